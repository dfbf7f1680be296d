"""multiple_choice: the most probable of k choices for a question (softmax over the choices axis)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from readout_sdk import agreement as A
from readout_sdk.arguments import items as check_items
from readout_sdk.batching import Prepared
from readout_sdk.decode import scores as S
from readout_sdk.errors import InputRefused
from readout_sdk.families.base import Context, Family, Head, TensorSpec, check_pair, row_field
from readout_sdk.families.sequence_classification import ARGMAX
from readout_sdk.results import Choice


class MultipleChoiceFamily(Family):
    name = "multiple_choice"
    task = "single_label"
    calibrators = ("temperature",)
    outputs = (TensorSpec("logits", "float32", ("batch", "choices")),)
    input_kind = "choices"
    fields = ("question", "choices")
    pair_roles = ("question", "choice")
    single_item = True
    score_types = ("softmax",)
    calls = ("choose",)
    result = Choice
    head = Head("AutoModelForMultipleChoice", ("logits",), (False,))
    decision = ARGMAX
    metric_names = ("argmax_agreement", "topk_agreement")
    record_keys = ("index", "choice", "score", "scores", "truncated")
    http_routes = ("/choices",)

    def check_item(self, index: int, item: Any) -> tuple[str, list[str]]:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise TypeError(f"item {index}: expected (question, choices), got {type(item).__name__}")
        question, choices = item
        options = list(check_items(choices, "choices"))
        if not options:
            raise InputRefused("choose() needs at least one choice")
        for i, c in enumerate(options):
            check_pair(i, (question, c), self.pair_roles)  # type: ignore[arg-type]
        return question, options

    def row_item(self, index: int, row: Any) -> tuple[str, list[str]]:
        question = row_field(index, row, "question", self.fields)
        return question, choices_field(index, row_field(index, row, "choices", self.fields))

    def encode(self, ctx: Context, base: int, items: Sequence[Any], check: bool = True,
               role: Any = None) -> list[list[Prepared]]:  # takes no roles (Engine.role refuses one)
        out = []
        for question, options in items:  # one part per question: its k (question, choice) encodings
            encs = ctx.encoder.encode_batch(0, [(question, c) for c in options], offsets=False)
            for i, enc in enumerate(encs if check else ()):
                ctx.encoder.check(i, enc)
            out.append([Prepared(tuple(encs), any(bool(e.overflowing) for e in encs))])
        return out

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
                "topk_agreement": A.topk_sets_agree([g.scores for g in got], [r.scores for r in ref], 2)}

    def record(self, r: Choice) -> dict[str, Any]:
        return {"index": r.index, "choice": r.choice, "score": r.score, "scores": list(r.scores),
                "truncated": r.truncated}

    def arrow_types(self, pa: Any, labels: Any) -> dict[str, Any]:
        return {"index": pa.int64(), "choice": pa.string(), "score": pa.float64(), "scores": pa.list_(pa.float64()),
                "truncated": pa.bool_()}


def choices_field(index: int, value: Any) -> list[str]:
    """A list of strings, or its JSON text (how Triton BYTES tensors carry it)."""
    import json

    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise InputRefused(f"row {index}: 'choices' must be a JSON list of strings") from None
    if not isinstance(value, (list, tuple)) and not hasattr(value, "tolist"):
        raise InputRefused(f"row {index}: 'choices' must be a list of strings")
    return list(value.tolist() if hasattr(value, "tolist") else value)


FAMILY = MultipleChoiceFamily()
