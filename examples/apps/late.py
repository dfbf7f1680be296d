"""Late-interaction (MaxSim) search: rank DOCUMENTs for QUERY token by token.

Example:
    python examples/apps/late.py examples/demo/late_interaction/artifact "capital of France" "Paris is in France." "Rivers."
"""
import readout_sdk
from _app import one_line_errors, parser

p = parser(__doc__)
p.add_argument("query", nargs="?", default="capital of France")
p.add_argument("documents", nargs="*", metavar="document", help="texts to rank (default: three built-in)")
args = p.parse_args()
with one_line_errors():
    engine = readout_sdk.load(args.artifact)
    docs = args.documents or ["Paris is the capital of France.", "The river runs to the sea.", "Berlin is in Germany."]
    q = engine.encode_tokens([args.query])[0]
    scored = sorted(((engine.maxsim(q, d), t) for d, t in zip(engine.encode_tokens(docs), docs)), reverse=True)
    for score, doc in scored:
        print(f"{score:.3f}  {doc}")
