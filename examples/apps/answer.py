"""Extractive question answering: python examples/apps/answer.py ARTIFACT [QUESTION CONTEXT]"""
import sys

import readout_sdk

engine = readout_sdk.load(sys.argv[1])
question, context = (sys.argv[2], sys.argv[3]) if len(sys.argv) > 3 else (
    "Who wrote the report?", "The report was written by Ada Lovelace in London in 1843.")
for a in engine.answer(question, context, top_k=3):
    print("(no answer)" if a.is_null else f"{a.text!r} [{a.start}:{a.end}]", f"score {a.score:.3f}")
