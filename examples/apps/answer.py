"""Extractive question answering: the best answer spans of CONTEXT for QUESTION.

Give a question and its context, or neither for a built-in example. Example:
    python examples/apps/answer.py examples/demo/extractive_qa/artifact "Who wrote the report?" "The report was written by Ada."
"""
from _app import complete, load, one_line_errors, parse, parser

p = parser(__doc__)
p.add_argument("question", nargs="?", help="the question")
p.add_argument("context", nargs="?", help="the text to find the answer in")
p.add_argument("--top-k", type=int, default=3, help="answers to print, best first (default: 3)")
args = parse(p)
given = complete(p, {"question": args.question, "context": args.context},
                 {"question": "Who wrote the report?", "context": "The report was written by Ada Lovelace in London in 1843."})
with one_line_errors():
    engine = load(args.artifact, "answer.py")
    answers = engine.answer(given["question"], given["context"], top_k=args.top_k)
    for a in answers if isinstance(answers, list) else [answers]:  # top_k=1 returns one Answer
        print("(no answer)" if a.is_null else f"{a.text!r} [{a.start}:{a.end}]", f"score {a.score:.3f}")
