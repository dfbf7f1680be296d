"""How close two runs are: the measures the families' parity metrics are made of.

Each function compares a candidate with a reference item by item (numpy only). The families decide
which measures apply to their outputs and decisions (`readout_sdk.families`); the parity harness
runs them and gates them against budgets.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


# the values each parity metric can take: a budget or floor outside them gates nothing (or everything)
RANGES: dict[str, tuple[float, float]] = {
    **{m: (-1.0, 1.0) for m in ("min_cosine", "mean_cosine", "rank_correlation", "values_rank_correlation")},
    **{m: (0.0, 1.0) for m in ("knn10_overlap", "argmax_agreement", "topk_agreement", "decision_agreement",
                               "set_agreement", "entity_agreement", "span_agreement", "term_overlap")},
    **{m: (0.0, float("inf")) for m in ("max_abs_error", "mean_abs_error", "max_rel_error", "maxsim_error",
                                        "values_abs_error", "values_scaled_error")},
}


def out_of_range(metric: str, value: float) -> str | None:
    """Why ``value`` cannot bound ``metric`` (outside the values it takes), or None."""
    lo, hi = RANGES.get(metric, (float("-inf"), float("inf")))
    if not lo <= value <= hi:
        return f"{metric} takes values in [{lo:g}, {hi:g}], got {value:g}"
    return None


def metric_text(metric: str, value: float | None) -> str:
    """``value`` of ``metric`` for people. Similarities and agreements (at most 1) get as many digits as it
    takes to show how far below 1 they are (six decimals, more where six would round to 1: 0.9999996; exactly 1 is "1"); errors get
    three significant digits."""
    if value is None:
        return "-"
    lo, hi = RANGES.get(metric, (float("-inf"), float("inf")))
    if hi != 1.0:
        return f"{value:.3g}"
    if value == 1.0:
        return "1"
    digits = 6
    while digits < 12 and float(f"{value:.{digits}f}") == 1.0:
        digits += 1
    return f"{value:.{digits}f}"


def _ranks(x: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(x, kind="stable"), kind="stable").astype(np.float64)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation (no tie averaging: ties are broken by position, the same on both sides)."""
    ra, rb = _ranks(np.asarray(a)), _ranks(np.asarray(b))
    if ra.std() == 0 or rb.std() == 0:
        return 1.0 if np.array_equal(ra, rb) else 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


def raw_errors(got: Sequence[dict[str, np.ndarray]], ref: Sequence[dict[str, np.ndarray]]) -> dict[str, float]:
    """Max and mean absolute error and max relative error over every floating output value.

    Relative error divides by max(|reference|, 1e-6), so it explodes where the reference is near 0:
    it is reported, and gated only where a family's budget says so."""
    diffs, rels = [], []
    for g, r in zip(got, ref):
        for name, rv in r.items():
            if rv.dtype.kind != "f":
                continue
            d = np.abs(g[name].astype(np.float64) - rv)
            diffs.append(d.ravel())
            rels.append((d / np.maximum(np.abs(rv), 1e-6)).ravel())
    if not diffs:
        return {}
    d, rel = np.concatenate(diffs), np.concatenate(rels)
    return {"max_abs_error": float(d.max()), "mean_abs_error": float(d.mean()), "max_rel_error": float(rel.max())}


def vector_agreement(got: np.ndarray, ref: np.ndarray, k: int = 10) -> dict[str, float]:
    """Cosine per item, and whether nearest neighbours and similarity ranks survive (embeddings)."""
    g = np.asarray(got, np.float64)
    r = np.asarray(ref, np.float64)
    gn = g / np.linalg.norm(g, axis=1, keepdims=True)
    rn = r / np.linalg.norm(r, axis=1, keepdims=True)
    cos = (gn * rn).sum(1)
    sg, sr = gn @ gn.T, rn @ rn.T
    n = len(g)
    k = min(k, n - 1)
    overlaps, corr = [], []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        if not others:
            continue
        top_g = set(np.array(others)[np.argsort(-sg[i, others], kind="stable")[:k]])
        top_r = set(np.array(others)[np.argsort(-sr[i, others], kind="stable")[:k]])
        overlaps.append(len(top_g & top_r) / max(k, 1))
        corr.append(spearman(sg[i, others], sr[i, others]))
    return {"min_cosine": float(cos.min()), "mean_cosine": float(cos.mean()),
            "knn10_overlap": float(np.mean(overlaps)) if overlaps else 1.0,
            "rank_correlation": float(np.mean(corr)) if corr else 1.0}


def same_fraction(got: Sequence[object], ref: Sequence[object]) -> float:
    """The fraction of items whose decisions are equal."""
    return float(np.mean([a == b for a, b in zip(got, ref)])) if len(got) else 1.0


def topk_sets_agree(got: Sequence[np.ndarray], ref: Sequence[np.ndarray], names: Sequence[str], k: int) -> float:
    """The fraction of items whose top-k names (by score, ties to the lower index) are the same set."""
    k = min(k, len(names))
    same = [{names[i] for i in np.argsort(-np.asarray(g), kind="stable")[:k]} ==
            {names[i] for i in np.argsort(-np.asarray(r), kind="stable")[:k]} for g, r in zip(got, ref)]
    return float(np.mean(same)) if same else 1.0


def scaled_error(got: np.ndarray, ref: np.ndarray) -> float:
    """Max absolute error divided by the reference's range per column (regression values): an error
    that means the same for outputs on any scale, and stays finite where values cross 0."""
    g, r = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    spread = np.maximum(r.max(0) - r.min(0), np.maximum(np.abs(r).max(0), 1e-6) * 1e-3)
    return float((np.abs(g - r) / spread).max())
