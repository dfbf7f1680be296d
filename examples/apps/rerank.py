"""Rerank documents for a query with a cross-encoder: python examples/apps/rerank.py ARTIFACT [QUERY]"""
import sys

import readout_sdk

engine = readout_sdk.load(sys.argv[1])
query = sys.argv[2] if len(sys.argv) > 2 else "Where is the Eiffel Tower?"
docs = ["The Eiffel Tower stands in Paris.", "Bananas are rich in potassium.", "Paris is in France."]
for r in engine.rerank(query, docs):
    print(f"{r.score:.3f}  #{r.index}  {r.document}")
