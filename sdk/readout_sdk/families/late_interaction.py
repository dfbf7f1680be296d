"""late_interaction: one unit vector per kept row (ColBERT-style); scored by MaxSim."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from readout_sdk.families.base import Context, Family, Head, TensorSpec
from readout_sdk.families.parts import builtin_resolver
from readout_sdk.families.embedding import projection_section
from readout_sdk.results import TokenVectors


class LateInteractionFamily(Family):
    name = "late_interaction"
    task = "relevance"
    outputs = (TensorSpec("token_vectors", "float32", ("batch", "sequence", "dim")),
               TensorSpec("token_mask", "int64", ("batch", "sequence")))
    score_types = ("maxsim",)
    calls = ("encode_tokens",)
    result = TokenVectors
    stored_cache = "vectors"  # its records are vectors: valid while the vector layers are
    manifest_fields = frozenset({"readout", "roles"})
    readout_fields = frozenset({"rows", "normalize"})
    takes_roles = True  # asymmetric retrieval: query and document prompts (`readout_sdk.roles`)
    role_policies = True  # sentence-transformers' MultiVectorEncoder: per-role length, expansion, skiplist
    head = Head("AutoModel", ("last_hidden_state",), (True,))
    exporter_hooks = builtin_resolver("resolve_late")  # its own manifest fields (`parts.ExporterHooks`)
    stages = ("project", "normalize", "row_mask")
    metric_names = ("maxsim_error",)
    record_keys = ("token_vectors", "tokens", "truncated")
    http_routes = ("/token_vectors", "/embed_all")

    def output_section(self, plan: Any, dims: Mapping[str, int]) -> dict[str, Any]:
        return super().output_section(plan, dims) | {"dim": dims["dim"], "normalized": plan.normalize == "l2"}

    def readout_section(self, plan: Any) -> dict[str, Any]:
        return projection_section(plan)

    def decide(self, ctx: Context, item: Any, outs: list[dict[str, np.ndarray]], parts: Any, truncated: bool,
               **options: Any) -> TokenVectors:
        o = outs[0]
        part = parts[0]
        keep = o["token_mask"].astype(bool)
        # a query's expansion rows follow its tokens, and are scored
        ids = np.concatenate([np.asarray(part.encodings[0].ids, np.int64),
                              np.full(part.expansion_rows, part.expansion_id, np.int64)])
        if part.role is not None and part.role.skip_ids:  # a document's punctuation: those rows are not scored
            keep = keep & ~np.isin(ids, part.role.skip_array)
        # token strings from the vocabulary: encodings made without offsets carry none
        tokens = tuple(ctx.tokenizer.id_to_token(int(i)) or "" for i in ids[keep])
        return TokenVectors(o["token_vectors"][keep], tokens, truncated)

    def relevance(self, engine: Any, pairs: Any) -> np.ndarray:
        """Each pair's MaxSim (query rows against document rows; each distinct text encoded once)."""
        texts = list(dict.fromkeys(t for p in pairs for t in p))
        vecs = dict(zip(texts, engine.encode_tokens(texts)))
        return np.array([maxsim(vecs[q].vectors, vecs[d].vectors) for q, d in pairs], np.float64)

    def agreement(self, ctx: Context, got: list[TokenVectors], ref: list[TokenVectors]) -> dict[str, float]:
        worst = 0.0
        for i in range(min(8, len(got))):
            for j in range(len(got)):
                a = maxsim(got[i].vectors, got[j].vectors)
                b = maxsim(ref[i].vectors, ref[j].vectors)
                worst = max(worst, abs(a - b))
        return {"maxsim_error": float(worst)}

    def record(self, r: TokenVectors) -> dict[str, Any]:
        return {"token_vectors": list(r.vectors), "tokens": list(r.tokens), "truncated": r.truncated}

    def arrow_types(self, pa: Any, labels: Any) -> dict[str, Any]:
        return {"token_vectors": pa.list_(pa.list_(pa.float32())), "tokens": pa.list_(pa.string()),
                "truncated": pa.bool_()}


def maxsim(q: np.ndarray, d: np.ndarray) -> float:
    """Sum over query rows of the best dot product with any document row (ColBERT MaxSim)."""
    return float((np.asarray(q, np.float64) @ np.asarray(d, np.float64).T).max(axis=1).sum())


FAMILY = LateInteractionFamily()
