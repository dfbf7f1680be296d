"""embedding: one vector per text (pooling over the declared rows, projection, normalization)."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from readout_sdk import agreement as A
from readout_sdk.families.base import Context, Family, Head, TensorSpec
from readout_sdk.families.parts import builtin_resolver
from readout_sdk.results import Embeddings


TOKEN_MEAN = "token_mean"
# under token_mean the graph also returns the rows its mean pools (zero elsewhere), before projection
POOLED_ROWS = TensorSpec("pooled_rows", "float32", ("batch", "sequence", "width"))


class EmbeddingFamily(Family):
    name = "embedding"
    task = "relevance"
    outputs = (TensorSpec("embeddings", "float32", ("batch", "dim")),)
    score_types = ("cosine", "dot", "euclidean")
    calls = ("embed",)
    result = Embeddings
    stored_cache = "vectors"  # its records are vectors: valid while the vector layers are
    manifest_fields = frozenset({"readout", "score_type", "long_inputs", "roles", "vectors"})
    readout_fields = frozenset({"pooling", "rows", "normalize"})
    aggregations = ("mean", TOKEN_MEAN)  # mean: of window vectors; token_mean: of source tokens, each once
    takes_roles = True  # asymmetric retrieval: query and document prompts (`readout_sdk.roles`)
    head = Head("AutoModel", ("last_hidden_state",), (True,))
    exporter_hooks = builtin_resolver("resolve_embedding")  # its own manifest fields (`parts.ExporterHooks`)
    stages = ("pool", "project", "normalize")
    metric_names = ("min_cosine", "mean_cosine", "knn10_overlap", "rank_correlation")
    record_keys = ("embedding", "truncated")
    http_routes = ("/embed", "/v1/embeddings")
    bench_peer = "sentence-transformers"
    bench_metric = "min_cosine"
    bench_tiers = (0.99999, 0.9999, 0.999, 0.99)

    def outputs_for(self, long_inputs: Mapping[str, Any] | None) -> tuple[TensorSpec, ...]:
        return self.outputs + ((POOLED_ROWS,) if _token_mean(long_inputs) else ())

    def stages_for(self, long_inputs: Mapping[str, Any] | None) -> tuple[str, ...]:
        return (("keep_rows",) if _token_mean(long_inputs) else ()) + self.stages

    def output_section(self, plan: Any, dims: Mapping[str, int]) -> dict[str, Any]:
        return super().output_section(plan, dims) | {"dim": dims["dim"], "normalized": plan.normalize == "l2"}

    def readout_section(self, plan: Any) -> dict[str, Any]:
        return {"pooling": list(plan.pooling or [])} | projection_section(plan)

    def decide(self, ctx: Context, item: Any, outs: list[dict[str, np.ndarray]], parts: Any, truncated: bool,
               **options: Any) -> np.ndarray:
        if len(outs) == 1:
            return outs[0]["embeddings"]
        if _token_mean(ctx.long):
            v = self._token_mean(ctx, outs, [p.encodings[0] for p in parts])
        else:
            v = self.merged(ctx, outs)["embeddings"]
        if ctx.output["normalized"]:  # neither a mean of unit vectors nor a mean of rows is one
            v = v / max(float(np.linalg.norm(v)), 1e-12)
        return np.asarray(v, np.float32)

    @staticmethod
    def _token_mean(ctx: Context, outs: list[dict[str, np.ndarray]], encs: list[Any]) -> np.ndarray:
        """The mean over every source token's contextual row, each counted once: owned rows only, one global
        (sum, count) over all windows (never a mean of window means)."""
        content_only = ctx.record["readout"]["rows"] == "content"
        total = np.zeros(outs[0]["pooled_rows"].shape[-1], np.float64)
        count = 0
        for out, enc, own in zip(outs, encs, ctx.owned_rows(encs)):
            pooled = own & ~np.isin(enc.ids, ctx.inserted_ids) if content_only else own
            total += out["pooled_rows"][pooled].astype(np.float64).sum(0)
            count += int(pooled.sum())
        return total / max(count, 1)

    def collect(self, ctx: Context, results: list[Any], truncated: tuple[bool, ...] = ()) -> Embeddings:
        vectors = np.stack(results) if results else np.zeros((0, ctx.output["dim"]), np.float32)
        return Embeddings(vectors, bool(ctx.output["normalized"]), ctx.output["score_type"], truncated)

    def agreement(self, ctx: Context, got: list[Any], ref: list[Any]) -> dict[str, float]:
        return A.vector_agreement(np.stack(got), np.stack(ref))

    def relevance(self, engine: Any, pairs: Any) -> np.ndarray:
        """Each pair's similarity under the declared score type (each distinct text embedded once)."""
        texts = list(dict.fromkeys(t for p in pairs for t in p))
        vecs = engine.embed(texts)
        at = {t: i for i, t in enumerate(texts)}
        sims = [vecs_pair(vecs, at[q], at[d]) for q, d in pairs]
        return np.array(sims, np.float64)

    def bench_agreement(self, got: Any, ref: Any) -> dict[str, float]:
        cos = [float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b))) for a, b in zip(got, ref)]
        return {"min_cosine": min(cos), "mean_cosine": float(np.mean(cos))}

    def records(self, result: Embeddings) -> list[dict[str, Any]]:
        return [{"embedding": vec, "truncated": cut} for vec, cut in zip(result.vectors, result.truncated)]

    def arrow_types(self, pa: Any, labels: Any) -> dict[str, Any]:
        return {"embedding": pa.list_(pa.float32()), "truncated": pa.bool_()}


def vecs_pair(vecs: Embeddings, i: int, j: int) -> float:
    """The declared similarity of rows i and j of one Embeddings (the rule of `Embeddings.similarity`)."""
    one = Embeddings(vecs.vectors[i:i + 1], vecs.normalized, vecs.score_type)
    other = Embeddings(vecs.vectors[j:j + 1], vecs.normalized, vecs.score_type)
    return float(one.similarity(other)[0, 0])


def _token_mean(long_inputs: Mapping[str, Any] | None) -> bool:
    return bool(long_inputs) and long_inputs.get("aggregation") == TOKEN_MEAN  # type: ignore[union-attr]


def projection_section(plan: Any) -> dict[str, Any]:
    """Dense layers and normalization as the record states them (embedding and late interaction)."""
    return {"projection": [{"in": d.in_features, "out": d.out_features, "bias": d.bias, "activation": d.activation}
                           for d in plan.dense],
            "normalize": plan.normalize,
            "normalize_stage": None if plan.normalize == "none" else (
                "after_projection" if plan.dense else "after_pooling")}


FAMILY = EmbeddingFamily()
