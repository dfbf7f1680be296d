"""Retrieval cost of reduced vector forms, against scipy (ranks, Spearman), brute-force python
loops, an enumeration of every tie-breaking, and the SDK's own vector agreement."""
from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from scipy.stats import rankdata, spearmanr

from readout_parity.retrieval_cost import average_ranks, form_cost, retrieval_cost, top_membership
from readout_sdk.agreement import vector_agreement
from readout_sdk.vector_forms import VectorForm, apply, fit_ranges


def _unit(n: int, dim: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _orderings(row: np.ndarray):
    """Every ranking consistent with ``row`` (higher first), equal scores in every order."""
    groups = [np.flatnonzero(row == s).tolist() for s in sorted(set(row.tolist()), reverse=True)]
    for combo in itertools.product(*(itertools.permutations(g) for g in groups)):
        yield [j for g in combo for j in g]


def _enumerated(full: np.ndarray, reduced: np.ndarray, k: int, m: int) -> float:
    """Mean over queries of |top-k(full) ∩ top-m(reduced)| / k, averaged over every pair of
    tie-breakings (sum over pairs of |A ∩ B| = sum over items of count_A * count_B)."""
    n = len(full)
    total = 0.0
    for i in range(n):
        others = np.array([j for j in range(n) if j != i])
        counts = []
        for row, top in ((full[i, others], k), (reduced[i, others], m)):
            c, runs = Counter(), 0
            for order in _orderings(row):
                c.update(order[:top])
                runs += 1
            counts.append((c, runs))
        (ca, na), (cb, nb) = counts
        total += sum(ca[j] * cb[j] for j in ca) / (na * nb) / k
    return total / n


def _tied_matrix(n: int, levels: int, seed: int, max_orderings: int) -> np.ndarray:
    """[n, n] integer scores with ties, each row few enough tie-breakings to enumerate."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        while True:
            row = rng.integers(0, levels, n).astype(np.float64)
            others = np.delete(row, i)
            if math.prod(math.factorial(c) for c in Counter(others.tolist()).values()) <= max_orderings:
                break
        rows.append(row)
    return np.array(rows)


def _plain(full: np.ndarray, reduced: np.ndarray, k: int, m: int) -> float:
    """The untied definition in a python loop: sorted() of (score, index) pairs."""
    n = len(full)
    out = 0.0
    for i in range(n):
        others = [j for j in range(n) if j != i]
        top_f = {j for _, j in sorted(((-full[i, j], j) for j in others))[:k]}
        top_r = {j for _, j in sorted(((-reduced[i, j], j) for j in others))[:m]}
        out += len(top_f & top_r) / k
    return out / n


def _scipy_rho(full: np.ndarray, reduced: np.ndarray) -> float:
    n = len(full)
    off = ~np.eye(n, dtype=bool)
    return float(np.mean([spearmanr(full[i, off[i]], reduced[i, off[i]]).statistic for i in range(n)]))


# --- building blocks ------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(5))
def test_average_ranks_are_scipy_rankdata(seed):
    x = np.random.default_rng(seed).integers(0, 7, 40).astype(np.float64)
    assert np.array_equal(average_ranks(x), rankdata(x, method="average"))
    y = np.random.default_rng(seed).standard_normal(25)
    assert np.array_equal(average_ranks(y), rankdata(y))


def test_top_membership_splits_the_cut_group():
    p = top_membership(np.array([5.0, 3, 3, 3, 1, 9]), 3)  # 9 and 5 are in; one slot for three 3s
    np.testing.assert_allclose(p, [1, 1 / 3, 1 / 3, 1 / 3, 0, 1])
    assert top_membership(np.array([2.0, 2, 2, 2]), 4).tolist() == [1, 1, 1, 1]
    assert top_membership(np.array([4.0, 3, 2, 1]), 2).tolist() == [1, 1, 0, 0]


# --- the measures against oracles -----------------------------------------------------------------

def _separated(x: np.ndarray) -> np.ndarray:
    """Each row's values replaced by their ranks / 50: the same order, every gap 0.02 (no two values within
    the tie tolerance, which standard-normal draws of 150 values per row are not: some fall within 1e-6)."""
    return np.argsort(np.argsort(x, axis=1), axis=1).astype(np.float64) / 50.0


def test_float_noise_is_a_tie_exactly_as_an_exact_tie_is():
    # integer scores with ties, then the same scores with every tie broken by noise far below the tolerance
    # (what float32 arithmetic does to two equal similarities): every measure must be unchanged
    rng = np.random.default_rng(9)
    full = rng.integers(0, 4, (40, 40)).astype(np.float64)  # ~10 equal values per row: many ties at every cut
    reduced = rng.integers(0, 5, (40, 40)).astype(np.float64)
    noisy_full = full + rng.uniform(-1e-8, 1e-8, full.shape)
    noisy_reduced = reduced + rng.uniform(-1e-8, 1e-8, reduced.shape)
    exact = retrieval_cost(full, reduced)
    for name, value in retrieval_cost(noisy_full, noisy_reduced).items():
        assert value == pytest.approx(exact[name], abs=1e-12), name
    # and a gap above the tolerance is an order again
    assert top_membership(np.array([1.0 + 1e-5, 1.0, 0.0]), 1).tolist() == [1, 0, 0]
    assert top_membership(np.array([1.0 + 1e-8, 1.0, 0.0]), 1).tolist() == [0.5, 0.5, 0]


@pytest.mark.parametrize("seed", range(3))
def test_untied_scores_against_python_loops_and_scipy(seed):
    rng = np.random.default_rng(seed)
    full = _separated(rng.standard_normal((150, 150)))
    reduced = _separated(full + rng.standard_normal((150, 150)))  # noisy: overlaps strictly between 0 and 1
    got = retrieval_cost(full, reduced)
    assert got["knn10_overlap"] == pytest.approx(_plain(full, reduced, 10, 10), abs=1e-12)
    assert got["recall_10_at_100"] == pytest.approx(_plain(full, reduced, 10, 100), abs=1e-12)
    assert got["rank_correlation"] == pytest.approx(_scipy_rho(full, reduced), abs=1e-12)
    assert 0.1 < got["knn10_overlap"] < got["recall_10_at_100"] < 1.0
    assert set(got) == {"knn10_overlap", "recall_10_at_100", "rank_correlation"}


@pytest.mark.parametrize("seed", range(3))
def test_tied_scores_against_every_tie_breaking_and_scipy(seed):
    # 13 rows: 12 candidates per query, so the top-10 cut can fall inside a group of ties
    full = _tied_matrix(13, 6, seed, max_orderings=300)
    reduced = _tied_matrix(13, 5, seed + 100, max_orderings=300)
    got = retrieval_cost(full, reduced)
    assert got["knn10_overlap"] == pytest.approx(_enumerated(full, reduced, 10, 10), abs=1e-12)
    assert got["recall_10_at_100"] == 1.0  # 12 candidates: the 100-shortlist is all of them
    assert got["rank_correlation"] == pytest.approx(_scipy_rho(full, reduced), abs=1e-12)


def test_tied_shortlist_cut_against_every_tie_breaking():
    # 130 rows: ties placed at the reduced top-10 and top-100 cuts and at the full top-10 cut
    rng = np.random.default_rng(7)
    n = 130
    full = _separated(rng.standard_normal((n, n)))  # no near-ties but the exact ones placed below
    reduced = _separated(full + 0.5 * rng.standard_normal((n, n)))
    for i in range(n):
        others = np.delete(np.arange(n), i)
        order_r = others[np.argsort(-reduced[i, others])]
        reduced[i, order_r[8:11]] = reduced[i, order_r[9]]      # 3 tied across the 10th place
        reduced[i, order_r[98:101]] = reduced[i, order_r[99]]   # 3 tied across the 100th place
        order_f = others[np.argsort(-full[i, others])]
        full[i, order_f[9:11]] = full[i, order_f[9]]            # 2 tied at the 10th place
    got = retrieval_cost(full, reduced)
    assert got["knn10_overlap"] == pytest.approx(_enumerated(full, reduced, 10, 10), abs=1e-12)
    assert got["recall_10_at_100"] == pytest.approx(_enumerated(full, reduced, 10, 100), abs=1e-12)
    assert got["rank_correlation"] == pytest.approx(_scipy_rho(full, reduced), abs=1e-12)
    assert got["recall_10_at_100"] < 1.0


def test_ties_count_fairly_not_by_index():
    # every reduced score equal: each of the 12 candidates is in the top-10 with probability 10/12;
    # breaking ties by index would give 8/10 here (full prefers high indices, index ties low ones)
    n = 13
    full = np.tile(np.arange(n, dtype=np.float64), (n, 1))
    got = retrieval_cost(full, np.zeros((n, n)))
    assert got["knn10_overlap"] == pytest.approx(10 / 12, abs=1e-12)
    assert got["rank_correlation"] == 0.0  # a constant reduced row keeps no order


def test_constant_rows_policy():
    full = np.array([[0, 1, 2, 3], [5, 0, 5, 5], [1, 2, 0, 3], [3, 1, 2, 0]], dtype=np.float64)
    reduced = np.array([[0, 4, 4, 4], [9, 0, 9, 9], [1, 2, 0, 3], [3, 2, 1, 0]], dtype=np.float64)
    # row 0: reduced constant -> 0; row 1: both constant -> 1; rows 2, 3 as scipy says
    rho2 = spearmanr([1.0, 2, 3], [1.0, 2, 3]).statistic
    rho3 = spearmanr([3.0, 1, 2], [3.0, 2, 1]).statistic
    assert retrieval_cost(full, reduced)["rank_correlation"] == pytest.approx((0 + 1 + rho2 + rho3) / 4, abs=1e-12)


def test_diagonal_is_ignored():
    rng = np.random.default_rng(3)
    full, reduced = rng.standard_normal((20, 20)), rng.standard_normal((20, 20))
    f2, r2 = full.copy(), reduced.copy()
    np.fill_diagonal(f2, np.nan)
    np.fill_diagonal(r2, 1e9)  # a query scoring itself highest must not take a neighbour's slot
    assert retrieval_cost(f2, r2) == retrieval_cost(full, reduced)


# --- reduced forms of real-shaped vectors ---------------------------------------------------------

CORPUS = _unit(60, 64, 0)


def test_full_form_costs_nothing():
    full = VectorForm(width=64, precision="float32", float_score="cosine", renormalize=True)
    assert form_cost(CORPUS, full) == {"knn10_overlap": 1.0, "recall_10_at_100": 1.0, "rank_correlation": 1.0}


def test_float_truncation_matches_the_sdk_vector_agreement():
    form = VectorForm(width=16, precision="float32", float_score="cosine", renormalize=True)
    got = form_cost(CORPUS, form)
    # zero-padding the prefix back to 64 dims keeps its cosines; untied, so its index tie rule never acts
    padded = np.pad(apply(form, CORPUS), ((0, 0), (0, 48)))
    ref = vector_agreement(padded, CORPUS)
    assert got["knn10_overlap"] == pytest.approx(ref["knn10_overlap"], abs=1e-12)
    assert got["rank_correlation"] == pytest.approx(ref["rank_correlation"], abs=1e-9)
    assert got["knn10_overlap"] < 1.0


def test_binary_cost_does_not_depend_on_corpus_order():
    # Hamming scores tie constantly: an index tie rule would change with the row order
    form = VectorForm(width=24, precision="binary", float_score="cosine", renormalize=True)
    perm = np.random.default_rng(1).permutation(len(CORPUS))
    a, b = form_cost(CORPUS, form), form_cost(CORPUS[perm], form)
    for key in a:
        assert a[key] == pytest.approx(b[key], abs=1e-12)


def test_narrower_and_coarser_forms_cost_more():
    wide = VectorForm(width=64, precision="int8", float_score="cosine", renormalize=True,
                      ranges=fit_ranges(_unit(200, 64, 9), 64, True))
    narrow = VectorForm(width=8, precision="binary", float_score="cosine", renormalize=True)
    a, b = form_cost(CORPUS, wide), form_cost(CORPUS, narrow)
    assert a["knn10_overlap"] > b["knn10_overlap"] and a["rank_correlation"] > b["rank_correlation"] > 0


# --- refusals -------------------------------------------------------------------------------------

def test_refusals():
    with pytest.raises(ValueError, match="same square"):
        retrieval_cost(np.zeros((4, 4)), np.zeros((4, 5)))
    with pytest.raises(ValueError, match="same square"):
        retrieval_cost(np.zeros((4, 3)), np.zeros((4, 3)))
    with pytest.raises(ValueError, match="at least 3 rows"):
        retrieval_cost(np.zeros((2, 2)), np.zeros((2, 2)))
    s = np.random.default_rng(0).standard_normal((5, 5))
    bad = s.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="reduced scores of row 3 are not finite"):
        retrieval_cost(s, bad)
    with pytest.raises(ValueError, match="full scores of row 3 are not finite"):
        retrieval_cost(bad, s)
    v = CORPUS.copy()
    v[4] = np.nan
    with pytest.raises(ValueError, match="row 4 is not finite"):
        form_cost(v, VectorForm(width=8, precision="float32", float_score="cosine", renormalize=True))
