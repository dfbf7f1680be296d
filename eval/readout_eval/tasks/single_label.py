"""single_label: one class per case (sequence classification; multiple choice, whose classes are the
choice positions). Gold: ``label`` (a label name, or a choice index)."""
from __future__ import annotations

import copy
from typing import Any, Sequence

import numpy as np

from readout_eval.data import Dataset, Row
from readout_eval.measures import ECE_DEFINITION, ece, finite
from readout_eval.tasks.base import Case, Measured, Task, items_of, trace_slices

BRIER = "mean over cases of the sum over classes of (p - y)^2 (range 0..2; scikit-learn, scale_by_half=False)"
NLL = "mean negative natural log of the gold class's probability (scikit-learn log_loss)"
MACRO = "unweighted mean of per-class F1 over the classes present in gold or predictions (scikit-learn)"


class SingleLabel(Task):
    name = "single_label"
    gold_fields = ("label",)
    metric_names = ("accuracy", "macro_f1", "micro_f1", "nll", "brier", "ece", "coverage", "selective_accuracy",
               "selective_risk")
    lower_is_better = frozenset({"nll", "brier", "ece", "selective_risk"})
    case_value = "correct (1) or not (0)"
    correctness = "the argmax equals the gold label"

    def gold(self, ds: Dataset, row: Row, engine: Any) -> int:
        value = row.fields.get("label")
        n = _options(ds, row, engine)
        if n is not None:  # the classes are the row's own options (a question's choices): gold is an index
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < n:
                raise ds.fail(row, f"'label' must be the index of the right choice (0..{n - 1}), got {value!r}")
            return value
        labels = list(engine.labels or ())
        if not isinstance(value, str) or value not in labels:
            raise ds.fail(row, f"'label' {value!r} is not one of the model's labels {labels}")
        return labels.index(value)

    def classes(self, engine: Any, ds: Dataset) -> list[str]:
        counts = [_options(ds, r, engine) for r in ds.rows]
        if counts and counts[0] is not None:  # positions of each row's own options, as many as the longest has
            return [f"choice {k}" for k in range(max(counts))]  # type: ignore[type-var]
        return list(engine.labels or ())

    def cases(self, engine: Any, ds: Dataset, golds: Sequence[int]) -> list[Case]:
        fam = engine.family_spec
        classes = self.classes(engine, ds)
        raw_ctx = copy.copy(engine.context)
        raw_ctx.temperature = 1.0  # what the head says before the calibration layer (reliability: before)
        out = []
        for row, gold, t in zip(ds.rows, golds, engine.trace(items_of(engine, ds))):
            probs = _pad(fam.class_probabilities(engine.context, t.outs), len(classes))
            raw = _pad(fam.class_probabilities(raw_ctx, t.outs), len(classes))
            pred = int(np.argmax(probs))
            abstained = bool(getattr(t.result, "abstained", False))
            out.append(Case(row.id, trace_slices(engine, row, t),
                            {"label": classes[pred], "score": float(probs[pred]), "abstained": abstained},
                            classes[gold], pred == gold, float(pred == gold),
                            {"probs": probs, "raw_probs": raw, "gold": gold, "pred": pred, "abstained": abstained,
                             "classes": classes, "outs": t.outs}))
        return out

    def measure(self, cases: Sequence[Case], engine: Any) -> Measured:
        from sklearn.metrics import (accuracy_score, brier_score_loss, confusion_matrix, f1_score, log_loss,
                                     precision_recall_fscore_support)

        classes = cases[0].extra["classes"]
        k = len(classes)
        y = np.array([c.extra["gold"] for c in cases])
        p = np.array([c.extra["pred"] for c in cases])
        probs = np.stack([c.extra["probs"] for c in cases])
        every = list(range(k))
        prec, rec, f1, sup = precision_recall_fscore_support(y, p, labels=every, zero_division=0)
        n = len(cases)
        m: dict[str, float | None] = {
            "accuracy": float(accuracy_score(y, p)),
            "macro_f1": float(f1_score(y, p, average="macro", zero_division=0)),
            "micro_f1": float(f1_score(y, p, average="micro", zero_division=0)),
            "nll": finite(log_loss(y, probs, labels=every)),
            "brier": finite(brier_score_loss(y, probs, labels=every, scale_by_half=False)) if k > 1 else None,
            "ece": ece(probs.max(1), p == y),
        }
        support = {name: n for name in m}
        abstained = np.array([c.extra["abstained"] for c in cases])
        if engine.abi["output"].get("abstention") is not None:  # coverage and risk under abstention
            answered = ~abstained
            m["coverage"] = float(answered.mean())
            m["selective_accuracy"] = float((p == y)[answered].mean()) if answered.any() else None
            m["selective_risk"] = 1.0 - m["selective_accuracy"] if answered.any() else None
            support |= {"coverage": n, "selective_accuracy": int(answered.sum()), "selective_risk": int(answered.sum())}
        detail = {"per_class": {classes[j]: {"precision": float(prec[j]), "recall": float(rec[j]), "f1": float(f1[j]),
                                             "support": int(sup[j])} for j in every},
                  "confusion_matrix": {"labels": classes, "rows": "gold", "columns": "predicted",
                                       "counts": confusion_matrix(y, p, labels=every).tolist()}}
        return Measured(m, support, detail, {"ece": ECE_DEFINITION, "brier": BRIER, "nll": NLL, "macro_f1": MACRO,
                                             "micro_f1": "F1 of summed counts (equals accuracy for one label per case)"})


def _pad(probs: np.ndarray, k: int) -> np.ndarray:
    """Probabilities over ``k`` classes (a question with fewer choices has 0 for the missing ones)."""
    out = np.zeros(k, np.float64)
    out[:len(probs)] = probs
    return out


TASK = SingleLabel()


def _options(ds: Dataset, row: Row, engine: Any) -> int | None:
    """How many options the row offers when the family's items bring their own classes (its input kind's
    `option_count`: a question's choices), else None; a malformed row fails naming its line."""
    from readout_sdk.errors import InputRefused

    family = engine.family_spec
    try:
        return family.kind.option_count(family, row.fields)
    except InputRefused as e:
        raise ds.fail(row, str(e)) from None
