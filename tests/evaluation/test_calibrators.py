"""`readout_eval.calibrators` fitters that need no model (per-label thresholds, abstention), against brute
force over every candidate threshold with counts from scikit-learn's confusion matrix (the oracle) and exact
fractions, so a tie is a tie. tests/evaluation/test_calibration.py runs the fitters end to end."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from sklearn.metrics import confusion_matrix

from readout_eval.calibrators import FitRefused, abstention, thresholds

SCORES = st.lists(st.sampled_from([0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]), min_size=1, max_size=30)


def _counts(y: np.ndarray, s: np.ndarray, t: float) -> tuple[int, int, int]:
    tn, fp, fn, tp = confusion_matrix(y, s >= t, labels=[False, True]).ravel()
    return int(tp), int(fp), int(fn)


def _cases(draw_scores: list[float], draw_gold: list[bool]) -> tuple[np.ndarray, np.ndarray]:
    n = min(len(draw_scores), len(draw_gold))
    return np.array(draw_scores[:n]), np.array(draw_gold[:n], bool)


@settings(max_examples=150, deadline=None)
@given(SCORES, st.lists(st.booleans(), min_size=1, max_size=30))
def test_each_labels_threshold_is_the_highest_one_with_the_best_f1(scores, gold):
    s, y = _cases(scores, gold)
    got = thresholds(["a"], s[:, None], y[:, None], current=[0.5])
    if not y.any():
        assert got["thresholds"] == [0.5] and "no positive case" in got["notes"]["a"]
        return
    f1 = {t: Fraction(2 * tp, 2 * tp + fp + fn) for t in set(s.tolist()) for tp, fp, fn in [_counts(y, s, t)]}
    best = max(f1.values())
    assert got["thresholds"] == [max(t for t, v in f1.items() if v == best)]
    assert got["target"] == {"max": "f1"}


@settings(max_examples=150, deadline=None)
@given(SCORES, st.lists(st.booleans(), min_size=1, max_size=30), st.sampled_from([0.5, 0.6, 0.75, 0.8, 0.9, 1.0]))
def test_at_a_declared_precision_the_threshold_is_the_lowest_reaching_it(scores, gold, precision):
    s, y = _cases(scores, gold)
    got = thresholds(["a"], s[:, None], y[:, None], current=[0.5], precision=precision)
    if not y.any():
        assert got["thresholds"] == [0.5]
        return
    reaching = [t for t in set(s.tolist()) for tp, fp, _ in [_counts(y, s, t)]
                if tp + fp and Fraction(tp, tp + fp) >= Fraction(str(precision))]  # 0.9 means 9/10, not the float above it
    if reaching:
        assert got["thresholds"] == [min(reaching)] and got["target"] == {"precision": precision}
    else:
        assert got["thresholds"] == [0.5] and "no threshold reaches precision" in got["notes"]["a"]


def test_labels_are_fitted_each_on_their_own_column():
    s = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.2, 0.9]])
    y = np.array([[1, 0], [1, 0], [0, 1], [0, 1]])
    got = thresholds(["x", "y"], s, y, current=[0.5, 0.5])
    assert got["thresholds"] == [0.8, 0.7] and got["notes"] == {}


@settings(max_examples=150, deadline=None)
@given(SCORES, st.lists(st.booleans(), min_size=1, max_size=30), st.sampled_from([0.1, 0.25, 0.5, 0.55, 0.8, 1.0]))
def test_a_coverage_answers_at_least_that_fraction_with_the_highest_threshold(scores, correct, coverage):
    top, ok = _cases(scores, correct)
    got = abstention(top, ok, coverage=coverage, risk=None)
    n = len(top)
    enough = [t for t in set(top.tolist()) if (top >= t).sum() >= Fraction(coverage) * n - Fraction(1, 10 ** 9)]
    t = max(enough)
    answered = top >= t
    assert got["min_score"] == t
    assert got["achieved_coverage"] == pytest.approx(answered.mean())
    assert got["achieved_risk"] == pytest.approx(1 - ok[answered].mean())


@settings(max_examples=150, deadline=None)
@given(SCORES, st.lists(st.booleans(), min_size=1, max_size=30), st.sampled_from([0.0, 0.1, 0.2, 0.25, 0.5]))
def test_a_risk_answers_the_most_cases_whose_error_stays_within_it(scores, correct, risk):
    top, ok = _cases(scores, correct)
    n = len(top)
    within = {t: Fraction(int((top >= t).sum()), n) for t in set(top.tolist())
              if Fraction(int((~ok[top >= t]).sum()), int((top >= t).sum())) <= Fraction(risk)}
    if not within:
        with pytest.raises(FitRefused, match=f"risk {risk:g}"):
            abstention(top, ok, coverage=None, risk=risk)
        return
    got = abstention(top, ok, coverage=None, risk=risk)
    t = min(within)  # the lowest threshold within the risk answers the most cases
    assert got["min_score"] == t and got["achieved_coverage"] == pytest.approx(float(within[t]))
    assert got["achieved_risk"] <= risk + 1e-12
