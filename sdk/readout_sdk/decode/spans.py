"""Extractive QA span search: the best admissible (start, end) pairs of one window.

Admissible: start <= end, both rows in the context, end - start + 1 <= max_answer_length.
Scores are p_start * p_end with each softmax taken over the window's context rows (plus the first
row when the record's null policy is ``cls``), as transformers' QA pipeline did.
"""
from __future__ import annotations

import math

import numpy as np

from readout_sdk.decode.scores import softmax


def window_probabilities(start_logits: np.ndarray, end_logits: np.ndarray, context: np.ndarray,
                         null_row: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Softmax of start/end logits over allowed rows (context rows, and the null row if any)."""
    allowed = np.array(context, dtype=bool)
    if null_row is not None:
        allowed[null_row] = True
    p = softmax(np.where(allowed, np.stack([start_logits, end_logits]), -np.inf))  # one pass, row by row
    return p[0], p[1]


def _band(values: np.ndarray, width: int) -> np.ndarray:
    """(n, width) read-only view: row s holds values[s:s + width], padded past the end with zeros (False)."""
    pad = np.concatenate([values, np.zeros(width - 1, values.dtype)])
    step = pad.strides[0]
    view = np.ndarray((len(values), width), pad.dtype, pad, strides=(step, step))
    view.flags.writeable = False
    return view


def best_spans(p_start: np.ndarray, p_end: np.ndarray, context: np.ndarray, max_answer_length: int,
               top_k: int) -> list[tuple[float, int, int]]:
    """Top-k (score, start_row, end_row), best first; ties go to the earlier start, then the shorter span.

    Only the band start <= end < start + max_answer_length is scored: an (n, width) array whose row s holds
    the spans starting at s (inadmissible ones, and NaN or negative products, are never candidates), so its
    flat order is (start, end) order. The k-th best span scores at least the k-th best row maximum, so only
    the entries at or above that are sorted."""
    p_start, p_end = np.asarray(p_start), np.asarray(p_end)
    n = len(p_start)
    if n == 0 or not max_answer_length > 0:
        return []
    width = n if max_answer_length >= n else math.ceil(max_answer_length)  # end - start < max_answer_length
    context = np.asarray(context, dtype=bool)
    ok = _band(context, width) & context[:, None]
    band = np.where(ok, p_start[:, None] * _band(p_end, width), -1.0)  # -1: not a candidate
    flat = band.ravel()
    if top_k == 1:
        best = int(flat.argmax())  # the first maximum: the earliest start, then the shortest span
        if not math.isnan(flat[best]):
            if flat[best] < 0:
                return []
            return [(float(flat[best]), best // width, best // width + best % width)]
    rows = band.max(axis=1)
    if math.isnan(rows.sum()):  # NaN products are never candidates (nor is anything below 0)
        band = np.where(band >= 0, band, -1.0)
        flat, rows = band.ravel(), band.max(axis=1)
    if rows.max() < 0:
        return []
    threshold = 0.0  # every candidate
    if 0 < top_k < n:  # at least top_k candidates score >= the top_k-th row maximum
        threshold = max(float(np.partition(rows, n - top_k)[n - top_k]), 0.0)
    candidates = (flat >= threshold).nonzero()[0]
    values = flat[candidates]
    order = candidates[np.lexsort((candidates, -values))][:top_k]
    starts = order // width
    return list(zip(flat[order].tolist(), starts.tolist(), (starts + order % width).tolist()))
