"""`readout_sdk.decode.scores` against scipy.special (the oracle), including logits far outside the range
where the textbook formulas overflow."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays
from scipy.special import expit, softmax as scipy_softmax

from readout_sdk.decode.scores import apply, argmax_first, sigmoid, softmax

logits = arrays(np.float64, st.tuples(st.integers(1, 5), st.integers(1, 7)),
                elements=st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False))


@settings(max_examples=200, deadline=None)
@given(logits)
def test_softmax_is_scipys_on_every_axis(x):
    for axis in (-1, 0):
        got = softmax(x, axis=axis)
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, scipy_softmax(x, axis=axis), rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(got.sum(axis=axis), 1.0, rtol=1e-12)


@settings(max_examples=200, deadline=None)
@given(logits)
def test_sigmoid_is_scipys_expit(x):
    got = sigmoid(x)
    assert np.isfinite(got).all() and ((got >= 0) & (got <= 1)).all()
    np.testing.assert_allclose(got, expit(x), rtol=1e-12, atol=1e-300)


def test_extreme_logits_neither_overflow_nor_lose_the_winner():
    x = np.array([[1000.0, -1000.0, 999.0], [-800.0, 0.0, 800.0]])
    with np.errstate(over="raise", invalid="raise"):
        s = softmax(x)
        g = sigmoid(np.array([-1000.0, -40.0, 0.0, 40.0, 1000.0]))
    np.testing.assert_allclose(s, scipy_softmax(x, axis=-1), rtol=1e-12)
    np.testing.assert_allclose(g, expit(np.array([-1000.0, -40.0, 0.0, 40.0, 1000.0])), rtol=1e-12, atol=0)
    assert g[1] > 0  # exp(-40) is representable: not rounded to zero


@pytest.mark.parametrize("score_type, oracle", [
    ("softmax", lambda x: scipy_softmax(x, axis=-1)),
    ("sigmoid", expit),
    ("logit", lambda x: x),
    ("identity", lambda x: x),
])
def test_apply_gives_the_declared_score_type_in_float64(score_type, oracle):
    x = np.array([[0.5, -2.0, 3.25], [7.0, 7.0, -1.0]], np.float32)
    got = apply(score_type, x)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, oracle(x.astype(np.float64)), rtol=1e-12)


def test_apply_refuses_an_unknown_score_type():
    from readout_sdk.errors import SdkError

    with pytest.raises((ValueError, SdkError), match="tanh"):
        apply("tanh", np.zeros(3))


@pytest.mark.parametrize("values, want", [([0.1, 0.7, 0.7, 0.2], 1), ([3.0], 0), ([-1.0, -1.0], 0),
                                          ([0.0, 2.0, 1.0, 2.0, 2.0], 1)])
def test_argmax_first_breaks_ties_to_the_lowest_index(values, want):
    assert argmax_first(np.array(values)) == want == min(i for i, v in enumerate(values) if v == max(values))
