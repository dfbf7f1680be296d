"""Late-interaction (MaxSim) search: rank DOCUMENTs for QUERY token by token.

Give a query and its documents, or neither for a built-in example. Example:
    python examples/apps/late.py examples/demo/late_interaction/artifact "capital of France" "Paris is in France." "Rivers."
"""
from _app import complete, load, one_line_errors, parse, parser

p = parser(__doc__)
p.add_argument("query", nargs="?", help="the query")
p.add_argument("documents", nargs="*", metavar="document", help="texts to rank")
args = parse(p)
given = complete(p, {"query": args.query, "document": args.documents},
                 {"query": "capital of France",
                  "document": ["Paris is the capital of France.", "The river runs to the sea.", "Berlin is in Germany."]})
with one_line_errors():
    engine = load(args.artifact, "late.py")
    docs = given["document"]
    q = engine.encode_tokens([given["query"]])[0]
    scored = sorted(((engine.maxsim(q, d), t) for d, t in zip(engine.encode_tokens(docs), docs)), reverse=True)
    for score, doc in scored:
        print(f"{score:.3f}  {doc}")
