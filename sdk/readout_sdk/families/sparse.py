"""sparse: SPLADE vocabulary weights, log1p(relu(MLM logits)) max-pooled over the declared rows."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from readout_sdk import agreement as A
from readout_sdk.families.base import Context, Family, Head, TensorSpec
from readout_sdk.families.parts import builtin_resolver
from readout_sdk.results import SparseVector


class SparseFamily(Family):
    name = "sparse"
    task = "relevance"
    outputs = (TensorSpec("sparse_weights", "float32", ("batch", "vocab")),)
    score_types = ("dot",)
    calls = ("sparse_encode",)
    result = SparseVector
    stored_cache = "vectors"  # its records are vectors: valid while the vector layers are
    vector_layer = "head"  # term weights are the MLM head's logits, pooled: a new head means new vectors
    manifest_fields = frozenset({"readout", "roles"})
    readout_fields = frozenset({"pooling", "rows"})
    takes_roles = True  # asymmetric retrieval: query and document prompts (`readout_sdk.roles`)
    head = Head("AutoModelForMaskedLM", ("logits",), (True,))
    exporter_hooks = builtin_resolver("resolve_sparse")  # its own manifest fields (`parts.ExporterHooks`)
    stages = ("log1p_relu", "max_pool")
    metric_names = ("term_overlap",)
    record_keys = ("indices", "values", "tokens", "truncated")
    http_routes = ("/embed_sparse",)

    def output_section(self, plan: Any, dims: Mapping[str, int]) -> dict[str, Any]:
        return super().output_section(plan, dims) | {"vocab": dims["vocab"]}

    def readout_section(self, plan: Any) -> dict[str, Any]:
        return {"pooling": list(plan.pooling or []), "activation": "log1p_relu"}

    def decide(self, ctx: Context, item: Any, outs: list[dict[str, np.ndarray]], parts: Any, truncated: bool,
               **options: Any) -> SparseVector:
        w = outs[0]["sparse_weights"]
        idx = np.flatnonzero(w > 0)
        idx = idx[np.lexsort((idx, -w[idx]))]  # heaviest first, ties by vocabulary id
        tokens = tuple(ctx.tokenizer.id_to_token(int(i)) or "" for i in idx)
        return SparseVector(idx, w[idx], tokens, truncated)

    def relevance(self, engine: Any, pairs: Any) -> np.ndarray:
        """Each pair's sparse dot product (each distinct text encoded once)."""
        texts = list(dict.fromkeys(t for p in pairs for t in p))
        vecs = dict(zip(texts, engine.sparse_encode(texts)))
        return np.array([vecs[q].dot(vecs[d]) for q, d in pairs], np.float64)

    def agreement(self, ctx: Context, got: list[SparseVector], ref: list[SparseVector], k: int = 10) -> dict[str, float]:
        overlap = []
        for g, r in zip(got, ref):  # the top-k terms each run decided (fewer where fewer are nonzero)
            n = min(k, max(len(g.indices), len(r.indices)))
            overlap.append(_term_overlap(g, r, n) if n else 1.0)
        return {"term_overlap": float(np.mean(overlap))}

    def record(self, r: SparseVector) -> dict[str, Any]:
        return {"indices": r.indices, "values": r.values, "tokens": list(r.tokens), "truncated": r.truncated}

    def arrow_types(self, pa: Any, labels: Any) -> dict[str, Any]:
        return {"indices": pa.list_(pa.int64()), "values": pa.list_(pa.float32()), "tokens": pa.list_(pa.string()),
                "truncated": pa.bool_()}


FAMILY = SparseFamily()


def _term_overlap(got: SparseVector, ref: SparseVector, n: int) -> float:
    """The share of the reference's top ``n`` terms among the candidate's top ``n`` (both heaviest first),
    reference ties as ties (`readout_sdk.agreement.top_k_agreement`'s rule): a term whose reference weight is
    within the tie tolerance of the n-th weight counts, as many as that tie has places left."""
    weight = dict(zip(ref.indices.tolist(), ref.values.tolist()))
    picked = np.array([weight.get(i, 0.0) for i in got.indices[:n].tolist()], np.float64)
    kept = picked > 0
    if len(ref.values) < n:  # every reference term is in its top n
        return int(kept.sum()) / n
    cut = float(ref.values[n - 1])
    tol = A.TIE_TOLERANCE * max(1.0, abs(cut))
    above = int((ref.values > cut + tol).sum())
    hits = int((kept & (picked > cut + tol)).sum())
    tied = int((kept & (picked <= cut + tol) & (picked >= cut - tol)).sum())
    return (hits + min(tied, n - above)) / n
