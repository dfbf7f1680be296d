"""Label texts with a sequence-classification, multilabel or regression artifact.

Example:
    python examples/apps/classify.py examples/demo/sequence_classification/artifact "What a wonderful morning!"
"""
import readout_sdk
from _app import one_line_errors, parser

p = parser(__doc__)
p.add_argument("texts", nargs="*", metavar="text", help="texts to label (default: two built-in sentences)")
p.add_argument("--top-k", type=int, default=3, help="labels to keep per text (single-label artifacts)")
args = p.parse_args()
with one_line_errors():
    engine = readout_sdk.load(args.artifact)
    texts = args.texts or ["What a wonderful morning!", "This is the worst service I have ever had."]
    for text, result in zip(texts, engine.classify(texts, top_k=args.top_k)):
        if isinstance(result, readout_sdk.Classification):
            print(f"{result.label:>12} ({result.score_kind} {result.score:.3f})  {text}")
        elif isinstance(result, readout_sdk.MultiLabel):
            print(f"{', '.join(result.labels) or '(none)':>12}  {text}")
        else:
            print(f"{result.values}  {text}")
