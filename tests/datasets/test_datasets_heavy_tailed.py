"""make_heavy_tailed and central_moment_bound: exact moments, means, determinism."""

import math

import numpy as np
import pytest
from scipy import integrate, special, stats

from skdpsparse.datasets import central_moment_bound, make_heavy_tailed

DISTRIBUTIONS = ["student_t", "pareto", "lognormal"]


def _quad_half_line(f):
    """int_0^inf f, split at 1 so the slowly decaying tail gets its own transform."""
    kw = dict(epsabs=0.0, epsrel=1e-13, limit=500)
    return integrate.quad(f, 0, 1, **kw)[0] + integrate.quad(f, 1, np.inf, **kw)[0]


@pytest.mark.parametrize("nu, k", [(2.5, 0.5), (2.5, 1.5), (3, 1), (3, 2), (3, 2.5), (5, 1),
                                   (5, 3), (5, 4), (10.5, 2), (10.5, 7)])
def test_student_t_moment_matches_integration(nu, k):
    exact = 2 * _quad_half_line(lambda x: x**k * stats.t.pdf(x, nu))
    np.testing.assert_allclose(central_moment_bound("student_t", nu, k), exact, rtol=1e-8)


@pytest.mark.parametrize("a, k", [(1.5, 0.5), (2.5, 1), (3, 2), (3, 2.5), (6, 4), (10, 3)])
def test_pareto_moment_matches_integration(a, k):
    # |Z| is Lomax(a): density a (1 + x) ** -(a + 1) on [0, inf).
    exact = _quad_half_line(lambda x: x**k * a * (1 + x) ** (-a - 1))
    np.testing.assert_allclose(central_moment_bound("pareto", a, k), exact, rtol=1e-8)


@pytest.mark.parametrize("sigma, k", [(0.5, 1), (0.5, 3), (1.0, 2), (1.5, 1.5)])
def test_lognormal_moment_matches_integration(sigma, k):
    exact = _quad_half_line(lambda x: x**k * stats.lognorm.pdf(x, sigma))
    np.testing.assert_allclose(central_moment_bound("lognormal", sigma, k), exact, rtol=1e-8)


def test_known_closed_forms():
    # Student-t variance nu / (nu - 2) and E|T_3| = 2 sqrt(3) / pi.
    np.testing.assert_allclose(central_moment_bound("student_t", 7.0, 2), 7 / 5, rtol=1e-14)
    np.testing.assert_allclose(central_moment_bound("student_t", 3.0, 1),
                               2 * np.sqrt(3) / np.pi, rtol=1e-14)
    # Lomax: E L = 1 / (a - 1), E L^2 = 2 / ((a - 1)(a - 2)).
    np.testing.assert_allclose(central_moment_bound("pareto", 4.0, 1), 1 / 3, rtol=1e-14)
    np.testing.assert_allclose(central_moment_bound("pareto", 4.0, 2), 1 / 3, rtol=1e-14)
    # Even moments against scipy's own moments.
    for nu in (5.0, 9.0):
        np.testing.assert_allclose(central_moment_bound("student_t", nu, 4),
                                   stats.t(nu).moment(4), rtol=1e-12)
    np.testing.assert_allclose(central_moment_bound("lognormal", 0.7, 2), math.exp(2 * 0.49),
                               rtol=1e-14)


@pytest.mark.parametrize("distribution", ["student_t", "pareto"])
def test_moment_is_infinite_from_the_tail_parameter_on(distribution):
    assert central_moment_bound(distribution, 3.0, 3.0) == math.inf
    assert central_moment_bound(distribution, 3.0, 4.5) == math.inf
    assert math.isfinite(central_moment_bound(distribution, 3.0, 2.999))


def test_lognormal_moment_overflows_to_inf():
    assert central_moment_bound("lognormal", 10.0, 10.0) == math.inf
    assert math.isfinite(central_moment_bound("lognormal", 10.0, 3.0))


@pytest.mark.parametrize("distribution, tail", [("student_t", 4.0), ("pareto", 3.5),
                                                ("lognormal", 0.8)])
@pytest.mark.parametrize("k", [0.5, 1.0, 2.0])
def test_moment_scales_as_scale_to_the_k(distribution, tail, k):
    np.testing.assert_allclose(central_moment_bound(distribution, tail, k, scale=2.5),
                               2.5**k * central_moment_bound(distribution, tail, k),
                               rtol=1e-13)


@pytest.mark.parametrize("distribution, tail, k", [("student_t", 10.0, 2), ("student_t", 10.0, 3),
                                                   ("student_t", 3.0, 1), ("pareto", 9.0, 2),
                                                   ("pareto", 9.0, 3), ("pareto", 3.0, 1),
                                                   ("lognormal", 0.5, 2), ("lognormal", 0.5, 1)])
def test_moment_matches_monte_carlo(distribution, tail, k):
    """Loose check on 10**6 draws; the chosen k keep the Monte Carlo variance finite."""
    X, mu = make_heavy_tailed(20_000, 50, distribution=distribution, tail_parameter=tail,
                              scale=1.3, random_state=11)
    empirical = np.mean(np.abs(X - mu) ** k)
    np.testing.assert_allclose(empirical, central_moment_bound(distribution, tail, k, 1.3),
                               rtol=0.03)


@pytest.mark.parametrize("distribution, tail", [("student_t", 3.0), ("pareto", 3.0),
                                                ("lognormal", 0.5), ("student_t", 2.5)])
def test_sample_mean_converges_to_loc(distribution, tail):
    """n ||mean - mu||^2 / (d sigma^2) has mean 1 and std about sqrt(2 / d) = 0.1."""
    n, d, scale = 5000, 200, 0.7
    X, mu = make_heavy_tailed(n, d, distribution=distribution, tail_parameter=tail,
                              scale=scale, random_state=3)
    variance = central_moment_bound(distribution, tail, 2, scale)
    err = X.mean(axis=0) - mu
    ratio = n * (err @ err) / (d * variance)
    assert 0.5 < ratio < 1.6, ratio


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_shape_dtype_and_symmetry(distribution):
    X, mu = make_heavy_tailed(4000, 25, distribution=distribution, random_state=0)
    assert X.shape == (4000, 25) and X.dtype == np.float64 and X.flags.c_contiguous
    assert mu.shape == (25,) and mu.dtype == np.float64
    np.testing.assert_allclose(np.linalg.norm(mu), 1.0, rtol=1e-14)
    assert np.all(np.isfinite(X))
    # Symmetric about mu: half of the deviations are negative (binomial, 6 sigma).
    frac = np.mean(X < mu)
    assert abs(frac - 0.5) < 6 * 0.5 / np.sqrt(X.size)
    # The median of every coordinate is mu (loose).
    np.testing.assert_allclose(np.median(X, axis=0), mu, atol=0.15)


def test_pareto_deviations_are_lomax():
    X, mu = make_heavy_tailed(20_000, 5, distribution="pareto", tail_parameter=2.5,
                              random_state=1)
    dev = np.abs(X - mu).ravel()
    assert stats.kstest(dev, stats.lomax(2.5).cdf).pvalue > 1e-4


def test_student_t_deviations_are_student_t():
    X, mu = make_heavy_tailed(20_000, 5, distribution="student_t", tail_parameter=1.5,
                              scale=2.0, random_state=1)
    dev = ((X - mu) / 2.0).ravel()
    assert stats.kstest(dev, stats.t(1.5).cdf).pvalue > 1e-4


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_scale_and_loc(distribution):
    X1, mu1 = make_heavy_tailed(300, 8, distribution=distribution, random_state=5)
    X2, mu2 = make_heavy_tailed(300, 8, distribution=distribution, scale=2.0, random_state=5)
    np.testing.assert_array_equal(mu1, mu2)
    np.testing.assert_allclose(X2 - mu2, 2.0 * (X1 - mu1), rtol=1e-12, atol=1e-12)
    loc = np.arange(8.0)
    X3, mu3 = make_heavy_tailed(300, 8, distribution=distribution, loc=loc, random_state=5)
    np.testing.assert_array_equal(mu3, loc)
    assert mu3 is not loc
    X4, mu4 = make_heavy_tailed(300, 8, distribution=distribution, loc=-2.0, random_state=5)
    np.testing.assert_array_equal(mu4, np.full(8, -2.0))


def test_deterministic_for_int_seed():
    X1, mu1 = make_heavy_tailed(100, 10, distribution="pareto", random_state=9)
    X2, mu2 = make_heavy_tailed(100, 10, distribution="pareto", random_state=9)
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(mu1, mu2)
    X3, mu3 = make_heavy_tailed(100, 10, distribution="pareto", random_state=10)
    assert not np.array_equal(X1, X3) and not np.array_equal(mu1, mu3)
    # The default location comes first from the seed: independent of n_samples.
    _, mu4 = make_heavy_tailed(7, 10, distribution="pareto", random_state=9)
    np.testing.assert_array_equal(mu1, mu4)
    Xa, _ = make_heavy_tailed(5, 3, random_state=None)
    Xb, _ = make_heavy_tailed(5, 3, random_state=None)
    assert not np.array_equal(Xa, Xb)


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        (dict(n_samples=0), ValueError, "n_samples"),
        (dict(n_features=1.5), TypeError, "n_features"),
        (dict(distribution="cauchy"), ValueError, "distribution"),
        (dict(tail_parameter=1.0), ValueError, "tail_parameter"),
        (dict(distribution="pareto", tail_parameter=0.5), ValueError, "tail_parameter"),
        (dict(distribution="lognormal", tail_parameter=0.0), ValueError, "tail_parameter"),
        (dict(tail_parameter=np.inf), ValueError, "tail_parameter"),
        (dict(scale=-1.0), ValueError, "scale"),
        (dict(loc=np.zeros(3)), ValueError, "loc"),
        (dict(loc=[0.0, np.nan, 0.0, 0.0]), ValueError, "loc"),
        (dict(loc="abc"), TypeError, "loc"),
    ],
)
def test_make_heavy_tailed_validation(kwargs, exc, name):
    args = dict(n_samples=5, n_features=4)
    args.update(kwargs)
    with pytest.raises(exc, match=name):
        make_heavy_tailed(**args)


@pytest.mark.parametrize(
    "args, exc, name",
    [
        (("t", 3.0, 1), ValueError, "distribution"),
        (("student_t", 0.0, 1), ValueError, "tail_parameter"),
        (("student_t", 3.0, 0), ValueError, "k"),
        (("student_t", 3.0, "2"), TypeError, "k"),
        (("pareto", 3.0, 1, 0.0), ValueError, "scale"),
    ],
)
def test_central_moment_bound_validation(args, exc, name):
    with pytest.raises(exc, match=name):
        central_moment_bound(*args)


def test_gammaln_form_is_stable_for_large_tail_parameter():
    # nu -> inf: Student-t tends to N(0, 1), whose E|Z|^k = 2^(k/2) Gamma((k+1)/2) / sqrt(pi).
    k = 3.0
    gaussian = 2 ** (k / 2) * special.gamma((k + 1) / 2) / np.sqrt(np.pi)
    np.testing.assert_allclose(central_moment_bound("student_t", 1e8, k), gaussian, rtol=1e-6)
