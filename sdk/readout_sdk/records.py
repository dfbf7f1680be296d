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


def fields(family: str) -> tuple[str, ...]:
    """The input fields of a request row for ``family``."""
    return FIELDS[family]


def predict_records(engine: Any, rows: Sequence[Mapping[str, Any]], batch_size: int = 32) -> list[dict[str, Any]]:
    """Run ``rows`` (each a mapping of the family's :data:`FIELDS`) and return one record per row, in order.

    Batch families go through the engine's sorted batching in one call; QA and multiple choice are
    per-row calls (each question has its own windows or choices).
    """
    family = engine.family
    need = FIELDS[family]
    values = [[_field(i, row, name, need) for name in need] for i, row in enumerate(rows)]
    if family == "embedding":
        emb: Embeddings = engine.embed([v[0] for v in values], batch_size=batch_size)
        return [{"embedding": vec, "truncated": cut} for vec, cut in zip(emb.vectors, emb.truncated)]
    if family in ("sequence_classification", "multilabel_classification", "regression"):
        return [record(r) for r in engine.classify([v[0] for v in values], batch_size=batch_size)]
    if family == "token_classification":
        return [record(r) for r in engine.tag([v[0] for v in values], batch_size=batch_size)]
    if family == "late_interaction":
        return [record(r) for r in engine.encode_tokens([v[0] for v in values], batch_size=batch_size)]
    if family == "sparse":
        return [record(r) for r in engine.sparse_encode([v[0] for v in values], batch_size=batch_size)]
    if family == "cross_encoder":
        return [record(r) for r in engine.score_pairs([(q, d) for q, d in values], batch_size=batch_size)]
    if family == "extractive_qa":
        return [record(engine.answer(q, c, batch_size=batch_size)) for q, c in values]
    return [record(engine.choose(q, _choices(i, c))) for i, (q, c) in enumerate(values)]


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
    except (InputRefused, TypeError, ValueError):
        if len(groups) == 1:
            return [_refusal(engine, groups[0], batch_size)]
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


def to_json(rec: Mapping[str, Any]) -> str:
    """A record as compact JSON (numpy arrays become lists of numbers)."""
    return json.dumps(rec, default=_plain, separators=(",", ":"), allow_nan=False)


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


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
