"""Rerank DOCUMENTs for QUERY with a cross-encoder artifact (highest score first).

Give a query and its documents, or neither for a built-in example. Example:
    python examples/apps/rerank.py examples/demo/cross_encoder/artifact "Where is the Eiffel Tower?" "It is in Paris." "Bananas."
"""
from _app import complete, load, one_line_errors, parse, parser

p = parser(__doc__)
p.add_argument("query", nargs="?", help="the query")
p.add_argument("documents", nargs="*", metavar="document", help="texts to rerank")
args = parse(p)
given = complete(p, {"query": args.query, "document": args.documents},
                 {"query": "Where is the Eiffel Tower?",
                  "document": ["The Eiffel Tower stands in Paris.", "Bananas are rich in potassium.", "Paris is in France."]})
with one_line_errors():
    engine = load(args.artifact, "rerank.py")
    for r in engine.rerank(given["query"], given["document"]):
        print(f"{r.score:.3f}  #{r.index}  {r.document}")
