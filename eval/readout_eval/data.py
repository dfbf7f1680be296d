"""Evaluation data: JSONL rows of the family's input fields plus gold fields, an ``id`` and ``slice``.

A row's ``id`` defaults to its line number (1-based); ``slice`` is a string or a list of strings naming
the data's own slices. The file's sha256 (of its bytes) is what lineage and reports name it by.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readout_sdk.errors import InputRefused
from readout_sdk.jsonl import objects


class DataError(InputRefused):
    """Evaluation data that cannot be read as stated: names the file, the line and the field."""


ROLES = ("development", "calibration", "test")


@dataclass(frozen=True)
class Row:
    """One evaluation case as written: its stable id, line, raw fields and declared slices."""

    id: str
    line: int
    fields: dict[str, Any]
    slices: tuple[str, ...]


@dataclass(frozen=True)
class Dataset:
    """An evaluation file: its path, sha256 and rows."""

    path: Path
    sha256: str
    rows: tuple[Row, ...]

    def describe(self, role: str) -> dict[str, Any]:
        """What reports and the calibration layer say about it."""
        return {"file": self.path.name, "sha256": self.sha256, "rows": len(self.rows), "role": role}

    def use(self, role: str) -> dict[str, Any]:
        """What lineage keeps: :meth:`describe` plus a digest per row, so a reordered or re-identified copy
        of the same split is still recognized."""
        return self.describe(role) | {"row_digests": [row_digest(r) for r in self.rows]}

    def fail(self, row: Row, message: str) -> DataError:
        return DataError(f"{self.path}:{row.line}: {message}")


def row_digest(row: Row) -> str:
    """A row's content (every field but ``id`` and ``slice``), hashed: 12 hex digits."""
    body = {k: v for k, v in row.fields.items() if k not in ("id", "slice")}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=True).encode("ascii")).hexdigest()[:12]


def number(value: Any) -> float | None:
    """A finite float from a JSON number, or None (bools, strings, NaN, infinities and integers too large
    for a float are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        v = float(value)
    except OverflowError:
        return None
    return v if math.isfinite(v) else None


def read(path: str | Path) -> Dataset:
    """Read a JSONL file of objects; refuse (naming file and line) anything else or a repeated id."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such data file")
    raw = path.read_bytes()
    rows, seen = [], {}
    for n, obj in objects(path, DataError, raw):
        rid = str(obj.get("id", n))
        if rid in seen:
            raise DataError(f"{path}:{n}: id {rid!r} repeats line {seen[rid]}; case ids must be unique")
        seen[rid] = n
        sl = obj.get("slice", ())
        sl = (sl,) if isinstance(sl, str) else sl
        if not isinstance(sl, (list, tuple)) or not all(isinstance(s, str) and s for s in sl):
            raise DataError(f"{path}:{n}: 'slice' must be a non-empty string or a list of them")
        rows.append(Row(rid, n, obj, tuple(sl)))
    if not rows:
        raise DataError(f"{path}: no rows")
    return Dataset(path, hashlib.sha256(raw).hexdigest(), tuple(rows))
