"""cross_encoder: a score per (query, document) pair with the declared score type; rerank sorts by it."""
from __future__ import annotations

from typing import Any

import numpy as np

from readout_sdk import agreement as A
from readout_sdk.families.base import Context, Family, Head, TensorSpec
from readout_sdk.results import Scored


class CrossEncoderFamily(Family):
    name = "cross_encoder"
    task = "relevance"
    calibrators = ("temperature",)
    outputs = (TensorSpec("logits", "float32", ("batch", "classes")),)
    input_kind = "pair"
    fields = ("query", "document")
    pair_roles = ("query", "document")
    label_axis = True
    score_types = ("sigmoid", "logit", "softmax")
    calls = ("score_pairs", "rerank")
    result = Scored
    manifest_fields = frozenset({"labels", "score_type"})
    head = Head("AutoModelForSequenceClassification", ("logits",), (False,))
    decision = "sort by score, descending; ties keep input order"
    metric_names = ("rank_correlation", "topk_agreement", "argmax_agreement")
    record_keys = ("score", "scores", "truncated")
    http_routes = ("/predict", "/rerank")

    def decide(self, ctx: Context, item: tuple[str, str], outs: list[dict[str, np.ndarray]], parts: Any,
               truncated: bool) -> Scored:
        values = self.class_probabilities(ctx, outs)
        # the score of a multi-class cross-encoder is its last class (e.g. "entailment" / "relevant")
        return Scored(-1, float(values[-1]), item[1], tuple(map(float, values)), truncated)

    def class_probabilities(self, ctx: Context, outs: list[dict[str, np.ndarray]]) -> np.ndarray:
        """Every class's declared score for one pair, through the calibration layer."""
        return ctx.scores(outs[0]["logits"])

    def collect(self, ctx: Context, results: list[Scored], truncated: tuple[bool, ...]) -> list[Scored]:
        return [Scored(i, r.score, r.document, r.scores, r.truncated) for i, r in enumerate(results)]

    def relevance(self, engine: Any, pairs: Any) -> np.ndarray:
        """Each pair's declared score (the last class's, as `score_pairs` gives it)."""
        return np.array([s.score for s in engine.score_pairs(list(pairs))], np.float64)

    def agreement(self, ctx: Context, got: list[Scored], ref: list[Scored]) -> dict[str, float]:
        g = np.array([x.score for x in got])
        r = np.array([x.score for x in ref])
        k = min(3, len(g))
        m = {"rank_correlation": A.rank_agreement(g, r), "topk_agreement": float(A.top_k_agreement(g, r, k) == 1.0)}
        if len(ctx.labels) > 1:
            argmax = [int(np.argmax(x.scores)) for x in got], [int(np.argmax(x.scores)) for x in ref]
            m["argmax_agreement"] = A.same_fraction(*argmax)
        return m

    def record(self, r: Scored) -> dict[str, Any]:
        return {"score": r.score, "scores": list(r.scores), "truncated": r.truncated}

    def arrow_types(self, pa: Any, labels: Any) -> dict[str, Any]:
        return {"score": pa.float64(), "scores": pa.list_(pa.float64()), "truncated": pa.bool_()}


FAMILY = CrossEncoderFamily()
