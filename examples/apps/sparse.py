"""Sparse (SPLADE-style) term weights: the heaviest vocabulary terms of each TEXT.

Example:
    python examples/apps/sparse.py examples/demo/sparse/artifact "The cat sat on the mat."
"""
from _app import load, one_line_errors, parse, parser

p = parser(__doc__)
p.add_argument("texts", nargs="*", metavar="text", help="texts to encode (default: one built-in sentence)")
p.add_argument("--top", type=int, default=10, help="terms to print per text (default: 10)")
args = parse(p)
with one_line_errors():
    engine = load(args.artifact, "sparse.py")
    texts = args.texts or ["The cat sat on the mat."]
    for text, vector in zip(texts, engine.sparse_encode(texts)):
        print(f"{len(vector.indices)} nonzero terms in {text!r}; heaviest:")
        for token, weight in list(zip(vector.tokens, vector.values))[:args.top]:
            print(f"  {weight:.3f}  {token}")
