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
    **{m: (0.0, 1.0) for m in ("knn10_overlap", "argmax_agreement", "clear_argmax_agreement", "topk_agreement",
                               "decision_agreement",
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


# Reference values this close are one tie (relative to the value's size, absolute below 1). Float32 noise on
# a similarity or a logit is ~1e-7 of it: two reference values nearer than this have no order a correct fp32
# candidate can be held to (duplicated items and roles whose prompts change nothing tie exactly), so the rank
# and neighbourhood measures below never charge a candidate for the order it picks inside a tie.
TIE_TOLERANCE = 1e-6


def tie_groups(ref: np.ndarray) -> np.ndarray:
    """A group id per value of ``ref``: values sorted, and neighbours whose gap is within TIE_TOLERANCE (of the
    larger magnitude, or absolute below 1) share a group; ids ascend with the values."""
    r = np.asarray(ref, np.float64)
    order = np.argsort(r, kind="stable")
    s = r[order]
    starts = np.r_[True, np.diff(s) > TIE_TOLERANCE * np.maximum(1.0, np.maximum(np.abs(s[1:]), np.abs(s[:-1])))]
    groups = np.empty(len(r), np.int64)
    groups[order] = np.cumsum(starts) - 1
    return groups


def _group_mean(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    sums = np.bincount(groups, weights=values)
    counts = np.bincount(groups)
    return (sums / np.maximum(counts, 1))[groups]


def rank_agreement(got: np.ndarray, ref: np.ndarray) -> float:
    """Spearman's rho between a candidate's and the reference's values, reference ties as ties: each side's
    ranks are averaged over every reference tie group (:func:`tie_groups`), so any order a candidate picks
    inside a tie scores as the tie itself, and an order the reference has is charged when the candidate loses
    it. A reference with no order at all (one tie) scores 1."""
    g, r = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    groups = tie_groups(r)
    ordinal = np.arange(len(r), dtype=np.float64)
    rr, rg = np.empty(len(r)), np.empty(len(g))
    rr[np.argsort(r, kind="stable")] = ordinal
    rg[np.argsort(g, kind="stable")] = ordinal
    rr, rg = _group_mean(rr, groups), _group_mean(rg, groups)
    rr, rg = rr - rr.mean(), rg - rg.mean()
    dr, dg = float(np.sqrt((rr * rr).sum())), float(np.sqrt((rg * rg).sum()))
    if dr == 0.0:
        return 1.0  # the reference orders nothing: nothing to lose
    if dg == 0.0:
        return 0.0
    return float((rr * rg).sum() / (dr * dg))


def top_k_agreement(got: np.ndarray, ref: np.ndarray, k: int) -> float:
    """|the candidate's top k ∩ the reference's top k| / k, reference ties as ties: a value within the tie
    tolerance of the reference's k-th largest is as much in the reference's top k as the k-th itself, so an
    item the candidate takes from that tie counts (at most as many as the tie has places left), and an item
    the reference ranks clearly above the cut counts only where the candidate keeps it."""
    g, r = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    k = min(k, len(r))
    if k <= 0:
        return 1.0
    chosen = np.argsort(-g, kind="stable")[:k]
    cut = np.partition(r, len(r) - k)[len(r) - k]  # the reference's k-th largest
    tol = TIE_TOLERANCE * max(1.0, abs(float(cut)))
    above = r > cut + tol
    tied = ~above & (r >= cut - tol)
    hits = int(above[chosen].sum()) + min(int(tied[chosen].sum()), k - int(above.sum()))
    return hits / k


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
        others = np.array([j for j in range(n) if j != i], np.int64)
        if not others.size:
            continue
        overlaps.append(top_k_agreement(sg[i, others], sr[i, others], k))
        corr.append(rank_agreement(sg[i, others], sr[i, others]))
    return {"min_cosine": float(cos.min()), "mean_cosine": float(cos.mean()),
            "knn10_overlap": float(np.mean(overlaps)) if overlaps else 1.0,
            "rank_correlation": float(np.mean(corr)) if corr else 1.0}


def same_fraction(got: Sequence[object], ref: Sequence[object]) -> float:
    """The fraction of items whose decisions are equal."""
    return float(np.mean([a == b for a, b in zip(got, ref)])) if len(got) else 1.0


def argmax_agree(got: Sequence[np.ndarray], ref: Sequence[np.ndarray]) -> list[bool]:
    """Per item, whether the candidate's top score is the reference's, reference ties as ties: a candidate
    whose argmax the reference scores within the tie tolerance of its own maximum picks one of the reference's
    equal winners (:func:`top_k_agreement` at k=1)."""
    return [top_k_agreement(g, r, 1) == 1.0 for g, r in zip(got, ref)]


# A reference decision whose winning probability leads the runner-up by at least this much is a clear one.
# Quantization moves a probability by a few hundredths (all-MiniLM-L6-v2's sentiment head, ONNX int8: the two
# decisions of 31 it flipped led by 0.055 and 0.006); a decision with a lead of a tenth is one no correct
# lower-precision target may flip, so `clear_argmax_agreement` is gated at 1 at every precision while
# `argmax_agreement` (every decision, near ties too) keeps the looser per-precision budget.
CLEAR_LEAD = 0.1


def clear_leads(ref: Sequence[np.ndarray], lead: float = CLEAR_LEAD) -> list[bool]:
    """Per item, whether the reference's top probability leads its second by at least ``lead``."""
    out = []
    for r in ref:
        top = np.sort(np.asarray(r, np.float64))[::-1]
        out.append(len(top) < 2 or float(top[0] - top[1]) >= lead)
    return out


def uncalibrated(ctx: object, ref: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The reference's scores before the calibration layer, as probabilities: where a lead is judged clear.
    Quantization noise lives in the logits, and a temperature below 1 would sharpen a near tie into what looks
    like a clear lead (softmax(z / T) = softmax(T * log p) undone). ``ctx``'s ``temperature`` (1 without one)
    and ``output.score_type`` (softmax unless said: probabilities; sigmoid; anything else logits)."""
    t = float(getattr(ctx, "temperature", 1.0) or 1.0)
    score_type = (getattr(ctx, "output", None) or {}).get("score_type", "softmax")
    out = []
    for r in ref:
        x = np.asarray(r, np.float64)
        if score_type == "sigmoid":
            p = np.clip(x, 1e-12, 1 - 1e-12)
            out.append(1.0 / (1.0 + np.exp(-t * np.log(p / (1 - p)))))
            continue
        z = t * (np.log(np.maximum(x, 1e-300)) if score_type == "softmax" else x)
        e = np.exp(z - z.max())
        out.append(e / e.sum())
    return out


def clear_agreement(same: Sequence[bool], clear: Sequence[bool]) -> dict[str, float]:
    """``clear_argmax_agreement``: the fraction of the reference's clear decisions the candidate keeps; no
    entry where the reference decided nothing clearly (a measure of nothing is not a pass)."""
    kept = [s for s, c in zip(same, clear) if c]
    return {"clear_argmax_agreement": float(np.mean(kept))} if kept else {}


def topk_sets_agree(got: Sequence[np.ndarray], ref: Sequence[np.ndarray], k: int) -> float:
    """The fraction of items whose top-k (by score) the candidate keeps whole, reference ties as ties
    (:func:`top_k_agreement` of 1)."""
    same = [top_k_agreement(g, r, k) == 1.0 for g, r in zip(got, ref)]
    return float(np.mean(same)) if same else 1.0


def scaled_error(got: np.ndarray, ref: np.ndarray) -> float:
    """Max absolute error divided by the reference's range per column (regression values): an error
    that means the same for outputs on any scale, and stays finite where values cross 0."""
    g, r = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    spread = np.maximum(r.max(0) - r.min(0), np.maximum(np.abs(r).max(0), 1e-6) * 1e-3)
    return float((np.abs(g - r) / spread).max())
