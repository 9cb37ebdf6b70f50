"""Kernels of the heavy-tailed means (seed 004, Algorithms 3 and 4) against plain
NumPy/SciPy references: the trimmed median of means (dense, F-ordered, strided, CSR,
float32, n < m, ties, one row, one column, a general centre) and the closed form of
the smoothed soft-truncation E[phi(a(1 + N))] against numerical quadrature."""

import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import integrate, special

from skdpsparse._kernels.heavy_tailed import (
    PHI_BOUND,
    cwme_csr,
    cwme_dense,
    effective_n_groups,
    group_bounds,
    noise_smoothing_mean_csr,
    noise_smoothing_mean_dense,
    smoothed_phi,
    smoothed_phi_array,
    smoothed_phi_sup,
)

SETTINGS = settings(deadline=None, max_examples=150)
B = math.sqrt(2.0)


# ------------------------------------------------------------------ NumPy references


def _float_towards(exact, direction):
    """The float nearest to the rational ``exact`` on the side of ``direction`` (+1:
    the smallest float >= exact, -1: the largest float <= exact), within the finite
    floats."""
    top = Fraction(np.finfo(np.float64).max)
    if exact >= top:
        return float(top)
    if exact <= -top:
        return -float(top)
    v = float(exact)  # nearest
    if direction > 0 and Fraction(v) < exact:
        v = float(np.nextafter(v, math.inf))
    if direction < 0 and Fraction(v) > exact:
        v = float(np.nextafter(v, -math.inf))
    return v


def ref_interval_end(c, tau, side):
    """The float end of the clipping interval in exact rationals: h = the largest
    float <= 3τ, then the smallest float >= c - h (side -1) or the largest float
    <= c + h (side +1). Both ends lie within [c - 3τ, c + 3τ]."""
    if tau == math.inf:
        return side * math.inf
    h = Fraction(_float_towards(3 * Fraction(tau), -1))
    return _float_towards(Fraction(c) + side * h, -side)


def ref_cwme(X, tau, n_groups, center=None):
    """Algorithm 3 without noise, in plain NumPy (np.array_split makes the groups:
    consecutive, the first n mod m one row longer); the interval's ends rounded
    inwards (:func:`ref_interval_end`)."""
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    center = np.zeros(d) if center is None else np.broadcast_to(center, (d,))
    lo = np.array([ref_interval_end(float(c), tau, -1) for c in center])
    hi = np.array([ref_interval_end(float(c), tau, 1) for c in center])
    Z = np.clip(X, lo, hi)
    groups = np.array_split(Z, min(n_groups, n), axis=0)
    means = np.stack([g.mean(axis=0) for g in groups])
    return np.median(means, axis=0)


def ref_phi(y):
    y = np.asarray(y, dtype=np.float64)
    inner = np.clip(y, -B, B)  # the cubic only where it is used (no overflow)
    return np.where(y > B, 2 * B / 3, np.where(y < -B, -2 * B / 3, inner - inner**3 / 6))


def ref_smoothed_phi_closed(a, c):
    """The z-space closed form, vectorised; accurate for |a|(1 + sqrt c) <= 8."""
    a = np.asarray(a, dtype=np.float64)
    sgn = np.sign(a)
    a = np.abs(a)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = a * np.sqrt(c)
        alpha = (-B - a) / s
        beta = (B - a) / s
        i0 = special.ndtr(beta) - special.ndtr(alpha)
        # Far tails: the pdf is 0 there; clip so that alpha^2 pdf(alpha) is 0, not NaN.
        alpha, beta = np.clip(alpha, -60, 60), np.clip(beta, -60, 60)
        pa, pb = np.exp(-alpha**2 / 2) / np.sqrt(2 * np.pi), \
            np.exp(-beta**2 / 2) / np.sqrt(2 * np.pi)
        i1 = pa - pb
        i2 = i0 + alpha * pa - beta * pb
        i3 = (alpha**2 + 2) * pa - (beta**2 + 2) * pb
        m1 = a * i0 + s * i1
        m3 = a**3 * i0 + 3 * a**2 * s * i1 + 3 * a * s**2 * i2 + s**3 * i3
        sat = 2 * B / 3 * (special.ndtr(-beta) - special.ndtr(alpha))
        out = m1 - m3 / 6 + sat
    out = np.where(s == 0, ref_phi(a), out)
    return sgn * np.where(a == 0, 0.0, out)


def quad_smoothed_phi(a, c):
    """E phi(a (1 + sqrt(c) Z)) by scipy.integrate.quad over z, split where the
    argument crosses -sqrt 2 and sqrt 2."""
    if a == 0:
        return 0.0
    if c == 0:
        return float(ref_phi(a))
    sc = math.sqrt(c)
    kinks = [(-B / a - 1) / sc, (B / a - 1) / sc]  # where phi's pieces meet
    knots = sorted(set(kinks + [-40.0, -10.0, -3.0, 0.0, 3.0, 10.0, 40.0]))
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    f = lambda z: float(ref_phi(a * (1 + sc * z))) * pdf(z)  # noqa: E731
    opts = dict(epsabs=1e-15, epsrel=1e-13, limit=200)
    total = integrate.quad(f, -np.inf, knots[0], **opts)[0]
    total += integrate.quad(f, knots[-1], np.inf, **opts)[0]
    for lo, hi in zip(knots[:-1], knots[1:]):
        total += integrate.quad(f, lo, hi, **opts)[0]
    return total


def ref_noise_smoothing_mean(X, tau, c):
    X = np.asarray(X, dtype=np.float64)
    return tau * ref_smoothed_phi_closed(X / tau, c).mean(axis=0)


# ------------------------------------------------------------------------ strategies


@st.composite
def matrices(draw, max_rows=25, max_cols=5, max_magnitude=50.0):
    """Dense float32/float64 matrices: general values, small integers (many ties and
    zeros), or either scaled; rows and columns may be 1."""
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    n = draw(st.integers(1, max_rows))
    d = draw(st.integers(1, max_cols))
    kind = draw(st.sampled_from(["general", "ties", "sparse"]))
    if kind == "general":
        elems = st.floats(-max_magnitude, max_magnitude, allow_nan=False,
                          width=32 if dtype == np.float32 else 64)
        return draw(hnp.arrays(dtype, (n, d), elements=elems))
    X = draw(hnp.arrays(np.int64, (n, d), elements=st.integers(-3, 3))).astype(dtype)
    if kind == "sparse":
        X[draw(hnp.arrays(np.bool_, (n, d)))] = 0
        X *= dtype(draw(st.sampled_from([1.0, 7.5, 1e3])))
    return X


taus = st.sampled_from([0.0, 0.1, 0.5, 1.0, 3.0, np.inf]) | st.floats(0.0, 20.0)
n_groups = st.integers(1, 40)


def _center(draw_center, d):
    return None if draw_center is None else np.resize(np.asarray(draw_center), d)


centers = st.none() | st.lists(st.floats(-20, 20), min_size=1, max_size=5)


def _tol(X, tau, center):
    # Absolute tolerance 1e-12 times the largest magnitude involved (the sums are
    # exact to rounding in a different order).
    c = 0.0 if center is None else float(np.max(np.abs(center)))
    return 1e-12 * max(1.0, float(np.max(np.abs(X), initial=0.0)), c)


# ---------------------------------------------------------------- median of means


@SETTINGS
@given(matrices(), taus, n_groups, centers)
def test_cwme_dense_matches_reference(X, tau, m, center):
    center = _center(center, X.shape[1])
    expected = ref_cwme(X, tau, m, center)
    got = cwme_dense(X, tau, m, center)
    assert got.dtype == np.float64 and got.shape == (X.shape[1],)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=_tol(X, tau, center))
    # F-ordered and strided inputs take other code paths.
    np.testing.assert_allclose(cwme_dense(np.asfortranarray(X), tau, m, center), expected,
                               rtol=1e-12, atol=_tol(X, tau, center))
    wide = np.repeat(X, 2, axis=1)[:, ::2]
    np.testing.assert_allclose(cwme_dense(wide, tau, m, center), expected, rtol=1e-12,
                               atol=_tol(X, tau, center))


def _csr_with_explicit_zeros(X, rng):
    """CSR of X that also stores some zeros explicitly, rows' indices shuffled."""
    A = sp.csr_matrix(X)
    rows, cols = np.nonzero(X == 0)
    keep = rng.random(rows.size) < 0.3
    coo = sp.coo_matrix(A)
    r = np.concatenate([coo.row, rows[keep]])
    c = np.concatenate([coo.col, cols[keep]])
    v = np.concatenate([coo.data, np.zeros(keep.sum(), dtype=X.dtype)])
    perm = rng.permutation(r.size)
    order = np.argsort(r[perm], kind="stable")
    r, c, v = r[perm][order], c[perm][order], v[perm][order]
    indptr = np.searchsorted(r, np.arange(X.shape[0] + 1)).astype(np.int32)
    return indptr, c.astype(np.int32), v


@SETTINGS
@given(matrices(), taus, n_groups, centers, st.integers(0, 2**32 - 1))
def test_cwme_csr_matches_dense(X, tau, m, center, seed):
    center = _center(center, X.shape[1])
    indptr, indices, data = _csr_with_explicit_zeros(X, np.random.default_rng(seed))
    got = cwme_csr(indptr, indices, data, X.shape[0], X.shape[1], tau, m, center)
    np.testing.assert_allclose(got, cwme_dense(X, tau, m, center), rtol=1e-12,
                               atol=_tol(X, tau, center))
    np.testing.assert_allclose(got, ref_cwme(X, tau, m, center), rtol=1e-12,
                               atol=_tol(X, tau, center))


def test_cwme_csr_implicit_zeros_clip_to_the_interval():
    # Centre 10, tau 1: the interval [7, 13] excludes 0, so every implicit zero
    # counts as 7, which a sum over stored entries alone would miss.
    X = np.zeros((6, 3))
    X[0, 0] = 12.0
    A = sp.csr_matrix(X)
    center = np.array([10.0, 10.0, -10.0])
    got = cwme_csr(A.indptr, A.indices, A.data, 6, 3, 1.0, 1, center)
    np.testing.assert_allclose(got, [(12 + 5 * 7) / 6, 7.0, -7.0], rtol=1e-15)
    np.testing.assert_allclose(got, ref_cwme(X, 1.0, 1, center), rtol=1e-15)


def test_cwme_groups_are_consecutive_and_balanced():
    assert list(group_bounds(10, 3)) == [0, 4, 7, 10]
    assert list(group_bounds(2, 5)) == [0, 1, 2]  # n < m: one row per group
    assert effective_n_groups(2, 5) == 2
    # Groups of consecutive rows: one distinct row per group, median of (0, 0, 9).
    X = np.array([[0.0], [0.0], [0.0], [9.0], [9.0], [9.0], [9.0]])  # groups 3, 2, 2
    assert cwme_dense(X, np.inf, 3)[0] == 9.0  # (sizes 2, 2, 3 would give 4.5)
    X = np.array([[1.0], [2.0], [3.0], [4.0]])
    assert cwme_dense(X, np.inf, 4)[0] == 2.5  # even m: average of the middle two
    assert cwme_dense(X, np.inf, 1)[0] == 2.5
    assert cwme_dense(X, 0.1, 1)[0] == pytest.approx(0.3)  # all clipped to 3 tau


def test_cwme_non_finite_gives_nan_in_its_column_only():
    X = np.ones((8, 3))
    X[3, 1] = np.nan
    X[5, 2] = np.inf
    for Y in (X, np.asfortranarray(X), X.astype(np.float32)):
        out = cwme_dense(Y, 1.0, 3)
        assert out[0] == 1.0 and np.isnan(out[1]) and np.isnan(out[2])
    A = sp.csr_matrix(X)
    out = cwme_csr(A.indptr, A.indices, A.data, 8, 3, 1.0, 3)
    assert out[0] == 1.0 and np.isnan(out[1]) and np.isnan(out[2])


def test_cwme_argument_checks():
    X = np.ones((4, 2))
    with pytest.raises(ValueError):
        cwme_dense(X, -1.0, 2)
    with pytest.raises(ValueError):
        cwme_dense(X, 1.0, 0)
    with pytest.raises(ValueError):
        cwme_dense(np.ones((0, 2)), 1.0, 2)
    with pytest.raises(ValueError):
        cwme_dense(X, 1.0, 2, center=np.zeros(3))
    with pytest.raises(ValueError):
        cwme_dense(np.ones(4), 1.0, 2)


def test_cwme_large_input_matches_reference():
    # Many rows, m not dividing n, float32, both layouts.
    rng = np.random.default_rng(0)
    X = rng.standard_t(2.5, size=(20011, 7)).astype(np.float32)
    center = rng.normal(size=7)
    expected = ref_cwme(X, 1.5, 23, center)
    np.testing.assert_allclose(cwme_dense(X, 1.5, 23, center), expected, rtol=0, atol=1e-13)
    np.testing.assert_allclose(cwme_dense(np.asfortranarray(X), 1.5, 23, center), expected,
                               rtol=0, atol=1e-13)
    A = sp.csr_matrix(np.where(np.abs(X) < 1, 0, X))
    np.testing.assert_allclose(
        cwme_csr(A.indptr, A.indices, A.data, *A.shape, 1.5, 23, center),
        ref_cwme(A.toarray(), 1.5, 23, center), rtol=0, atol=1e-13)


# ----------------------------------------------------------------- noise smoothing

A_GRID = np.concatenate([
    [0.0, 1e-300, 1e-12, 1e-6, 1e-3, 0.1, 0.5, 1.0, 1.3, B - 1e-9, B, B + 1e-9, 1.5, 2.0,
     3.0, 5.0, 7.9, 8.0, 8.1, 12.0, 20.0, 50.0, 100.0, 300.0, 1e3, 1e4, 1e6, 1e9, 1e12,
     1e100, 1e300],
])
C_GRID = [0.0, 1e-12, 1e-6, 1e-4, 1e-3, 0.01, 0.05, 0.1, 0.3, 0.756, 1.0, 2.0, 5.0,
          30.0, 100.0, 1e4, 1e8]


QUAD_WARNINGS = pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")


@QUAD_WARNINGS
@pytest.mark.parametrize("c", C_GRID)
def test_smoothed_phi_matches_quadrature(c):
    for a in A_GRID:
        expected = quad_smoothed_phi(a, c)
        got = smoothed_phi(a, c)
        assert abs(got - expected) <= 1e-8, (a, c, got, expected)
        assert smoothed_phi(-a, c) == -got


@QUAD_WARNINGS
def test_smoothed_phi_matches_quadrature_random():
    # Log-uniform (a, c), and points next to the switches between the closed form and
    # the Gauss-Legendre branch (a (1 + sqrt c) = 8 and a c = sqrt(2)/8).
    rng = np.random.default_rng(1)
    a = np.concatenate([10 ** rng.uniform(-3, 6, 150), np.zeros(0)])
    c = 10 ** rng.uniform(-5, 4, 150)
    c2 = 10 ** rng.uniform(-4, 2, 60)
    a2 = 8 / (1 + np.sqrt(c2)) * rng.uniform(0.95, 1.05, 60)
    a3 = 10 ** rng.uniform(0, 3, 60)
    c3 = B / 8 / a3 * rng.uniform(0.9, 1.1, 60)
    for ai, ci in zip(np.concatenate([a, a2, a3]), np.concatenate([c, c2, c3])):
        assert abs(smoothed_phi(ai, ci) - quad_smoothed_phi(ai, ci)) <= 1e-8, (ai, ci)


def test_smoothed_phi_matches_high_precision_quadrature():
    # Tighter than scipy's quad can certify: mpmath at 30 digits, error below 1e-13.
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30
    b = mpmath.sqrt(2)

    def exact(a, c):
        a, c = mpmath.mpf(a), mpmath.mpf(c)
        s = a * mpmath.sqrt(c)
        pts = sorted({-b, b, *[min(max(a + k * s, -b), b) for k in (-8, -3, 0, 3, 8)]})
        poly = mpmath.quad(lambda y: (y - y**3 / 6) * mpmath.npdf(y, a, s), pts)
        return poly + 2 * b / 3 * (1 - mpmath.ncdf(b, a, s) - mpmath.ncdf(-b, a, s))

    for a, c in [(0.5, 100.0), (1.0, 30.0), (0.77, 70.0), (3.0, 1.0), (7.0, 0.01),
                 (8.49, 7e-4), (50.0, 1.0), (1e4, 1.0), (1e6, 0.3), (20.0, B / 160),
                 (1.5, 0.2), (1e-3, 1e8),
                 # either side of the inner-moments shortcut, a (1 + 8.5 sqrt c) = b
                 *[(B / (1 + 8.5 * math.sqrt(c)) * f, c) for c in (1.0, 0.01, 100.0)
                   for f in (0.999, 1.001)]]:
        assert abs(smoothed_phi(a, c) - float(exact(a, c))) <= 1e-13, (a, c)


def test_smoothed_phi_shape():
    a = np.concatenate([-np.logspace(-6, 12, 400)[::-1], [0.0], np.logspace(-6, 12, 400)])
    for c in (0.0, 1e-4, 0.1, 1.0, 10.0):
        v = smoothed_phi_array(a, c)
        sup = smoothed_phi_sup(c)
        np.testing.assert_array_equal(v[::-1], -v)  # odd
        assert np.all(np.diff(v) >= -1e-15)  # nondecreasing
        assert np.all(np.abs(v) <= sup)  # within the range used for the sensitivity
        assert v[-1] == pytest.approx(sup, rel=1e-9)  # and it is the supremum
    np.testing.assert_array_equal(smoothed_phi_array(a, 0.0), ref_phi(a))
    assert smoothed_phi_sup(0.0) == PHI_BOUND
    assert smoothed_phi_sup(1.0) == pytest.approx(PHI_BOUND * (2 * special.ndtr(1.0) - 1))
    assert np.isnan(smoothed_phi(np.nan, 1.0)) and np.isnan(smoothed_phi(np.inf, 1.0))
    with pytest.raises(ValueError):
        smoothed_phi(1.0, -1.0)
    with pytest.raises(ValueError):
        smoothed_phi_array(a, np.inf)


@SETTINGS
@given(matrices(max_magnitude=10.0), st.sampled_from([0.5, 1.0, 2.0, 7.0]),
       st.sampled_from([0.0, 0.01, 0.3, 1.0, 2.0]), st.integers(0, 2**32 - 1))
def test_noise_smoothing_mean_matches_reference(X, tau, c, seed):
    # |x/tau| (1 + sqrt c) <= 10/0.5 * 2.5 could exceed the reference's accurate range:
    # restrict to entries where the z-space closed form is accurate.
    X = X.copy()
    X[np.abs(X / tau) * (1 + np.sqrt(c)) > 8] = 0
    expected = ref_noise_smoothing_mean(X, tau, c)
    got = noise_smoothing_mean_dense(X, tau, c)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * tau)
    np.testing.assert_allclose(noise_smoothing_mean_dense(np.asfortranarray(X), tau, c),
                               got, rtol=0, atol=1e-13 * tau)
    indptr, indices, data = _csr_with_explicit_zeros(X, np.random.default_rng(seed))
    np.testing.assert_allclose(
        noise_smoothing_mean_csr(indptr, indices, data, *X.shape, tau, c), got, rtol=0,
        atol=1e-13 * tau)


def test_noise_smoothing_mean_wide_range_equals_entrywise_kernel():
    rng = np.random.default_rng(3)
    X = rng.standard_cauchy(size=(500, 4)) * 10.0 ** rng.integers(-3, 6, size=(500, 4))
    for c in (0.0, 0.5, 1.0):
        expected = 2.0 * smoothed_phi_array(X / 2.0, c).mean(axis=0)
        np.testing.assert_allclose(noise_smoothing_mean_dense(X, 2.0, c), expected,
                                   rtol=1e-13, atol=1e-15)
        A = sp.csr_matrix(np.where(np.abs(X) < 1, 0.0, X))
        np.testing.assert_allclose(
            noise_smoothing_mean_csr(A.indptr, A.indices, A.data, *A.shape, 2.0, c),
            noise_smoothing_mean_dense(A.toarray(), 2.0, c), rtol=1e-13, atol=1e-15)


def test_noise_smoothing_non_finite_and_checks():
    X = np.ones((5, 3))
    X[1, 1] = np.nan
    X[2, 2] = -np.inf
    out = noise_smoothing_mean_dense(X, 1.0, 1.0)
    assert np.isfinite(out[0]) and np.isnan(out[1]) and np.isnan(out[2])
    with pytest.raises(ValueError):
        noise_smoothing_mean_dense(X, 0.0, 1.0)
    with pytest.raises(ValueError):
        noise_smoothing_mean_dense(X, 1.0, -1.0)


@pytest.mark.parametrize("tau", [2.0, 0.5, 1e-10])
@pytest.mark.parametrize("c", [0.0, 1.0])
def test_noise_smoothing_finite_extremes_saturate(tau, c):
    """Issue 17: a finite entry x with |x/τ| beyond float64 (1e308 with τ < 1) gave
    x/τ = ±inf, which ψ_c maps to NaN (its marker for non-finite input), and the
    mechanism then refused finite data. ψ_c(x/τ) of a finite x is within rounding of
    ±sup ψ_c at such sizes: each entry contributes ±τ·sup/n."""
    X = np.array([[1.7e308, -1.7e308, 1e308, -1e300]])
    sup = smoothed_phi_sup(c)
    expected = tau * sup * np.sign(X[0])
    outputs = [noise_smoothing_mean_dense(X, tau, c),
               noise_smoothing_mean_dense(np.asfortranarray(np.vstack([X, X])), tau, c),
               noise_smoothing_mean_csr(*_csr_parts(X), *X.shape, tau, c)]
    for out in outputs:
        np.testing.assert_allclose(out, expected, rtol=1e-15)
    # Non-finite input is still marked NaN (the mechanisms refuse it as malformed).
    assert np.isnan(noise_smoothing_mean_dense(np.array([[np.inf, 1.0]]), tau, c)[0])


def _csr_parts(X):
    A = sp.csr_matrix(X)
    return A.indptr, A.indices, A.data


@SETTINGS
@given(st.floats(-1.7e308, 1.7e308), st.floats(0.0, 1e300) | st.sampled_from([0.4, 0.1, 1e-9]),
       st.sampled_from([1e16, -1e16, 0.0]) | st.floats(-1e20, 1e20))
def test_cwme_interval_ends_are_rounded_inwards(c_any, tau, c_big):
    """The ends of the clipping interval (what ∓the largest float is clipped to, with
    n = m = 1) are exactly the floats nearest to c ∓ 3τ on the inside, so hi − lo ≤ 6τ
    in exact arithmetic whatever the magnitude of the centre (c = 1e16, τ = 0.4 had
    ends c ∓ 2, width 4 > 2.4)."""
    top = np.finfo(np.float64).max
    for c in (c_any, c_big):
        center = np.array([c])
        lo = cwme_dense(np.array([[-top]]), tau, 1, center)[0]
        hi = cwme_dense(np.array([[top]]), tau, 1, center)[0]
        assert lo == ref_interval_end(c, tau, -1) and hi == ref_interval_end(c, tau, 1)
        assert lo <= c <= hi
        assert Fraction(hi) - Fraction(lo) <= 6 * Fraction(tau)


@pytest.mark.parametrize("c", [0.0, 0.3, 1.0, 4.0])
def test_noise_smoothing_mean_rows_mixing_common_and_rare_entries(c):
    # The dense kernel adds the common case (plain moments) in one vectorised pass and
    # revisits a row only for its rare entries (|x/tau|(1 + 8.5 sqrt c) >= sqrt 2, NaN):
    # every entry must still count exactly once, as the entry-wise kernel computes it.
    rng = np.random.default_rng(int(10 * c))
    X = rng.standard_normal((300, 17)) * 0.01
    rare = rng.random(X.shape) < 0.05
    X[rare] = rng.standard_cauchy(rare.sum()) * 10.0
    X[7] = 0.0  # a row of zeros, and one with only rare entries
    X[8] = 50.0
    expected = 2.0 * smoothed_phi_array(X / 2.0, c).mean(axis=0)
    got = noise_smoothing_mean_dense(X, 2.0, c)
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=1e-16)
    assert np.all(np.abs(got) <= 2.0 * smoothed_phi_sup(c))
    X[5, 3] = np.nan  # a rare entry that is NaN: its column only
    got = noise_smoothing_mean_dense(X, 2.0, c)
    assert np.isnan(got[3]) and not np.isnan(np.delete(got, 3)).any()


def _noise_smoothing_same_floats(X, tau, c):
    """The dense kernel's floats in NumPy: a = x·(1/τ); entries with
    |clip(a, ±1e300) + (x − x)|·(1 + 8.5√c) < √2 take the plain moments
    a − a³(1 + 3c)/6 clamped to ±sup, the others ψ_c of the clamped ratio; columns
    summed row after row, times τ/n."""
    from skdpsparse._kernels.heavy_tailed import _B, _INNER_SDS

    with np.errstate(all="ignore"):
        a = X * (1.0 / tau)
        a_clamped = np.clip(a, -1e300, 1e300) + (X - X)
        common = np.abs(a_clamped) * (1.0 + _INNER_SDS * math.sqrt(c)) < _B
        sup = smoothed_phi_sup(c)
        v = np.clip(a - a * a * a * ((1.0 + 3.0 * c) / 6.0), -sup, sup)
        terms = np.where(common, v, smoothed_phi_array(a_clamped, c))
    sums = np.zeros(X.shape[1])
    for row in terms:
        sums = sums + row
    return sums * (tau / X.shape[0])


@pytest.mark.parametrize("tau, c", [(3.0, 1.0), (0.5, 0.0), (1e-3, 0.5), (50.0, 2.0)])
def test_noise_smoothing_dense_is_its_formula_bit_for_bit(tau, c):
    # The common-entry test reads x·(1/τ) without the clamp and the NaN term; entries
    # where those matter (beyond 1e300·τ, ±inf, NaN, ±0, subnormal) must still get
    # the same floats as the formula, which takes them.
    rng = np.random.default_rng(8)
    X = rng.standard_t(3.0, size=(403, 13)) * rng.choice([0.1, 1.0, 30.0], size=(403, 1))
    X[3, :6] = [0.0, -0.0, 1e308, -1e308, 5e-324, -5e-324]
    X[4, :3] = [1e-300, -1e-310, 1.7e308]
    got = noise_smoothing_mean_dense(X, tau, c)
    np.testing.assert_array_equal(got, _noise_smoothing_same_floats(X, tau, c))
    X[10, 7], X[11, 8], X[12, 8] = np.nan, np.inf, -np.inf
    got = noise_smoothing_mean_dense(X, tau, c)
    np.testing.assert_array_equal(got, _noise_smoothing_same_floats(X, tau, c))
    assert np.isnan(got[7]) and np.isnan(got[8]) and np.isfinite(np.delete(got, [7, 8])).all()
