"""Paired comparison of a candidate and its parent on the same case ids (readout-contract 0x0A).

Every metric's delta (candidate - parent), and for tasks with per-case correctness the transition table
(both correct, parent correct -> candidate wrong, parent wrong -> candidate correct, both wrong) with the
ids of the regressed cases; per-case value deltas for every task that has a per-case value.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from readout_sdk.errors import InputRefused

from readout_eval.tasks import Case, Task

MAX_IDS = 50  # regressed ids listed in full up to this many (the count is always exact)


def compare(task: Task, cand: Sequence[Case], parent: Sequence[Case], cand_metrics: Mapping[str, Any],
            parent_metrics: Mapping[str, Any], parent_release: str | None) -> dict[str, Any]:
    """The ``paired`` section of a report."""
    if [c.id for c in cand] != [p.id for p in parent]:
        raise InputRefused("candidate and parent were not evaluated on the same cases")
    deltas = {k: (None if cand_metrics.get(k) is None or parent_metrics.get(k) is None
                  else float(cand_metrics[k] - parent_metrics[k])) for k in cand_metrics}
    out: dict[str, Any] = {"parent_release_id": parent_release, "cases": len(cand),
                           "parent_metrics": dict(parent_metrics), "deltas": deltas,
                           "better": {k: task.higher_is_better(k) for k in cand_metrics}}
    if task.correctness and all(c.correct is not None for c in cand):
        table = {"both_correct": [], "parent_correct_candidate_wrong": [], "parent_wrong_candidate_correct": [],
                 "both_wrong": []}
        for c, p in zip(cand, parent):
            key = ("both_correct" if c.correct else "parent_correct_candidate_wrong") if p.correct else \
                ("parent_wrong_candidate_correct" if c.correct else "both_wrong")
            table[key].append(c.id)
        out["correct_means"] = task.correctness
        out["transitions"] = {k: len(v) for k, v in table.items()}
        regressed = table["parent_correct_candidate_wrong"]
        out["regressed_ids"] = regressed[:MAX_IDS]
        out["improved_ids"] = table["parent_wrong_candidate_correct"][:MAX_IDS]
    values = [(c.id, c.value - p.value) for c, p in zip(cand, parent) if c.value is not None and p.value is not None]
    if values:
        d = np.array([v for _, v in values])
        worst = sorted(values, key=lambda v: v[1])[:10]
        out["case_value"] = task.case_value
        out["case_deltas"] = {"mean": float(d.mean()), "median": float(np.median(d)), "min": float(d.min()),
                              "max": float(d.max()), "worst_ids": [i for i, _ in worst]}
    return out
