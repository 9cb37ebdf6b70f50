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


# ------------------------------------------------- exact (fixed-point) row sums
from skdpsparse._kernels.linear_losses import (  # noqa: E402
    csr_fixed_hessian_product, csr_fixed_loss_gradient, dense_fixed_hessian_product,
    dense_fixed_loss_gradient, loss_curvature,
)


def _fixed_reference(X, y, w, b, code, param, ls, gs):
    """Row by row in Python: round(term·2^F) added as Python ints."""
    loss, grad, grad_b = 0, np.zeros(X.shape[1], dtype=object), 0
    for i in range(X.shape[0]):
        z = float(X[i] @ w) + b
        val, der = loss_value_and_derivative(code, z, y[i], param)
        loss += int(np.rint(val * ls))
        grad_b += int(np.rint(der * gs))
        for j in np.flatnonzero(X[i]):
            grad[j] += int(np.rint(der * X[i, j] * gs))
    return loss, grad.astype(np.int64), grad_b


@pytest.mark.parametrize("code", [SQUARED, LOGISTIC, SMOOTHED_HINGE, HUBER])
def test_fixed_sums_are_the_rounded_terms_and_add_over_any_chunking(code):
    rng = np.random.default_rng(code)
    X = sp.random(60, 9, density=0.4, random_state=rng, format="csr")
    X.data = rng.standard_normal(X.nnz)
    dense = X.toarray()
    y = _labels(code, rng, 60)
    w = rng.standard_normal(9)
    param = PARAM.get(code, 0.0)
    ls, gs, limit = 2.0 ** 40, 2.0 ** 44, 2.0 ** 62 / 60
    ref = _fixed_reference(dense, y, w, 0.3, code, param, ls, gs)
    for out in (csr_fixed_loss_gradient(X.indptr, X.indices, X.data, y, w, 0.3, code,
                                        param, ls, gs, limit),
                dense_fixed_loss_gradient(dense, y, w, 0.3, code, param, ls, gs, limit)):
        assert out[3] and out[0] == ref[0] and out[2] == ref[2]
        np.testing.assert_array_equal(out[1], ref[1])
    # Any split of the rows: the same integers (associativity of int64 addition).
    parts = [csr_fixed_loss_gradient(X[a:b].indptr, X[a:b].indices, X[a:b].data, y[a:b],
                                     w, 0.3, code, param, ls, gs, limit)
             for a, b in ((0, 17), (17, 18), (18, 60))]
    assert sum(p[0] for p in parts) == ref[0]
    np.testing.assert_array_equal(sum(p[1] for p in parts), ref[1])
    # Within half a grid step per term of the float64 mean gradient.
    _, g, gb = csr_loss_gradient(X.indptr, X.indices, X.data, y, w, 0.3, code, param)
    counts = np.bincount(X.indices, minlength=9)
    assert np.all(np.abs(ref[1] / gs / 60 - g) <= (counts * 0.5 / gs + 1e-15) / 60 + 1e-15)


def test_fixed_sums_refuse_a_term_beyond_the_limit():
    X = sp.csr_matrix(np.array([[1e6, 0.0], [0.5, 0.5]]))
    y = np.array([0.0, 0.0])
    out = csr_fixed_loss_gradient(X.indptr, X.indices, X.data, y, np.ones(2), 0.0,
                                  SQUARED, 0.0, 1.0, 1.0, 1e3)
    assert not out[3]  # the caller retries on a coarser grid
    out = csr_fixed_loss_gradient(X.indptr, X.indices, X.data, y, np.ones(2), 0.0,
                                  SQUARED, 0.0, 1.0, 1.0, 1e13)
    assert out[3] and out[0] == 500000000000
    w_nan = np.array([np.nan, 1.0])  # a non-finite term is refused too, never wrapped
    out = csr_fixed_loss_gradient(X.indptr, X.indices, X.data, y, w_nan, 0.0,
                                  SQUARED, 0.0, 1.0, 1.0, 1e13)
    assert not out[3]


@pytest.mark.parametrize("code", [SQUARED, LOGISTIC, SMOOTHED_HINGE, HUBER])
def test_fixed_hessian_products_match_the_float_product(code):
    rng = np.random.default_rng(10 + code)
    X = sp.random(80, 7, density=0.5, random_state=rng, format="csr")
    y = _labels(code, rng, 80)
    w, v = rng.standard_normal(7), rng.standard_normal(7)
    param = PARAM.get(code, 0.0)
    z = X @ w + 0.2
    curv = np.array([loss_curvature(code, zi, yi, param) for zi, yi in zip(z, y)])
    u = curv * (X @ v + 0.7)
    scale = 2.0 ** 40
    for h, hb, ok in (csr_fixed_hessian_product(X.indptr, X.indices, X.data, y, w, 0.2, v,
                                                0.7, code, param, scale, 2.0 ** 62 / 80),
                      dense_fixed_hessian_product(X.toarray(), y, w, 0.2, v, 0.7, code,
                                                  param, scale, 2.0 ** 62 / 80)):
        assert ok
        np.testing.assert_allclose(h / scale, X.T @ u, atol=80 / scale)
        assert abs(hb / scale - u.sum()) <= 80 / scale


def _fixed_hessian_reference(X, y, w, b, v, v_b, code, param, scale):
    """Row by row in Python: round(ℓ''ᵢ·(⟨v, xᵢ⟩ + v_b)·xᵢⱼ·2^F) added as Python ints."""
    out, out_b = np.zeros(X.shape[1], dtype=object), 0
    for i in range(X.shape[0]):
        z = b
        for j in range(X.shape[1]):  # the kernels' order of operations
            z += X[i, j] * w[j]
        curv = loss_curvature(code, z, y[i], param)
        if curv == 0.0:
            continue
        m = v_b
        for j in range(X.shape[1]):
            m += X[i, j] * v[j]
        u = curv * m
        out_b += int(np.rint(u * scale))
        for j in np.flatnonzero(X[i]):
            out[j] += int(np.rint(u * X[i, j] * scale))
    return out.astype(np.int64), out_b


@pytest.mark.parametrize("scale", [1.0, 2.0 ** 52])
def test_fixed_sums_round_ties_to_even_on_both_paths(scale):
    # Terms k + 1/2 (ties) with scale 1 take the fast rounding (below 2^51); with scale
    # 2^52 every term is beyond 2^51 and takes the checked rint path: both must give
    # the reference's round-half-even integers.
    dense = np.array([[2.5, 0.0, -0.5, 3.5], [1.5, -2.5, 0.0, 0.25], [0.0, 0.0, 0.0, 0.0]])
    X = sp.csr_matrix(dense)
    y = np.array([-1.0, -1.0, 0.5])  # w = 0, b = 0: the squared loss's ℓ' = -y
    w = np.zeros(4)
    limit = 2.0 ** 62 / 3
    ref = _fixed_reference(dense, y, w, 0.0, SQUARED, 0.0, 1.0, scale)
    for out in (csr_fixed_loss_gradient(X.indptr, X.indices, X.data, y, w, 0.0, SQUARED,
                                        0.0, 1.0, scale, limit),
                dense_fixed_loss_gradient(dense, y, w, 0.0, SQUARED, 0.0, 1.0, scale,
                                          limit)):
        assert out[3] and out[0] == ref[0] and out[2] == ref[2]
        np.testing.assert_array_equal(out[1], ref[1])
    if scale == 1.0:
        np.testing.assert_array_equal(ref[1], [4, -2, 0, 4])  # 2.5+1.5 -> 2+2, 3.5 -> 4


@pytest.mark.parametrize("code", [SQUARED, LOGISTIC, SMOOTHED_HINGE, HUBER])
@pytest.mark.parametrize("scale", [2.0 ** 30, 2.0 ** 44])
def test_fixed_hessian_products_are_the_rounded_terms(code, scale):
    rng = np.random.default_rng(20 + code)
    X = sp.random(70, 8, density=0.5, random_state=rng, format="csr")
    X.data = rng.standard_normal(X.nnz)
    X.data[:5] *= 30.0  # at 2^44 the first rows' terms pass 2^51: the checked path
    dense = X.toarray()
    y = _labels(code, rng, 70)
    w, v = rng.standard_normal(8), rng.standard_normal(8)
    param = PARAM.get(code, 0.0)
    ref = _fixed_hessian_reference(dense, y, w, 0.2, v, 0.7, code, param, scale)
    for h, hb, ok in (csr_fixed_hessian_product(X.indptr, X.indices, X.data, y, w, 0.2, v,
                                                0.7, code, param, scale, 2.0 ** 62 / 70),
                      dense_fixed_hessian_product(dense, y, w, 0.2, v, 0.7, code, param,
                                                  scale, 2.0 ** 62 / 70)):
        assert ok and hb == ref[1]
        np.testing.assert_array_equal(h, ref[0])


def test_fixed_sums_refuse_a_nan_entry_in_a_row():
    # A NaN entry makes the row's bound NaN: the checked path refuses it (never wraps).
    X = sp.csr_matrix(np.array([[np.nan, 1.0], [0.5, 0.5]]))
    out = csr_fixed_loss_gradient(X.indptr, X.indices, X.data, np.zeros(2), np.zeros(2),
                                  0.0, SQUARED, 0.0, 1.0, 1.0, 1e13)
    assert not out[3]
    out = dense_fixed_loss_gradient(X.toarray(), np.zeros(2), np.zeros(2), 0.0, SQUARED,
                                    0.0, 1.0, 1.0, 1e13)
    assert not out[3]


@pytest.mark.parametrize("code", [SQUARED, LOGISTIC, HUBER])
def test_fixed_sums_with_a_known_entry_bound_are_the_same_integers(code):
    # entry_max (read once by an in-memory fit) replaces each row's maximum in the
    # check of the fast rounding; any valid bound gives the same integers, and a
    # negative or NaN one means "per row".
    rng = np.random.default_rng(40 + code)
    X = sp.random(50, 8, density=0.5, random_state=rng, format="csr")
    X.data = rng.standard_normal(X.nnz) * 30.0
    dense = X.toarray()
    y = _labels(code, rng, 50)
    w, v = rng.standard_normal(8), rng.standard_normal(8)
    param = PARAM.get(code, 0.0)
    top = float(np.abs(X.data).max())
    for gs in (2.0 ** 30, 2.0 ** 44):  # all fast; some terms beyond 2^51 (checked path)
        base = csr_fixed_loss_gradient(X.indptr, X.indices, X.data, y, w, 0.3, code, param,
                                       2.0 ** 30, gs, 2.0 ** 62 / 50)
        assert base[3]
        hbase = csr_fixed_hessian_product(X.indptr, X.indices, X.data, y, w, 0.3, v, 0.1,
                                          code, param, gs, 2.0 ** 62 / 50)
        for em in (top, 4.0 * top, np.inf, -1.0, np.nan):
            for out in (csr_fixed_loss_gradient(X.indptr, X.indices, X.data, y, w, 0.3,
                                                code, param, 2.0 ** 30, gs, 2.0 ** 62 / 50,
                                                em),
                        dense_fixed_loss_gradient(dense, y, w, 0.3, code, param, 2.0 ** 30,
                                                  gs, 2.0 ** 62 / 50, em)):
                assert out[3] == base[3] and out[0] == base[0] and out[2] == base[2]
                np.testing.assert_array_equal(out[1], base[1])
            for h in (csr_fixed_hessian_product(X.indptr, X.indices, X.data, y, w, 0.3, v,
                                                0.1, code, param, gs, 2.0 ** 62 / 50, em),
                      dense_fixed_hessian_product(dense, y, w, 0.3, v, 0.1, code, param, gs,
                                                  2.0 ** 62 / 50, em)):
                assert h[2] == hbase[2] and h[1] == hbase[1]
                np.testing.assert_array_equal(h[0], hbase[0])
