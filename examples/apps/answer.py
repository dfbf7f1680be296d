"""Extractive question answering: the best answer spans of CONTEXT for QUESTION.

Example:
    python examples/apps/answer.py examples/demo/extractive_qa/artifact "Who wrote the report?" "The report was written by Ada."
"""
import readout_sdk
from _app import one_line_errors, parser

p = parser(__doc__)
p.add_argument("question", nargs="?", default="Who wrote the report?")
p.add_argument("context", nargs="?", default="The report was written by Ada Lovelace in London in 1843.")
p.add_argument("--top-k", type=int, default=3, help="answers to print")
args = p.parse_args()
with one_line_errors():
    engine = readout_sdk.load(args.artifact)
    answers = engine.answer(args.question, args.context, top_k=args.top_k)
    for a in answers if isinstance(answers, list) else [answers]:  # top_k=1 returns one Answer
        print("(no answer)" if a.is_null else f"{a.text!r} [{a.start}:{a.end}]", f"score {a.score:.3f}")
