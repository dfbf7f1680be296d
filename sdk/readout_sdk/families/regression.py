"""regression: named real values per text (the head's outputs, identity score)."""
from __future__ import annotations

from typing import Any

import numpy as np

from readout_sdk import agreement as A
from readout_sdk.families.base import Context, Family, Head, TensorSpec, by_label
from readout_sdk.families.sequence_classification import positive_top_k
from readout_sdk.results import Regression


class RegressionFamily(Family):
    name = "regression"
    task = "values"
    outputs = (TensorSpec("values", "float32", ("batch", "outputs")),)
    label_axis = True
    score_types = ("identity",)
    calls = ("classify",)
    result = Regression
    manifest_fields = frozenset({"labels", "long_inputs"})
    aggregations = ("mean",)
    problem_type = "regression"
    head = Head("AutoModelForSequenceClassification", ("logits",), (False,))
    decision = "the values as they are, one per output name"
    metric_names = ("values_abs_error", "values_scaled_error", "values_rank_correlation")
    record_keys = ("values", "truncated")
    http_routes = ("/predict",)

    def options(self, ctx: Context, top_k: int = 1) -> dict[str, Any]:
        positive_top_k(top_k)  # top_k is checked for classify()'s one signature
        return {}

    def decide(self, ctx: Context, item: Any, outs: list[dict[str, np.ndarray]], parts: Any, truncated: bool,
               **options: Any) -> Regression:
        return Regression(dict(zip(ctx.labels, map(float, self.merged(ctx, outs)["values"]))), truncated)

    def agreement(self, ctx: Context, got: list[Regression], ref: list[Regression]) -> dict[str, float]:
        g = np.array([[x.values[k] for k in ctx.labels] for x in got])
        r = np.array([[x.values[k] for k in ctx.labels] for x in ref])
        ranks = [A.rank_agreement(g[:, j], r[:, j]) for j in range(g.shape[1])] if len(g) > 1 else [1.0]
        return {"values_abs_error": float(np.abs(g - r).max()), "values_scaled_error": A.scaled_error(g, r),
                "values_rank_correlation": float(min(ranks))}

    def record(self, r: Regression) -> dict[str, Any]:
        return {"values": dict(r.values), "truncated": r.truncated}

    def arrow_types(self, pa: Any, labels: Any) -> dict[str, Any]:
        return {"values": by_label(pa, labels), "truncated": pa.bool_()}


FAMILY = RegressionFamily()
