"""Sparse (SPLADE-style) term weights: the heaviest vocabulary terms of each TEXT.

Example:
    python examples/apps/sparse.py examples/demo/sparse/artifact "The cat sat on the mat."
"""
import readout_sdk
from _app import one_line_errors, parser

p = parser(__doc__)
p.add_argument("texts", nargs="*", metavar="text", help="texts to encode (default: one built-in sentence)")
p.add_argument("--top", type=int, default=10, help="terms to print per text")
args = p.parse_args()
with one_line_errors():
    engine = readout_sdk.load(args.artifact)
    texts = args.texts or ["The cat sat on the mat."]
    for text, vector in zip(texts, engine.sparse_encode(texts)):
        print(f"{len(vector.indices)} nonzero terms in {text!r}; heaviest:")
        for token, weight in list(zip(vector.tokens, vector.values))[:args.top]:
            print(f"  {weight:.3f}  {token}")
