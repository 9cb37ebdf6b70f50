"""Exact fixed-point sums of bounded rows: independent of order, threads and container."""

import numpy as np
import scipy.sparse as sp

import skdpsparse._kernels.fixed_point as fp
import skdpsparse._kernels.sparse_rows as sparse_rows
from skdpsparse.mechanisms.projection import bounded_mean, mean_fixed_point_bits


def _rows(n=3000, d=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * rng.choice([0.1, 5.0], size=(n, 1))
    X[rng.random((n, d)) < 0.7] = 0.0
    return X


def _csr_parts(X):
    A = sp.csr_matrix(X)
    return A.indptr, A.indices, A.data


def test_same_sums_for_every_thread_count_and_container(monkeypatch):
    monkeypatch.setattr(sparse_rows, "_THREADED_MIN_NNZ", 0)  # thread even small inputs
    X = _rows()
    F = fp.fixed_point_bits(X.shape[0], 1.0)
    dense = fp.bounded_fixed_sum(X, X.shape[1], 1.0, 3.0, F)
    for threads in (1, 2, 3, 4):
        np.testing.assert_array_equal(
            fp.bounded_fixed_sum(_csr_parts(X), X.shape[1], 1.0, 3.0, F, n_threads=threads),
            dense)


def test_sums_are_the_exact_sums_of_the_rounded_rows():
    # Python integers as the reference: the difference of two neighbours' sums is
    # exactly the difference of their two rounded rows.
    X = _rows(500, 12)
    Y = X.copy()
    Y[7] = np.linspace(-3, 3, 12)
    F = fp.fixed_point_bits(500, 1.0)
    diff = fp.bounded_fixed_sum(X, 12, 1.0, 3.0, F) - fp.bounded_fixed_sum(Y, 12, 1.0, 3.0, F)
    row = lambda Z: fp.bounded_fixed_sum(Z[7:8], 12, 1.0, 3.0, F)  # noqa: E731
    np.testing.assert_array_equal(diff, row(X) - row(Y))
    assert np.all(np.abs(row(Y)) <= 2.0**F + 1)


def test_no_overflow_at_the_largest_bound():
    n = 10_000
    F = fp.fixed_point_bits(n, 1.0)
    X = np.full((n, 1), 1.0)  # every entry at the bound: the largest possible sum
    s = fp.bounded_fixed_sum(X, 1, 1.0, 1.0, F)
    assert s[0] == n * 2**F and n * (2.0**F + 1) < 2.0**62


def test_dense_and_sparse_means_agree_bit_for_bit_on_absorbing_rows():
    # The reviewer's rows: a column sum just above 2^14 absorbs tiny values in one
    # float summation order and not in another. Exact sums have no order.
    n, d = 40_000, 4
    X = np.full((n, d), 1e-3)
    X[: n // 2, 0] = 0.0
    X[:16_550, 0] = 0.99
    X[n // 2:, 0] = 0.9 * 2.0**-39 / 0.99
    np.testing.assert_array_equal(bounded_mean(X, 1.0, d), bounded_mean(sp.csr_matrix(X), 1.0, d))
    assert mean_fixed_point_bits(n, 1.0) > 40
