"""Scaled-row, shuffled-group heavy-tailed kernels against plain NumPy references:
the median of means of ``scale[:, None] * X`` with rows permuted, and the
noise-smoothing mean of scaled rows."""

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsparse._kernels.heavy_tailed import noise_smoothing_mean_dense, smoothed_phi_array
from skdpsparse._kernels.heavy_tailed_scaled import (
    check_groups,
    consecutive_groups,
    cwme_scaled_csr,
    cwme_scaled_dense,
    noise_smoothing_scaled_csr,
    noise_smoothing_scaled_dense,
)


def ref_cwme_grouped(X, tau, m, center, scale, groups):
    """Plain NumPy: scale rows, clip, group means by label, coordinate-wise median."""
    X = np.asarray(X, dtype=np.float64) * scale[:, None]
    n, d = X.shape
    center = np.broadcast_to(np.zeros(d) if center is None else center, (d,))
    Z = np.clip(X, center - 3 * tau, center + 3 * tau)
    m = min(m, n)
    means = np.stack([Z[groups == g].mean(axis=0) for g in range(m)])
    return np.median(means, axis=0)


def _data(seed, n, d, density=1.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(2.0, size=(n, d)) * 3
    if density < 1:
        X[rng.random((n, d)) > density] = 0.0
    scale = rng.standard_t(2.0, size=n)
    return rng, X, scale


@pytest.mark.parametrize("n, d, m", [(1, 1, 3), (7, 3, 3), (50, 4, 6), (101, 5, 22)])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_cwme_scaled_dense_matches_reference(n, d, m, layout):
    rng, X, scale = _data(n * 31 + d, n, d)
    groups = rng.permutation(consecutive_groups(n, m))
    center = rng.normal(size=d)
    expected = ref_cwme_grouped(X, 1.3, m, center, scale, groups)
    if layout == "F":
        X = np.asfortranarray(X)
    elif layout == "strided":
        X = np.repeat(X, 2, axis=1)[:, ::2]
    got = cwme_scaled_dense(X, 1.3, m, center, scale=scale, groups=groups)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_defaults_reduce_to_the_plain_kernel():
    _, X, _ = _data(3, 40, 5)
    # np.array_split's consecutive groups, as in the plain kernels' reference.
    means = np.stack([g.mean(axis=0) for g in np.array_split(np.clip(X, -2.1, 2.1), 5)])
    np.testing.assert_allclose(cwme_scaled_dense(X, 0.7, 5), np.median(means, axis=0),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(noise_smoothing_scaled_dense(X, 0.7, 0.5),
                               noise_smoothing_mean_dense(X, 0.7, 0.5), rtol=1e-12)


@pytest.mark.parametrize("center", [None, 0.5])
def test_cwme_scaled_csr_matches_dense(center):
    rng, X, scale = _data(11, 60, 7, density=0.3)
    groups = rng.permutation(consecutive_groups(60, 8))
    A = sp.csr_matrix(X)
    got = cwme_scaled_csr(A.indptr, A.indices, A.data, 60, 7, 0.9, 8, center,
                          scale=scale, groups=groups)
    expected = ref_cwme_grouped(X, 0.9, 8, center, scale, groups)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_noise_smoothing_scaled_matches_entrywise_reference():
    rng, X, scale = _data(5, 30, 4, density=0.5)
    tau, c = 1.7, 0.8
    expected = tau * smoothed_phi_array(scale[:, None] * X / tau, c).mean(axis=0)
    for Xl in (X, np.asfortranarray(X)):
        np.testing.assert_allclose(noise_smoothing_scaled_dense(Xl, tau, c, scale=scale),
                                   expected, rtol=1e-12, atol=1e-15)
    A = sp.csr_matrix(X)
    np.testing.assert_allclose(
        noise_smoothing_scaled_csr(A.indptr, A.indices, A.data, 30, 4, tau, c, scale=scale),
        expected, rtol=1e-12, atol=1e-15)


def test_non_finite_gives_nan_in_its_column():
    _, X, scale = _data(2, 10, 3)
    X[4, 1] = np.inf
    out = cwme_scaled_dense(X, 1.0, 3, scale=scale)
    assert np.isnan(out[1]) and np.all(np.isfinite(out[[0, 2]]))


def test_overflowing_products_are_clipped_not_errors():
    """A huge per-example gradient (finite factors whose product overflows) is a
    large value, clipped or saturated; only non-finite inputs are errors."""
    X = np.array([[1e200, -1e200], [1.0, 2.0], [0.0, -1.0]])
    scale = np.array([1e200, 1.0, 3.0])
    out = cwme_scaled_dense(X, 1.0, 1, scale=scale)
    np.testing.assert_allclose(out, [(3.0 + 1.0 + 0.0) / 3, (-3.0 + 2.0 - 3.0) / 3])
    ns = noise_smoothing_scaled_dense(X, 1.0, 0.5, scale=scale)
    assert np.all(np.isfinite(ns))
    A = sp.csr_matrix(X)
    assert np.all(np.isfinite(noise_smoothing_scaled_csr(A.indptr, A.indices, A.data, 3, 2,
                                                         1.0, 0.5, scale=scale)))
    bad = scale.copy()
    bad[1] = np.nan
    assert np.all(np.isnan(cwme_scaled_dense(X, 1.0, 1, scale=bad)))
    assert np.all(np.isnan(noise_smoothing_scaled_dense(X, 1.0, 0.5, scale=bad)))


def test_groups_validation():
    good = consecutive_groups(10, 3)
    np.testing.assert_array_equal(good, [0, 0, 0, 0, 1, 1, 1, 2, 2, 2])
    np.testing.assert_array_equal(check_groups(None, 10, 3), good)
    with pytest.raises(ValueError, match="sizes"):
        check_groups(np.array([0] * 5 + [1] * 3 + [2] * 2), 10, 3)
    with pytest.raises(ValueError, match="lie in"):
        check_groups(good + 1, 10, 3)
    with pytest.raises(ValueError, match="shape"):
        check_groups(good[:-1], 10, 3)
    with pytest.raises(ValueError, match="scale"):
        cwme_scaled_dense(np.ones((10, 2)), 1.0, 3, scale=np.ones(9))


@pytest.mark.parametrize("layout", ["C", "F"])
def test_cwme_shuffled_groups_without_scale_match_reference(layout):
    # The estimator's default (shuffled groups, no scale) has its own unscaled kernel
    # for C-ordered X: the reference with unit scales, and exactly the plain kernel on
    # the rows reordered group by group (same sums in the same order).
    from skdpsparse._kernels.heavy_tailed import cwme_dense

    rng, X, _ = _data(11, 203, 6)
    X[17, 2] = np.nan
    groups = rng.permutation(consecutive_groups(203, 9))
    center = rng.normal(size=6)
    Xl = np.asfortranarray(X) if layout == "F" else X
    got = cwme_scaled_dense(Xl, 0.8, 9, center, groups=groups)
    expected = ref_cwme_grouped(X, 0.8, 9, center, np.ones(203), groups)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    assert np.isnan(got[2])
    if layout == "C":
        order = np.argsort(groups, kind="stable")
        np.testing.assert_array_equal(got, cwme_dense(X[order], 0.8, 9, center))


def test_shuffled_groups_are_checked_in_the_kernels_pass():
    # The unscaled C-ordered path checks the labels while it sums (no separate passes):
    # the same errors as check_groups, for a label out of range at the first row, in
    # the middle and at the last row, and for wrong sizes with labels in range.
    X = np.arange(20.0).reshape(10, 2)
    good = consecutive_groups(10, 3)
    np.testing.assert_array_equal(cwme_scaled_dense(X, 100.0, 3, groups=good[::-1].copy()),
                                  cwme_scaled_dense(X, 100.0, 3, groups=good[::-1].copy(),
                                                    scale=np.ones(10)))
    for pos, label in [(0, -1), (5, 3), (9, 7)]:
        bad = good.copy()
        bad[pos] = label
        with pytest.raises(ValueError, match="lie in"):
            cwme_scaled_dense(X, 1.0, 3, groups=bad)
    with pytest.raises(ValueError, match="sizes"):
        cwme_scaled_dense(X, 1.0, 3, groups=np.array([0] * 5 + [1] * 3 + [2] * 2))
    with pytest.raises(ValueError, match="shape"):
        cwme_scaled_dense(X, 1.0, 3, groups=good[:-1])
    with pytest.raises(ValueError, match="shape"):
        cwme_scaled_dense(X, 1.0, 3, groups=good.astype(float))
    # int32 labels are accepted as int64 ones
    np.testing.assert_array_equal(cwme_scaled_dense(X, 1.0, 3, groups=good.astype(np.int32)),
                                  cwme_scaled_dense(X, 1.0, 3, groups=good))


def test_uint8_labels_are_read_in_place_and_checked_like_int64_ones():
    # random_groups' one-byte labels take the unscaled C-ordered kernel as they are:
    # the same statistic as the int64 labels, and the same checks (a label of 3 with
    # m = 3 is out of range; 255 too; wrong sizes), on every path.
    X = np.random.default_rng(3).standard_t(2.0, size=(10, 2))
    good = consecutive_groups(10, 3)[::-1].copy()
    g8 = good.astype(np.uint8)
    expected = cwme_scaled_dense(X, 1.0, 3, groups=good)
    np.testing.assert_array_equal(cwme_scaled_dense(X, 1.0, 3, groups=g8), expected)
    np.testing.assert_array_equal(
        cwme_scaled_dense(np.asfortranarray(X), 1.0, 3, groups=g8),
        cwme_scaled_dense(np.asfortranarray(X), 1.0, 3, groups=good))
    A = sp.csr_matrix(X)
    np.testing.assert_array_equal(cwme_scaled_csr(A.indptr, A.indices, A.data, 10, 2, 1.0, 3,
                                                  groups=g8),
                                  cwme_scaled_csr(A.indptr, A.indices, A.data, 10, 2, 1.0, 3,
                                                  groups=good))
    for label in (3, 255):
        bad = g8.copy()
        bad[4] = label
        with pytest.raises(ValueError, match="lie in"):
            cwme_scaled_dense(X, 1.0, 3, groups=bad)
    with pytest.raises(ValueError, match="sizes"):
        cwme_scaled_dense(X, 1.0, 3, groups=np.array([0] * 5 + [1] * 3 + [2] * 2, np.uint8))
