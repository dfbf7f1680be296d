"""multiple_choice: the most probable of k choices for a question (softmax over the choices axis)."""
from __future__ import annotations

from typing import Any

import numpy as np

from readout_sdk import agreement as A
from readout_sdk.decode import scores as S
from readout_sdk.families.base import Context, Family, Head, TensorSpec
from readout_sdk.families.sequence_classification import ARGMAX
from readout_sdk.input_kinds.choices import KIND as CHOICES
from readout_sdk.results import Choice


class MultipleChoiceFamily(Family):
    name = "multiple_choice"
    task = "single_label"
    calibrators = ("temperature",)
    outputs = (TensorSpec("logits", "float32", ("batch", "choices")),)
    input_kind = CHOICES.name  # an item: a question and its choices (`readout_sdk.input_kinds.choices`)
    fields = ("question", "choices")
    pair_roles = ("question", "choice")
    single_item = True
    score_types = ("softmax",)
    calls = ("choose",)
    result = Choice
    head = Head("AutoModelForMultipleChoice", ("logits",), (False,))
    decision = ARGMAX
    metric_names = ("argmax_agreement", "clear_argmax_agreement", "topk_agreement")
    record_keys = ("index", "choice", "score", "scores", "truncated")
    http_routes = ("/choices",)

    def decide(self, ctx: Context, item: tuple[str, list[str]], outs: list[dict[str, np.ndarray]], parts: Any,
               truncated: bool, **options: Any) -> Choice:
        probs = self.class_probabilities(ctx, outs)
        k = S.argmax_first(probs)
        return Choice(k, item[1][k], float(probs[k]), tuple(map(float, probs)), truncated)

    def class_probabilities(self, ctx: Context, outs: list[dict[str, np.ndarray]]) -> np.ndarray:
        """Softmax over one question's choices, through the calibration layer."""
        return ctx.scores(outs[0]["logits"])

    def agreement(self, ctx: Context, got: list[Choice], ref: list[Choice]) -> dict[str, float]:
        tied = A.argmax_agree([g.scores for g in got], [r.scores for r in ref])  # ties within float noise agree
        return {"argmax_agreement": float(np.mean(tied)) if tied else 1.0,
                **A.clear_agreement(tied, A.clear_leads(A.uncalibrated(ctx, [r.scores for r in ref]))),
                "topk_agreement": A.topk_sets_agree([g.scores for g in got], [r.scores for r in ref], 2)}

    def record(self, r: Choice) -> dict[str, Any]:
        return {"index": r.index, "choice": r.choice, "score": r.score, "scores": list(r.scores),
                "truncated": r.truncated}

    def arrow_types(self, pa: Any, labels: Any) -> dict[str, Any]:
        return {"index": pa.int64(), "choice": pa.string(), "score": pa.float64(), "scores": pa.list_(pa.float64()),
                "truncated": pa.bool_()}


FAMILY = MultipleChoiceFamily()
