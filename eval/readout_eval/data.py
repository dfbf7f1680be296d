"""Evaluation data: JSONL rows of the family's input fields plus gold fields, an ``id`` and ``slice``.

A row's ``id`` defaults to its line number (1-based); ``slice`` is a string or a list of strings naming
the data's own slices. The file's sha256 (of its bytes) is what lineage and reports name it by.

Lineage also keeps a *content key* per row (:func:`row_key`), so that the split-role audit
(`readout_eval.lineage`) recognizes a copy of a split that was only reformatted: the key reads only the
fields the family's evaluation reads (`readout_eval.tasks.fields.content_fields`), NFKC-normalized, case-folded, with
invisible format characters removed and whitespace collapsed.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from readout_sdk.errors import InputRefused
from readout_sdk.jsonl import objects


class DataError(InputRefused):
    """Evaluation data that cannot be read as stated: names the file, the line and the field."""


ROLES = ("development", "calibration", "test")

# The row-key format, the prefix of every content key. Bump it whenever the normalization changes: keys of two
# formats are never compared (a record from before content keys has bare 12-hex raw digests instead).
ROW_KEY = "c1"
# gold fields whose list order means nothing to the task (it reads them as sets)
SET_FIELDS = frozenset({"labels", "entities", "relevant"})
# invisible code points that are not format characters (Cf) but render as nothing: the combining grapheme
# joiner, variation selectors, Hangul fillers
_IGNORABLE = (0x034F, *range(0xFE00, 0xFE10), 0x115F, 0x1160, 0x3164, 0xFFA0)


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

    def use(self, role: str, fields: frozenset[str] | None = None) -> dict[str, Any]:
        """What lineage keeps: :meth:`describe` plus a content key per row (``row_digests``), so that a
        reordered, re-identified or reformatted copy of the same split is still recognized. ``fields``: what
        the keys read, the evaluated family's (`readout_eval.tasks.fields.content_fields`); None: every
        field a row has. ``raw_row_digests`` are the digests records made before content keys held, for the
        audit to compare with those only; `readout_eval.lineage.entry` does not keep them."""
        return self.describe(role) | {"row_digests": [row_key(r, fields) for r in self.rows],
                                      "raw_row_digests": [row_digest(r) for r in self.rows]}

    def fail(self, row: Row, message: str) -> DataError:
        return DataError(f"{self.path}:{row.line}: {message}")


def row_digest(row: Row) -> str:
    """The raw digest records kept before content keys: every field but ``id`` and ``slice``, as written,
    hashed (12 hex digits). Kept only to compare with those records."""
    body = {k: v for k, v in row.fields.items() if k not in ("id", "slice")}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=True).encode("ascii")).hexdigest()[:12]


def row_key(row: Row, fields: Iterable[str] | None) -> str:
    """A row's content key: the ``fields`` it has (None: all it has; never ``id`` or ``slice``), normalized
    (:func:`canonical`), hashed: ``c1:`` and 16 hex digits. Formatting edits (key order, an unread field,
    case, Unicode form, whitespace, zero-width characters) leave it unchanged; any change the task would
    read changes it."""
    names = row.fields if fields is None else [f for f in fields if f in row.fields]
    body = {f: canonical(row.fields[f], f in SET_FIELDS) for f in names if f not in ("id", "slice")}
    text = json.dumps(body, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return f"{ROW_KEY}:{hashlib.sha256(text.encode('ascii')).hexdigest()[:16]}"


def canonical(value: Any, as_set: bool = False) -> Any:
    """``value`` with every string normalized (:func:`text_key`) and integral floats as integers (``1.0``
    reads as ``1`` everywhere); a list of a set-like field (``as_set``) also sorted and without repeats.
    Dict keys are field names the task looks up exactly, so they stay as written."""
    if isinstance(value, str):
        return text_key(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
        return int(value)
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [canonical(v) for v in value]
        if as_set:
            by_text = {json.dumps(v, sort_keys=True): v for v in items}
            items = [by_text[k] for k in sorted(by_text)]
        return items
    return value


def text_key(text: str) -> str:
    """NFKC, case-folded (and NFKC again: folding can denormalize), invisible characters removed, every run
    of Unicode whitespace (no-break spaces included) one space, none at either end."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return " ".join(folded.translate(_invisible()).split())


@functools.lru_cache(maxsize=1)
def _invisible() -> dict[int, None]:
    """A translate table deleting format characters (zero-width space and joiners, word joiner, BOM, soft
    hyphen, bidi marks: category Cf) and the other invisible code points."""
    table = {c: None for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"}
    return table | dict.fromkeys(_IGNORABLE)


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
