"""Rerank DOCUMENTs for QUERY with a cross-encoder artifact (highest score first).

Example:
    python examples/apps/rerank.py examples/demo/cross_encoder/artifact "Where is the Eiffel Tower?" "It is in Paris." "Bananas."
"""
import readout_sdk
from _app import one_line_errors, parser

p = parser(__doc__)
p.add_argument("query", nargs="?", default="Where is the Eiffel Tower?")
p.add_argument("documents", nargs="*", metavar="document", help="texts to rerank (default: three built-in)")
args = p.parse_args()
with one_line_errors():
    engine = readout_sdk.load(args.artifact)
    docs = args.documents or ["The Eiffel Tower stands in Paris.", "Bananas are rich in potassium.", "Paris is in France."]
    for r in engine.rerank(args.query, docs):
        print(f"{r.score:.3f}  #{r.index}  {r.document}")
