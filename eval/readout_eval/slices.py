"""Slices: the cases that share a built-in or declared slice name, measured like the whole.

Built-in slices are fixed before any data is seen: the token-length bucket, ``truncated``, ``windowed``,
QA's ``answerable`` / ``unanswerable``; the data's own ``slice`` field adds the rest. A slice with fewer
cases than the declared minimum support is shown but never gated (a gate on it is NOT_EVALUATED).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from readout_eval.tasks import Case, Measured, Task

DEFAULT_MIN_SUPPORT = 30


@dataclass
class Slice:
    name: str
    support: int
    gated: bool
    measured: Measured

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "support": self.support, "gated": self.gated, "metrics": self.measured.metrics,
                "metric_support": self.measured.support}


def slices(task: Task, cases: Sequence[Case], engine: Any, min_support: int) -> list[Slice]:
    """Every slice some case belongs to, in name order, measured by ``task``."""
    names = sorted({s for c in cases for s in c.slices})
    out = []
    for name in names:
        member = [c for c in cases if name in c.slices]
        out.append(Slice(name, len(member), len(member) >= min_support, task.measure(member, engine)))
    return out
