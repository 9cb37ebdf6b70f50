"""Review of DP-SGD's accounting for batches sampled without replacement (replace-one
neighbours, discrete Gaussian noise): the bound of
``subsampled_without_replacement_discrete_gaussian_rdp`` and its ternary moments,
checked against quantities computed here from first principles.

* Exact one-step Rényi divergences: every data set with gradients in {−1, 0, 1} (ℤ)
  or on the lattice points of the unit disc (ℤ²), every replace-one pair, the output
  pmf summed over a wide window. The bound must lie above every one of them; the
  same bound at the add/remove sensitivity C instead of 2C (z doubled) must not (it
  is caught), so the check can see a factor-2 sensitivity error.
* The supremum of the Gaussian's ternary moments E_r[(p/r − q/r)^j] over triangles of
  centres with sides at most s (doc/derivations/dp_sgd.rst, step 4): the exact finite
  sums over a grid of feasible Gram matrices (mpmath) lie below the library's M_j and
  below max{equilateral, pair}; the pair value alone is exceeded somewhere (a bound that
  took r = q only would be wrong). Odd j by two-dimensional Gauss–Hermite quadrature.
* An independent implementation of the per-step bound from the derivation (exact
  F_eq and B by quadrature, Cauchy–Schwarz for odd j, the cap 2e^{j(j−1)s²/2}): the
  library's curve is never below it at integer orders.

Reference: Wang, Balle and Kasiviswanathan (2019), "Subsampled Rényi differential
privacy and analytical moments accountant", AISTATS (the expansion and the ternary
|χ|^j divergence).
"""

import itertools
import math

import numpy as np
import pytest
from scipy.special import logsumexp

from skdpsparse.accounting import (
    subsampled_without_replacement_discrete_gaussian_rdp as wor_bound,
    ternary_moment_bounds,
)

mp = pytest.importorskip("mpmath")

ORDERS = [2, 3, 4, 6, 8]


# ------------------------------------------------------------ exact one-step divergences
def _log_norm(scale):
    k = np.arange(-40 * scale - 5, 40 * scale + 6)
    return logsumexp(-k * k / (2.0 * scale * scale))


def _renyi(lp, lq, a):
    """max(D_a(P||Q), D_a(Q||P)) from log-pmfs on a common window."""
    return max(logsumexp(a * lp + (1 - a) * lq), logsumexp(a * lq + (1 - a) * lp)) / (a - 1)


def _worst_exact(points, n, b, scale, orders):
    """The largest exact divergence over every multiset of n gradients from ``points``
    (tuples in ℤ^p) and every replacement of one of them: output = sum of a uniform
    b-subset + N_ℤ(0, scale²)^p."""
    pts = [tuple(p) for p in points]
    dim = len(pts[0])
    reach = max(max(abs(c) for c in p) for p in pts) * n
    half = int(reach * max(orders) + 12 * scale + 8)
    axis = np.arange(-half, half + 1, dtype=float)
    grid = np.stack(np.meshgrid(*([axis] * dim), indexing="ij"), axis=-1).reshape(-1, dim)
    log_z = dim * _log_norm(scale)
    cache = {}

    def mixture(multiset):
        if multiset not in cache:
            sums = [np.sum(c, axis=0) for c in itertools.combinations(multiset, b)]
            comps = np.array([-((grid - m) ** 2).sum(axis=1) / (2.0 * scale * scale)
                              for m in sums])
            cache[multiset] = logsumexp(comps, axis=0) - log_z - math.log(len(sums))
        return cache[multiset]

    best = np.zeros(len(orders))
    for rest in itertools.combinations_with_replacement(pts, n - 1):
        for xi, xj in itertools.combinations(pts, 2):
            lp = mixture(tuple(sorted(rest + (xi,))))
            lq = mixture(tuple(sorted(rest + (xj,))))
            best = np.maximum(best, [_renyi(lp, lq, a) for a in orders])
    return best


LINE = [(-1,), (0,), (1,)]                                 # |g| ≤ C = 1, Δ = 2
DISC = [(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)]          # ‖g‖ ≤ C = 1, Δ = 2


@pytest.mark.parametrize("points,n,b,scale", [
    (LINE, 3, 1, 2), (LINE, 3, 2, 2), (LINE, 4, 2, 4), (LINE, 4, 3, 4),
    (LINE, 4, 1, 8), (LINE, 4, 2, 8), (DISC, 3, 1, 2), (DISC, 3, 2, 4),
])
def test_bound_above_every_replace_one_pair(points, n, b, scale):
    exact = _worst_exact(points, n, b, scale, ORDERS)
    z = scale / 2.0  # σ / Δ with Δ = 2C = 2 (replace-one)
    bound = wor_bound(b, n, z, ORDERS).epsilons
    assert np.all(bound >= exact * (1 - 1e-9)), (bound, exact)
    # Measured on this machine (1-D and 2-D alike): bound/exact in [1.00, 1.49].
    assert np.all(bound <= 1.6 * exact), (bound / exact)


@pytest.mark.parametrize("n,b,scale", [(3, 2, 2), (4, 2, 4)])
def test_add_remove_sensitivity_is_caught(n, b, scale):
    """The same curve at Δ = C (z = σ/C, twice the true z) is below an exact
    divergence: the brute force sees a factor-2 sensitivity error."""
    exact = _worst_exact(LINE, n, b, scale, ORDERS)
    wrong = wor_bound(b, n, float(scale), ORDERS).epsilons
    assert np.any(wrong < exact * 0.9), (wrong, exact)


# ------------------------------------------------------------ the ternary supremum
def _f_even(j, a, c, w):
    """E_r[(p/r − q/r)^j] for Gaussians with ‖u‖² = a, ‖v‖² = c, ‖u − v‖² = w (even j),
    the finite sum of exponentials, in high precision."""
    ip = (a + c - w) / 2
    with mp.workdps(80):
        return mp.fsum(mp.binomial(j, k) * (-1) ** (j - k)
                       * mp.e ** (k * (k - 1) * a / 2 + (j - k) * (j - k - 1) * c / 2
                                  + k * (j - k) * ip) for k in range(j + 1))


def _triangles(s, m):
    s2 = mp.mpf(s) ** 2
    for i, k, l in itertools.product(range(m + 1), repeat=3):
        a, c, w = s2 * i / m, s2 * k / m, s2 * l / m
        ra, rc, rw = mp.sqrt(a), mp.sqrt(c), mp.sqrt(w)
        if rw <= ra + rc and ra <= rc + rw and rc <= ra + rw:
            yield a, c, w


@pytest.mark.parametrize("s", [0.1, 0.6, 1.0])
def test_even_ternary_supremum(s):
    lib = np.exp(ternary_moment_bounds(1.0 / s, 8))
    s2 = mp.mpf(s) ** 2
    pair_exceeded = False
    for j in (2, 4, 6, 8):
        sup = max(_f_even(j, *t) for t in _triangles(s, 8))
        eq, pair = _f_even(j, s2, s2, s2), _f_even(j, s2, 0, s2)
        assert sup <= max(eq, pair) * (1 + 1e-12), (j, sup, eq, pair)
        assert lib[j] >= float(sup) * (1 - 1e-12), (j, lib[j], sup)
        pair_exceeded |= sup > pair * (1 + 1e-6)
    assert pair_exceeded  # r = q alone is not the supremum


_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(100)


def _f_abs(j, a, c, w):
    """E|e^X − e^Y|^j, (X, Y) the log-ratios, by 2-D Gauss–Hermite quadrature."""
    a, c, w = float(a), float(c), float(w)
    cov = np.array([[a, (a + c - w) / 2], [(a + c - w) / 2, c]])
    ev, vec = np.linalg.eigh(cov)
    root = vec @ np.diag(np.sqrt(np.clip(ev, 0, None)))
    z1, z2 = np.meshgrid(_GH_X, _GH_X, indexing="ij")
    x = -a / 2 + root[0, 0] * z1 + root[0, 1] * z2
    y = -c / 2 + root[1, 0] * z1 + root[1, 1] * z2
    return float((np.outer(_GH_W, _GH_W) * np.abs(np.exp(x) - np.exp(y)) ** j).sum()
                 / (2 * math.pi))


@pytest.mark.parametrize("s", [0.1, 0.6, 1.0])
def test_odd_ternary_moments(s):
    lib = np.exp(ternary_moment_bounds(1.0 / s, 7))
    for j in (3, 5, 7):
        sup = max(_f_abs(j, *t) for t in _triangles(s, 6))
        assert lib[j] >= sup * (1 - 1e-6), (j, lib[j], sup)


# ------------------------------------------------------------ independent implementation
def _independent_rdp(b, n, z, orders):
    """The per-step bound written from the derivation, with the exact suprema."""
    s, g = 1 / mp.mpf(z), mp.mpf(b) / n
    jmax = max(orders)
    m = {}
    for j in range(2, jmax + 2, 2):
        f_eq = mp.e ** ((3 * j * j - 4 * j) * s * s / 8) * 2 * mp.quad(
            lambda t: (2 * mp.sinh(s * t / 2)) ** j * mp.npdf(t), [0, 2, 6, 12, 40])
        f_pair = mp.quad(lambda t: (mp.e ** (s * t - s * s / 2) - 1) ** j * mp.npdf(t),
                         [-40, -6, 0, 6, 40])
        m[j] = min(max(f_eq, f_pair), 2 * mp.e ** (j * (j - 1) * s * s / 2))
    for j in range(3, jmax + 1, 2):
        m[j] = min(mp.sqrt(m[j - 1] * m[j + 1]), 2 * mp.e ** (j * (j - 1) * s * s / 2))
    out = []
    for a in orders:
        log_a = mp.log(1 + mp.fsum(mp.binomial(a, j) * g ** j * m[j] for j in range(2, a + 1)))
        out.append(min(float(log_a / (a - 1)), a / (2 * z * z)))
    return np.array(out)


@pytest.mark.parametrize("b,n,z", [(2000, 12456, 8.92), (1000, 20000, 2.7), (2, 5, 1.5)])
def test_library_matches_independent_bound(b, n, z):
    orders = list(range(2, 17))
    mine = _independent_rdp(b, n, z, orders)
    lib = wor_bound(b, n, z, orders).epsilons
    assert np.all(lib >= mine * (1 - 1e-12)), (lib / mine)
    assert np.all(lib <= mine * 1.5), (lib / mine)  # measured at most 1.39 (sinh bounds)
