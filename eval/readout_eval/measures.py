"""Measures several tasks share, each with its definition stated where it is reported."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

ECE_BINS = 15
ECE_DEFINITION = (f"top-label ECE: the top probability in {ECE_BINS} equal-width bins over (0, 1] (lower edge "
                  "exclusive, the first bin includes 0), sum over bins of |B|/N * |accuracy(B) - mean confidence(B)|")


def ece(confidence: Sequence[float], correct: Sequence[bool], bins: int = ECE_BINS) -> float | None:
    """Expected calibration error under :data:`ECE_DEFINITION` (None with no cases)."""
    conf = np.asarray(confidence, np.float64)
    hit = np.asarray(correct, np.float64)
    if len(conf) == 0:
        return None
    which = np.clip(np.ceil(conf * bins).astype(int) - 1, 0, bins - 1)
    total = 0.0
    for b in range(bins):
        inside = which == b
        if inside.any():
            total += inside.sum() / len(conf) * abs(hit[inside].mean() - conf[inside].mean())
    return float(total)


def reliability(confidence: Sequence[float], correct: Sequence[bool], bins: int = ECE_BINS) -> list[dict]:
    """Per bin: its edges, count, accuracy and mean confidence (the reliability diagram's data)."""
    conf = np.asarray(confidence, np.float64)
    hit = np.asarray(correct, np.float64)
    which = np.clip(np.ceil(conf * bins).astype(int) - 1, 0, bins - 1)
    out = []
    for b in range(bins):
        inside = which == b
        n = int(inside.sum())
        out.append({"low": b / bins, "high": (b + 1) / bins, "count": n,
                    "accuracy": float(hit[inside].mean()) if n else None,
                    "confidence": float(conf[inside].mean()) if n else None})
    return out


def correlations(predicted: Sequence[float], gold: Sequence[float]) -> dict[str, float | None]:
    """Pearson and Spearman (scipy), None where undefined (fewer than 2 cases or a constant side)."""
    from scipy.stats import pearsonr, spearmanr

    a, b = np.asarray(predicted, np.float64), np.asarray(gold, np.float64)
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return {"pearson": None, "spearman": None}
    return {"pearson": float(pearsonr(a, b).statistic), "spearman": float(spearmanr(a, b).statistic)}


def prf(tp: int, fp: int, fn: int) -> dict[str, float]:
    """Precision, recall, F1 from counts (0 where a denominator is 0, as scikit-learn's zero_division=0)."""
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": p, "recall": r, "f1": f}


def finite(value: float | None) -> float | None:
    """A float for JSON, or None (never NaN)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None
