"""Named entities with character offsets, from a token-classification artifact.

Example:
    python examples/apps/tag.py examples/demo/token_classification/artifact "Ada Lovelace wrote the notes in London."
"""
from readout_sdk.decode.tagging import AGGREGATIONS
from _app import load, one_line_errors, parse, parser

p = parser(__doc__)
p.add_argument("texts", nargs="*", metavar="text", help="texts to tag (default: one built-in sentence)")
p.add_argument("--aggregation", default="simple", choices=AGGREGATIONS, help="how word pieces become entities (default: simple)")
args = parse(p)
with one_line_errors():
    engine = load(args.artifact, "tag.py")
    texts = args.texts or ["Ada Lovelace wrote the notes in London."]
    for text, tagged in zip(texts, engine.tag(texts, aggregation=args.aggregation)):
        print(f"{len(tagged)} entities{' (text truncated)' if tagged.truncated else ''} in {text!r}")
        for entity in tagged:
            print(f"  {entity.label:>6} [{entity.start}:{entity.end}] {entity.text!r} ({entity.score:.3f})")
