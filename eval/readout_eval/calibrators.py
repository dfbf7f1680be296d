"""Fitting the calibration layer on a calibration split (readout-contract 0x0A; Guo et al. 2017 for
temperature). Every fitter reads the cases a task produced and returns parameters plus what they did
on the data they were fitted on; none of them looks at any other split.

- ``temperature``: T > 0 minimizing the NLL of softmax(logits / T) (scipy, bounded search on log T); T = 1
  is kept when the fit does not lower the NLL, so calibration never raises it on its own data.
- ``thresholds`` (multilabel): per label, the threshold maximizing F1, or the lowest one reaching a
  declared precision (the most recall at that precision); labels without a positive keep theirs.
- ``null_threshold`` (QA): the margin (null score - best span score) above which the null answer wins,
  maximizing summed F1 as the SQuAD v2.0 script's ``find_best_thresh`` does (ties in the margin taken
  together).
- ``abstention``: the lowest top probability still answered, for a declared coverage (answer at least
  that fraction) or risk (the most coverage whose error among answered cases is at most that).
"""
from __future__ import annotations

import copy
import math
from typing import Any, Sequence

import numpy as np

from readout_sdk.errors import InputRefused


class FitRefused(InputRefused):
    """A calibration that cannot be fitted on this data as asked."""


def temperature(engine: Any, cases: Sequence[Any]) -> dict[str, Any]:
    """Fit T on single-label cases (their ``outs`` and gold index); returns parameters and NLLs."""
    from scipy.optimize import minimize_scalar

    fam, ctx = engine.family_spec, copy.copy(engine.context)
    gold = np.array([c.extra["gold"] for c in cases])

    def nll(t: float) -> float:
        ctx.temperature = t
        p = np.array([fam.class_probabilities(ctx, c.extra["outs"])[g] for c, g in zip(cases, gold)])
        return float(-np.mean(np.log(np.clip(p, 1e-300, None))))

    before = nll(1.0)
    res = minimize_scalar(lambda z: nll(math.exp(z)), bounds=(math.log(0.05), math.log(20.0)), method="bounded",
                          options={"xatol": 1e-4})
    t, after = math.exp(float(res.x)), float(res.fun)
    if not after < before:
        t, after = 1.0, before
    return {"temperature": t, "nll_before": before, "nll_after": after}


def thresholds(labels: Sequence[str], scores: np.ndarray, gold: np.ndarray, current: Sequence[float],
               precision: float | None = None) -> dict[str, Any]:
    """Per-label thresholds (``scores``/``gold``: cases x labels); see the module docstring."""
    out, notes = [], {}
    for j, lab in enumerate(labels):
        s, y = scores[:, j], gold[:, j].astype(bool)
        if not y.any():
            out.append(float(current[j]))
            notes[lab] = "no positive case in the calibration data: threshold kept"
            continue
        best = None
        for t in sorted(set(s.tolist()), reverse=True):  # predicting positive where score >= t
            yhat = s >= t
            tp, fp, fn = int((yhat & y).sum()), int((yhat & ~y).sum()), int((~yhat & y).sum())
            p = tp / (tp + fp) if tp + fp else 0.0
            f1 = 2 * tp / (2 * tp + fp + fn)
            if precision is None:
                if best is None or f1 > best[0]:
                    best = (f1, t)
            elif p >= precision:
                best = (p, t)  # lower thresholds come later: the last one reaching the precision has most recall
        if best is None:
            out.append(float(current[j]))
            notes[lab] = f"no threshold reaches precision {precision:g}: threshold kept"
        else:
            out.append(float(best[1]))
    return {"thresholds": out, "notes": notes, "target": {"precision": precision} if precision else {"max": "f1"}}


def null_threshold(cases: Sequence[Any]) -> dict[str, Any]:
    """The QA null margin maximizing summed F1 over the calibration cases (a case without a span, margin
    +inf, is null at any threshold)."""
    scored = [c for c in cases if c.extra["margin"] is not None]
    finite = [c for c in scored if math.isfinite(c.extra["margin"])]
    if not finite:
        raise FitRefused("no case has both a null score and a span score; the record's null_policy must be cls")
    # start with every case null: each unanswerable one scores 1
    score = float(sum(1 for c in scored if not c.extra["answerable"]))
    best, best_t = score, min(c.extra["margin"] for c in finite) - 1.0
    for m in sorted({c.extra["margin"] for c in finite}):  # answering every case whose margin <= m
        for c in finite:
            if c.extra["margin"] == m:
                score += c.extra["span_scores"][1] if c.extra["answerable"] else -1.0
        if score > best:
            best, best_t = score, m
    return {"null_threshold": float(best_t), "f1_sum": float(best), "cases": len(scored)}


def abstention(top: np.ndarray, correct: np.ndarray, coverage: float | None, risk: float | None) -> dict[str, Any]:
    """The abstention threshold for a declared coverage or risk (exactly one of them)."""
    order = np.argsort(-top, kind="stable")
    values = top[order]
    hits = correct[order].astype(float)
    n = len(values)
    if coverage is not None:
        k = max(1, math.ceil(coverage * n - 1e-9))  # 0.55 * 100 is 55.000000000000007 in floats
        t = float(values[k - 1])
        answered = top >= t
        return {"min_score": t, "coverage": coverage, "achieved_coverage": float(answered.mean()),
                "achieved_risk": float(1 - correct[answered].mean())}
    best = None
    for k in range(1, n + 1):
        if k < n and values[k] == values[k - 1]:
            continue  # ties go together
        r = 1 - hits[:k].mean()
        if r <= risk:
            best = (k, float(values[k - 1]), float(r))
    if best is None:
        raise FitRefused(f"no abstention threshold reaches risk {risk:g} on this data (even the most confident "
                         f"case is wrong)")
    return {"min_score": best[1], "risk": risk, "achieved_coverage": best[0] / n, "achieved_risk": best[2]}
