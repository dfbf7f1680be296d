"""What every task (one output object's evaluation) provides, and the case record it produces."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

import numpy as np

from readout_eval.data import Dataset, Row

# built-in length buckets (tokens of the item, each source token once): fixed before any data is seen
TOKEN_BUCKETS = ((1, 32), (33, 128), (129, 512), (513, None))


@dataclass
class Case:
    """One evaluated row: its id and slices, what was predicted and what was gold (JSON-able), whether
    it was correct (None where the task has no per-case correctness) and its per-case value (the metric
    paired comparison takes deltas of); ``extra`` holds arrays the task's metrics read."""

    id: str
    slices: list[str]
    prediction: Any
    gold: Any
    correct: bool | None
    value: float | None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "slices": self.slices, "prediction": self.prediction, "gold": self.gold,
                "correct": self.correct, "value": self.value}


@dataclass
class Measured:
    """A task's metrics over some cases: plain name -> value (None: not measurable here), the support of
    each, per-class/label/type/output detail, and each metric's definition where it needs one."""

    metrics: dict[str, float | None]
    support: dict[str, int]
    detail: dict[str, Any] = field(default_factory=dict)
    definitions: dict[str, str] = field(default_factory=dict)


class Task:
    """One output object's evaluation. Subclasses set the class attributes and the three methods."""

    name: ClassVar[str] = ""
    gold_fields: ClassVar[tuple[str, ...]] = ()
    metric_names: ClassVar[tuple[str, ...]] = ()  # every metric it may report (gates may name these)
    lower_is_better: ClassVar[frozenset[str]] = frozenset()
    case_value: ClassVar[str] = ""          # what Case.value is (paired deltas)
    correctness: ClassVar[str | None] = None  # what Case.correct means, None where there is none
    reads_items: ClassVar[bool] = True      # rows are the family's input items (`items_of`)

    def gold(self, ds: Dataset, row: Row, engine: Any) -> Any:
        """The row's gold value, checked (refusals name the file, line and field)."""
        raise NotImplementedError

    def cases(self, engine: Any, ds: Dataset, golds: Sequence[Any]) -> list[Case]:
        """Run ``engine`` on every row of ``ds`` once; one case per row, in order."""
        raise NotImplementedError

    def measure(self, cases: Sequence[Case], engine: Any) -> Measured:
        """The task's metrics over ``cases``."""
        raise NotImplementedError

    def higher_is_better(self, metric: str) -> bool:
        return metric not in self.lower_is_better


def items_of(engine: Any, ds: Dataset) -> list[Any]:
    """Each row's input item, read by the family's own field names."""
    fam = engine.family_spec
    out = []
    for k, row in enumerate(ds.rows):
        try:  # refused here, naming the line, rather than inside a batch
            out.append(fam.check_item(k, fam.row_item(row.line, row.fields)))
        except (ValueError, TypeError) as e:
            why = str(e).replace(f"row {row.line}: ", "").replace(f"item {k}: ", "")
            raise ds.fail(row, f"input {' / '.join(repr(f) for f in fam.fields)}: {why}") from None
    return out


def trace_slices(engine: Any, row: Row, traced: Any) -> list[str]:
    """Built-in slices of one traced item: its token-length bucket, truncated, windowed; then the row's own."""
    parts = traced.parts
    if len(parts) > 1:  # windows: each source token once
        n = int(sum(o.sum() for o in engine.context.owned_rows([p.encodings[0] for p in parts])))
    else:
        n = max(int(np.sum(e.attention_mask)) for e in parts[0].encodings)
    return [token_bucket(n)] + (["truncated"] if traced.truncated else []) + \
        (["windowed"] if len(parts) > 1 else []) + list(row.slices)


def token_bucket(n: int) -> str:
    for low, high in TOKEN_BUCKETS:
        if n >= low and (high is None or n <= high):
            return f"tokens:{low}-{high}" if high else f"tokens:>{low - 1}"
    return "tokens:0"
