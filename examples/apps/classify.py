"""Label texts with a sequence-classification, multilabel or regression artifact.

Example:
    python examples/apps/classify.py examples/demo/sequence_classification/artifact "What a wonderful morning!"
"""
import readout_sdk
from _app import load, one_line_errors, parse, parser

p = parser(__doc__)
p.add_argument("texts", nargs="*", metavar="text", help="texts to label (default: two built-in sentences)")
p.add_argument("--top-k", type=int, help="also print the k best labels per text (single-label artifacts)")
args = parse(p)
with one_line_errors():
    engine = load(args.artifact, "classify.py")
    if args.top_k is not None and engine.family != "sequence_classification":
        p.error(f"--top-k applies to single-label (sequence_classification) artifacts; this one is {engine.family}")
    texts = args.texts or ["What a wonderful morning!", "This is the worst service I have ever had."]
    for text, result in zip(texts, engine.classify(texts, **({"top_k": args.top_k} if args.top_k else {}))):
        if isinstance(result, readout_sdk.Classification):
            best = f"  [{', '.join(f'{lab} {s:.3f}' for lab, s in result.top)}]" if args.top_k else ""
            print(f"{result.label or '(abstained)':>12} ({result.score_kind} {result.score:.3f})  {text}{best}")
        elif isinstance(result, readout_sdk.MultiLabel):
            print(f"{', '.join(result.labels) or '(none)':>12}  {text}")
        elif isinstance(result, readout_sdk.Regression):  # each named output, in the artifact's label order
            print(f"{', '.join(f'{name} {value:.3f}' for name, value in result.values.items()):>12}  {text}")
        else:  # a family this app does not know yet: say so rather than print a raw object
            raise TypeError(f"classify.py cannot print a {type(result).__name__}")
