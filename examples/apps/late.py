"""Late-interaction (MaxSim) search: python examples/apps/late.py ARTIFACT [QUERY]"""
import sys

import readout_sdk

engine = readout_sdk.load(sys.argv[1])
query = sys.argv[2] if len(sys.argv) > 2 else "capital of France"
docs = ["Paris is the capital of France.", "The river runs to the sea.", "Berlin is in Germany."]
q = engine.encode_tokens([query])[0]
for score, doc in sorted(((engine.maxsim(q, d), t) for d, t in zip(engine.encode_tokens(docs), docs)), reverse=True):
    print(f"{score:.3f}  {doc}")
