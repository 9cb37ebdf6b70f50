"""Last-iterate accounting of cyclic DP-SGD (seed 003): worked example, limits, an exact
linear-Gaussian reference, composition, calibration and validation."""

import doctest
import math

import numpy as np
import pytest

from skdpsparse.accounting import DEFAULT_ORDERS, RdpCurve, gaussian_rdp
from skdpsparse.accounting import last_iterate as li
from skdpsparse.accounting.last_iterate import (
    calibrate_last_iterate_noise,
    cyclic_schedule,
    displacement_noise_std,
    last_iterate_epsilon,
    last_iterate_rdp,
    last_iterate_rdp_bounds,
)

DELTA = 1e-5
ORDERS_2_64 = np.arange(2, 65, dtype=float)
# kong_ribero.md §6: n = 1000, b = 10, C = 1, λ = 0.1, E = 5, m = 0.1, M = 1, and
# displacement noise σ = 1, i.e. noise multiplier z = σb/(λC) = 100.
EXAMPLE = dict(n_samples=1000, batch_size=10, epochs=5, noise_multiplier=100.0,
               learning_rate=0.1, clip_norm=1.0, weak_convexity=0.1, smoothness=1.0,
               orders=ORDERS_2_64)


def rho(curve):
    """ε(α)/α, checking that the curve is linear in α (a Gaussian-type bound)."""
    r = curve.epsilons / curve.orders
    np.testing.assert_allclose(r, r[0], rtol=1e-13)
    return r[0]


def test_worked_example_of_the_notes():
    bounds = last_iterate_rdp_bounds(clipping_can_bind=False, domain_diameter=1.0, **EXAMPLE)
    assert list(bounds) == ["composition", "thm4.5-safe", "thm4.5-eq12", "thm4.4-bounded"]
    assert displacement_noise_std(100.0, 0.1, 1.0, 10) == pytest.approx(1.0, rel=1e-15)
    # the table of §6 (ρ = ε(α)/α)
    assert rho(bounds["thm4.5-eq12"]) == pytest.approx(2.18752526e-4, rel=1e-6)
    assert rho(bounds["thm4.5-safe"]) == pytest.approx(3.38843e-4, rel=1e-6)
    assert rho(bounds["composition"]) == pytest.approx(1.0e-3, rel=1e-12)
    assert rho(bounds["thm4.4-bounded"]) == pytest.approx(0.5308627, rel=1e-6)
    eq12 = dict(zip(bounds["thm4.5-eq12"].orders, bounds["thm4.5-eq12"].epsilons))
    for alpha, value in [(2, 4.375051e-4), (4, 8.750101e-4), (8, 1.750020e-3),
                         (16, 3.500040e-3), (32, 7.000081e-3), (64, 1.400016e-2)]:
        assert eq12[alpha] == pytest.approx(value, rel=1e-6)
    safe = bounds["thm4.5-safe"].epsilons
    assert (safe[0], safe[-1]) == pytest.approx((6.776860e-4, 2.168595e-2), rel=1e-6)
    # the intermediate quantities: L_λ, S_L(100) and the bracket of eq. (21)
    sched = cyclic_schedule(1000, 10, 5)
    assert sched == (500, 5, 100)
    log_l2 = li._log_lip_sq_eq12(0.1, 0.1, 1.0)
    assert math.exp(log_l2 / 2) == pytest.approx(1.0104004607, rel=1e-10)
    assert 1 / li._inv_s(log_l2, 100) == pytest.approx(42.6609204561, rel=1e-10)
    assert li._thm45_bracket(log_l2, sched) == pytest.approx(1.0937626277, rel=1e-10)
    assert 1 / li._inv_s(li._log_lip_sq_safe(0.1, 0.1, 1.0), 100) == pytest.approx(
        5.7619047316, rel=1e-10)
    # (ε, δ = 1e-5) on α ∈ {2..64} with the improved conversion (5 digits in the notes)
    for name, eps in [("thm4.5-eq12", 0.11498), ("composition", 0.16498),
                      ("thm4.5-safe", 0.12267)]:
        assert bounds[name].to_epsilon(DELTA)[0] == pytest.approx(eps, abs=5e-6)
    assert last_iterate_epsilon(DELTA, clipping_can_bind=False, **EXAMPLE)[:2] == (
        pytest.approx(0.11498, abs=5e-6), "thm4.5-eq12")
    # calibration for (1, 1e-5): σ = λzC/b of the notes' last table
    params = {k: v for k, v in EXAMPLE.items() if k != "noise_multiplier"}
    for kwargs, sigma in [(dict(clipping_can_bind=False), 0.084616),
                          (dict(clipping_can_bind=True), 0.105311),
                          (dict(weak_convexity=None, smoothness=None), 0.180915)]:
        z = calibrate_last_iterate_noise(1.0, DELTA, **{**params, **kwargs})
        assert displacement_noise_std(z, 0.1, 1.0, 10) == pytest.approx(sigma, abs=5e-7)


def test_convex_limit_as_weak_convexity_vanishes():
    base = dict(EXAMPLE, clipping_can_bind=False)
    # eq. (22): ε(α) = (2α/z²)(1 + (E − 1)b/n)
    convex = rho(last_iterate_rdp_bounds(**dict(base, weak_convexity=0.0))["thm4.5-eq12"])
    assert convex == pytest.approx(2 / 100.0**2 * (1 + 4 * 10 / 1000), rel=1e-14)
    gaps = []
    for m in [1e-1, 1e-2, 1e-4, 1e-6, 1e-9, 1e-12]:
        gaps.append(rho(last_iterate_rdp_bounds(**dict(base, weak_convexity=m))["thm4.5-eq12"])
                    / convex - 1)
    assert all(g > 0 for g in gaps[:-1]) and np.all(np.diff(gaps) < 0)
    assert gaps[-1] < 1e-9
    # with clipping the safe constant 1 + λ max(m, M) tends to the convex bound as m, M → 0
    for m in [1e-6, 1e-10]:
        curve = last_iterate_rdp_bounds(**dict(EXAMPLE, weak_convexity=m, smoothness=m))
        assert rho(curve["thm4.5-safe"]) == pytest.approx(convex, rel=10 * m)


def exact_linear_gaussian_rho(n, b, steps, z, lr, clip, a):
    """max over records of D_α/α for x_t = a x_{t−1} − (λ/b) Σ_{i∈B_t} c_i + N_t.

    f_i(x) = (q/2)x² + c_i x (a = 1 − λq) or −(m/2)x² + c_i x (a = 1 + λm), h = 0, no
    clipping, |c_i − c'_i| = 2C: x_T is Gaussian with the same variance
    v = σ² Σ_{u<T} a^{2u} under both datasets and means apart by
    Δ = (2λC/b) Σ_{uses τ} a^{T−1−τ}, so D_α = αΔ²/(2v). σ = λzC/b.
    """
    sigma = lr * z * clip / b
    v = sigma**2 * np.sum(a ** (2.0 * np.arange(steps)))
    worst = 0.0
    for p in range(n):
        batches = [t for t in range(steps) if p in {(t * b + j) % n for j in range(b)}]
        delta = 2 * lr * clip / b * np.sum(a ** (steps - 1.0 - np.array(batches)))
        worst = max(worst, delta**2 / (2 * v))
    return worst


@pytest.mark.parametrize("n, b, epochs", [(12, 4, 3), (10, 3, 4), (7, 7, 2), (9, 2, 5),
                                         (40, 1, 2)])
def test_bounds_dominate_exact_linear_gaussian_divergence(n, b, epochs):
    z, clip, ratios = 1.3, 0.7, []
    for lr, curvature in [(0.9, 1.0), (0.5, 0.3), (0.1, 1e-3), (0.5, -0.2), (1.0, -1.0),
                          (0.2, -0.05), (0.3, 0.0)]:
        if curvature >= 0:  # strongly convex quadratic: m = 0, M = q
            m, big_m, a = 0.0, curvature, 1 - lr * curvature
        else:  # concave: weak convexity m = −q, M = 0
            m, big_m, a = -curvature, 0.0, 1 - lr * curvature
        bounds = last_iterate_rdp_bounds(
            n_samples=n, batch_size=b, epochs=epochs, noise_multiplier=z, learning_rate=lr,
            clip_norm=clip, weak_convexity=m, smoothness=big_m, clipping_can_bind=False)
        assert "thm4.5-eq12" in bounds  # λ ≤ 1/(M + m) in every case above
        steps = cyclic_schedule(n, b, epochs).n_steps
        exact = exact_linear_gaussian_rho(n, b, steps, z, lr, clip, a)
        for name, curve in bounds.items():
            assert rho(curve) >= exact * (1 - 1e-12), (name, lr, curvature)
        ratios.append(exact / rho(bounds["thm4.5-eq12"]))
    if (n, b) == (40, 1):
        # strong contraction (a = 0.1) makes the worst record nearly one Gaussian step,
        # the leading 1 of eq. (21); (E − 1)/ℓ = 1/40 adds 2.5 %: exact/bound = 0.99/1.025.
        assert max(ratios) > 0.96


def test_composition_equals_independent_composition_of_gaussian_steps():
    z, orders = 1.7, np.array([1.5, 2.0, 8.0, 64.0])
    for n, b, epochs in [(20, 5, 3), (23, 5, 4), (10, 10, 2), (10, 6, 3)]:
        steps = cyclic_schedule(n, b, epochs).n_steps
        step_curve = gaussian_rdp(z / 2.0, orders)  # replace-one sensitivity 2C, std zC
        zero = RdpCurve(orders, np.zeros_like(orders))
        worst = max((sum(step_curve if p in {(t * b + j) % n for j in range(b)} else zero
                         for t in range(steps)) for p in range(n)),
                    key=lambda c: c.epsilons[0])
        got = last_iterate_rdp_bounds(n_samples=n, batch_size=b, epochs=epochs,
                                      noise_multiplier=z, learning_rate=0.1, clip_norm=1.0,
                                      orders=orders)
        assert list(got) == ["composition"]
        np.testing.assert_allclose(got["composition"].epsilons, worst.epsilons, rtol=1e-14)
    # b | n: E steps see each record, each costing 2α/z²
    got = last_iterate_rdp_bounds(n_samples=20, batch_size=5, epochs=3, noise_multiplier=z,
                                  learning_rate=0.1, clip_norm=1.0, orders=orders)
    np.testing.assert_allclose(got["composition"].epsilons, 3 * 2 * orders / z**2, rtol=1e-14)


def test_bound_selection_and_minimum():
    safe_only = last_iterate_rdp_bounds(**EXAMPLE)  # clipping may bind: no eq. (12)
    assert list(safe_only) == ["composition", "thm4.5-safe"]
    big_step = last_iterate_rdp_bounds(**dict(EXAMPLE, learning_rate=1.0),
                                       clipping_can_bind=False)  # λ > 1/(M + m)
    assert "thm4.5-eq12" not in big_step
    # S_L ≥ 1, so Thm 4.5 never exceeds composition; with ⌊n/b⌋ = 1 they tie and the
    # tie goes to composition (fewer assumptions)
    assert np.all(safe_only["thm4.5-safe"].epsilons <= safe_only["composition"].epsilons)
    tie = last_iterate_epsilon(DELTA, **dict(EXAMPLE, batch_size=600))
    assert tie.bound == "composition"
    # a small domain makes Thm 4.4 win; the envelope is the pointwise minimum
    res = last_iterate_epsilon(DELTA, **dict(EXAMPLE, domain_diameter=1e-4))
    assert res.bound == "thm4.4-bounded"
    env = last_iterate_rdp(**dict(EXAMPLE, domain_diameter=1e-4))
    assert env.to_epsilon(DELTA) == pytest.approx((res.epsilon, res.order))
    # weak_convexity=None means m = M
    assert last_iterate_rdp(**dict(EXAMPLE, weak_convexity=None)) == last_iterate_rdp(
        **dict(EXAMPLE, weak_convexity=1.0))
    # n_steps overrides the ⌈E n/b⌉ count
    assert last_iterate_rdp(**dict(EXAMPLE, epochs=None, n_steps=500)) == last_iterate_rdp(
        **EXAMPLE)
    assert cyclic_schedule(10_000, 256, 1) == (40, 2, 39)


@pytest.mark.parametrize("extra", [
    dict(weak_convexity=None, smoothness=None),
    dict(),
    dict(clipping_can_bind=False),
    dict(domain_diameter=1e-4),
    dict(n_samples=10_000, batch_size=256, epochs=20, learning_rate=0.05),
])
@pytest.mark.parametrize("target", [0.3, 1.0, 8.0])
def test_calibration_round_trip(extra, target):
    params = {k: v for k, v in {**EXAMPLE, **extra}.items() if k != "noise_multiplier"}
    params["orders"] = DEFAULT_ORDERS
    z = calibrate_last_iterate_noise(target, DELTA, **params)
    eps = last_iterate_epsilon(DELTA, noise_multiplier=z, **params).epsilon
    assert eps <= target and eps == pytest.approx(target, rel=1e-6)
    assert last_iterate_epsilon(DELTA, noise_multiplier=z * (1 - 1e-6), **params).epsilon > target


BAD = [
    ("n_samples", dict(n_samples=0)),
    ("batch_size", dict(batch_size=0)),
    ("batch_size", dict(batch_size=1001)),
    ("epochs", dict(epochs=0)),
    ("n_steps", dict(epochs=None, n_steps=-3)),
    ("epochs and n_steps", dict(n_steps=10)),
    ("noise_multiplier", dict(noise_multiplier=0.0)),
    ("noise_multiplier", dict(noise_multiplier=math.inf)),
    ("learning_rate", dict(learning_rate=-0.1)),
    ("clip_norm", dict(clip_norm=0.0)),
    ("weak_convexity", dict(weak_convexity=-0.1)),
    ("smoothness", dict(smoothness=-1.0)),
    ("smoothness", dict(smoothness=None)),  # weak_convexity alone gives no bound
    ("domain_diameter", dict(domain_diameter=-1.0)),
    ("orders", dict(orders=[0.5, 2.0])),
]


@pytest.mark.parametrize("name, bad", BAD, ids=[f"{n}-{i}" for i, (n, _) in enumerate(BAD)])
def test_invalid_parameters_raise_value_error_naming_them(name, bad):
    with pytest.raises(ValueError, match=name):
        last_iterate_rdp_bounds(**{**EXAMPLE, **bad})


def test_invalid_targets_and_types():
    params = {k: v for k, v in EXAMPLE.items() if k != "noise_multiplier"}
    for delta in [0.0, 1.0]:
        with pytest.raises(ValueError, match="delta"):
            last_iterate_epsilon(delta, **EXAMPLE)
    with pytest.raises(ValueError, match="epsilon"):
        calibrate_last_iterate_noise(0.0, DELTA, **params)
    with pytest.raises(ValueError, match="learning_rate"):  # checked before the root find
        calibrate_last_iterate_noise(1.0, DELTA, **dict(params, learning_rate=0.0))
    with pytest.raises(TypeError, match="noise_multiplier"):
        calibrate_last_iterate_noise(1.0, DELTA, **EXAMPLE)
    with pytest.raises(TypeError, match="epochs"):
        last_iterate_rdp_bounds(**dict(EXAMPLE, epochs=2.5))
    with pytest.raises(TypeError, match="clipping_can_bind"):
        last_iterate_rdp_bounds(**dict(EXAMPLE, clipping_can_bind="no"))


def test_doctests():
    result = doctest.testmod(li)
    assert result.failed == 0 and result.attempted > 0
