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
from readout_sdk.results import (Answer, Choice, Classification, Embeddings, MultiLabel, Regression, Scored,
                                 SparseVector, TaggedText, TokenVectors)

# The named text fields one request row carries, per family. multiple_choice's `choices` is a JSON list.
FIELDS: dict[str, tuple[str, ...]] = {
    "embedding": ("text",), "sequence_classification": ("text",), "multilabel_classification": ("text",),
    "regression": ("text",), "token_classification": ("text",), "late_interaction": ("text",),
    "sparse": ("text",), "cross_encoder": ("query", "document"), "extractive_qa": ("question", "context"),
    "multiple_choice": ("question", "choices"),
}
# The record keys each family returns (what Ray appends as columns).
OUTPUT_KEYS: dict[str, tuple[str, ...]] = {
    "embedding": ("embedding", "truncated"),
    "sequence_classification": ("label", "score", "scores", "truncated"),
    "multilabel_classification": ("labels", "scores", "truncated"),
    "regression": ("values", "truncated"),
    "token_classification": ("entities", "truncated"),
    "late_interaction": ("token_vectors", "tokens", "truncated"),
    "sparse": ("indices", "values", "tokens", "truncated"),
    "cross_encoder": ("score", "scores", "truncated"),
    "extractive_qa": ("answer", "start", "end", "score", "is_null"),
    "multiple_choice": ("index", "choice", "score", "scores", "truncated"),
}


def predict_records(engine: Any, rows: Sequence[Mapping[str, Any]], batch_size: int = 32) -> list[dict[str, Any]]:
    """Run ``rows`` (each a mapping of the family's :data:`FIELDS`) and return one record per row, in order.

    Text and pair families go through the engine's sorted batching in one call; QA and multiple choice
    are per-row calls (each question has its own windows or choices).
    """
    family = engine.family
    need = FIELDS[family]
    values = [[_field(i, row, name, need) for name in need] for i, row in enumerate(rows)]
    if family == "extractive_qa":
        return [record(engine.answer(q, c, batch_size=batch_size)) for q, c in values]
    if family == "multiple_choice":
        return [record(engine.choose(q, _choices(i, c))) for i, (q, c) in enumerate(values)]
    if family == "embedding":  # one Embeddings for the batch: a record per vector
        emb: Embeddings = engine.embed([v[0] for v in values], batch_size=batch_size)
        return [{"embedding": vec, "truncated": cut} for vec, cut in zip(emb.vectors, emb.truncated)]
    items = [tuple(v) for v in values] if len(need) == 2 else [v[0] for v in values]
    return [record(r) for r in engine.predict(items, batch_size=batch_size)]


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


def record(result: Any) -> dict[str, Any]:
    """One typed result as a plain record (the keys of :data:`OUTPUT_KEYS` for its family)."""
    if isinstance(result, Classification):
        return {"label": result.label, "score": result.score, "scores": dict(result.scores),
                "truncated": result.truncated}
    if isinstance(result, MultiLabel):
        return {"labels": list(result.labels), "scores": dict(result.scores), "truncated": result.truncated}
    if isinstance(result, Regression):
        return {"values": dict(result.values), "truncated": result.truncated}
    if isinstance(result, TaggedText):
        return {"entities": [{"label": e.label, "start": e.start, "end": e.end, "text": e.text, "score": e.score}
                             for e in result.entities], "truncated": result.truncated}
    if isinstance(result, TokenVectors):
        return {"token_vectors": list(result.vectors), "tokens": list(result.tokens), "truncated": result.truncated}
    if isinstance(result, SparseVector):
        return {"indices": result.indices, "values": result.values, "tokens": list(result.tokens),
                "truncated": result.truncated}
    if isinstance(result, Scored):
        return {"score": result.score, "scores": list(result.scores), "truncated": result.truncated}
    if isinstance(result, Answer):
        return {"answer": result.text, "start": result.start, "end": result.end, "score": result.score,
                "is_null": result.is_null}
    if isinstance(result, Choice):
        return {"index": result.index, "choice": result.choice, "score": result.score, "scores": list(result.scores),
                "truncated": result.truncated}
    raise TypeError(f"no record shape for {type(result).__name__}")


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


def _field(index: int, row: Mapping[str, Any], name: str, need: tuple[str, ...]) -> Any:
    if name not in row or row[name] is None:
        raise InputRefused(f"row {index}: missing field {name!r} (this model's rows carry: {', '.join(need)})")
    value = row[name]
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else value


def _choices(index: int, value: Any) -> list[str]:
    """multiple_choice: a list of strings, or its JSON text (how Triton BYTES tensors carry it)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise InputRefused(f"row {index}: 'choices' must be a JSON list of strings") from None
    if not isinstance(value, (list, tuple)) and not hasattr(value, "tolist"):
        raise InputRefused(f"row {index}: 'choices' must be a list of strings")
    return list(value.tolist() if hasattr(value, "tolist") else value)
