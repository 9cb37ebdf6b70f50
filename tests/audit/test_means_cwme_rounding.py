"""Issue 17, item 4: the clipping interval of the trimmed median of means in floating
point. No catalogue pair can show a wrongly rounded interval in a release (the grid
clamp hides every centre where the rounding matters; the argument is
``skdpsparse.audit.cases.means.CWME_ROUNDING_HIDDEN``), so the rounding is tested on the
statistic itself, with the outward rounding as the broken variant that must fail."""

import math
from fractions import Fraction

import numpy as np
import pytest

from skdpsparse.audit.cases.means import CWME_ROUNDING_HIDDEN
from skdpsparse.mechanisms import heavy_tailed as H
from skdpsparse.mechanisms.noise import plan_grid_noise

TOP = np.finfo(np.float64).max


def _outward_interval(c, tau):
    """The broken variant: c ∓ 3τ rounded outwards (the float at or below c − 3τ, the
    float at or above c + 3τ), exactly."""
    lo, hi = Fraction(c) - 3 * Fraction(tau), Fraction(c) + 3 * Fraction(tau)
    flo, fhi = float(lo), float(hi)  # nearest
    if Fraction(flo) > lo:
        flo = math.nextafter(flo, -math.inf)
    if Fraction(fhi) < hi:
        fhi = math.nextafter(fhi, math.inf)
    return flo, fhi


def _statistic_move(c, tau):
    """|stat(D) − stat(D')| of the library's statistic, one row at ∓the largest float,
    one group (the move is the interval's width)."""
    center = np.array([c])
    lo = H.trimmed_median_of_means(np.array([[-TOP]]), tau=tau, n_groups=1, center=center)[0]
    hi = H.trimmed_median_of_means(np.array([[TOP]]), tau=tau, n_groups=1, center=center)[0]
    return Fraction(hi) - Fraction(lo)


@pytest.mark.parametrize("c, tau", [(1e16, 0.4), (3.3e15, 0.3), (-7e17, 0.4), (2.0**60, 1.0),
                                    (1e300, 1e-3), (0.0, 0.4), (12.5, 0.1)])
def test_clipping_interval_is_within_the_sensitivity_in_floating_point(c, tau):
    """The reviewer's pair (c = 1e16, τ = 0.4) moved the statistic by 4.0 against the
    6τ = 2.4 the noise assumes; the library's interval is rounded inwards, the
    outward-rounded one (the broken variant) exceeds 6τ wherever c ± 3τ is inexact
    and ulp(c) > τ."""
    sensitivity = H.cwme_sensitivity(1, 1, tau, 1).linf  # fl(6τ/n_min), n_min = 1
    move = _statistic_move(c, tau)
    assert move <= 6 * Fraction(tau)
    # fl(6τ) may be one ulp below 6τ (τ = 0.3): the move is within what the noise
    # is calibrated for all the same.
    assert move <= Fraction(sensitivity)
    lo, hi = _outward_interval(c, tau)
    if math.ulp(c) > tau:
        assert Fraction(hi) - Fraction(lo) > 6 * Fraction(tau)


@pytest.mark.parametrize("epsilon", [1.0, 1e-3, 1e-6])
def test_the_reviewers_pair_is_clamped_in_every_release(epsilon):
    """Why no audit can show the rounding: at c = 1e16 the grid value c/γ is beyond
    2^60 at every ε (γ ≤ b·2^-29), so the releases on D and D' are the same clamped
    value plus noise, whatever the interval."""
    center = np.array([1e16])
    releases = []
    for row in (-TOP, TOP):
        out, _, info = H.private_cwme(np.array([[row]]), tau=0.4, n_groups=1,
                                      epsilon=epsilon, delta=0.0, center=center,
                                      rng=np.random.default_rng(0))
        releases.append(out[0])
        plan = plan_grid_noise("laplace", info["scale"], info["sensitivity"].l1, 1)
        assert abs(center[0]) / plan.spacing > 2.0**60
        assert plan.spacing <= info["scale"] * 2.0**-29
    assert releases[0] == releases[1]  # same key material here; both clamped
    assert "2^-20" in CWME_ROUNDING_HIDDEN
