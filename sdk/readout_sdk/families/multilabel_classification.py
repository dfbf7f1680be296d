"""multilabel_classification: every label whose sigmoid probability reaches its threshold."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from readout_sdk import agreement as A
from readout_sdk.families.base import Context, Family, Head, TensorSpec, by_label
from readout_sdk.families.sequence_classification import positive_top_k, probabilities
from readout_sdk.results import MultiLabel


class MultilabelClassificationFamily(Family):
    name = "multilabel_classification"
    task = "multilabel"
    calibrators = ("thresholds",)
    outputs = (TensorSpec("logits", "float32", ("batch", "classes")),)
    label_axis = True
    score_types = ("sigmoid",)
    calls = ("classify",)
    result = MultiLabel
    manifest_fields = frozenset({"labels", "thresholds", "long_inputs"})
    aggregations = ("mean_logits", "mean_probabilities")
    problem_type = "multi_label_classification"
    head = Head("AutoModelForSequenceClassification", ("logits",), (False,))
    decision = "sigmoid(logit) >= threshold, per label"
    metric_names = ("decision_agreement", "set_agreement")
    record_keys = ("labels", "scores", "truncated")
    http_routes = ("/predict",)

    def output_section(self, plan: Any, dims: Mapping[str, int]) -> dict[str, Any]:
        return super().output_section(plan, dims) | {"thresholds": plan.thresholds}

    def options(self, ctx: Context, top_k: int = 1) -> dict[str, Any]:
        positive_top_k(top_k)  # every label is decided; top_k is checked for classify()'s one signature
        return {}

    def decide(self, ctx: Context, item: Any, outs: list[dict[str, np.ndarray]], parts: Any, truncated: bool,
               **options: Any) -> MultiLabel:
        scores = dict(zip(ctx.labels, map(float, probabilities(ctx, self.merged(ctx, outs)))))
        th = dict(zip(ctx.labels, ctx.output["thresholds"]))
        on = tuple(lab for lab in ctx.labels if scores[lab] >= th[lab])
        return MultiLabel(on, scores, th, "probability", truncated)

    def agreement(self, ctx: Context, got: list[MultiLabel], ref: list[MultiLabel]) -> dict[str, float]:
        per_label = [np.mean([(lab in g.labels) == (lab in r.labels) for lab in ctx.labels]) for g, r in zip(got, ref)]
        return {"decision_agreement": float(np.mean(per_label)),
                "set_agreement": A.same_fraction([g.labels for g in got], [r.labels for r in ref])}

    def record(self, r: MultiLabel) -> dict[str, Any]:
        return {"labels": list(r.labels), "scores": dict(r.scores), "truncated": r.truncated}

    def arrow_types(self, pa: Any, labels: Any) -> dict[str, Any]:
        return {"labels": pa.list_(pa.string()), "scores": by_label(pa, labels), "truncated": pa.bool_()}


FAMILY = MultilabelClassificationFamily()
