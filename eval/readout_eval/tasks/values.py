"""values (regression): named real values per case. Gold: ``values`` ({output name: number}; an output a row
omits is missing for that row, and its support says so)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from readout_eval.data import Dataset, Row, number
from readout_eval.measures import correlations, finite
from readout_eval.tasks.base import Case, Measured, Task, items_of, trace_slices


class Values(Task):
    name = "values"
    gold_fields = ("values",)
    metric_names = ("mae", "rmse", "pearson", "spearman")
    lower_is_better = frozenset({"mae", "rmse"})
    case_value = "mean absolute error over the case's gold outputs"

    def gold(self, ds: Dataset, row: Row, engine: Any) -> dict[str, float]:
        value = row.fields.get("values")
        names = list(engine.labels or ())
        if not isinstance(value, dict) or not value or any(k not in names for k in value):
            raise ds.fail(row, f"'values' must map some of the outputs {names} to numbers, got {value!r}")
        out = {}
        for k, v in value.items():
            out[k] = number(v)
            if out[k] is None:
                raise ds.fail(row, f"'values.{k}' must be a finite number, got {str(v)[:40]}")
        return out

    def cases(self, engine: Any, ds: Dataset, golds: Sequence[dict[str, float]]) -> list[Case]:
        out = []
        for row, gold, t in zip(ds.rows, golds, engine.trace(items_of(engine, ds))):
            pred = dict(t.result.values)
            err = float(np.mean([abs(pred[k] - v) for k, v in gold.items()]))
            out.append(Case(row.id, trace_slices(engine, row, t), pred, gold, None, err, {}))
        return out

    def measure(self, cases: Sequence[Case], engine: Any) -> Measured:
        from sklearn.metrics import mean_absolute_error, root_mean_squared_error

        per_output, support = {}, {}
        for name in engine.labels or ():
            have = [c for c in cases if name in c.gold]
            if not have:
                per_output[name] = {"support": 0, "mae": None, "rmse": None, "pearson": None, "spearman": None}
                continue
            g = [c.gold[name] for c in have]
            p = [c.prediction[name] for c in have]
            per_output[name] = {"support": len(have), "mae": finite(mean_absolute_error(g, p)),
                                "rmse": finite(root_mean_squared_error(g, p)), **correlations(p, g),
                                "gold_range": [min(g), max(g)]}
        measured = {k: v for k, v in per_output.items() if v["support"]}
        m: dict[str, float | None] = {}
        for metric in ("mae", "rmse", "pearson", "spearman"):
            values = [v[metric] for v in measured.values() if v[metric] is not None]
            m[metric] = float(np.mean(values)) if values else None
            support[metric] = min((v["support"] for v in measured.values()), default=0)
        defs = {"mae": "mean absolute error (scikit-learn), averaged over outputs when there are several",
                "rmse": "root mean squared error (scikit-learn), averaged over outputs",
                "pearson": "Pearson r of predicted and gold (scipy), averaged over outputs",
                "spearman": "Spearman rho of predicted and gold (scipy), averaged over outputs"}
        return Measured(m, support, {"per_output": per_output}, defs)


TASK = Values()
