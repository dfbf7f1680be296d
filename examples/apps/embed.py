"""Semantic search over a few sentences: python examples/apps/embed.py ARTIFACT [QUERY]"""
import sys

import readout_sdk

engine = readout_sdk.load(sys.argv[1])
docs = ["The cat sat on the mat.", "Paris is the capital of France.", "Stocks fell sharply on Monday.",
        "A kitten naps on the rug."]
query = sys.argv[2] if len(sys.argv) > 2 else "Where does the cat sleep?"
sims = engine.embed([query]).similarity(engine.embed(docs))[0]
print(f"{engine.abi['name']}: {engine.abi['output']['score_type']} similarity to {query!r}")
for i in sims.argsort()[::-1]:
    print(f"  {sims[i]:+.3f}  {docs[i]}")
