"""The ternary-moment bound for a (discrete) Gaussian on a batch sampled without
replacement, checked against quantities computed here independently: divergences of
mixtures of discrete Gaussians summed directly over the integers, ternary moments of
discrete Gaussian triples summed over Z², and one-dimensional integrals by quadrature.
Each check also catches a broken variant of the bound."""

import itertools
import math

import numpy as np
import pytest
from scipy import integrate
from scipy.special import comb, logsumexp

import skdpsparse.accounting.wor_discrete_gaussian as wor
from skdpsparse.accounting import (
    DEFAULT_ORDERS,
    DiscreteGaussianEvent,
    GaussianEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    compose_events,
    event_from_dict,
    gaussian_rdp,
    subsampled_without_replacement_discrete_gaussian_rdp,
    subsampled_without_replacement_gaussian_rdp,
    ternary_moment_bounds,
)


# ---------------------------------------------------------------- direct references
def _log_discrete_gaussian(x, mean, scale):
    """log N_Z(mean, scale²) at the integers x (normaliser summed over ±40 scales)."""
    k = np.arange(-int(40 * scale) - 5, int(40 * scale) + 6)
    return -(x - mean) ** 2 / (2 * scale * scale) - logsumexp(-k * k / (2 * scale * scale))


def _log_wor_mixture(values, b, x, scale):
    """The output distribution of the sum of a uniform b-subset of ``values`` plus
    N_Z(0, scale²), at the integers x."""
    comps = [_log_discrete_gaussian(x, sum(s), scale)
             for s in itertools.combinations(values, b)]
    return logsumexp(np.array(comps), axis=0) - math.log(len(comps))


def _exact_divergences(values, values2, b, scale, orders):
    """max of D_α(P‖Q), D_α(Q‖P) for the two data sets at each order, summed over Z."""
    lo = min(min(values), min(values2)) * b - 40 * scale
    hi = max(max(values), max(values2)) * b + 40 * scale
    x = np.arange(math.floor(lo), math.ceil(hi) + 1)
    lp, lq = _log_wor_mixture(values, b, x, scale), _log_wor_mixture(values2, b, x, scale)
    return np.array([max(logsumexp(a * lp + (1 - a) * lq), logsumexp(a * lq + (1 - a) * lp))
                     / (a - 1) for a in orders])


def _worst_exact(n, b, c, z, orders):
    """The largest exact divergences over data sets with values in {−c, 0, c} where
    one row changes from c to −c, 0 or c − 1 (replace-one; sensitivity 2c; scale 2cz)."""
    best = np.zeros(len(orders))
    for rest in itertools.product([-c, 0, c], repeat=n - 1):
        for new in (-c, 0, c - 1):
            best = np.maximum(best, _exact_divergences([c, *rest], [new, *rest], b,
                                                       2 * c * z, orders))
    return best


def _theorem9(gamma, z, alpha):
    """Wang, Balle and Kasiviswanathan 2019, Theorem 9 for ε(j) = j/(2z²), term by term."""
    e2 = 1 / (z * z)
    total = 1 + gamma**2 * comb(alpha, 2, exact=True) * min(4 * math.expm1(e2),
                                                             2 * math.exp(e2))
    for j in range(3, alpha + 1):
        total += gamma**j * comb(alpha, j, exact=True) * 2 * math.exp(j * (j - 1) / (2 * z * z))
    return math.log(total) / (alpha - 1)


CASES = [(2, 1, 0.5), (2, 1, 1.0), (3, 1, 1.0), (4, 2, 2.0), (5, 2, 0.7)]


@pytest.mark.parametrize("n,b,z", CASES)
def test_bound_is_above_the_exact_divergence_summed_over_the_integers(n, b, z):
    """(a) Every exact Rényi divergence of two neighbouring sampled-without-replacement
    discrete Gaussian mixtures (summed over Z in double precision, relative error far
    below the 1e-9 allowed) is below the bound, which is below Theorem 9 (strictly:
    the exact values come within 1 % of the bound at large orders, so it is tight)."""
    orders = [2.0, 3.0, 5.0, 8.0, 16.0]
    bound = subsampled_without_replacement_discrete_gaussian_rdp(b, n, z, orders).epsilons
    closest = 0.0
    for a, ours, exact in zip(orders, bound, _worst_exact(n, b, 4, z, orders)):
        assert exact <= ours * (1 + 1e-9), (a, exact, ours)
        assert ours <= min(_theorem9(b / n, z, int(a)), a / (2 * z * z)) * (1 + 1e-12)
        closest = max(closest, exact / ours)
    assert closest > 0.9


@pytest.mark.parametrize("n,b,z", [(2, 1, 1.0), (5, 2, 0.7), (4, 2, 2.0)])
def test_a_bound_without_the_higher_terms_is_caught(n, b, z, monkeypatch):
    """(b) The broken variant that drops the terms j ≥ 3 (keeping the exact j = 2
    supremum) is below an exact divergence of (a): the audit has teeth."""
    real = wor.ternary_moment_bounds

    def dropped(noise_multiplier, max_order):
        out = real(noise_multiplier, max_order).copy()
        out[3:] = -np.inf
        return out

    monkeypatch.setattr(wor, "ternary_moment_bounds", dropped)
    broken = subsampled_without_replacement_discrete_gaussian_rdp(b, n, z, [5.0]).epsilons[0]
    assert _worst_exact(n, b, 4, z, [5.0])[0] > broken * 1.05


# ------------------------------------------------------------- the ternary moments
def _lattice_ternary_moment(means, scale, j):
    """E_r[(p/r − q/r)^j] for discrete Gaussians N_Z(m, scale²)² with integer means
    (p, q, r), summed over a window of Z² (even j: every term is non-negative)."""
    mp, mq, mr = (np.asarray(m, dtype=float) for m in means)
    lo = np.minimum(np.minimum(mp, mq), mr) - 9 * scale
    hi = np.maximum(np.maximum(mp, mq), mr) + 9 * scale
    x = np.arange(math.floor(lo[0]), math.ceil(hi[0]) + 1)[:, None]
    y = np.arange(math.floor(lo[1]), math.ceil(hi[1]) + 1)[None, :]

    def sq(m):
        return (x - m[0]) ** 2 + (y - m[1]) ** 2

    k = np.arange(-int(40 * scale) - 5, int(40 * scale) + 6)
    log_z = 2 * logsumexp(-k * k / (2 * scale * scale))
    log_r = -sq(mr) / (2 * scale * scale) - log_z
    ratio_p = np.exp((sq(mr) - sq(mp)) / (2 * scale * scale))  # same normaliser
    ratio_q = np.exp((sq(mr) - sq(mq)) / (2 * scale * scale))
    return float(np.sum(np.exp(log_r) * (ratio_p - ratio_q) ** j))


def test_a_planar_triple_exceeds_the_pair_moment_and_stays_below_the_bound():
    """Three integer means, pairwise at most 28 apart (scale 56, s = 1/2): sides
    28, √772, √772 (almost equilateral). Its second ternary moment, summed over Z²,
    exceeds the pair's e^{s²} − 1 (so a bound with r = q only, the broken variant,
    would be wrong) and is below the bound's exact supremum 2e^{s²} − 2e^{s²/2}; the
    fourth and sixth moments are below the bound too."""
    scale, z = 56.0, 2.0
    means = [(0, 0), (28, 0), (14, 24)]
    assert max(math.dist(a, b) for a, b in itertools.combinations(means, 2)) <= scale / z
    log_m = ternary_moment_bounds(z, 6)
    s2 = 1 / (z * z)
    second = _lattice_ternary_moment(means, scale, 2)
    assert math.expm1(s2) < second <= math.exp(log_m[2]) * (1 + 1e-9)
    assert math.exp(log_m[2]) == pytest.approx(2 * math.exp(s2) - 2 * math.exp(s2 / 2),
                                               rel=1e-12)
    for j in (4, 6):
        assert _lattice_ternary_moment(means, scale, j) <= math.exp(log_m[j])
    # r = q at distance 28: the pair moment B(j) itself, also below the bound.
    for j in (2, 4, 6):
        assert _lattice_ternary_moment([(0, 0), (28, 0), (28, 0)], scale, j) <= math.exp(
            log_m[j])


def test_discrete_mixed_moments_equal_the_continuous_ones():
    """E_r[(p/r)^i (q/r)^k] over Z² with integer means is exp(Q) of the continuous
    Gaussians: the fact that carries the bound over to the discrete Gaussian."""
    scale = 3.0
    mp, mq, mr = np.array([2.0, -1.0]), np.array([-1.0, 3.0]), np.array([0.0, 1.0])
    x = np.arange(-60, 61)[:, None]
    y = np.arange(-60, 61)[None, :]

    def log_dg(m):
        k = np.arange(-200, 201)
        return (-((x - m[0]) ** 2 + (y - m[1]) ** 2) / (2 * scale**2)
                - 2 * logsumexp(-k * k / (2 * scale**2)))

    u, v = (mp - mr) / scale, (mq - mr) / scale
    for i, k in [(2, 0), (1, 1), (2, 3), (3, 2)]:
        got = logsumexp((1 - i - k) * log_dg(mr) + i * log_dg(mp) + k * log_dg(mq))
        want = (i * (i - 1) * (u @ u) + k * (k - 1) * (v @ v)) / 2 + i * k * (u @ v)
        assert got == pytest.approx(want, abs=1e-10)


@pytest.mark.parametrize("z", [1.5, 3.0, 10.0])
def test_even_moment_bounds_are_above_the_suprema_by_quadrature(z):
    """For even j ≥ 4 the bound is ≥ max(F_eq(j), B(j)), both computed here by
    quadrature (F_eq = e^{(3j²−4j)s²/8} E[(2 sinh(sZ/2))^j],
    B = E[(e^{sZ − s²/2} − 1)^j]), and within 5 % of it where j·s² ≤ 1."""
    s = 1 / z
    log_m = ternary_moment_bounds(z, 12)
    phi = lambda t: math.exp(-t * t / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    for j in (4, 6, 8, 12):
        eq = math.exp((3 * j * j - 4 * j) * s * s / 8) * integrate.quad(
            lambda t: (2 * math.sinh(s * t / 2)) ** j * phi(t), -40, 40, epsabs=0,
            epsrel=1e-12, limit=400)[0]
        pair = integrate.quad(lambda t: math.expm1(s * t - s * s / 2) ** j * phi(t), -40, 40,
                              epsabs=0, epsrel=1e-12, limit=400)[0]
        top = max(eq, pair)
        assert math.exp(log_m[j]) >= top * (1 - 1e-9)
        if j * s * s <= 1:
            assert math.exp(log_m[j]) <= top * 1.05


def test_odd_moments_use_cauchy_schwarz_and_every_term_is_below_theorem_9():
    for z in (0.4, 1.0, 5.0):
        log_m = ternary_moment_bounds(z, 41)
        generic = math.log(2) + np.arange(42) * (np.arange(42) - 1) / (2 * z * z)
        for j in range(3, 40, 2):
            assert log_m[j] == pytest.approx(min(0.5 * (log_m[j - 1] + log_m[j + 1]),
                                                 generic[j]), rel=1e-12)
        assert np.all(log_m[3:] <= generic[3:] + 1e-12)
        e2 = 1 / (z * z)
        assert log_m[2] <= min(math.log(4 * math.expm1(e2)), math.log(2) + e2)


# ----------------------------------------------------------------- the curve itself
def test_curve_edges_monotonicity_and_validation():
    z = 1.3
    assert np.all(subsampled_without_replacement_discrete_gaussian_rdp(0, 50, z).epsilons == 0)
    assert (subsampled_without_replacement_discrete_gaussian_rdp(50, 50, z)
            == gaussian_rdp(z))
    small = subsampled_without_replacement_discrete_gaussian_rdp(10, 1000, z).epsilons
    big = subsampled_without_replacement_discrete_gaussian_rdp(100, 1000, z).epsilons
    assert np.all(small <= big) and np.all(np.diff(small) >= 0)
    louder = subsampled_without_replacement_discrete_gaussian_rdp(100, 1000, 2 * z).epsilons
    assert np.all(louder <= big)
    theorem9 = subsampled_without_replacement_gaussian_rdp(100, 1000, z,
                                                           moments_bound=False).epsilons
    assert np.all(big <= theorem9 * (1 + 1e-12))
    with pytest.raises(ValueError):
        subsampled_without_replacement_discrete_gaussian_rdp(11, 10, z)
    with pytest.raises(TypeError):
        subsampled_without_replacement_discrete_gaussian_rdp(1.5, 10, z)
    with pytest.raises(ValueError):
        ternary_moment_bounds(1.0, 1)


def test_leading_term_is_a_quarter_of_theorem_9():
    """At small γ and large z the curve is γ²α(e^{s²} − e^{s²/2})·(1 + o(1)), a quarter
    of Theorem 9's 2γ²α(e^{s²} − 1) = its γ²C(α, 2)·4(e^{s²} − 1)/(α − 1)."""
    m, n, z = 1, 100_000, 30.0
    ours = subsampled_without_replacement_discrete_gaussian_rdp(m, n, z, [4.0]).epsilons[0]
    theirs = subsampled_without_replacement_gaussian_rdp(m, n, z, [4.0],
                                                         moments_bound=False).epsilons[0]
    assert ours / theirs == pytest.approx(0.25, rel=0.01)


# ------------------------------------------------------------------------ the event
def test_event_accepts_a_discrete_gaussian_and_composes_its_curve():
    event = SampledWithoutReplacementEvent(200, 5000, DiscreteGaussianEvent(2.0))
    want = subsampled_without_replacement_discrete_gaussian_rdp(200, 5000, 2.0).epsilons
    assert np.array_equal(event.rdp(DEFAULT_ORDERS), want)
    continuous = SampledWithoutReplacementEvent(200, 5000, GaussianEvent(2.0))
    assert np.array_equal(continuous.rdp(DEFAULT_ORDERS),
                          subsampled_without_replacement_gaussian_rdp(200, 5000, 2.0).epsilons)
    assert event_from_dict(event.to_dict()) == event
    run = SelfComposedEvent(event, 100)
    one = compose_events([run], 1e-6).epsilon
    two = compose_events([run, run], 1e-6).epsilon
    assert one < two < 2 * one  # RDP composition of two fits, not basic composition
    with pytest.raises(TypeError):
        SampledWithoutReplacementEvent(200, 5000, DiscreteGaussianEvent(2.0, count=2))


def test_docstring_example():
    import doctest

    result = doctest.testmod(wor)
    assert result.failed == 0 and result.attempted > 0
