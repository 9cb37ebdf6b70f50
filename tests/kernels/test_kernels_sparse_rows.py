import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from kernels_reference import SETTINGS, bounding_scales, csr_matrices, row_norms

from skdpsparse._kernels import (
    csr_bounded_column_sum,
    csr_bounding_scales,
    csr_row_norms,
    csr_scale_rows,
    csr_scaled_column_sum,
    dense_bounded_column_sum,
    dense_bounding_scales,
    dense_row_norms,
    dense_scale_rows,
    dense_scaled_column_sum,
)

# (Bounds below ~1e-290 would make the scale factors subnormal, with few
# significant bits, and the bounds would hold only to that precision.)
bounds = st.sampled_from([0.0, 1e-3, 1.0, 100.0, np.inf]) | st.floats(1e-200, 1e4)


def _parts(X):
    return X.indptr, X.indices, X.data


@SETTINGS
@given(csr_matrices(), st.sampled_from([1, 2]))
def test_row_norms(X, ord):
    expected = row_norms(X, ord)
    np.testing.assert_allclose(csr_row_norms(X.indptr, X.data, ord), expected, rtol=1e-13)
    np.testing.assert_allclose(dense_row_norms(X.toarray(), ord), expected, rtol=1e-13)


@SETTINGS
@given(csr_matrices(), bounds, bounds)
def test_bounding_scales_and_scaled_rows(X, l2, l1):
    expected = bounding_scales(X, l2, l1)
    scales = csr_bounding_scales(X.indptr, X.data, l2, l1)
    np.testing.assert_allclose(scales, expected, rtol=1e-13)
    np.testing.assert_allclose(dense_bounding_scales(X.toarray(), l2, l1), expected, rtol=1e-13)
    assert np.all((scales >= 0) & (scales <= 1))

    data = csr_scale_rows(X.indptr, X.data, scales)
    assert data.dtype == X.data.dtype
    Y = sp.csr_matrix((data, X.indices, X.indptr), shape=X.shape)
    ref = (sp.diags(scales) @ X.astype(np.float64)).toarray()
    info = np.finfo(X.dtype)  # (float32 results may underflow)
    np.testing.assert_allclose(Y.toarray(), ref, rtol=2 * info.eps, atol=info.smallest_subnormal)
    np.testing.assert_allclose(dense_scale_rows(X.toarray(), scales), ref, rtol=2 * info.eps,
                               atol=info.smallest_subnormal)
    # The scaled rows satisfy the bounds (up to rounding); rows already inside are
    # untouched (scaled, never dropped).
    slack = 1 + 4 * X.shape[1] * info.eps
    tiny = X.shape[1] * info.smallest_subnormal
    assert np.all(row_norms(Y, 2) <= l2 * slack + tiny)
    assert np.all(row_norms(Y, 1) <= l1 * slack + tiny)
    inside = (row_norms(X, 2) <= l2) & (row_norms(X, 1) <= l1)
    np.testing.assert_array_equal(scales[inside], 1.0)


@SETTINGS
@given(csr_matrices(), bounds, bounds)
def test_column_sums(X, l2, l1):
    scales = bounding_scales(X, l2, l1)
    expected = X.astype(np.float64).T @ scales
    atol = 1e-300 + 8 * max(X.shape[0], 1) * 1e-16 * np.abs(X).sum(axis=0).A1.max(initial=0)
    np.testing.assert_allclose(
        csr_scaled_column_sum(*_parts(X), X.shape[1], scales), expected, rtol=1e-12, atol=atol
    )
    np.testing.assert_allclose(
        dense_scaled_column_sum(X.toarray(), scales), expected, rtol=1e-12, atol=atol
    )
    np.testing.assert_allclose(
        csr_bounded_column_sum(*_parts(X), X.shape[1], l2, l1), expected, rtol=1e-12, atol=atol
    )
    np.testing.assert_allclose(
        dense_bounded_column_sum(X.toarray(), l2, l1), expected, rtol=1e-12, atol=atol
    )


def test_bounded_column_sum_many_blocks():
    # More rows than one block of the fused kernel, with empty rows and float32.
    X = sp.random(1000, 50, density=0.05, format="csr", random_state=0, dtype=np.float32)
    X.data = (X.data - 0.5) * 10
    expected = X.astype(np.float64).T @ bounding_scales(X, 1.0, 2.0)
    np.testing.assert_allclose(
        csr_bounded_column_sum(*_parts(X), 50, 1.0, 2.0), expected, rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(
        csr_bounded_column_sum(*_parts(X), 50, np.inf, np.inf), X.sum(axis=0).A1, rtol=1e-5
    )


def test_int64_index_arrays():
    # SciPy switches to int64 indices for very large matrices.
    X = sp.random(30, 6, density=0.4, format="csr", random_state=1)
    X.indptr = X.indptr.astype(np.int64)
    X.indices = X.indices.astype(np.int64)
    scales = bounding_scales(X, 0.5, 0.8)
    np.testing.assert_allclose(csr_row_norms(X.indptr, X.data, 2), row_norms(X, 2), rtol=1e-13)
    np.testing.assert_allclose(csr_bounding_scales(X.indptr, X.data, 0.5, 0.8), scales, rtol=1e-13)
    np.testing.assert_allclose(csr_scaled_column_sum(*_parts(X), 6, scales), X.T @ scales,
                               rtol=1e-12)
    np.testing.assert_allclose(csr_bounded_column_sum(*_parts(X), 6, 0.5, 0.8), X.T @ scales,
                               rtol=1e-12)
    Y = sp.csr_matrix((csr_scale_rows(X.indptr, X.data, scales), X.indices, X.indptr), X.shape)
    np.testing.assert_allclose(Y.toarray(), (sp.diags(scales) @ X).toarray(), rtol=1e-15)


def test_bounding_edge_cases():
    # Row 0 empty, row 1 explicit zeros, row 2 huge, row 3 tiny.
    indptr = np.array([0, 0, 2, 4, 5])
    data = np.array([0.0, 0.0, 3e200, 4e200, 1e-200])
    indices = np.array([0, 1, 0, 1, 2])
    s = csr_bounding_scales(indptr, data, 1.0, np.inf)
    np.testing.assert_allclose(s, [1.0, 1.0, 1 / 5e200, 1.0], rtol=1e-15)
    # A zero bound zeroes every nonzero row and keeps zero rows (scale 1).
    np.testing.assert_array_equal(csr_bounding_scales(indptr, data, 0.0, np.inf), [1, 1, 0, 0])
    np.testing.assert_array_equal(csr_bounding_scales(indptr, data, np.inf, np.inf), 1.0)
    np.testing.assert_allclose(csr_row_norms(indptr, data, 2), [0, 0, 5e200, 1e-200], rtol=1e-15)
    np.testing.assert_allclose(
        csr_bounded_column_sum(indptr, indices, data, 3, 1.0, np.inf), [0.6, 0.8, 1e-200],
        rtol=1e-15,
    )
    # No rows at all.
    assert csr_bounding_scales(np.zeros(1, np.int64), np.empty(0), 1.0, 1.0).shape == (0,)
    no_rows = (np.zeros(1, np.int32), np.empty(0, np.int32), np.empty(0))
    np.testing.assert_array_equal(csr_bounded_column_sum(*no_rows, 3, 1.0, 1.0), 0.0)
    assert dense_row_norms(np.empty((0, 3)), 1).shape == (0,)


def test_scale_rows_in_place_and_validation():
    X = sp.csr_matrix(np.array([[3.0, 4.0], [0.0, 1.0]]))
    data = X.data
    assert csr_scale_rows(X.indptr, data, np.array([0.5, 2.0]), out=data) is data
    np.testing.assert_array_equal(X.toarray(), [[1.5, 2.0], [0.0, 2.0]])
    D = np.ones((2, 2), dtype=np.float32)
    assert dense_scale_rows(D, np.array([0.5, 2.0]), out=D) is D
    np.testing.assert_array_equal(D, [[0.5, 0.5], [2.0, 2.0]])
    with pytest.raises(ValueError):
        csr_scale_rows(X.indptr, data, np.ones(3))
    with pytest.raises(ValueError):
        csr_row_norms(X.indptr, data, 3)
    with pytest.raises(ValueError):
        dense_row_norms(D, 0)
    with pytest.raises(ValueError):
        csr_bounding_scales(X.indptr, data, -1.0, 1.0)
    with pytest.raises(ValueError):
        csr_bounded_column_sum(X.indptr, X.indices, data, 2, 1.0, np.nan)
    with pytest.raises(ValueError):
        dense_bounding_scales(D, 1.0, -2.0)
    with pytest.raises(ValueError):
        csr_scaled_column_sum(X.indptr, X.indices, data, 2, np.ones(1))
    with pytest.raises(ValueError):
        dense_scaled_column_sum(D, np.ones(3))


@pytest.mark.parametrize("row, l2, l1", [
    ([1.7e308, 1.7e308], 1.0, np.inf),           # ‖x‖₂ = 2.4e308 overflows
    ([1.7e308, -1.7e308, 1e300, 0.0], 1.0, 1.5),  # both norms overflow
    ([-1.7e308] * 5, np.inf, 2.0),               # only ‖x‖₁ is bounded (and overflows)
    ([1e308, 1e308], 1e-3, np.inf),              # a small bound: a subnormal factor
    ([1.7e308, 3.0], 2.0, 1e308),                # ‖x‖₁ overflows, ‖x‖₂ does not
])
def test_rows_whose_norms_overflow_are_scaled_not_dropped(row, l2, l1):
    """Contribution bounding of a finite row whose norm exceeds the largest float64:
    x·min(1, L2/‖x‖₂, L1/‖x‖₁) must be that row scaled into the bounds (its direction
    kept), not a zero row (a factor L/inf = 0 drops the row) nor NaN."""
    x = np.array(row)
    m = np.abs(x).max()
    u = x / m
    factor = min(l2 / np.linalg.norm(u), l1 / np.abs(u).sum())
    expected = u * factor  # = x·L/‖x‖
    # The factor L/‖x‖ = factor/m is subnormal here: it carries an absolute error of
    # a few units of 2⁻¹⁰⁷⁴, i.e. a relative one of 2⁻¹⁰⁷⁴·m/factor.
    rtol = 1e-13 + 4 * 2.0**-1074 * m / factor
    X = sp.csr_matrix(x[None, :])
    for scales in (csr_bounding_scales(X.indptr, X.data, l2, l1),
                   dense_bounding_scales(x[None, :], l2, l1)):
        scaled = dense_scale_rows(x[None, :], scales)[0]
        np.testing.assert_allclose(scaled, expected, rtol=rtol, atol=1e-300)
        assert np.linalg.norm(scaled) <= l2 and np.abs(scaled).sum() <= l1
    np.testing.assert_allclose(csr_bounded_column_sum(*_parts(X), x.size, l2, l1), expected,
                               rtol=rtol, atol=1e-300)
    np.testing.assert_allclose(dense_bounded_column_sum(x[None, :], l2, l1), expected,
                               rtol=rtol, atol=1e-300)
