"""Named entities with character offsets: python examples/apps/tag.py ARTIFACT [TEXT]"""
import sys

import readout_sdk

engine = readout_sdk.load(sys.argv[1])
text = sys.argv[2] if len(sys.argv) > 2 else "Ada Lovelace wrote the notes in London."
tagged = engine.tag([text], aggregation="simple")[0]
print(f"{len(tagged)} entities{' (text truncated)' if tagged.truncated else ''}")
for entity in tagged:
    print(f"{entity.label:>6} [{entity.start}:{entity.end}] {entity.text!r} ({entity.score:.3f})")
