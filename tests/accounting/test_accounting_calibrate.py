"""Noise calibration: closed forms, the analytic Gaussian, and the RDP root find."""

import doctest
import math

import numpy as np
import pytest
from scipy.stats import norm

import skdpsparse.accounting as acc
from skdpsparse.accounting import (
    RdpCurve,
    analytic_gaussian_sigma,
    calibrate_noise_multiplier,
    gaussian_delta,
    gaussian_rdp,
    gaussian_sigma_classic,
    laplace_scale,
    poisson_subsampled_gaussian_rdp,
    subsampled_without_replacement_gaussian_rdp,
    zcdp_gaussian_sigma,
)


def test_closed_forms():
    assert laplace_scale(2.0, 0.5) == 4.0
    assert zcdp_gaussian_sigma(3.0, 0.5) == 3.0
    assert gaussian_sigma_classic(2.0, 0.5, 1e-5) == pytest.approx(
        2.0 * math.sqrt(2 * math.log(1.25e5)) / 0.5, rel=1e-15)
    with pytest.raises(ValueError, match="epsilon.*analytic_gaussian_sigma"):
        gaussian_sigma_classic(1.0, 1.0, 1e-5)
    for f, args, name in [(laplace_scale, (0.0, 1.0), "sensitivity"),
                          (laplace_scale, (1.0, -1.0), "epsilon"),
                          (zcdp_gaussian_sigma, (1.0, 0.0), "rho"),
                          (gaussian_sigma_classic, (1.0, 0.5, 0.0), "delta"),
                          (analytic_gaussian_sigma, (1.0, 0.5, 1.0), "delta")]:
        with pytest.raises(ValueError, match=name):
            f(*args)


def _delta_mp(sigma, sens, eps):
    """The defining equation of Balle & Wang 2018 (Thm 8) at 50 digits."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 50
    s, d, e = mp.mpf(sigma), mp.mpf(sens), mp.mpf(eps)
    return float(mp.ncdf(d / (2 * s) - e * s / d) - mp.exp(e) * mp.ncdf(-d / (2 * s) - e * s / d))


@pytest.mark.parametrize("eps", [0.01, 0.3, 0.9, 1.0, 4.0, 30.0])
@pytest.mark.parametrize("delta", [1e-100, 1e-12, 1e-6, 0.05])
@pytest.mark.parametrize("sens", [1.0, 0.01])
def test_analytic_gaussian(eps, delta, sens):
    sigma = analytic_gaussian_sigma(sens, eps, delta)
    exact = _delta_mp(sigma, sens, eps)
    assert exact == pytest.approx(delta, rel=1e-9)  # the defining equation
    assert exact <= delta  # safe side, by the 50-digit reference
    assert gaussian_delta(sigma, sens, eps) <= delta
    assert gaussian_delta(sigma * (1 - 1e-9), sens, eps) > delta  # and the smallest
    if eps < 1:
        assert sigma < gaussian_sigma_classic(sens, eps, delta)


def test_gaussian_delta_against_references():
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_mechanism")
    # (1, 0.5) puts the privacy-loss mean exactly at ε (a = 0 in _log_gaussian_delta).
    for sigma, eps in [(0.5, 0.1), (1.0, 1.0), (1.0, 0.5), (3.0, 0.0), (10.0, 5.0), (0.2, 40.0)]:
        ref = pld.GaussianPrivacyLoss(sigma, sensitivity=1.0).get_delta_for_epsilon(eps)
        ours = gaussian_delta(sigma, 1.0, eps)
        assert ours == pytest.approx(ref, rel=1e-9)
        a, b = 1 / (2 * sigma) - eps * sigma, -1 / (2 * sigma) - eps * sigma
        assert ours == pytest.approx(norm.cdf(a) - math.exp(eps) * norm.cdf(b), rel=1e-7)
    # Decreasing in σ (until it underflows to 0) and in ε.
    sig = np.geomspace(0.1, 100, 50)
    d = np.array([gaussian_delta(s, 1.0, 1.0) for s in sig])
    assert np.all(np.diff(d[d > 0]) < 0) and np.all(np.diff(d) <= 0)
    assert gaussian_delta(1.0, 1.0, 2.0) < gaussian_delta(1.0, 1.0, 1.0)


CURVES = {
    "gaussian_x100": lambda s: 100 * gaussian_rdp(s),
    "poisson_q0.01_x1000": lambda s: 1000 * poisson_subsampled_gaussian_rdp(0.01, s),
    "poisson_q0.1_x50": lambda s: 50 * poisson_subsampled_gaussian_rdp(0.1, s),
    "wor_m32_n10000_x300": lambda s: 300 * subsampled_without_replacement_gaussian_rdp(
        32, 10_000, s),
}


@pytest.mark.parametrize("name", sorted(CURVES))
@pytest.mark.parametrize("eps, delta", [(1.0, 1e-5), (8.0, 1e-6)])
def test_calibrate_noise_multiplier_round_trip(name, eps, delta):
    curve_of_sigma = CURVES[name]
    sigma = calibrate_noise_multiplier(curve_of_sigma, eps, delta)
    assert curve_of_sigma(sigma).to_epsilon(delta)[0] <= eps
    assert curve_of_sigma(sigma * (1 - 1e-4)).to_epsilon(delta)[0] > eps


def test_calibrate_matches_dp_accounting():
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.rdp import RdpAccountant

    q, steps, eps, delta = 0.01, 1000, 1.0, 1e-5
    ours = calibrate_noise_multiplier(
        lambda s: steps * poisson_subsampled_gaussian_rdp(q, s), eps, delta, rtol=1e-8)
    theirs = dpa.calibrate_dp_mechanism(
        RdpAccountant,
        lambda s: dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(s)),
                                          steps),
        eps, delta, dpa.LowerEndpointAndGuess(0.1, 1.0), tol=1e-8)
    assert ours == pytest.approx(theirs, rel=1e-6)


def test_calibrate_errors():
    orders = np.array([2.0, 3.0])
    with pytest.raises(ValueError, match="no noise multiplier"):
        calibrate_noise_multiplier(lambda s: RdpCurve(orders, [np.inf, np.inf]), 1.0, 1e-5)
    with pytest.raises(ValueError, match="hardly depends"):
        calibrate_noise_multiplier(lambda s: poisson_subsampled_gaussian_rdp(0.0, s), 1.0, 1e-5)
    with pytest.raises(TypeError, match="RdpCurve"):
        calibrate_noise_multiplier(lambda s: 1.0, 1.0, 1e-5)
    with pytest.raises(ValueError, match="delta"):
        calibrate_noise_multiplier(gaussian_rdp, 1.0, 0.0)
    with pytest.raises(ValueError, match="rtol"):
        calibrate_noise_multiplier(gaussian_rdp, 1.0, 1e-5, rtol=0.0)


def test_docstring_examples():
    for module in (acc.budget, acc.rdp, acc.calibrate):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0


def test_gaussian_sigma_dispatches_on_calibration():
    from skdpsparse.accounting import (
        analytic_gaussian_sigma, gaussian_sigma, gaussian_sigma_classic,
    )
    assert gaussian_sigma(0.3, 0.5, 1e-6) == analytic_gaussian_sigma(0.3, 0.5, 1e-6)
    assert gaussian_sigma(0.3, 0.5, 1e-6, "classic") == gaussian_sigma_classic(0.3, 0.5, 1e-6)
    with pytest.raises(ValueError, match="calibration"):
        gaussian_sigma(0.3, 0.5, 1e-6, "exact")
