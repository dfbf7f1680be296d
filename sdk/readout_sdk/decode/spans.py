"""Extractive QA span search: the best admissible (start, end) pairs of one window.

Admissible: start <= end, both rows in the context, end - start + 1 <= max_answer_length.
Scores are p_start * p_end with each softmax taken over the window's context rows (plus the first
row when the record's null policy is ``cls``), as transformers' QA pipeline did.
"""
from __future__ import annotations

import numpy as np

from readout_sdk.decode.scores import softmax


def window_probabilities(start_logits: np.ndarray, end_logits: np.ndarray, context: np.ndarray,
                         null_row: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Softmax of start/end logits over allowed rows (context rows, and the null row if any)."""
    allowed = context.copy()
    if null_row is not None:
        allowed[null_row] = True
    masked_s = np.where(allowed, start_logits, -np.inf)
    masked_e = np.where(allowed, end_logits, -np.inf)
    return softmax(masked_s), softmax(masked_e)


def best_spans(p_start: np.ndarray, p_end: np.ndarray, context: np.ndarray, max_answer_length: int,
               top_k: int) -> list[tuple[float, int, int]]:
    """Top-k (score, start_row, end_row), best first; ties go to the earlier start, then the shorter span."""
    n = len(p_start)
    scores = np.outer(p_start, p_end)
    rows = np.arange(n)
    ok = (rows[:, None] <= rows[None, :]) & (rows[None, :] - rows[:, None] < max_answer_length)
    ok &= context[:, None] & context[None, :]
    scores = np.where(ok, scores, -1.0)
    flat = scores.ravel()
    candidates = np.flatnonzero(flat >= 0)
    if candidates.size == 0:
        return []
    # stable order: by score desc, then by flat index (start row, then end row) asc
    order = candidates[np.lexsort((candidates, -flat[candidates]))][:top_k]
    return [(float(flat[i]), int(i // n), int(i % n)) for i in order]
