"""Rows in, records out: one request/response shape per family for every serving path.

Triton (the generated Python model and `readout-export serve`) and Ray Data all call
:func:`predict_records`: named input fields per row, one plain record (str, float, bool, lists, dicts
and float32 numpy vectors) per row, in input order. :func:`to_json` turns a record into JSON text.
Keeping this in one place is what keeps the label map, score type and decisions identical whichever
path serves the model.
"""
from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

import numpy as np

from readout_sdk.errors import InputRefused
from readout_sdk.families import get


ROLE_FIELD = "role"  # an optional request field where the artifact declares input roles (`readout_sdk.roles`)


def serving_fields(record: Mapping[str, Any]) -> tuple[str, ...]:
    """A request's fields: the family's, and ``role`` where the artifact (its ABI record) declares input roles."""
    fam = get(record["family"])
    return fam.fields + ((ROLE_FIELD,) if fam.takes_roles and record["input"].get("prompts") else ())


def predict_records(engine: Any, rows: Sequence[Mapping[str, Any]], batch_size: int = 32) -> list[dict[str, Any]]:
    """Run ``rows`` (each a mapping of the family's fields, and optionally ``role``) and return one record
    per row, in order.

    Every family's rows go through the engine's sorted batching and the family's own decoder, one call
    per input role present (QA windows and multiple-choice questions too). Where the artifact declares
    roles, each record says which role made it (the declared default where a row names none).
    """
    fam = engine.family_spec
    roles = [_role(i, row.get(ROLE_FIELD)) for i, row in enumerate(rows)]
    out: list[dict[str, Any]] = [{} for _ in rows]
    for role in dict.fromkeys(roles):
        at = [i for i, r in enumerate(roles) if r == role]
        items = [fam.row_item(i, rows[i]) for i in at]
        applied = engine.role(role)
        for i, rec in zip(at, fam.records(engine.decide(items, batch_size=batch_size, role=role))):
            out[i] = rec | ({ROLE_FIELD: applied.name if applied and applied.name else None} if engine.roles else {})
    return out


def _role(index: int, value: Any) -> str | None:
    """A row's role as a name (Triton sends BYTES; an empty one means none given)."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            raise InputRefused(f"row {index}: role is not UTF-8") from None
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InputRefused(f"row {index}: role must be a string, got {type(value).__name__}")
    return value


def predict_groups(engine: Any, groups: Sequence[Sequence[Mapping[str, Any]]],
                   batch_size: int = 32) -> list[list[dict[str, Any]] | Exception]:
    """Several requests' rows in one engine call; a refused request fails alone.

    Servers batch requests from different clients together: a row one client got wrong must not fail
    the others. All rows run at once; if that is refused, each request runs on its own and a refused
    one gets its exception in place of its records.
    """
    flat = [row for group in groups for row in group]
    try:
        records = predict_records(engine, flat, batch_size)
    except (InputRefused, TypeError, ValueError) as e:
        if len(groups) == 1:
            return [e]
        return [_refusal(engine, group, batch_size) for group in groups]
    out: list[list[dict[str, Any]] | Exception] = []
    for group in groups:
        out.append(records[:len(group)])
        records = records[len(group):]
    return out


def _refusal(engine: Any, rows: Sequence[Mapping[str, Any]], batch_size: int) -> list[dict[str, Any]] | Exception:
    try:
        return predict_records(engine, rows, batch_size)
    except (InputRefused, TypeError, ValueError) as e:
        return e


def rows_from_columns(columns: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One request's per-field columns (Triton BYTES tensors, ``[n]`` or ``[n, 1]``) as ``n`` rows; a
    field whose column is shorter (or absent) is missing from the rows it lacks, and refused by name."""
    flat = {f: np.asarray(c).reshape(-1) for f, c in columns.items()}
    n = max((len(c) for c in flat.values()), default=0)
    return [{f: c[i] for f, c in flat.items() if i < len(c)} for i in range(n)]


def json_column(records: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Records as a Triton BYTES tensor ``[n, 1]`` of UTF-8 JSON."""
    return np.array([[to_json(r).encode("utf-8")] for r in records], dtype=object).reshape(len(records), 1)


def to_json(rec: Mapping[str, Any]) -> str:
    """A record as compact JSON."""
    return json.dumps(plain(rec), separators=(",", ":"), allow_nan=False)


def plain(value: Any) -> Any:
    """``value`` with numpy arrays and scalars turned into Python lists and numbers, at any depth."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
