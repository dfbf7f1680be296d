"""multilabel: a set of labels per case, each decided by its threshold. Gold: ``labels`` (names)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from readout_eval.data import Dataset, Row
from readout_eval.tasks.base import Case, Measured, Task, items_of, trace_slices

AP = ("mean over labels with at least one gold positive of scikit-learn's average_precision_score "
      "(labels without a positive are not measured)")


class Multilabel(Task):
    name = "multilabel"
    gold_fields = ("labels",)
    metric_names = ("macro_f1", "micro_f1", "average_precision", "labels_per_example", "gold_labels_per_example",
               "empty_prediction_rate", "exact_set_accuracy")
    lower_is_better = frozenset({"empty_prediction_rate"})
    case_value = "per-case label agreement (fraction of labels decided as gold)"
    correctness = "the predicted label set equals the gold set"

    def gold(self, ds: Dataset, row: Row, engine: Any) -> list[str]:
        value = row.fields.get("labels")
        labels = list(engine.labels or ())
        if not isinstance(value, list) or any(not isinstance(v, str) or v not in labels for v in value):
            raise ds.fail(row, f"'labels' must be a list of the model's labels {labels}, got {value!r}")
        return sorted(set(value), key=labels.index)

    def cases(self, engine: Any, ds: Dataset, golds: Sequence[list[str]]) -> list[Case]:
        labels = list(engine.labels or ())
        out = []
        for row, gold, t in zip(ds.rows, golds, engine.trace(items_of(engine, ds))):
            r = t.result
            y = np.array([lab in gold for lab in labels])
            yhat = np.array([lab in r.labels for lab in labels])
            out.append(Case(row.id, trace_slices(engine, row, t), list(r.labels), gold, bool((y == yhat).all()),
                            float((y == yhat).mean()),
                            {"y": y, "yhat": yhat, "scores": np.array([r.scores[lab] for lab in labels])}))
        return out

    def measure(self, cases: Sequence[Case], engine: Any) -> Measured:
        from sklearn.metrics import average_precision_score, f1_score, precision_recall_fscore_support

        labels = list(engine.labels or ())
        y = np.stack([c.extra["y"] for c in cases]).astype(int)
        yhat = np.stack([c.extra["yhat"] for c in cases]).astype(int)
        scores = np.stack([c.extra["scores"] for c in cases])
        prec, rec, f1, sup = precision_recall_fscore_support(y, yhat, average=None, zero_division=0)
        ap = [float(average_precision_score(y[:, j], scores[:, j])) if y[:, j].any() else None
              for j in range(len(labels))]
        measured = [a for a in ap if a is not None]
        thresholds = engine.abi["output"].get("thresholds") or []
        n = len(cases)
        present = [j for j in range(len(labels)) if y[:, j].any() or yhat[:, j].any()]  # as single-label's macro
        m = {"macro_f1": float(f1_score(y, yhat, labels=present, average="macro", zero_division=0)) if present
             else None,
             "micro_f1": float(f1_score(y, yhat, average="micro", zero_division=0)),
             "average_precision": float(np.mean(measured)) if measured else None,
             "labels_per_example": float(yhat.sum(1).mean()),
             "gold_labels_per_example": float(y.sum(1).mean()),
             "empty_prediction_rate": float((yhat.sum(1) == 0).mean()),
             "exact_set_accuracy": float((y == yhat).all(1).mean())}
        support = {k: n for k in m}
        support["average_precision"] = len(measured)
        per_label = {lab: {"precision": float(prec[j]), "recall": float(rec[j]), "f1": float(f1[j]),
                           "support": int(sup[j]), "average_precision": ap[j], "prevalence": float(y[:, j].mean()),
                           "threshold": float(thresholds[j]) if j < len(thresholds) else None}
                     for j, lab in enumerate(labels)}
        return Measured(m, support, {"per_label": per_label},
                        {"average_precision": AP, "macro_f1": "unweighted mean of per-label F1 over the labels present in gold or "
                         "predictions (scikit-learn)",
                         "micro_f1": "F1 of counts summed over labels (scikit-learn)",
                         "empty_prediction_rate": "fraction of cases with no label predicted"})


TASK = Multilabel()
