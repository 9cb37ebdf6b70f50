import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from kernels_reference import FEW, clipped_gradient_sum, loss_and_derivative

from skdpsparse._kernels import (
    HINGE,
    HUBER,
    LOGISTIC,
    LOSS_CODES,
    SIGMOID,
    SMOOTHED_HINGE,
    SQUARED,
    check_loss,
    csr_clipped_gradient_sum,
    csr_loss_gradient,
    csr_margins,
    dense_clipped_gradient_sum,
    dense_loss_gradient,
    dense_margins,
    loss_derivative,
    loss_value,
    loss_value_and_derivative,
    per_example_derivatives,
    per_example_losses,
)

CODES = [SQUARED, LOGISTIC, HINGE, SMOOTHED_HINGE, HUBER, SIGMOID]
CLASSIFICATION = {LOGISTIC, HINGE, SMOOTHED_HINGE, SIGMOID}
PARAM = {SMOOTHED_HINGE: 0.5, HUBER: 1.3}


def _labels(code, rng, n):
    if code in CLASSIFICATION:
        return rng.choice([-1.0, 1.0], n)
    return rng.standard_normal(n) * 2


def test_codes():
    assert sorted(LOSS_CODES.values()) == CODES
    assert len(set(CODES)) == 6


@pytest.mark.parametrize("code", CODES)
def test_scalar_losses_match_closed_forms(code):
    param = PARAM.get(code, 0.0)
    z = np.linspace(-6, 6, 241)
    for y in ([-1.0, 1.0] if code in CLASSIFICATION else [-2.0, 0.0, 0.7]):
        val, der = loss_and_derivative(code, z, y, param)
        got = np.array([loss_value_and_derivative(code, zi, y, param) for zi in z])
        np.testing.assert_allclose(got[:, 0], val, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(got[:, 1], der, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose([loss_value(code, zi, y, param) for zi in z], val, rtol=1e-12,
                                   atol=1e-15)
        np.testing.assert_allclose([loss_derivative(code, zi, y, param) for zi in z], der,
                                   rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("code", CODES)
@FEW
@given(z=st.floats(-30, 30), y=st.sampled_from([-1.0, 1.0, 0.3, -2.5]))
def test_derivatives_match_finite_differences(code, z, y):
    param = PARAM.get(code, 0.0)
    if code in CLASSIFICATION:
        y = float(np.sign(y))
    kinks = {HINGE: [1.0], SMOOTHED_HINGE: [1.0, 1 - param]}.get(code, [])
    h = 1e-6
    t = y * z
    if any(abs(t - k) < 10 * h for k in kinks):
        return  # derivative of the hinge jumps there
    fd = (loss_value(code, z + h, y, param) - loss_value(code, z - h, y, param)) / (2 * h)
    assert loss_derivative(code, z, y, param) == pytest.approx(fd, abs=1e-6)


def test_extreme_margins_are_stable():
    for z in (-1e4, -800.0, 800.0, 1e4):
        for y in (-1.0, 1.0):
            t = y * z
            v, d = loss_value_and_derivative(LOGISTIC, z, y, 0.0)
            assert np.isfinite(v) and np.isfinite(d)
            assert v == pytest.approx(max(-t, 0.0), abs=1e-12)
            assert d == pytest.approx(-y if t < 0 else 0.0, abs=1e-12)
            v, d = loss_value_and_derivative(SIGMOID, z, y, 0.0)
            assert v == (1.0 if t < 0 else 0.0) or v == pytest.approx(1.0 if t < 0 else 0.0)
            assert d == 0.0 or abs(d) < 1e-300
    # Moderate margins where naive formulas lose precision.
    assert loss_value(LOGISTIC, 40.0, 1.0, 0.0) == pytest.approx(np.exp(-40.0), rel=1e-12)
    assert loss_value(SIGMOID, 40.0, 1.0, 0.0) == pytest.approx(np.exp(-40.0), rel=1e-12)
    assert loss_derivative(SIGMOID, 40.0, 1.0, 0.0) == pytest.approx(-np.exp(-40.0), rel=1e-12)


def test_loss_validation():
    for code, param in [(7, 0.0), (-1, 0.0), (SMOOTHED_HINGE, 0.0), (HUBER, -1.0),
                        (HUBER, np.inf), (SMOOTHED_HINGE, np.nan)]:
        with pytest.raises(ValueError):
            check_loss(code, param)
    with pytest.raises(ValueError):
        loss_value(9, 0.0, 1.0, 0.0)
    with pytest.raises(ValueError):
        per_example_losses(np.zeros(2), np.zeros(2), HUBER, 0.0)
    with pytest.raises(ValueError):
        per_example_derivatives(np.zeros(2), np.zeros(3), SQUARED, 0.0)


# ---------------------------------------------------------------- batch kernels


def _problem(code, dtype, seed=0, n=40, d=7, density=0.4):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d)) * 2 * (rng.random((n, d)) < density)
    A[3] = 0  # an empty row
    X = sp.csr_matrix(A.astype(dtype))
    y = _labels(code, rng, n)
    w = rng.standard_normal(d)
    return X, y, w, 0.4


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("code", CODES)
def test_margins_and_per_example(code, dtype):
    X, y, w, b = _problem(code, dtype)
    z = X.astype(np.float64) @ w + b
    np.testing.assert_allclose(csr_margins(X.indptr, X.indices, X.data, w, b), z, rtol=1e-12)
    np.testing.assert_allclose(dense_margins(X.toarray(), w, b), z, rtol=1e-12)
    param = PARAM.get(code, 0.0)
    val, der = loss_and_derivative(code, z, y, param)
    np.testing.assert_allclose(per_example_losses(z, y, code, param), val, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(per_example_derivatives(z, y, code, param), der, rtol=1e-12,
                               atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("code", CODES)
def test_mean_loss_gradient(code, dtype):
    X, y, w, b = _problem(code, dtype)
    param = PARAM.get(code, 0.0)
    rows = np.array([5, 0, 5, 39, 3])  # repeats and the empty row
    for sel in (None, rows):
        idx = np.arange(X.shape[0]) if sel is None else sel
        A = X.astype(np.float64).toarray()[idx]
        val, der = loss_and_derivative(code, A @ w + b, y[idx], param)
        expected = (val.mean(), A.T @ der / len(idx), der.mean())
        for got in (
            csr_loss_gradient(X.indptr, X.indices, X.data, y, w, b, code, param, sel),
            dense_loss_gradient(X.toarray(), y, w, b, code, param, sel),
        ):
            assert got[0] == pytest.approx(expected[0], rel=1e-12)
            np.testing.assert_allclose(got[1], expected[1], rtol=1e-11, atol=1e-14)
            assert got[2] == pytest.approx(expected[2], rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("clip", [0.0, 0.05, 1.0, np.inf])
@pytest.mark.parametrize("code", CODES)
def test_clipped_gradient_sum(code, clip, fit_intercept):
    X, y, w, b = _problem(code, np.float64, seed=1)
    param = PARAM.get(code, 0.0)
    rows = np.array([1, 1, 2, 3, 30, 39])
    for sel in (None, rows):
        idx = np.arange(X.shape[0]) if sel is None else sel
        exp_coef, exp_b = clipped_gradient_sum(X, y, w, b, code, param, clip, idx, fit_intercept)
        for coef, intercept in (
            csr_clipped_gradient_sum(X.indptr, X.indices, X.data, y, w, b, code, param, clip,
                                     X.shape[1], sel, fit_intercept),
            dense_clipped_gradient_sum(X.toarray(), y, w, b, code, param, clip, sel,
                                       fit_intercept),
        ):
            np.testing.assert_allclose(coef, exp_coef, rtol=1e-12, atol=1e-14)
            assert intercept == pytest.approx(exp_b, rel=1e-12, abs=1e-14)
    # Each example moves the sum by at most clip_norm (the DP sensitivity).
    if np.isfinite(clip):
        for i in range(5):
            coef, intercept = csr_clipped_gradient_sum(
                X.indptr, X.indices, X.data, y, w, b, code, param, clip, X.shape[1],
                np.array([i]), fit_intercept,
            )
            assert np.hypot(np.linalg.norm(coef), intercept) <= clip * (1 + 1e-12)


def test_unclipped_sum_is_n_times_mean_gradient():
    X, y, w, b = _problem(LOGISTIC, np.float32, seed=2)
    coef, intercept = csr_clipped_gradient_sum(
        X.indptr, X.indices, X.data, y, w, b, LOGISTIC, 0.0, np.inf, X.shape[1]
    )
    _, g, gb = csr_loss_gradient(X.indptr, X.indices, X.data, y, w, b, LOGISTIC, 0.0)
    np.testing.assert_allclose(coef, X.shape[0] * g, rtol=1e-12)
    assert intercept == pytest.approx(X.shape[0] * gb, rel=1e-12)


def test_batch_validation():
    X, y, w, b = _problem(SQUARED, np.float64)
    parts = (X.indptr, X.indices, X.data)
    with pytest.raises(IndexError):
        csr_loss_gradient(*parts, y, w, b, SQUARED, 0.0, np.array([40]))
    with pytest.raises(IndexError):
        dense_clipped_gradient_sum(X.toarray(), y, w, b, SQUARED, 0.0, 1.0, np.array([-1]))
    with pytest.raises(ValueError):
        csr_clipped_gradient_sum(*parts, y, w, b, SQUARED, 0.0, 1.0, X.shape[1] + 1)
    with pytest.raises(ValueError):
        csr_clipped_gradient_sum(*parts, y, w, b, SQUARED, 0.0, -1.0, X.shape[1])
    with pytest.raises(ValueError):
        dense_loss_gradient(X.toarray(), y[:-1], w, b, SQUARED, 0.0)
    with pytest.raises(ValueError):
        dense_loss_gradient(X.toarray(), y, w, b, HUBER, 0.0)
    with pytest.raises(ValueError):
        csr_loss_gradient(*parts, y, w, b, SQUARED, 0.0, np.empty(0, np.int64))
    with pytest.raises(ValueError):
        dense_margins(X.toarray(), w[:-1], b)
    # Integer labels are accepted (converted per example).
    yi = np.sign(y).astype(np.int64)
    np.testing.assert_array_equal(per_example_derivatives(np.zeros(3), yi[:3], HINGE, 0.0),
                                  -yi[:3])


@pytest.mark.parametrize("row, w, expected", [
    ([1.7e308, -1.7e308], [2.0, 2.0], 0.0),             # inf − inf: NaN before
    ([1e308, 1e308, -1e308], [1.0, 1.0, 1.0], 1e308),   # a partial sum overflows: inf
    ([1.7e308, 1.0], [2.0, 0.0], np.inf),                # the margin itself overflows
    ([-1.7e308, 0.0], [2.0, 5.0], -np.inf),
])
def test_margins_of_extreme_rows_are_exact_or_signed_inf(row, w, expected):
    """⟨w, x⟩ of a finite row is never NaN: when the plain sum overflows it is taken
    again in units of the row's largest entry, which gives the true margin, or ±inf when
    the true margin is beyond float64."""
    X = np.array([row])
    w = np.array(w)
    got_dense = dense_margins(X, w, 0.0)[0]
    Xc = sp.csr_matrix(X)
    got_csr = csr_margins(Xc.indptr, Xc.indices, Xc.data, w, 0.0)[0]
    for got in (got_dense, got_csr):
        assert got == expected or got == pytest.approx(expected, rel=1e-15)


def _csr(X):
    Xc = sp.csr_matrix(X)
    return Xc.indptr, Xc.indices, Xc.data


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("code", CODES)
def test_clipped_gradient_of_an_extreme_row(code, fit_intercept):
    """DP-SGD's clipped per-example gradient of a finite row of entries ±1.7e308:
    ℓ'·(x, 1) scaled to norm ≤ C. Its margin used to be inf or NaN, ℓ' then inf or
    NaN, and the clip factor C/inf = 0 turned inf into NaN (or dropped the row when
    only ‖x‖ overflowed). Now: finite, of norm ≤ C, and, when the loss has a nonzero
    slope there, exactly C in the direction of ±(x, 1)/‖(x, 1)‖."""
    X = np.array([[1.7e308, -1.7e308, 1.7e308], [0.3, 0.1, -0.2]])
    y = np.array([-1.0, 1.0])
    w = np.array([0.9, 0.5, 0.8])  # margin of row 0 ≈ 2.0e308: beyond float64
    C = 0.7
    for coef, intercept in (
        dense_clipped_gradient_sum(X, y, w, 0.1, code, PARAM.get(code, 0.0), C,
                                   np.array([0]), fit_intercept),
        csr_clipped_gradient_sum(*_csr(X), y, w, 0.1, code, PARAM.get(code, 0.0), C, 3,
                                 np.array([0]), fit_intercept),
    ):
        assert np.all(np.isfinite(coef)) and np.isfinite(intercept)
        norm = np.hypot(np.linalg.norm(coef), intercept)
        assert norm <= C * (1 + 1e-15)
        der = loss_derivative(code, np.inf, -1.0, PARAM.get(code, 0.0))
        if der != 0.0:
            assert norm == pytest.approx(C, rel=1e-14)
            np.testing.assert_allclose(coef, np.sign(der) * C * np.array([1, -1, 1]) / np.sqrt(3),
                                       rtol=1e-14)
