"""RDP curves: cross-checks with dp_accounting's RdpAccountant, exact references, curve algebra."""

import dataclasses
import functools
import logging
import math

import numpy as np
import pytest

from skdpsparse.accounting import (
    DEFAULT_ORDERS,
    ApproxDP,
    RdpCurve,
    gaussian_rdp,
    laplace_rdp,
    poisson_subsampled_gaussian_rdp,
    rdp_to_epsilon,
    subsampled_without_replacement_gaussian_rdp,
)
from skdpsparse.accounting import rdp as rdp_module

dpa = pytest.importorskip("dp_accounting")
from dp_accounting.rdp import rdp_privacy_accountant as dp_rdp  # noqa: E402

DELTA = 1e-5
ORDERS = DEFAULT_ORDERS
IS_INT = ORDERS == np.floor(ORDERS)
RTOL = 1e-6


@pytest.fixture(autouse=True)
def _quiet_dp_accounting():
    # dp_accounting logs a warning per fractional order whose series it gives up on.
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


@functools.lru_cache(maxsize=None)
def _dp(event, steps=1, relation=None):
    """dp_accounting's (rdp per order, epsilon at DELTA) after `steps` compositions."""
    kwargs = {} if relation is None else {"neighboring_relation": relation}
    acc = dp_rdp.RdpAccountant(**kwargs)
    acc.compose(event, steps)
    return np.array(acc._rdp), acc.get_epsilon(DELTA)


def test_default_orders_are_dp_accountings():
    assert ORDERS.tolist() == list(dp_rdp.DEFAULT_RDP_ORDERS)
    with pytest.raises(ValueError):
        ORDERS[0] = 2.0


# --------------------------------------------------------- cross-checks with dp_accounting
@pytest.mark.parametrize("sigma", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("steps", [1, 100, 10_000])
def test_gaussian_matches_dp_accounting(sigma, steps):
    dp_curve, dp_eps = _dp(dpa.GaussianDpEvent(sigma), steps)
    curve = steps * gaussian_rdp(sigma)
    np.testing.assert_allclose(curve.epsilons, dp_curve, rtol=1e-12)
    assert curve.to_epsilon(DELTA)[0] == pytest.approx(dp_eps, rel=RTOL)


@pytest.mark.parametrize("b", [0.05, 0.5, 1.0, 4.0, 100.0])
@pytest.mark.parametrize("steps", [1, 100, 10_000])
def test_laplace_matches_dp_accounting(b, steps):
    dp_curve, dp_eps = _dp(dpa.LaplaceDpEvent(b), steps)
    curve = steps * laplace_rdp(b)
    np.testing.assert_allclose(curve.epsilons, dp_curve, rtol=1e-9)
    assert curve.to_epsilon(DELTA)[0] == pytest.approx(dp_eps, rel=RTOL)


def _tightened(dp_curve, cap):
    """dp_accounting's curve with the generic valid tightenings our subsampled curves
    apply: at fractional orders the chord of the CGF (α−1)ε(α) through dp_accounting's own
    integer orders; everywhere `cap` (the plain Gaussian, or for Poisson sampling the
    mixture bound); then the running minimum over higher orders (RDP grows with α)."""
    cgf = dict(zip(ORDERS[IS_INT], dp_curve[IS_INT] * (ORDERS[IS_INT] - 1)))
    cgf[1.0] = 0.0
    lo, hi = np.floor(ORDERS), np.ceil(ORDERS)
    t = ORDERS - lo
    chord = np.array([(1 - ti) * cgf[a] + ti * cgf[b] for a, b, ti in zip(lo, hi, t)])
    out = np.minimum(np.minimum(dp_curve, chord / (ORDERS - 1)), cap)
    return np.minimum.accumulate(out[::-1])[::-1]


@pytest.mark.parametrize("sigma", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("q", [0.001, 0.01, 0.1])
@pytest.mark.parametrize("steps", [1, 100, 10_000])
def test_poisson_subsampled_gaussian_matches_dp_accounting(sigma, q, steps):
    dp_curve, dp_eps = _dp(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), steps)
    curve = steps * poisson_subsampled_gaussian_rdp(q, sigma)
    ours = curve.epsilons
    # Integer orders: the same finite binomial sum.
    np.testing.assert_allclose(ours[IS_INT], dp_curve[IS_INT], rtol=RTOL)
    # Fractional orders: dp_accounting's |terms| series, unless the chord or the mixture
    # bound log(1 − q + q e^{α(α−1)/(2σ²)})/(α−1) is smaller (9 of the 2673 orders here).
    x = ORDERS * (ORDERS - 1) / (2 * sigma**2)
    log_mix = np.logaddexp(math.log1p(-q), math.log(q) + x)  # log(1 − q + q eˣ)
    log_mix = np.where(x < 1, np.log1p(q * np.expm1(np.minimum(x, 1))), log_mix)
    mixture = steps * log_mix / (ORDERS - 1)
    expected = _tightened(dp_curve, mixture)
    # dp_accounting stops its series once a term falls below e^-30 of the sum, dropping a
    # tail of up to ~1e-10 of A_α: compare the CGF (α − 1)ε(α) = log A_α with that slack.
    finite = np.isfinite(dp_curve)
    frac = ~IS_INT & finite
    cgf_ours = ours[frac] * (ORDERS[frac] - 1) / steps
    cgf_expected = expected[frac] * (ORDERS[frac] - 1) / steps
    np.testing.assert_allclose(cgf_ours, cgf_expected, rtol=RTOL, atol=1e-10)
    # Where dp_accounting's series does not converge (inf: σ ≤ 1, q = 0.1, α ≤ 1.6) ours is
    # finite and no larger than the tightened curve.
    assert np.all(np.isfinite(ours)) and np.all(ours[~finite] <= expected[~finite])
    # ε over dp_accounting's finite orders must match; over all orders ours can only be
    # smaller (beyond the tolerance).
    eps_same_orders, _ = rdp_to_epsilon(ORDERS[finite], ours[finite], DELTA)
    assert eps_same_orders == pytest.approx(dp_eps, rel=RTOL)
    eps = curve.to_epsilon(DELTA)[0]
    assert eps <= dp_eps * (1 + RTOL)
    if finite.all():
        assert eps == pytest.approx(dp_eps, rel=RTOL)


@pytest.mark.parametrize(
    "n, m, sigma", [(1000, 10, 1.0), (1000, 100, 0.5), (60_000, 256, 4.0), (100, 50, 1.0)]
)
@pytest.mark.parametrize("steps", [1, 1000])
def test_without_replacement_matches_dp_accounting(n, m, sigma, steps):
    event = dpa.SampledWithoutReplacementDpEvent(n, m, dpa.GaussianDpEvent(sigma))
    dp_curve, dp_eps = _dp(event, steps, dp_rdp.NeighborRel.REPLACE_ONE)
    curve = steps * subsampled_without_replacement_gaussian_rdp(m, n, sigma)
    # Every order: dp_accounting's value, capped by the plain Gaussian (binding only for
    # m/n = 1/2 at α < 1.8, where the chord down to α = 1 is loose).
    expected = _tightened(dp_curve, steps * ORDERS / (2 * sigma**2))
    np.testing.assert_allclose(curve.epsilons, expected, rtol=RTOL)
    capped = np.sum(expected < dp_curve * (1 - RTOL))
    assert capped == (7 if m / n == 0.5 else 0)
    eps = curve.to_epsilon(DELTA)[0]
    assert eps == pytest.approx(rdp_to_epsilon(ORDERS, expected, DELTA)[0], rel=RTOL)
    assert eps <= dp_eps * (1 + RTOL)
    if capped == 0:
        assert eps == pytest.approx(dp_eps, rel=RTOL)


def test_rdp_to_epsilon_matches_dp_compute_epsilon():
    rng = np.random.default_rng(0)
    for _ in range(50):
        rdp = np.sort(rng.exponential(rng.choice([1e-3, 1.0, 100.0]), ORDERS.size))
        delta = 10.0 ** rng.uniform(-12, -1)
        eps, order = rdp_to_epsilon(ORDERS, rdp, delta)
        dp_eps, dp_order = dp_rdp.compute_epsilon(ORDERS, rdp, delta)
        assert eps == pytest.approx(dp_eps, rel=1e-12, abs=1e-300)
        assert order == dp_order


# --------------------------------------------------------------------- exact references
def test_rdp_to_epsilon_edge_cases():
    orders = np.array([1.0, 1.5, 2.0, 3.0])
    # α = 1 and infinite bounds are ignored; an all-ignored curve gives inf.
    eps, order = rdp_to_epsilon(orders, [0.0, np.inf, 0.5, np.inf], 1e-5)
    expected = 0.5 + math.log(0.5) - (math.log(1e-5) + math.log(2.0))
    assert (eps, order) == (pytest.approx(expected, rel=1e-14), 2.0)
    assert rdp_to_epsilon([1.0, 2.0], [0.0, np.inf], 1e-5) == (math.inf, pytest.approx(np.nan,
                                                                                       nan_ok=True))
    assert rdp_to_epsilon([2.0], [1e-12], 0.1)[0] == 0.0  # clamped / TV bound
    with pytest.raises(ValueError, match="delta"):
        rdp_to_epsilon(orders, [0.1] * 4, 0.0)
    with pytest.raises(ValueError):
        rdp_to_epsilon(orders, [0.1] * 3, 1e-5)
    with pytest.raises(ValueError):
        rdp_to_epsilon(orders, [0.1, -0.1, 0.1, 0.1], 1e-5)


def test_laplace_exact_values_and_limits():
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 50

    def exact(b, a):
        e0 = 1 / mp.mpf(b)
        if a == 1:
            return e0 + mp.exp(-e0) - 1
        a = mp.mpf(a)
        return mp.log(a / (2 * a - 1) * mp.exp((a - 1) * e0)
                      + (a - 1) / (2 * a - 1) * mp.exp(-a * e0)) / (a - 1)

    orders = np.array([1.0, 1 + 1e-12, 1 + 1e-6, 1.05, 2.0, 37.5, 1024.0, 1e6])
    for b in [0.01, 0.5, 3.0, 1e3, 1e5]:
        ours = laplace_rdp(b, orders).epsilons
        ref = np.array([float(exact(b, a)) for a in orders])
        np.testing.assert_allclose(ours, ref, rtol=1e-12)
        assert np.all(np.diff(ours) >= 0) and ours[-1] <= 1 / b  # monotone, ≤ pure ε


def _exact_poisson_rdp(q, s, a):
    """ε(α) = log(A_α)/(α−1), A_α = E_{z∼N(0,s²)}[(1 − q + q e^{(2z−1)/(2s²)})^α] ([MTZ19]),
    by 20-digit quadrature."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 20
    q, s, a = mp.mpf(q), mp.mpf(s), mp.mpf(a)

    def f(z):
        return mp.npdf(z, 0, s) * ((1 - q) + q * mp.exp((2 * z - 1) / (2 * s * s))) ** a

    val = mp.quad(f, [-mp.inf, -10 * s, 0, 0.5, 10 * s + 50 * s * s, mp.inf])
    return float(mp.log(val) / (a - 1))


def test_poisson_exact_integer_orders_and_valid_fractional_orders():
    for q, s in [(0.01, 1.0), (0.1, 2.0), (0.3, 0.7)]:
        orders = np.array([2.0, 7.0, 1.5, 3.3])
        ours = poisson_subsampled_gaussian_rdp(q, s, orders).epsilons
        ref = np.array([_exact_poisson_rdp(q, s, a) for a in orders])
        np.testing.assert_allclose(ours[:2], ref[:2], rtol=1e-10)
        assert np.all(ours[2:] >= ref[2:])  # |terms| series: an upper bound


def test_poisson_fractional_series_is_converged():
    from scipy.special import log_ndtr, logsumexp

    q, s, a = 0.001, 0.5, 1.1
    k = np.arange(500_000, dtype=float)
    j = a - k
    z0 = s**2 * math.log(1 / q - 1) + 0.5
    lc = rdp_module._log_comb(a, k)
    t0 = (lc + k * math.log(q) + j * math.log1p(-q) + (k * k - k) / (2 * s**2)
          + log_ndtr((z0 - k) / s))
    t1 = (lc + j * math.log(q) + k * math.log1p(-q) + (j * j - j) / (2 * s**2)
          + log_ndtr((j - z0) / s))
    ref = np.logaddexp(logsumexp(t0), logsumexp(t1)) / (a - 1)
    ours = poisson_subsampled_gaussian_rdp(q, s, [a]).epsilons[0]
    assert ours == pytest.approx(ref, rel=1e-9) and ours >= ref


def test_poisson_edge_rates():
    assert np.all(poisson_subsampled_gaussian_rdp(0.0, 1.0).epsilons == 0)
    assert poisson_subsampled_gaussian_rdp(1.0, 1.3) == gaussian_rdp(1.3)
    for bad in (-0.1, 1.1):
        with pytest.raises(ValueError, match="sampling_rate"):
            poisson_subsampled_gaussian_rdp(bad, 1.0)
    with pytest.raises(ValueError, match="noise_multiplier"):
        poisson_subsampled_gaussian_rdp(0.1, 0.0)
    with pytest.raises(ValueError, match="orders"):
        poisson_subsampled_gaussian_rdp(0.1, 1.0, [1.0, 2.0])


def test_poisson_non_converging_series_is_replaced_by_valid_bounds():
    q, s = 0.1, 0.5  # dp_accounting gives inf at α = 1.1 ... 1.6: the series needs ~1e5 terms
    assert np.isinf(dp_rdp._compute_rdp_poisson_subsampled_gaussian(q, s, [1.1]))[0]
    e11, e2 = poisson_subsampled_gaussian_rdp(q, s, [1.1, 2.0]).epsilons
    chord = e2  # the chord from log A_1 = 0 to log A_2 gives ε(2) for α in (1, 2)
    mixture = math.log1p(q * math.expm1(1.1 * 0.1 / (2 * s * s))) / 0.1
    assert e11 == pytest.approx(min(chord, mixture), rel=1e-12)
    assert _exact_poisson_rdp(q, s, 1.1) <= e11  # still an upper bound


def test_central_moments_are_exact():
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 400
    for sigma in [0.3, 4.0, 20.0, 500.0]:
        ours = rdp_module._log_central_moments(sigma, 128)
        e = 1 / (2 * mp.mpf(sigma) ** 2)
        for ell in (2, 6, 16, 40, 128):
            ref = mp.log(mp.fsum((-1) ** (ell - i) * mp.binomial(ell, i) * mp.exp(i * (i - 1) * e)
                                 for i in range(ell + 1)))
            assert ours[ell] == pytest.approx(float(ref), rel=1e-12, abs=1e-12)


def test_without_replacement_structure():
    n, m, s = 1000, 40, 2.0
    orders = np.array([2.0, 2.5, 3.0, 1.25])
    e = subsampled_without_replacement_gaussian_rdp(m, n, s, orders).epsilons
    # Fractional orders: the chord of the CGF (α − 1)ε(α).
    assert 1.5 * e[1] == pytest.approx(0.5 * (e[0] + 2 * e[2]), rel=1e-14)
    assert 0.25 * e[3] == pytest.approx(0.25 * e[0], rel=1e-14)
    assert np.all(subsampled_without_replacement_gaussian_rdp(0, n, s).epsilons == 0)
    assert subsampled_without_replacement_gaussian_rdp(n, n, s) == gaussian_rdp(s)
    # Amplification: below the plain Gaussian, and increasing in the sample size.
    full = gaussian_rdp(s).epsilons
    small = subsampled_without_replacement_gaussian_rdp(10, n, s).epsilons
    big = subsampled_without_replacement_gaussian_rdp(200, n, s).epsilons
    assert np.all(small <= big) and np.all(big <= full)
    with pytest.raises(ValueError):
        subsampled_without_replacement_gaussian_rdp(11, 10, s)
    with pytest.raises(TypeError):
        subsampled_without_replacement_gaussian_rdp(1.5, 10, s)


# ----------------------------------------------------------------------- curve algebra
def test_curve_is_immutable_and_copies_input():
    orders, eps = np.array([2.0, 3.0]), np.array([0.1, 0.2])
    c = RdpCurve(orders, eps)
    eps[0] = 9.0
    assert c.epsilons[0] == 0.1
    with pytest.raises(ValueError):
        c.epsilons[0] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.orders = orders
    assert c == RdpCurve([2, 3], [0.1, 0.2]) and hash(c) == hash(RdpCurve([2, 3], [0.1, 0.2]))


def test_curve_composition():
    a, b = gaussian_rdp(1.0), laplace_rdp(2.0)
    np.testing.assert_array_equal((a + b).epsilons, a.epsilons + b.epsilons)
    assert 3 * a == a + a + a == a * 3 == sum([a, a, a])
    inf_curve = RdpCurve([2.0, 3.0], [np.inf, 1.0])
    assert np.all((0 * inf_curve).epsilons == 0)
    with pytest.raises(ValueError, match="orders"):
        a + gaussian_rdp(1.0, orders=[2.0, 3.0])
    for bad, exc in [(-1, ValueError), (1.5, TypeError), (True, TypeError)]:
        with pytest.raises(exc):
            a * bad
    for bad_eps in ([0.1, np.nan], [0.1, -1.0], [0.1]):
        with pytest.raises(ValueError):
            RdpCurve([2.0, 3.0], bad_eps)
    with pytest.raises(ValueError):
        RdpCurve([0.5, 2.0], [0.1, 0.1])


def test_curve_to_approx_dp():
    c = 10 * gaussian_rdp(3.0)
    eps, order = c.to_epsilon(1e-6)
    assert c.to_approx_dp(1e-6) == ApproxDP(eps, 1e-6)
    assert order in ORDERS
    with pytest.raises(ValueError, match="finite"):
        RdpCurve([2.0], [np.inf]).to_approx_dp(1e-6)
    assert RdpCurve([2.0], [0.0]).to_approx_dp(1e-6).epsilon > 0


def test_vectorised_custom_orders():
    orders = np.linspace(1.5, 300.0, 40)
    for curve in (gaussian_rdp(1.0, orders), laplace_rdp(1.0, orders),
                  poisson_subsampled_gaussian_rdp(0.05, 1.0, orders),
                  subsampled_without_replacement_gaussian_rdp(5, 100, 1.0, orders)):
        assert curve.orders.shape == (40,) and np.all(np.isfinite(curve.epsilons))
        assert np.all(np.diff(curve.epsilons) >= -1e-12)  # RDP is non-decreasing in α


def test_without_replacement_theorem_9_alone_matches_a_hand_computation():
    """moments_bound=False is [WBK19] Theorem 9 alone: at integer orders,
    (α−1)ε′(α) = log(1 + γ²C(α,2)·min{4(e^{ε(2)}−1), 2e^{ε(2)}} + Σ_{j=3..α}
    γ^j C(α,j)·2e^{(j−1)ε(j)}) with ε(j) = j/(2σ²); it is never below the strengthened
    bound, and it is capped by the plain Gaussian's α/(2σ²)."""
    from math import comb, exp, log

    from skdpsparse.accounting import subsampled_without_replacement_gaussian_rdp

    m, n, sigma = 30, 1000, 1.3
    g = m / n
    orders = np.array([2.0, 3.0, 5.0, 8.0])

    def eps(j):
        return j / (2 * sigma**2)

    ref = []
    for a in orders.astype(int):
        s = 1 + g**2 * comb(a, 2) * min(4 * (exp(eps(2)) - 1), 2 * exp(eps(2)))
        s += sum(g**j * comb(a, j) * 2 * exp((j - 1) * eps(j)) for j in range(3, a + 1))
        ref.append(min(log(s) / (a - 1), a / (2 * sigma**2)))
    plain = subsampled_without_replacement_gaussian_rdp(m, n, sigma, orders,
                                                        moments_bound=False).epsilons
    np.testing.assert_allclose(plain, ref, rtol=1e-10)
    tight = subsampled_without_replacement_gaussian_rdp(m, n, sigma, orders).epsilons
    assert np.all(tight <= plain * (1 + 1e-12))
