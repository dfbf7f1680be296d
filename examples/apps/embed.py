"""Semantic search: rank DOCUMENTs by similarity to QUERY with an embedding artifact.

Without documents, four built-in sentences are searched. Example:
    python examples/apps/embed.py examples/minilm/dist/minilm "Where does the cat sleep?" "A kitten naps." "Stocks fell."
"""
import readout_sdk
from _app import one_line_errors, parser

DOCS = ["The cat sat on the mat.", "Paris is the capital of France.", "Stocks fell sharply on Monday.",
        "A kitten naps on the rug."]

p = parser(__doc__)
p.add_argument("query", nargs="?", default="Where does the cat sleep?", help="the search query")
p.add_argument("documents", nargs="*", metavar="document", help="texts to rank (default: four built-in sentences)")
args = p.parse_args()
with one_line_errors():
    engine = readout_sdk.load(args.artifact)
    docs = args.documents or DOCS
    sims = engine.embed([args.query]).similarity(engine.embed(docs))[0]
    print(f"{engine.abi['name']}: {engine.abi['output']['score_type']} similarity to {args.query!r}")
    for i in sims.argsort()[::-1]:
        print(f"  {sims[i]:+.3f}  {docs[i]}")
