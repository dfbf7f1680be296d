"""Sparse (SPLADE) term weights: python examples/apps/sparse.py ARTIFACT [TEXT]"""
import sys

import readout_sdk

engine = readout_sdk.load(sys.argv[1])
text = sys.argv[2] if len(sys.argv) > 2 else "The cat sat on the mat."
vector = engine.sparse_encode([text])[0]
print(f"{len(vector.indices)} nonzero terms; heaviest:")
for token, weight in list(zip(vector.tokens, vector.values))[:10]:
    print(f"  {weight:.3f}  {token}")
