"""Semantic search: rank DOCUMENTs by similarity to QUERY with an embedding artifact.

Give a query and its documents, or neither (four built-in sentences are then searched for a built-in
query). Example:
    python examples/apps/embed.py examples/minilm/dist/minilm "Where does the cat sleep?" "A kitten naps." "Stocks fell."
"""
from _app import complete, load, one_line_errors, parse, parser

DOCS = ["The cat sat on the mat.", "Paris is the capital of France.", "Stocks fell sharply on Monday.",
        "A kitten naps on the rug."]

p = parser(__doc__)
p.add_argument("query", nargs="?", help="the search query")
p.add_argument("documents", nargs="*", metavar="document", help="texts to rank")
args = parse(p)
given = complete(p, {"query": args.query, "document": args.documents},
                 {"query": "Where does the cat sleep?", "document": DOCS})
with one_line_errors():
    engine = load(args.artifact, "embed.py")
    query, docs = given["query"], given["document"]
    sims = engine.embed([query]).similarity(engine.embed(docs))[0]
    print(f"{engine.abi['name']}: {engine.abi['output']['score_type']} similarity to {query!r}")
    for i in sims.argsort()[::-1]:
        print(f"  {sims[i]:+.3f}  {docs[i]}")
