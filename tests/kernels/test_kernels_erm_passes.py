import math

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsparse._kernels.erm_passes import column_counts


def test_column_counts_are_the_stored_entries_per_column():
    rng = np.random.default_rng(0)
    X = sp.random(200, 37, density=0.2, random_state=rng, format="csr")
    X.data[::7] = 0.0  # explicit zeros are stored entries: a pass reads them
    np.testing.assert_array_equal(column_counts(X), np.bincount(X.indices, minlength=37))
    assert column_counts(X).dtype == np.int64
    Xl = sp.csr_matrix((X.data, X.indices.astype(np.int64), X.indptr.astype(np.int64)),
                       shape=X.shape)
    np.testing.assert_array_equal(column_counts(Xl), column_counts(X))
    dense = X.toarray()
    dense[3, 4] = np.nan  # NaN is nonzero, as for np.count_nonzero
    for arr in (dense, dense.astype(np.float32), np.asfortranarray(dense)):
        np.testing.assert_array_equal(column_counts(arr), (arr != 0).sum(axis=0))
        assert column_counts(arr).dtype == np.int64


def test_column_counts_refuse_an_index_out_of_range():
    X = sp.csr_matrix((np.ones(2), np.array([0, 5], dtype=np.int32), np.array([0, 1, 2])),
                      shape=(2, 5), copy=False)
    with pytest.raises(ValueError, match="out of range"):
        column_counts(X)


# ------------------------------------------------------- bounded rows without a copy
from skdpsparse._kernels.erm_passes import (  # noqa: E402
    csr_bounding_stats,
    dense_bounding_stats,
    max_abs_entry,
)
from skdpsparse._kernels.linear_losses import (  # noqa: E402
    csr_fixed_hessian_product,
    csr_fixed_loss_gradient,
    dense_fixed_hessian_product,
    dense_fixed_loss_gradient,
)
from skdpsparse._kernels.sparse_rows import (  # noqa: E402
    csr_bounding_scales,
    csr_scale_rows,
    dense_bounding_scales,
    dense_scale_rows,
)


def _awkward_rows(seed, n=203, d=37):
    """Rows inside and outside the bounds, a zero row, a row whose sum of squares
    overflows, one that underflows, subnormal entries, and n not a multiple of 4."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * rng.choice([1e-3, 0.2, 1.0, 40.0], size=(n, 1))
    X[rng.random((n, d)) < 0.6] = 0.0
    X[5] = 0.0
    X[7, :3] = 1e200
    X[8, :2] = 1e-170
    X[9, 0] = 1e-310
    X[11, 4] = -5e-324
    return X


@pytest.mark.parametrize("bounds", [(1.0, 2.0), (0.5, np.inf), (np.inf, 3.0),
                                    (np.inf, np.inf), (0.0, 1.0)])
def test_bounding_stats_are_those_of_the_bounded_copy(bounds):
    # scales: sparse_rows' own factors, the same floats; counts and the largest entry:
    # column_counts and max_abs_entry of the copy sparse_rows would scale.
    l2, l1 = bounds
    for seed in range(3):
        X = _awkward_rows(seed)
        scales, counts, top = dense_bounding_stats(X, l2, l1)
        ref = dense_bounding_scales(X, l2, l1)
        np.testing.assert_array_equal(scales, ref)
        copy = dense_scale_rows(X, ref)
        np.testing.assert_array_equal(counts, column_counts(copy))
        assert top == max_abs_entry(copy)
        S = sp.csr_matrix(X)
        scales, counts, top = csr_bounding_stats(S.indptr, S.indices, S.data, S.shape[1],
                                                 l2, l1)
        ref = csr_bounding_scales(S.indptr, S.data, l2, l1)
        np.testing.assert_array_equal(scales, ref)
        copy = sp.csr_matrix((csr_scale_rows(S.indptr, S.data, ref), S.indices, S.indptr),
                             shape=S.shape)
        np.testing.assert_array_equal(counts, column_counts(copy))
        assert top == max_abs_entry(copy)


def test_bounding_stats_propagate_nan_and_refuse_bad_input():
    X = _awkward_rows(0)
    X[20, 3] = np.nan
    assert np.isnan(dense_bounding_stats(X, np.inf, np.inf)[2])
    S = sp.csr_matrix(X)
    assert np.isnan(csr_bounding_stats(S.indptr, S.indices, S.data, 37, np.inf, np.inf)[2])
    # a NaN before larger entries is kept (a later entry used to replace it)
    assert np.isnan(max_abs_entry(X)) and np.isnan(max_abs_entry(S))
    with pytest.raises(ValueError, match="out of range"):
        csr_bounding_stats(S.indptr, S.indices, S.data, 30, 1.0, 1.0)
    with pytest.raises(ValueError, match=">= 0"):
        dense_bounding_stats(X, -1.0, 1.0)


@pytest.mark.parametrize("bounds", [(1.0, 2.0), (0.5, np.inf), (np.inf, 3.0),
                                    (np.inf, np.inf), (0.0, 1.0), (1e-300, 1e-300)])
def test_csr_bounding_stats_bit_maximum_is_the_entrywise_one(bounds):
    # float64 values take the row maximum over bit patterns, fl(c_i * max_j |x_ij|);
    # the entry-by-entry pass (float32 takes it) is the reference: the same scales,
    # counts and largest entry, with +-inf entries (c_i = 0 makes 0 * inf a NaN both
    # ways), a NaN, -0.0, subnormals and empty rows.
    from skdpsparse._kernels.erm_passes import (
        _csr_bounding_stats_bits,
        _csr_bounding_stats_entrywise,
    )

    l2, l1 = bounds
    for seed in range(3):
        X = _awkward_rows(seed)
        X[12, 1] = -0.0
        S = sp.csr_matrix(X)
        variants = [S.data]
        with np.errstate(invalid="ignore"):
            for special in (np.inf, -np.inf, np.nan):
                data = S.data.copy()
                data[len(data) // (seed + 2)] = special
                variants.append(data)
        for data in variants:
            got = _csr_bounding_stats_bits(S.indptr, S.indices, data, data.view(np.int64),
                                           S.shape[1], l2, l1)
            ref = _csr_bounding_stats_entrywise(S.indptr, S.indices, data, S.shape[1],
                                                l2, l1)
            np.testing.assert_array_equal(got[0], ref[0])
            np.testing.assert_array_equal(got[1], ref[1])
            assert got[2] == ref[2] or (np.isnan(got[2]) and np.isnan(ref[2]))
        S32 = S.astype(np.float32)
        got = csr_bounding_stats(S32.indptr, S32.indices, S32.data, S.shape[1], l2, l1)
        ref = _csr_bounding_stats_entrywise(S32.indptr, S32.indices, S32.data, S.shape[1],
                                            l2, l1)
        for a, b in zip(got, ref):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("code, param", [(0, 1.0), (1, 1.0), (3, 0.5), (4, 0.7)])
def test_row_scales_give_the_sums_of_the_bounded_copy(code, param):
    # The kernels read row i as fl(c_i x_i): every integer is the one computed on the
    # copy, for the loss-gradient and the Hessian-vector sums, dense and CSR, with and
    # without the largest entry given (the checked and the fast paths both run: the
    # coarse grid sends the large rows to the checked one).
    X = _awkward_rows(1)
    X[7] = 0.0  # a margin beyond float64 would make every grid refuse (tested elsewhere)
    n, d = X.shape
    rng = np.random.default_rng(2)
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0) * (1.5 if code in (0, 4) else 1.0)
    w, v = rng.standard_normal(d), rng.standard_normal(d)
    for l2, l1 in ((1.0, 2.5), (np.inf, np.inf)):
        scales = dense_bounding_scales(X, l2, l1)
        copy = dense_scale_rows(X, scales)
        S = sp.csr_matrix(X)
        Sc = sp.csr_matrix((csr_scale_rows(S.indptr, S.data, scales), S.indices, S.indptr),
                           shape=S.shape)
        for scale, limit in ((2.0 ** 40, 2.0 ** 62 / n), (2.0 ** 52, 2.0 ** 62 / n),
                             (2.0 ** 60, 2.0 ** 56)):
            for top in (-1.0, max_abs_entry(copy)):
                ref = dense_fixed_loss_gradient(copy, y, w, 0.3, code, param, scale, scale,
                                                limit, top)
                got = [dense_fixed_loss_gradient(X, y, w, 0.3, code, param, scale, scale,
                                                 limit, top, scales),
                       csr_fixed_loss_gradient(S.indptr, S.indices, S.data, y, w, 0.3,
                                               code, param, scale, scale, limit, top,
                                               scales),
                       csr_fixed_loss_gradient(Sc.indptr, Sc.indices, Sc.data, y, w, 0.3,
                                               code, param, scale, scale, limit, top)]
                for out in got:
                    assert out[3] == ref[3]
                    if ref[3]:  # a refused grid's partial sums mean nothing
                        assert out[0] == ref[0] and out[2] == ref[2]
                        np.testing.assert_array_equal(out[1], ref[1])
                href = dense_fixed_hessian_product(copy, y, w, 0.3, v, 0.1, code, param,
                                                   scale, limit, top)
                for h in (dense_fixed_hessian_product(X, y, w, 0.3, v, 0.1, code, param,
                                                      scale, limit, top, scales),
                          csr_fixed_hessian_product(S.indptr, S.indices, S.data, y, w, 0.3,
                                                    v, 0.1, code, param, scale, limit, top,
                                                    scales)):
                    assert h[2] == href[2]
                    if href[2]:
                        np.testing.assert_array_equal(h[0], href[0])
                        assert h[1] == href[1]


def test_dense_sums_are_the_rounded_terms_in_numpy():
    # The dense kernel adds four rows' terms before each store; the reference rounds
    # every term der_i * x_ij * 2^F on its own (np.rint, ties to even) and sums them.
    rng = np.random.default_rng(3)
    X = rng.standard_normal((67, 19))
    X[rng.random(X.shape) < 0.5] = 0.0
    y = np.where(rng.random(67) < 0.5, -1.0, 1.0)
    w = rng.standard_normal(19) * 0.5
    scales = rng.uniform(0.2, 1.0, 67)
    scales[::3] = 1.0
    grid = 2.0 ** 30
    z = (scales[:, None] * X) @ w  # not the kernel's order: compared by derivative below
    loss, g, gb, ok = dense_fixed_loss_gradient(X, y, w, 0.0, 1, 1.0, grid, grid,
                                                2.0 ** 62 / 67, -1.0, scales)
    assert ok
    # The margins' rounding may differ from NumPy's order by ulps: recompute them in
    # the kernel's order (left to right) to get the same derivatives.
    z = np.array([sum((scales[i] * X[i, j]) * w[j] for j in range(19)) + 0.0
                  for i in range(67)])
    t = y * z
    der = np.where(t > 0, -y * np.exp(-t) / (1 + np.exp(-t)), -y / (1 + np.exp(t)))
    terms = np.rint((der * grid)[:, None] * (scales[:, None] * X))
    np.testing.assert_array_equal(g, terms.sum(axis=0).astype(np.int64))
    assert gb == int(np.rint(der * grid).sum())


def test_logistic_fixed_terms_are_those_of_the_generic_loss():
    # _losses_fixed's branch-free logistic path against loss_value_and_derivative and
    # np.rint, term by term: margins of both signs, +-0, subnormal, beyond exp's range,
    # labels +-1 and others; loss_scale 2^40 (magic rounding) and 2^52 (|u| >= 2^51 for most terms,
    # rint); a NaN margin refused at its row on both paths.
    from skdpsparse._kernels.linear_losses import (
        LOGISTIC,
        _losses_fixed,
        loss_derivative,
        loss_value,
    )

    rng = np.random.default_rng(5)
    z = np.r_[rng.standard_normal(300) * 4, [0.0, -0.0, 5e-324, -5e-324, 40.0, -40.0,
                                             750.0, -750.0, 700.0, -700.0]]
    y = np.r_[rng.choice([-1.0, 1.0], 300), [1.0, -1.0, 1.0, -1.0, 0.5, -2.0, 1.0, -1.0,
                                             1.0, 1.0]]
    for scale in (2.0 ** 40, 2.0 ** 52):
        limit = 2.0 ** 70
        got_z = z.copy()
        loss, grad_b, ok = _losses_fixed(got_z, y, LOGISTIC, 1.0, scale, scale, limit)
        assert ok
        ref_loss = ref_b = 0
        for i in range(len(z)):
            v = loss_value(LOGISTIC, z[i], y[i], 1.0)
            g = loss_derivative(LOGISTIC, z[i], y[i], 1.0)
            ref_loss += int(np.rint(v * scale))
            ref_b += int(np.rint(g * scale))
            assert got_z[i] == g and np.signbit(got_z[i]) == np.signbit(g)

        def wrap(v):  # int64 sums (these large terms wrap; the kernels' limit forbids it)
            return (v + 2 ** 63) % 2 ** 64 - 2 ** 63

        assert (loss, grad_b) == (wrap(ref_loss), wrap(ref_b))
    bad = z.copy()
    bad[3] = np.nan
    assert not _losses_fixed(bad, y, LOGISTIC, 1.0, 2.0 ** 40, 2.0 ** 40, 2.0 ** 70)[2]


def test_solver_helpers_are_the_numpy_expressions():
    # corner_extremes and scaled_gradient replace Python/NumPy expressions of
    # FixedPointObjective.fge: the same floats (NaN and inf margins included).
    from skdpsparse._kernels.erm_passes import corner_extremes, scaled_gradient
    from skdpsparse._kernels.linear_losses import loss_derivative, loss_value

    for code, param in [(0, 1.0), (1, 1.0), (3, 0.5), (4, 0.7)]:
        for margin in (0.0, 1e-3, 2.5, 800.0, 1e300, np.inf, np.nan):
            for b in (1.0, 3.0):
                corners = [(z, y) for z in (-margin, margin) for y in (-b, b)]
                want = (max(abs(float(loss_value(code, z, y, param))) for z, y in corners),
                        max(abs(float(loss_derivative(code, z, y, param)))
                            for z, y in corners))
                got = corner_extremes(code, param, margin, b)
                np.testing.assert_array_equal(np.array(got), np.array(want))
    rng = np.random.default_rng(3)
    for c in (0.0, 0.37):
        d = 41
        theta = rng.standard_normal(d + (c > 0)) * 10.0 ** rng.integers(-5, 5, d + (c > 0))
        g_w = rng.integers(-2 ** 62, 2 ** 62, d)
        g_b = int(rng.integers(-2 ** 62, 2 ** 62))
        for bits in (-800, 3, 40, 1070, 1100):  # 1070: subnormal results; 1100: no 2^-F
            n, alpha = 2001, 1e-3
            want = np.empty(len(theta))
            want[:d] = np.ldexp(g_w.astype(np.float64), -bits) / n
            if c > 0:
                want[d] = c * (math.ldexp(float(g_b), -bits) / n)
            want += alpha * theta
            got = scaled_gradient(g_w, np.int64(g_b), bits, float(n), c, alpha, theta)
            np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))


@pytest.mark.parametrize("code, param", [(0, 1.0), (1, 1.0), (3, 0.5), (4, 0.7)])
def test_zero_iterate_shortcut_gives_the_rows_sums(code, param):
    # At w = 0 with a finite entry_max the kernels set every margin to b without
    # reading the rows; the sums must be those of the pass that reads them (entry_max
    # -1), for b = 0.3, +0 and -0 (-0 takes the pass), w = +0 or -0, and on rows with
    # an infinite entry (entry_max inf: no shortcut either).
    X = _awkward_rows(2)
    X[7] = 0.0
    n, d = X.shape
    y = np.where(np.random.default_rng(4).random(n) < 0.5, -1.0, 1.0)
    S = sp.csr_matrix(X)
    top = max_abs_entry(X)
    for w in (np.zeros(d), -np.zeros(d)):
        for b in (0.3, 0.0, -0.0):
            for scale in (2.0 ** 40, 2.0 ** 52):
                limit = 2.0 ** 62 / n
                ref = dense_fixed_loss_gradient(X, y, w, b, code, param, scale, scale,
                                                limit, -1.0)
                for out in (dense_fixed_loss_gradient(X, y, w, b, code, param, scale,
                                                      scale, limit, top),
                            csr_fixed_loss_gradient(S.indptr, S.indices, S.data, y, w, b,
                                                    code, param, scale, scale, limit, top)):
                    assert out[3] == ref[3]
                    if ref[3]:  # a refused grid's partial sums mean nothing
                        assert out[0] == ref[0] and out[2] == ref[2]
                        np.testing.assert_array_equal(out[1], ref[1])
                assert ref[3] or scale > 2.0 ** 40
                v = np.linspace(-1, 1, d)
                href = dense_fixed_hessian_product(X, y, w, b, v, 0.1, code, param, scale,
                                                   limit, -1.0)
                h = csr_fixed_hessian_product(S.indptr, S.indices, S.data, y, w, b, v, 0.1,
                                              code, param, scale, limit, top)
                assert h[2] == href[2]
                if href[2]:
                    assert h[1] == href[1]
                    np.testing.assert_array_equal(h[0], href[0])


@pytest.mark.parametrize("code, param", [(0, 1.0), (1, 1.0), (3, 0.5), (4, 0.7)])
def test_stats_with_the_zero_sums_are_the_two_passes(code, param):
    # csr_bounding_stats_zero_sums = csr_bounding_stats, then csr_fixed_loss_gradient
    # at w = 0 with those factors: the same statistics and integers (or `done` False
    # for b = -0 and rows with an infinite entry; ok False where the kernel refuses).
    from skdpsparse._kernels.erm_passes import csr_bounding_stats_zero_sums

    X = _awkward_rows(3)
    X[7] = 0.0
    n, d = X.shape
    y = np.where(np.random.default_rng(6).random(n) < 0.5, -1.0, 1.0) * (
        1.5 if code in (0, 4) else 1.0)
    S = sp.csr_matrix(X)
    w = np.zeros(d)
    for l2, l1 in ((1.0, 2.5), (np.inf, np.inf), (np.inf, 2.0)):
        for data in (S.data, np.where(np.arange(S.nnz) == 40, np.inf, S.data)):
            for b in (0.3, 0.0, -0.0, -40.0):
                for scale, limit in ((2.0 ** 40, 2.0 ** 62 / n), (2.0 ** 60, 2.0 ** 56)):
                    got = csr_bounding_stats_zero_sums(
                        S.indptr, S.indices, data, data.view(np.int64), d, l2, l1, y, b,
                        code, param, scale, scale, limit)
                    stats = csr_bounding_stats(S.indptr, S.indices, data, d, l2, l1)
                    for a, r in zip(got[:2], stats[:2]):
                        np.testing.assert_array_equal(a, r)
                    assert got[2] == stats[2] or np.isnan(got[2]) and np.isnan(stats[2])
                    done = np.isfinite(stats[2]) and not (b == 0 and np.signbit(b))
                    assert got[7] == done
                    if not done:
                        continue
                    ref = csr_fixed_loss_gradient(S.indptr, S.indices, data, y, w, b, code,
                                                  param, scale, scale, limit, stats[2],
                                                  stats[0])
                    assert got[6] == ref[3]
                    if ref[3]:
                        assert got[3] == ref[0] and got[5] == ref[2]
                        np.testing.assert_array_equal(got[4], ref[1])
    bad = sp.csr_matrix((np.ones(2), np.array([0, 5], dtype=np.int32), np.array([0, 1, 2])),
                        shape=(2, 5))
    with pytest.raises(ValueError, match="out of range"):
        csr_bounding_stats_zero_sums(bad.indptr, bad.indices, bad.data,
                                     bad.data.view(np.int64), 4, 1.0, 1.0, np.ones(2),
                                     0.0, code, param, 2.0 ** 40, 2.0 ** 40, 2.0 ** 50)
