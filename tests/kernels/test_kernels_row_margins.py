"""The dense margins of DP-SGD's batches: a function of the row alone."""

import numpy as np
import pytest

from skdpsparse._kernels.row_margins import dense_row_margins


def _left_to_right(X, idx, W):
    """The reference: plain Python floats, summed left to right."""
    out = np.empty((len(idx), W.shape[1]))
    for r, i in enumerate(idx):
        for c in range(W.shape[1]):
            total = 0.0
            for j in range(W.shape[0]):
                total += float(X[i, j]) * float(W[j, c])
            out[r, c] = total
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("k", [1, 3])
def test_matches_a_left_to_right_sum_bit_for_bit(dtype, k):
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((23, 17)) * 10.0 ** rng.integers(-8, 8, (23, 17))).astype(dtype)
    W = rng.standard_normal((17, k)) * 10.0 ** rng.integers(-8, 8, (17, k))
    idx = rng.choice(23, 11, replace=False)
    np.testing.assert_array_equal(dense_row_margins(X, idx, W), _left_to_right(X, idx, W))


def test_a_rows_margin_does_not_depend_on_its_batch_or_position():
    # The attack on a BLAS product: batches holding one row at different positions.
    # With cancellation-prone data the BLAS margins of one row differ in the last bits
    # between positions on most shapes; this kernel's never do.
    rng = np.random.default_rng(1)
    n, d, b = 300, 61, 37
    X = rng.standard_normal((n, d)) * 10.0 ** rng.integers(-6, 6, (n, d))
    W = rng.standard_normal((d, 2)) * 10.0 ** rng.integers(-6, 6, (d, 2))
    ref = dense_row_margins(X, np.arange(n), W)
    for _ in range(40):
        idx = rng.choice(n, b, replace=False)
        got = dense_row_margins(X, idx, W)
        np.testing.assert_array_equal(got, ref[idx])
        perm = rng.permutation(b)
        np.testing.assert_array_equal(dense_row_margins(X, idx[perm], W), got[perm])


def test_bad_shapes_and_indices_are_refused():
    X, W = np.ones((4, 3)), np.ones((3, 1))
    with pytest.raises(ValueError, match="multiply"):
        dense_row_margins(X, np.arange(2), np.ones((2, 1)))
    with pytest.raises(ValueError, match="out of range"):
        dense_row_margins(X, np.array([0, 4]), W)


def test_where_the_blas_product_moves_a_margin_the_kernel_does_not():
    # The attack on the old code, X[idx] @ W: find batches in which a row's BLAS margin
    # differs from its margin in the full product (its position changed), then check
    # the kernel on exactly those batches. Skipped where this machine's BLAS is
    # position-independent on these shapes (the property is the BLAS's, not ours).
    rng = np.random.default_rng(2)
    witnesses = []
    for _ in range(50):
        n, d = int(rng.integers(20, 80)), int(rng.integers(5, 130))
        X = rng.standard_normal((n, d)) * 10.0 ** rng.integers(-6, 6, (n, d))
        W = rng.standard_normal((d, 1)) * 10.0 ** rng.integers(-6, 6, (d, 1))
        full = X @ W
        for _ in range(5):
            idx = np.sort(rng.choice(n, int(rng.integers(2, n)), replace=False))
            if np.any((X[idx] @ W) != full[idx]):
                witnesses.append((X, W, idx))
    if not witnesses:
        pytest.skip("this BLAS gave every row the same margin at every position")
    for X, W, idx in witnesses:
        np.testing.assert_array_equal(dense_row_margins(X, idx, W),
                                      dense_row_margins(X, np.arange(len(X)), W)[idx])
