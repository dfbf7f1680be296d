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


REFUSALS = (InputRefused, TypeError, ValueError)  # what a bad row raises (a runtime fault is not one of them)


def predict_records(engine: Any, rows: Sequence[Mapping[str, Any]], batch_size: int = 32) -> list[dict[str, Any]]:
    """Run ``rows`` (each a mapping of the family's fields, and optionally ``role``) and return one record
    per row, in order.

    Every family's rows go through the engine's steps: prepared once per input role present
    (`Engine.prepare`), then run in sorted batches and decided by the family's own decoder (QA windows and
    multiple-choice questions too). Where the artifact declares roles, each record says which role made it
    (the declared default where a row names none).
    """
    result = predict_groups(engine, [rows], batch_size)[0]
    if isinstance(result, Exception):
        raise result
    return result


def _prepared(engine: Any, rows: Sequence[Mapping[str, Any]]) -> dict[str | None, tuple[list[int], Any]]:
    """One request's rows prepared (checked, tokenized) once per role they name: role -> (rows, prepared)."""
    fam = engine.family_spec
    roles = [_role(i, row.get(ROLE_FIELD)) for i, row in enumerate(rows)]
    out = {}
    for role in dict.fromkeys(roles):
        at = [i for i, r in enumerate(roles) if r == role]
        out[role] = (at, engine.prepare([fam.row_item(i, rows[i]) for i in at], role=role))
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
    """Several requests' rows in one engine call per role; a refused request fails alone.

    Servers batch requests from different clients together: a row one client got wrong must not fail
    the others. Each request is prepared on its own (a refused one gets its exception in place of its
    records, and is never run); the others' prepared items run together, one sorted call per role. A
    refusal at decision time (rare: the checks run while preparing) runs each request alone.
    """
    out: list[list[dict[str, Any]] | Exception] = []
    prepared: list[tuple[int, dict[str | None, tuple[list[int], Any]]]] = []
    for k, group in enumerate(groups):
        try:
            prepared.append((k, _prepared(engine, group)))
            out.append([{} for _ in group])
        except REFUSALS as e:
            out.append(e)
    try:
        _run(engine, prepared, out, batch_size)
    except REFUSALS as e:
        if len(prepared) == 1:
            out[prepared[0][0]] = e
            return out
        for k, one in prepared:
            try:
                _run(engine, [(k, one)], out, batch_size)
            except REFUSALS as e:
                out[k] = e
    return out


def _run(engine: Any, prepared: list[tuple[int, dict[str | None, tuple[list[int], Any]]]],
         out: list[Any], batch_size: int) -> None:
    """The prepared requests' items run together, one call per role; records placed in ``out`` by request and row."""
    from readout_sdk.engine import PreparedItems

    fam = engine.family_spec
    for role in dict.fromkeys(r for _, by_role in prepared for r in by_role):
        places = [(k, at) for k, by_role in prepared if role in by_role for at in [by_role[role][0]]]
        joined = PreparedItems.join([by_role[role][1] for _, by_role in prepared if role in by_role])
        applied = joined.role
        marked = {ROLE_FIELD: applied.name if applied and applied.name else None} if engine.roles else {}
        records = iter(fam.records(engine.decide(joined, batch_size=batch_size)))
        for k, at in places:
            for i in at:
                out[k][i] = next(records) | marked


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
