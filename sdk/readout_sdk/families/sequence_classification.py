"""sequence_classification: one label per text (softmax over the ordered label map, argmax)."""
from __future__ import annotations

from typing import Any

import numpy as np

from readout_sdk import agreement as A
from readout_sdk.arguments import positive_int
from readout_sdk.families.base import Context, Family, Head, TensorSpec, by_label
from readout_sdk.results import Classification

ARGMAX = "argmax; ties go to the lowest index"


class SequenceClassificationFamily(Family):
    name = "sequence_classification"
    task = "single_label"
    outputs = (TensorSpec("logits", "float32", ("batch", "classes")),)
    label_axis = True
    score_types = ("softmax",)
    calls = ("classify",)
    result = Classification
    manifest_fields = frozenset({"labels", "long_inputs"})
    aggregations = ("mean_logits", "mean_probabilities")
    problem_type = "single_label_classification"
    head = Head("AutoModelForSequenceClassification", ("logits",), (False,))
    decision = ARGMAX
    metric_names = ("argmax_agreement", "clear_argmax_agreement", "topk_agreement")
    record_keys = ("label", "score", "scores", "truncated", "abstained")
    http_routes = ("/predict",)
    calibrators = ("temperature", "abstention")
    bench_peer = "text-classification"

    def options(self, ctx: Context, top_k: int = 1) -> dict[str, Any]:
        return {"top_k": positive_top_k(top_k)}

    def decide(self, ctx: Context, item: Any, outs: list[dict[str, np.ndarray]], parts: Any, truncated: bool,
               top_k: int = 1) -> Classification:
        probs = self.class_probabilities(ctx, outs)
        labels = ctx.labels
        order = sorted(range(len(labels)), key=lambda k: (-probs[k], k))
        top = tuple((labels[k], float(probs[k])) for k in order[:top_k])
        abstained = abstains(ctx, top[0][1])
        return Classification(None if abstained else top[0][0], top[0][1], dict(zip(labels, map(float, probs))),
                              "probability", top, truncated, abstained)

    def agreement(self, ctx: Context, got: list[Classification], ref: list[Classification]) -> dict[str, float]:
        gs = [[g.scores[n] for n in ctx.labels] for g in got]
        rs = [[r.scores[n] for n in ctx.labels] for r in ref]
        # the same label, or (both deciding) a label the reference ties with its own within float noise
        same = [g.label == r.label or (g.abstained == r.abstained and tied)
                for g, r, tied in zip(got, ref, A.argmax_agree(gs, rs))]
        return {"argmax_agreement": float(np.mean(same)) if same else 1.0,
                **A.clear_agreement(same, [c and _clear_of_abstention(ctx, r.score)
                                           for c, r in zip(A.clear_leads(A.uncalibrated(ctx, rs)), ref)]),
                "topk_agreement": A.topk_sets_agree(gs, rs, 2)}

    def record(self, r: Classification) -> dict[str, Any]:
        return {"label": r.label, "score": r.score, "scores": dict(r.scores), "truncated": r.truncated,
                "abstained": r.abstained}

    def arrow_types(self, pa: Any, labels: Any) -> dict[str, Any]:
        return {"label": pa.string(), "score": pa.float64(), "scores": by_label(pa, labels), "truncated": pa.bool_(),
                "abstained": pa.bool_()}

    def class_probabilities(self, ctx: Context, outs: list[dict[str, np.ndarray]]) -> np.ndarray:
        """Each label's probability for one item (windows merged), through the calibration layer."""
        return probabilities(ctx, self.merged(ctx, outs))


def positive_top_k(top_k: Any) -> int:
    """classify()'s top_k, checked the same for every family that takes it."""
    return positive_int("top_k", top_k)


def _clear_of_abstention(ctx: Context, top_score: float) -> bool:
    """Whether the reference's top score is at least `agreement.CLEAR_LEAD` from the abstention threshold (no
    rule: always): a decision that abstains only just is as near a tie as a near lead."""
    rule = getattr(ctx, "output", None) and ctx.output.get("abstention")
    return not rule or abs(top_score - float(rule["min_score"])) >= A.CLEAR_LEAD


def abstains(ctx: Context, top_score: float) -> bool:
    """The decision layer's abstention rule: a top score under ``output.abstention.min_score``."""
    rule = ctx.output.get("abstention")
    return rule is not None and top_score < float(rule["min_score"])


def probabilities(ctx: Context, out: dict[str, np.ndarray]) -> np.ndarray:
    """The declared score of each label (windows averaged as probabilities arrive as such)."""
    return out["probabilities"] if "probabilities" in out else ctx.scores(out["logits"])


FAMILY = SequenceClassificationFamily()
