"""DP-SGD's accounting and noise: against references, not against itself."""

import math

import numpy as np
import pytest
from scipy.special import comb

from skdpsparse.accounting import (
    DEFAULT_ORDERS,
    ApproxDP,
    compose_events,
    event_of,
    subsampled_without_replacement_discrete_gaussian_rdp,
    subsampled_without_replacement_gaussian_rdp,
)
from skdpsparse.accounting.rdp import rdp_to_epsilon
from skdpsparse.mechanisms.dp_sgd import (
    batch_sum_sensitivity,
    calibrate_dp_sgd_noise,
    dp_sgd,
    dp_sgd_rdp,
    gradient_norm_bound,
    plan_dp_sgd,
)
from skdpsparse.mechanisms.noise import plan_grid_noise


def _theorem9(m, n, z, alpha):
    """Wang, Balle and Kasiviswanathan 2019, Theorem 9, for the Gaussian curve
    ε(j) = j/(2z²), written out term by term in exact-enough floats."""
    g = m / n
    eps = lambda j: j / (2 * z * z)  # noqa: E731
    total = 1 + g * g * comb(alpha, 2, exact=True) * min(
        4 * (math.exp(eps(2)) - 1), 2 * math.exp(eps(2)))
    for j in range(3, alpha + 1):
        total += g**j * comb(alpha, j, exact=True) * 2 * math.exp((j - 1) * eps(j))
    return math.log(total) / (alpha - 1)


@pytest.mark.parametrize("m,n,z", [(10, 1000, 1.0), (100, 1000, 3.0), (1, 50, 0.7)])
def test_rdp_is_the_ternary_bound_and_below_theorem_9(m, n, z):
    """One step is the ternary-moment bound (checked against exact divergences in
    tests/accounting/test_wor_discrete_gaussian.py), never above Theorem 9 written out
    term by term, and strictly below it."""
    orders = [2.0, 3.0, 4.0, 5.0, 8.0]
    curve = dp_sgd_rdp(m, n, z, 1, orders)
    want = subsampled_without_replacement_discrete_gaussian_rdp(m, n, z, orders)
    assert np.array_equal(curve.epsilons, want.epsilons)
    for a, got in zip(orders, curve.epsilons):
        theorem9 = min(_theorem9(m, n, z, int(a)), a / (2 * z * z))
        assert got <= theorem9 * (1 + 1e-12)
    assert curve.epsilons[0] < min(_theorem9(m, n, z, 2), 1 / (z * z))


def test_calibrated_noise_is_smaller_than_with_theorem_9():
    """At the derivation page's example (n = 12 456, b = 2000, T = 125, ε = 1,
    δ = 1e-6) Theorem 9 alone needs z ≈ 51; the ternary bound about 8.9."""
    z = calibrate_dp_sgd_noise(1.0, 1e-6, 2000, 12456, 125)
    assert 8.5 < z < 9.5
    curve = 125 * subsampled_without_replacement_gaussian_rdp(2000, 12456, z,
                                                              moments_bound=False)
    assert rdp_to_epsilon(curve.orders, curve.epsilons, 1e-6)[0] > 4.0


def test_rdp_composes_linearly_in_steps():
    one = dp_sgd_rdp(50, 2000, 1.5, 1)
    assert np.allclose(dp_sgd_rdp(50, 2000, 1.5, 37).epsilons, 37 * one.epsilons)


def test_full_batch_is_the_gaussian():
    curve = dp_sgd_rdp(100, 100, 2.0, 3, [2.0, 10.0])
    assert np.allclose(curve.epsilons, 3 * np.array([2.0, 10.0]) / 8.0)


def test_sampling_bound_is_above_the_continuous_poisson_analogue():
    """Sanity bound: replace-one sampling without replacement at z = σ/(2C) is never
    below dp_accounting's add/remove Poisson-sampled Gaussian at σ/C = 2z, q = b/n
    (a replacement is a removal and an addition)."""
    dp_accounting = pytest.importorskip("dp_accounting")
    b, n, z, T, delta = 64, 10_000, 1.2, 300, 1e-6
    acc = dp_accounting.rdp.RdpAccountant(orders=list(range(2, 129)))
    acc.compose(dp_accounting.PoissonSampledDpEvent(
        b / n, dp_accounting.GaussianDpEvent(2 * z)), T)
    poisson = acc.get_epsilon(delta)
    curve = dp_sgd_rdp(b, n, z, T)
    ours = rdp_to_epsilon(curve.orders, curve.epsilons, delta)[0]
    assert ours >= poisson


def test_calibration_meets_the_target_and_is_tight():
    b, n, T, eps, delta = 128, 20_000, 400, 1.0, 1e-6
    z = calibrate_dp_sgd_noise(eps, delta, b, n, T)
    curve = dp_sgd_rdp(b, n, z, T)
    assert rdp_to_epsilon(curve.orders, curve.epsilons, delta)[0] <= eps
    smaller = dp_sgd_rdp(b, n, z * (1 - 5e-4), T)
    assert rdp_to_epsilon(smaller.orders, smaller.epsilons, delta)[0] > eps


def test_gradient_bounds():
    assert gradient_norm_bound("logistic", 2.0) == 2.0
    assert gradient_norm_bound("huber", 2.0) == 2.0
    assert gradient_norm_bound("softmax", 2.0) == pytest.approx(2 * math.sqrt(2))
    with pytest.raises(ValueError, match="loss"):
        gradient_norm_bound("hinge", 1.0)


def test_softmax_gradient_norm_bound_is_attained_and_never_exceeded():
    """‖p − e_y‖ ≤ √2, approached when all mass is on a wrong class."""
    rng = np.random.default_rng(0)
    logits = rng.normal(scale=20, size=(5000, 4))
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = rng.integers(4, size=5000)
    p[np.arange(5000), y] -= 1
    norms = np.linalg.norm(p, axis=1)
    assert norms.max() <= math.sqrt(2) and norms.max() > math.sqrt(2) - 1e-3


def test_sensitivity_charges_the_float_sum():
    sens, true = batch_sum_sensitivity(1.0, 1000)
    assert sens == 2.0 and 2.0 < true < 2.0 * (1 + 1e-9)
    # The grid noise keeps the privacy of σ for Δ = 2C: (Δ_true/γ + √m)/N ≤ Δ/σ.
    grid = plan_grid_noise("gaussian", 7.0, sens, 300, true)
    assert (true / grid.spacing + math.isqrt(299) + 1) / grid.grid_scale <= sens / 7.0


def test_plan_reports_the_budget_and_refuses_bad_input():
    plan = plan_dp_sgd(5000, 10, loss="logistic", batch_size=100, epochs=2, epsilon=1.0,
                       delta=1e-6)
    assert isinstance(plan.budget, ApproxDP) and plan.budget.epsilon <= 1.0
    assert plan.n_steps == 100 and plan.sensitivity == 2 * plan.clip_norm
    assert plan.clip_norm == pytest.approx(math.sqrt(2.0))
    assert plan.noise_std == pytest.approx(plan.noise_multiplier * plan.sensitivity)
    # The ledger must not compose this budget more tightly than it is proven.
    event = event_of(plan.budget)
    assert compose_events([event], 1e-6).epsilon >= plan.budget.epsilon * (1 - 1e-9)
    with pytest.raises(ValueError, match="loss"):
        plan_dp_sgd(10, 2, loss="squared", batch_size=1, epochs=1, epsilon=1.0, delta=1e-6)
    with pytest.raises(ValueError, match="epsilon"):
        plan_dp_sgd(10, 2, loss="logistic", batch_size=1, epochs=1, delta=1e-6)


def test_sampled_plan_charges_a_sampled_discrete_gaussian_event():
    """The ledger composes DP-SGD fits in RDP: the plan's budget carries T sampled
    discrete Gaussians, whose composition reproduces the budget, and two fits
    compose to less than twice one."""
    plan = plan_dp_sgd(5000, 10, loss="logistic", batch_size=100, epochs=2, epsilon=1.0,
                       delta=1e-6)
    event = plan.budget.event
    assert type(event).__name__ == "SelfComposedEvent" and event.count == plan.n_steps
    leaf = event.event
    assert type(leaf.event).__name__ == "DiscreteGaussianEvent"
    assert (leaf.sample_size, leaf.population_size) == (100, 5000)
    assert leaf.event.noise_multiplier == plan.noise_multiplier
    assert compose_events([event], 1e-6).epsilon == pytest.approx(plan.budget.epsilon,
                                                                  rel=1e-9)
    assert compose_events([event, event], 1e-6).epsilon < 2 * plan.budget.epsilon


def test_full_batch_plan_charges_a_discrete_gaussian_event():
    plan = plan_dp_sgd(200, 3, loss="logistic", batch_size=200, epochs=5, epsilon=1.0,
                       delta=1e-6)
    event = plan.budget.event
    assert type(event).__name__ == "DiscreteGaussianEvent" and event.count == 5


def test_noise_scale_of_a_step_on_zero_gradients():
    """With learning rate 1 and b = 1 on rows that are all zero and intercept off, the
    released coefficients after one step are −(noise)/1: their spread is σ = 2zC."""
    n, d = 1, 4000
    X = np.zeros((n, d))
    plan = plan_dp_sgd(n, d, loss="huber", batch_size=1, epochs=1, learning_rate=1.0,
                       noise_multiplier=3.0, delta=1e-6, fit_intercept=False, average=False)
    coef, _ = dp_sgd(X, np.zeros(n), plan, np.random.default_rng(0))
    sd = coef.std()
    # sd of 4000 draws: relative standard error ≈ 1/√8000 ≈ 1.1 %; 5 % tolerance.
    assert sd == pytest.approx(plan.noise_std, rel=0.05)


def test_batches_are_uniform_without_replacement():
    """Row j's coefficient counts the batches that contain row j (one-hot rows, a
    target the Huber gradient never reaches, so each inclusion adds λ/b): every step
    has exactly b distinct rows, and each row's count is Binomial(T, b/n)."""
    n, b, T = 20, 5, 400
    plan = plan_dp_sgd(n, n, loss="huber", batch_size=b, epochs=T * b / n,
                       learning_rate=1.0, noise_multiplier=1e-9, delta=1e-6,
                       fit_intercept=False, average=False)
    coef, _ = dp_sgd(np.eye(n), np.full(n, 1e9), plan, np.random.default_rng(1))
    counts = coef[0] * b
    assert plan.n_steps == T
    assert counts.sum() == pytest.approx(T * b, abs=1e-3)  # b rows in every step
    mean, sd = T * b / n, math.sqrt(T * (b / n) * (1 - b / n))
    assert np.all(np.abs(counts - mean) < 5 * sd)  # 5 sd for each of 20 rows
    chi2 = float((((counts - mean) / sd) ** 2).sum())
    assert chi2 < 60  # ≈ χ²(19): P(> 60) < 1e-5


def test_dp_sgd_refuses_a_mismatched_plan():
    plan = plan_dp_sgd(10, 2, loss="logistic", batch_size=2, epochs=1, epsilon=1.0,
                       delta=1e-6)
    with pytest.raises(ValueError, match="shape"):
        dp_sgd(np.zeros((11, 2)), np.ones(11), plan, None)


def test_default_orders_are_used():
    curve = dp_sgd_rdp(10, 100, 1.0, 2)
    assert np.array_equal(curve.orders, DEFAULT_ORDERS)
