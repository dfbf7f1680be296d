"""Label texts (single label, multilabel or regression): python examples/apps/classify.py ARTIFACT TEXT..."""
import sys

import readout_sdk

engine = readout_sdk.load(sys.argv[1])
texts = sys.argv[2:] or ["What a wonderful morning!", "This is the worst service I have ever had."]
for text, result in zip(texts, engine.classify(texts, top_k=3)):
    if isinstance(result, readout_sdk.Classification):
        print(f"{result.label:>12} ({result.score_kind} {result.score:.3f})  {text}")
    elif isinstance(result, readout_sdk.MultiLabel):
        print(f"{', '.join(result.labels) or '(none)':>12}  {text}")
    else:
        print(f"{result.values}  {text}")
