"""Multiple choice: which CHOICE best continues QUESTION.

Give a question and its choices, or neither for a built-in example. Example:
    python examples/apps/choose.py examples/demo/multiple_choice/artifact "The capital of France is" "Paris." "Berlin."
"""
from _app import complete, load, one_line_errors, parse, parser

p = parser(__doc__)
p.add_argument("question", nargs="?", help="the question or sentence start")
p.add_argument("choices", nargs="*", metavar="choice", help="the candidate answers")
args = parse(p)
given = complete(p, {"question": args.question, "choice": args.choices},
                 {"question": "The capital of France is", "choice": ["Paris.", "Berlin.", "the moon."]})
with one_line_errors():
    engine = load(args.artifact, "choose.py")
    result = engine.choose(given["question"], given["choice"])
    print(f"chose #{result.index}: {result.choice!r} ({result.score:.3f}); "
          f"all: {[round(s, 3) for s in result.scores]}")
