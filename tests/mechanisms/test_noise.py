"""add_noise_inplace: the one place noise is added to a statistic, on a grid."""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from skdpsparse.mechanisms.noise import add_noise_inplace, grid_noise, plan_grid_noise
from skdpsparse.utils import RandomSource


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
@pytest.mark.parametrize("scale, sensitivity, m", [(0.37, 0.01, 1), (2.5e-7, 1e-8, 2**20),
                                                    (1e6, 3.0, 17)])
def test_grid_plan_keeps_the_continuous_privacy(kind, scale, sensitivity, m):
    # (Δ/γ + spread)/N ≤ Δ/b, in exact rationals: the grid mechanism is at least as
    # private as the calibration the caller made for the continuous parameters.
    plan = plan_grid_noise(kind, scale, sensitivity, m)
    gamma = Fraction(2) ** plan.exponent
    spread = m if kind == "laplace" else math.isqrt(m - 1) + 1
    assert (Fraction(sensitivity) / gamma + spread) / plan.grid_scale <= \
        Fraction(sensitivity) / Fraction(scale)
    assert 2**29 <= scale / plan.spacing
    assert plan.effective_scale / scale - 1 < 2e-6  # the price of the grid is tiny


def test_release_lies_on_the_grid_whatever_the_statistic():
    # The support of the release is γℤ for every input: no low bit of the statistic
    # survives (the floating-point attack's foothold).
    src = RandomSource(bytes(range(32)))
    plan = plan_grid_noise("laplace", 0.5, 0.1, 3)
    for stat in ([0.1, 0.2, 0.3], [0.1 + 2**-40, 0.2, 0.3]):
        z = add_noise_inplace(np.array(stat), src, "laplace", 0.5, sensitivity=0.1)
        k = np.ldexp(z, -plan.exponent)
        np.testing.assert_array_equal(k, np.rint(k))


@pytest.mark.parametrize("kind, law", [("gaussian", stats.norm(scale=3.0)),
                                       ("laplace", stats.laplace(scale=3.0))])
def test_noise_has_the_stated_law(kind, law):
    z = np.zeros(20000)
    add_noise_inplace(z, RandomSource.from_entropy(), kind, 3.0, sensitivity=1.0)
    assert stats.kstest(z, law.cdf).pvalue > 1e-3
    g, spacing = grid_noise((4000, 5), RandomSource.from_entropy(), kind, 3.0,
                            sensitivity=1.0)
    np.testing.assert_array_equal(g, np.rint(g))  # integers, in grid units
    assert stats.kstest(spacing * g.ravel(), law.cdf).pvalue > 1e-3


@pytest.mark.parametrize("kind, law", [("gaussian", stats.norm(scale=3.0)),
                                       ("laplace", stats.laplace(scale=3.0))])
def test_non_contiguous_arrays_receive_the_noise(kind, law):
    # The noise must be written back into a strided view, or the release is noiseless.
    a = np.zeros((400, 20))
    view = a[:, ::2]
    add_noise_inplace(view, np.random.default_rng(0), kind, 3.0, sensitivity=1.0)
    assert np.all(a[:, 1::2] == 0.0)  # untouched columns stay untouched
    assert stats.kstest(view.ravel(), law.cdf).pvalue > 1e-3


def test_same_source_state_same_release():
    a = add_noise_inplace(np.zeros(50), RandomSource(bytes(32)), "gaussian", 1.0,
                          sensitivity=1.0)
    b = add_noise_inplace(np.zeros(50), RandomSource(bytes(32)), "gaussian", 1.0,
                          sensitivity=1.0)
    np.testing.assert_array_equal(a, b)


def test_huge_statistics_are_clipped_not_rejected():
    z = add_noise_inplace(np.array([1e300, -1e300, 0.0]), RandomSource(bytes(32)),
                          "laplace", 1.0, sensitivity=1.0)
    assert np.all(np.isfinite(z)) and z[0] > 0 > z[1]


def test_bad_arguments():
    src = RandomSource(bytes(32))
    with pytest.raises(TypeError, match="float64"):
        add_noise_inplace(np.zeros(3, dtype=np.float32), src, "gaussian", 1.0, sensitivity=1)
    with pytest.raises(ValueError, match="kind"):
        add_noise_inplace(np.zeros(3), src, "cauchy", 1.0, sensitivity=1.0)
    with pytest.raises(ValueError, match="sigma"):
        add_noise_inplace(np.zeros(3), src, "gaussian", -1.0, sensitivity=1.0)
    with pytest.raises(ValueError, match="sensitivity"):
        add_noise_inplace(np.zeros(3), src, "gaussian", 1.0, sensitivity=0.0)
    with pytest.raises(ValueError, match="NaN"):
        add_noise_inplace(np.array([np.nan]), src, "gaussian", 1.0, sensitivity=1.0)
    with pytest.raises(TypeError, match="sensitivity"):
        add_noise_inplace(np.zeros(3), src, "gaussian", 1.0)  # no silent default


def test_plan_charges_a_computed_sensitivity_above_the_claimed_one():
    # The statistic as computed can move by Δ_true > Δ (floating-point error): the
    # plan keeps the privacy of b for Δ, (Δ_true/γ + spread)/N ≤ Δ/b, exactly.
    plan = plan_grid_noise("gaussian", 0.37, 0.01, 64, 0.01 * (1 + 1e-6))
    gamma = Fraction(2) ** plan.exponent
    assert (Fraction(0.01 * (1 + 1e-6)) / gamma + 8) / plan.grid_scale <= \
        Fraction(0.01) / Fraction(0.37)
    with pytest.raises(ValueError, match="true_sensitivity"):
        plan_grid_noise("gaussian", 0.37, 0.01, 64, 0.005)
