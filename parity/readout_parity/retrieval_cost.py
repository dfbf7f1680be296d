"""What a reduced vector form costs in retrieval, measured against the full float32 vectors.

The corpus is its own query set: each row queries every other row (itself excluded), once
ranked by the full vectors' scores and once by the reduced form's. Three measures, each a mean
over queries:

* ``knn10_overlap``: |top-10(full) ∩ top-10(reduced)| / 10. Do the nearest neighbours survive?
* ``recall_10_at_100``: the fraction of the full top-10 inside the reduced top-100. Would a
  reduced first stage that shortlists 100 candidates, rescored with full vectors, still find the
  true top-10? Trivially 1 when a query has at most 100 candidates (the shortlist is everything).
* ``rank_correlation``: Spearman's rho between the full and reduced score rows, ties given their
  average rank (as ``scipy.stats.spearmanr``). A row constant on one side only scores 0 (no order
  survives); constant on both sides scores 1.

With n - 1 candidates per query, 10 and 100 become min(10, n - 1) and min(100, n - 1).

Ties (common: Hamming scores are integers; scores equal within `readout_sdk.agreement.TIE_TOLERANCE`,
float noise, are ties too) are counted fairly rather than broken by index, which
would reward or punish a form for the corpus order: where a top-m cut falls inside a group of
equal scores, each member of the group is in the top-m with probability (slots left) / (group
size), and a measure is its expectation under independent uniform tie-breaking of both rankings
(exact, deterministic, and the plain set overlap when there are no ties).
"""
from __future__ import annotations

import numpy as np

from readout_sdk.agreement import TIE_TOLERANCE, tie_groups
from readout_sdk.errors import BadArgument, FormError, InputRefused
from readout_sdk.vector_forms import VectorForm, apply, similarity

K = 10      # neighbours compared
POOL = 100  # reduced shortlist for recall_10_at_100


def average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of ``x`` (ascending), tied values (equal within `agreement.TIE_TOLERANCE`) sharing the
    mean of their ranks."""
    x = np.asarray(x)
    groups = tie_groups(x)
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[np.argsort(x, kind="stable")] = np.arange(1, len(x) + 1, dtype=np.float64)
    return (np.bincount(groups, weights=ranks) / np.bincount(groups))[groups]


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = average_ranks(a), average_ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    da, db = float(np.sqrt((ra * ra).sum())), float(np.sqrt((rb * rb).sum()))
    if da == 0.0 or db == 0.0:
        return 1.0 if da == db else 0.0
    return float((ra * rb).sum() / (da * db))


def top_membership(scores: np.ndarray, m: int) -> np.ndarray:
    """The probability that each item is among the ``m`` highest ``scores`` when ties are broken
    uniformly at random: 1 above the cut, (slots left) / (tied count) at it, 0 below. Sums to m."""
    s = np.asarray(scores, dtype=np.float64)
    cut = np.partition(s, len(s) - m)[len(s) - m]        # the m-th highest score
    tol = TIE_TOLERANCE * max(1.0, abs(float(cut)))      # float noise is no order (agreement.TIE_TOLERANCE)
    above = s > cut + tol
    at = ~above & (s >= cut - tol)
    p = above.astype(np.float64)
    p[at] = (m - int(above.sum())) / int(at.sum())
    return p


def retrieval_cost(full_scores: np.ndarray, reduced_scores: np.ndarray) -> dict[str, float]:
    """``knn10_overlap``, ``recall_10_at_100`` and ``rank_correlation`` (module docstring) of
    [n, n] corpus-against-itself score matrices, larger meaning closer; diagonals are ignored.

    Refuses mismatched or non-square shapes, n < 3 (a query needs two candidates to be ranked),
    and non-finite scores off the diagonal (a NaN row has no neighbours), naming the first row."""
    f = np.asarray(full_scores, dtype=np.float64)
    r = np.asarray(reduced_scores, dtype=np.float64)
    if f.ndim != 2 or f.shape[0] != f.shape[1] or r.shape != f.shape:
        raise BadArgument(f"score matrices must be the same square [n, n] shape, got {list(f.shape)} "
                         f"and {list(r.shape)}")
    n = len(f)
    if n < 3:
        raise BadArgument(f"retrieval cost needs at least 3 rows (2 candidates per query), got {n}")
    off = ~np.eye(n, dtype=bool)
    for name, s in (("full", f), ("reduced", r)):
        bad = np.flatnonzero(~(np.isfinite(s) | ~off).all(axis=1))
        if bad.size:
            raise InputRefused(f"{name} scores of row {int(bad[0])} are not finite")
    k, pool = min(K, n - 1), min(POOL, n - 1)
    overlap = recall = corr = 0.0
    for i in range(n):
        fi, ri = f[i, off[i]], r[i, off[i]]
        in_full = top_membership(fi, k)
        # independent tie-breaking on both sides: expected |A ∩ B| = sum of products
        overlap += float(in_full @ top_membership(ri, k)) / k
        recall += float(in_full @ top_membership(ri, pool)) / k
        corr += _spearman(fi, ri)
    return {"knn10_overlap": overlap / n, "recall_10_at_100": recall / n, "rank_correlation": corr / n}


def form_cost(vectors: np.ndarray, form: VectorForm) -> dict[str, float]:
    """`retrieval_cost` of ``form`` against ``vectors`` [n, full_dim] as they are (float32, all
    dims, the artifact's score ``form.float_score``). NaN rows are refused, naming the first."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim != 2:
        raise FormError(f"vectors must be a 2-D [n, dim] array, got shape {list(v.shape)}")
    bad = np.flatnonzero(~np.isfinite(v).all(axis=1))
    if bad.size:
        raise FormError(f"row {int(bad[0])} is not finite (a text with no content rows?): it has no neighbours")
    full = VectorForm(width=v.shape[1], precision="float32", float_score=form.float_score, renormalize=False)
    stored = apply(form, v)
    return retrieval_cost(similarity(full, v, v), similarity(form, stored, stored))
