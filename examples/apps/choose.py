"""Multiple choice: python examples/apps/choose.py ARTIFACT [QUESTION CHOICE...]"""
import sys

import readout_sdk

engine = readout_sdk.load(sys.argv[1])
question, choices = (sys.argv[2], sys.argv[3:]) if len(sys.argv) > 3 else (
    "The capital of France is", ["Paris.", "Berlin.", "the moon."])
result = engine.choose(question, choices)
print(f"chose #{result.index}: {result.choice!r} ({result.score:.3f}); all: {[round(s, 3) for s in result.scores]}")
