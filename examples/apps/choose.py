"""Multiple choice: which CHOICE best continues QUESTION.

Example:
    python examples/apps/choose.py examples/demo/multiple_choice/artifact "The capital of France is" "Paris." "Berlin."
"""
import readout_sdk
from _app import one_line_errors, parser

p = parser(__doc__)
p.add_argument("question", nargs="?", default="The capital of France is")
p.add_argument("choices", nargs="*", metavar="choice", help="the candidate answers (default: three built-in)")
args = p.parse_args()
with one_line_errors():
    engine = readout_sdk.load(args.artifact)
    result = engine.choose(args.question, args.choices or ["Paris.", "Berlin.", "the moon."])
    print(f"chose #{result.index}: {result.choice!r} ({result.score:.3f}); "
          f"all: {[round(s, 3) for s in result.scores]}")
