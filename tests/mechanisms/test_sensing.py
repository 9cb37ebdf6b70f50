"""Subsampled randomized Hadamard sensing: transform kernels, operator, clipped sums."""

import math

import numba
import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from skdpsparse._kernels import fwht as hk
from skdpsparse._kernels import srht_measurements as srht
from skdpsparse.mechanisms.sensing import SubsampledHadamardSensing


def dense_from_definition(op):
    """A = sqrt(d_pad/m) · P_Ω H D, first d columns, with H from scipy (Sylvester)."""
    H = scipy.linalg.hadamard(op.d_pad).astype(np.float64) / math.sqrt(op.d_pad)
    A = math.sqrt(op.d_pad / op.n_measurements) * H[op.omega] * op.signs[None, :]
    return A[:, :op.n_features]


def clipped_sum_reference(A, X, scales, clip):
    Xd = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    Y = (Xd * scales[:, None]) @ A.T
    norms = np.linalg.norm(Y, axis=1)
    factor = np.ones(len(norms))
    big = norms > clip
    factor[big] = clip / norms[big]
    return (Y * factor[:, None]).sum(axis=0), int(big.sum())


# ----------------------------------------------------------------------------- FWHT

@pytest.mark.parametrize("log2n", range(0, 11))
def test_fwht_matches_scipy_hadamard(log2n):
    n = 1 << log2n
    x = np.random.default_rng(log2n).standard_normal(n)
    expected = scipy.linalg.hadamard(n) @ x / math.sqrt(n)
    y = hk.fwht_inplace(x.copy())
    np.testing.assert_allclose(y, expected, rtol=0, atol=1e-12 * max(1, np.abs(x).sum()))


@pytest.mark.parametrize("log2n", [4, 6, 9, 11])
@pytest.mark.parametrize("log2_block", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("strip_bytes", [8, 64, 1 << 19])
def test_fwht_blocked_path_matches_scipy(log2n, log2_block, strip_bytes):
    # Small blocks exercise the two-sweep (low levels / column strips) code path.
    n = 1 << log2n
    x = np.random.default_rng(n + log2_block).standard_normal(n)
    expected = scipy.linalg.hadamard(n) @ x / math.sqrt(n)
    y = hk._fwht_blocked(x.copy(), log2_block, strip_bytes)
    np.testing.assert_allclose(y, expected, rtol=0, atol=1e-11)


@pytest.mark.parametrize("log2n", [16, 21])
def test_fwht_is_an_involution_at_large_sizes(log2n):
    x = np.random.default_rng(0).standard_normal(1 << log2n)
    y = hk.fwht_inplace(x.copy())
    assert np.linalg.norm(y) == pytest.approx(np.linalg.norm(x), rel=1e-12)  # orthogonal
    hk.fwht_inplace(y)
    np.testing.assert_allclose(y, x, rtol=0, atol=1e-12)


def test_fwht_large_first_row_is_the_scaled_sum():
    n = 1 << 20
    x = np.random.default_rng(1).standard_normal(n)
    y = hk.fwht_inplace(x.copy())
    assert y[0] == pytest.approx(x.sum() / math.sqrt(n), abs=1e-10)
    # row 1 of H alternates signs
    assert y[1] == pytest.approx((x[0::2].sum() - x[1::2].sum()) / math.sqrt(n), abs=1e-10)


@pytest.mark.parametrize("log2n,log2_block", [(6, 2), (10, 3), (10, 15), (17, 15)])
def test_fwht_scatter_and_signed_loads(log2n, log2_block):
    n = 1 << log2n
    rng = np.random.default_rng(log2n)
    pos = np.sort(rng.choice(n, n // 5 + 1, replace=False))
    val = rng.standard_normal(len(pos))
    e = np.zeros(n)
    e[pos] = val
    expected = hk._fwht_blocked(e, log2_block)
    x = np.full(n, np.nan)  # garbage in the buffer must not leak into the result
    hk._fwht_blocked(x, log2_block, load=("scatter", pos, val))
    np.testing.assert_allclose(x, expected, rtol=0, atol=1e-12)

    d = n - n // 3
    z = rng.standard_normal(d)
    signs = rng.choice(np.array([-1, 1], dtype=np.int8), size=n)
    e = np.zeros(n)
    e[:d] = z * signs[:d]
    expected = hk._fwht_blocked(e, log2_block)
    x = np.full(n, np.nan)
    hk._fwht_blocked(x, log2_block, load=("signed", z, signs))
    np.testing.assert_allclose(x, expected, rtol=0, atol=1e-12)


def test_fwht_public_loaders_validate():
    x = np.zeros(16)
    with pytest.raises(ValueError, match="sorted"):
        hk.fwht_scatter(x, [3, 1], [1.0, 2.0])
    with pytest.raises(ValueError, match="range"):
        hk.fwht_scatter(x, [3, 16], [1.0, 2.0])
    with pytest.raises(ValueError):
        hk.fwht_signed(x, np.zeros(17), np.ones(17, dtype=np.int8))
    np.testing.assert_allclose(hk.fwht_scatter(x, [0], [4.0]), np.ones(16))


@pytest.mark.parametrize("bad", [np.zeros(12), np.zeros(8, dtype=np.float32),
                                 np.zeros((4, 4)), np.zeros(0), np.zeros(16)[::2]])
def test_fwht_rejects_bad_input(bad):
    with pytest.raises((ValueError, TypeError)):
        hk.fwht_inplace(bad)


# ----------------------------------------------------------------------------- operator

@pytest.mark.parametrize("d,m", [(1, 1), (5, 3), (64, 64), (300, 40), (1000, 100),
                                 (1024, 256)])
def test_operator_agrees_with_explicit_matrix(d, m):
    op = SubsampledHadamardSensing(d, m, np.random.default_rng(d + m))
    A = dense_from_definition(op)
    assert op.d_pad == 1 << max(d - 1, 0).bit_length() and op.d_pad >= d
    assert op.gram_scale == op.d_pad / m
    np.testing.assert_allclose(op.toarray(), A, rtol=0, atol=1e-14)
    np.testing.assert_allclose(np.abs(A), 1 / math.sqrt(m), rtol=1e-12)  # ±1/√m
    rng = np.random.default_rng(0)
    z = rng.standard_normal(d)
    y = rng.standard_normal(m)
    np.testing.assert_allclose(op.matvec(z), A @ z, rtol=0, atol=1e-12)
    np.testing.assert_allclose(op.rmatvec(y), A.T @ y, rtol=0, atol=1e-12)
    assert len(set(op.omega.tolist())) == m and np.all(np.diff(op.omega) > 0)
    assert set(np.unique(op.signs).tolist()) <= {-1, 1}


def test_adjoint_identity_at_moderate_size():
    op = SubsampledHadamardSensing(300_001, 2_000, np.random.default_rng(5))
    rng = np.random.default_rng(6)
    z = rng.standard_normal(op.n_features)
    y = rng.standard_normal(op.n_measurements)
    lhs = float(op.matvec(z) @ y)
    rhs = float(z @ op.rmatvec(y))
    assert abs(lhs - rhs) <= 1e-10 * max(1.0, abs(lhs))


def test_padded_gram_is_scaled_identity_and_projection_is_exact():
    op = SubsampledHadamardSensing(3000, 50, np.random.default_rng(2))
    rng = np.random.default_rng(3)
    y = rng.standard_normal(op.n_measurements)
    np.testing.assert_allclose(op.matvec_padded(op.rmatvec_padded(y)), op.gram_scale * y,
                               rtol=1e-12, atol=1e-12)
    b = rng.standard_normal(op.n_measurements)
    v = rng.standard_normal(op.d_pad)
    p = op.project_affine(v, b)
    np.testing.assert_allclose(op.matvec_padded(p), b, atol=1e-11)
    np.testing.assert_allclose(op.project_affine(p, b), p, atol=1e-11)  # idempotent
    u = op.project_affine(rng.standard_normal(op.d_pad), b)  # another feasible point
    assert abs(float((v - p) @ (p - u))) <= 1e-9 * np.linalg.norm(v) * np.linalg.norm(u)
    # out= may alias the input
    q = v.copy()
    op.project_affine(q, b, out=q)
    np.testing.assert_allclose(q, p, atol=1e-12)


def test_sparse_matvec_agrees_with_transform():
    op = SubsampledHadamardSensing(100_000, 700, np.random.default_rng(4))
    rng = np.random.default_rng(5)
    for nnz in [0, 1, 11, 12, 13, 100, 2_000]:
        idx = rng.choice(op.n_features, nnz, replace=False)
        vals = rng.standard_normal(nnz)
        z = np.zeros(op.n_features)
        z[idx] = vals
        np.testing.assert_allclose(op.matvec_sparse(idx, vals), op.matvec(z), rtol=0,
                                   atol=1e-12 * max(1.0, np.abs(vals).sum()))
    # duplicates add up
    np.testing.assert_allclose(op.matvec_sparse([7, 7, 9], [1.0, 2.0, -1.0]),
                               op.matvec_sparse([7, 9], [3.0, -1.0]), atol=1e-14)
    with pytest.raises(ValueError):
        op.matvec_sparse([op.n_features], [1.0])


def test_cost_model_is_monotone():
    op = SubsampledHadamardSensing(10**7, 32_000, np.random.default_rng(0))
    flags = [op.sparse_matvec_is_cheaper(k) for k in [1, 100, 1_000, 10_000, 100_000]]
    assert flags[0] and not flags[-1]
    assert flags == sorted(flags, reverse=True)
    op.release_buffer()


def test_seeded_generator_reproduces_the_operator():
    a = SubsampledHadamardSensing(5000, 77, np.random.default_rng(11))
    b = SubsampledHadamardSensing(5000, 77, np.random.default_rng(11))
    c = SubsampledHadamardSensing(5000, 77, np.random.default_rng(12))
    assert np.array_equal(a.signs, b.signs) and np.array_equal(a.omega, b.omega)
    assert not np.array_equal(a.omega, c.omega)
    z = np.random.default_rng(0).standard_normal(5000)
    assert np.array_equal(a.matvec(z), b.matvec(z))
    # an int seed is accepted as well (scikit-learn style)
    assert np.array_equal(SubsampledHadamardSensing(5000, 77, 11).omega, a.omega)


def test_omega_is_uniform_over_padded_rows():
    # Each padded row is selected with probability m/d_pad.
    counts = np.zeros(64)
    for seed in range(2000):
        counts[SubsampledHadamardSensing(50, 8, np.random.default_rng(seed)).omega] += 1
    expected = 2000 * 8 / 64
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 120  # 63 degrees of freedom; P(chi2 > 120) < 1e-5


@pytest.mark.parametrize("args", [(0, 1), (10, 0), (10, 17), (2.5, 1), (10, True)])
def test_operator_validates_sizes(args):
    with pytest.raises((ValueError, TypeError)):
        SubsampledHadamardSensing(*args, np.random.default_rng(0))


# ----------------------------------------------------------------------------- clipped sum

def _csr_rows(n, d, rng, max_nnz=30):
    rows, cols, vals = [], [], []
    for i in range(n):
        k = int(rng.integers(0, max_nnz + 1))
        c = rng.choice(d, size=min(k, d), replace=False)
        rows += [i] * len(c)
        cols += c.tolist()
        vals += rng.standard_normal(len(c)).tolist()
    return sp.csr_matrix((vals, (rows, cols)), shape=(n, d))


@pytest.mark.parametrize("d,m", [(37, 5), (1000, 64), (5000, 300)])
@pytest.mark.parametrize("clip", [0.05, 0.7, np.inf])
def test_clipped_sum_matches_numpy_reference(d, m, clip):
    rng = np.random.default_rng(d * m)
    op = SubsampledHadamardSensing(d, m, rng)
    A = op.toarray()
    X = _csr_rows(60, d, rng)  # 0..30 nonzeros per row: empty rows, multi-group rows
    X.data[X.indptr[3]:X.indptr[4]] = 0.0  # an empty row
    X.eliminate_zeros()
    assert X.getnnz(axis=1).min() == 0 and X.getnnz(axis=1).max() > 12
    scales = rng.uniform(0.0, 1.0, 60)
    scales[[1, 7]] = [0.0, 1.0]
    expected, n_big = clipped_sum_reference(A, X, scales, clip)
    total, n_clipped = op.clipped_measurement_sum(X, scales, clip)
    atol = 1e-12 * max(1.0, np.abs(expected).max())
    np.testing.assert_allclose(total, expected, rtol=0, atol=atol)
    assert n_clipped == n_big
    if clip == 0.05:
        assert n_clipped > 10  # clipping active
    if clip == np.inf:
        assert n_clipped == 0
    # dense input gives the same result
    total_d, n_d = op.clipped_measurement_sum(X.toarray(), scales, clip)
    np.testing.assert_allclose(total_d, expected, rtol=0, atol=atol)
    assert n_d == n_big


def test_clipped_sum_inactive_clipping_is_the_plain_measurement_of_the_sum():
    rng = np.random.default_rng(0)
    op = SubsampledHadamardSensing(2000, 128, rng)
    X = _csr_rows(40, 2000, rng, max_nnz=5)
    scales = np.full(40, 1e-3)
    total, n_clipped = op.clipped_measurement_sum(X, scales, 10.0)
    assert n_clipped == 0
    np.testing.assert_allclose(total, op.matvec(np.asarray(X.sum(axis=0)).ravel() * 1e-3),
                               atol=1e-14)


def test_clipped_sum_input_variants():
    rng = np.random.default_rng(1)
    op = SubsampledHadamardSensing(700, 50, rng)
    A = op.toarray()
    X = _csr_rows(25, 700, rng)
    scales = rng.uniform(0.2, 1.0, 25)
    expected, _ = clipped_sum_reference(A, X, scales, 0.5)
    # float32 data, int64 indices, unsorted indices and duplicates (CSR semantics: sum)
    X32 = X.astype(np.float32)
    exp32, _ = clipped_sum_reference(A, X32.astype(np.float64), scales, 0.5)
    np.testing.assert_allclose(op.clipped_measurement_sum(X32, scales, 0.5)[0], exp32,
                               atol=1e-12)
    X64 = X.copy()
    X64.indices = X64.indices.astype(np.int64)
    X64.indptr = X64.indptr.astype(np.int64)
    np.testing.assert_allclose(op.clipped_measurement_sum(X64, scales, 0.5)[0], expected,
                               atol=1e-12)
    Xu = X.copy()
    for i in range(Xu.shape[0]):
        a, b = Xu.indptr[i], Xu.indptr[i + 1]
        Xu.indices[a:b] = Xu.indices[a:b][::-1]
        Xu.data[a:b] = Xu.data[a:b][::-1]
    Xu.has_sorted_indices = False
    np.testing.assert_allclose(op.clipped_measurement_sum(Xu, scales, 0.5)[0], expected,
                               atol=1e-12)
    dup = sp.csr_matrix((np.array([1.0, 2.0, -0.5]), np.array([5, 5, 9]),
                         np.array([0, 3])), shape=(1, 700))
    merged = sp.csr_matrix((np.array([3.0, -0.5]), np.array([5, 9]), np.array([0, 2])),
                           shape=(1, 700))
    np.testing.assert_allclose(op.clipped_measurement_sum(dup, [1.0], 0.5)[0],
                               op.clipped_measurement_sum(merged, [1.0], 0.5)[0], atol=1e-14)
    # other sparse formats are accepted
    np.testing.assert_allclose(op.clipped_measurement_sum(X.tocoo(), scales, 0.5)[0],
                               expected, atol=1e-12)
    # no rows
    total, k = op.clipped_measurement_sum(sp.csr_matrix((0, 700)), np.zeros(0), 0.5)
    assert k == 0 and np.array_equal(total, np.zeros(50))


def test_clipped_sum_validation():
    op = SubsampledHadamardSensing(100, 10, np.random.default_rng(0))
    X = sp.random(5, 100, density=0.1, random_state=0, format="csr")
    with pytest.raises(ValueError, match="columns"):
        op.clipped_measurement_sum(sp.random(5, 99, density=0.1, format="csr"),
                                   np.ones(5), 1.0)
    bad = X.copy()
    bad.data[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        op.clipped_measurement_sum(bad, np.ones(5), 1.0)
    with pytest.raises(ValueError):
        op.clipped_measurement_sum(X, -np.ones(5), 1.0)
    with pytest.raises(ValueError):
        op.clipped_measurement_sum(X, np.ones(4), 1.0)
    with pytest.raises(ValueError):
        op.clipped_measurement_sum(X, np.ones(5), 0.0)
    with pytest.raises(ValueError):
        op.clipped_measurement_sum(np.ones(100), np.ones(1), 1.0)


def test_clipped_sum_is_finite_for_extreme_rows():
    op = SubsampledHadamardSensing(64, 16, np.random.default_rng(0))
    X = np.zeros((3, 64))
    X[0, :20] = 1e300  # the measurement vector overflows
    X[1, :3] = [1e200, -1e200, 1e200]  # only its squared norm overflows
    X[2, 5] = 0.1
    total, n_clipped = op.clipped_measurement_sum(X, np.ones(3), 1.0)
    assert np.isfinite(total).all()
    assert np.linalg.norm(total) <= 3.0 * (1 + 1e-12)
    assert n_clipped == 2


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), clip=st.floats(1e-3, 10.0),
       scale_exp=st.floats(-3, 3))
def test_replacing_one_row_moves_the_sum_by_at_most_two_clips(seed, clip, scale_exp):
    """The sensitivity bound holds for every operator draw (here m is tiny, so A is
    far from an isometry and the clipping is what bounds the change)."""
    rng = np.random.default_rng(seed)
    op = SubsampledHadamardSensing(200, int(rng.integers(1, 6)), rng)
    X = _csr_rows(8, 200, rng, max_nnz=15)
    scales = np.ones(8)
    Y = X.tolil()
    Y[int(rng.integers(0, 8))] = rng.standard_normal(200) * 10.0 ** scale_exp
    a, _ = op.clipped_measurement_sum(X, scales, clip)
    b, _ = op.clipped_measurement_sum(Y.tocsr(), scales, clip)
    assert np.linalg.norm(a - b) <= 2 * clip * (1 + 1e-12)


def test_clipped_sum_does_not_depend_on_thread_count():
    rng = np.random.default_rng(3)
    op = SubsampledHadamardSensing(200_000, 2_000, rng)
    n = 2_000
    X = sp.csr_matrix((rng.standard_normal(10 * n), rng.integers(0, 200_000, 10 * n),
                       np.arange(0, 10 * n + 1, 10)), shape=(n, 200_000))
    scales = rng.uniform(0.1, 1.0, n)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = op.clipped_measurement_sum(X, scales, 0.3)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        many = op.clipped_measurement_sum(X, scales, 0.3)
    finally:
        numba.set_num_threads(before)
    assert np.array_equal(one[0], many[0]) and one[1] == many[1]


def test_kernel_entry_points_validate_indices():
    signs = np.ones(16, dtype=np.int8)
    with pytest.raises(ValueError):
        srht.csr_clipped_measurement_sum(np.array([0, 1]), np.array([16]), np.ones(1),
                                       np.ones(1), signs, np.array([0, 3]), 0.5, 1.0)
    with pytest.raises(ValueError):
        srht.sparse_measure(np.array([0]), np.ones(1), signs, np.array([0, 16]), 0.5)
    with pytest.raises(ValueError):
        srht.sparse_measure(np.array([0]), np.ones(1), np.ones(12, dtype=np.int8),
                          np.array([0]), 0.5)
    assert srht.field_bits(1) == 1 and srht.field_bits(2**24) == 8
    assert srht.field_bits(2**33) == 11
    with pytest.raises(ValueError):
        srht.field_bits(2**34)
