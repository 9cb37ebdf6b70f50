"""The sparse mean's plans (issue 22): public numbers in, every bound by hand; the run
equals the former one-call functions; a replaced plan is caught by the hand check."""

from dataclasses import FrozenInstanceError, replace

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsparse.accounting.discrete import discrete_gaussian_sigma
from skdpsparse.datasets import make_sparse_vectors
from skdpsparse.mechanisms.l1_recovery import (
    MEASUREMENT_CLIP, gaussian_l1_recovery, l1_recovery, measurement_noise_sigma,
    n_measurements, plan_l1_recovery,
)
from skdpsparse.mechanisms.projection import (
    bounded_mean, plan_projection, projection, projection_mechanism,
)
from skdpsparse.mechanisms.sparse_mean import (
    plan_sparse_mean, plan_threshold, private_sparse_mean, sparse_mean,
)


def _by_hand(plan):
    """The plan's noise recomputed from its public numbers (the check a replaced plan
    fails): Laplace b = 2L√s/(nε), Gaussian σ for 2L/n (√2·L/n for nonnegative rows),
    and the charged event's σ/Δ equal to the noise actually drawn."""
    eps, delta = plan.budget.epsilon, getattr(plan.budget, "delta", 0.0)
    n, L, s = plan.n_samples, plan.norm_bound, plan.sparsity
    if plan.kind == "laplace":
        ok = plan.noise_scale == pytest.approx(2 * L * np.sqrt(s) / (n * eps), rel=1e-14)
        return ok and plan.budget.event.noise_multiplier == pytest.approx(1 / eps)
    change = (np.sqrt(2) if plan.nonnegative_rows else 2.0) * L / n
    return (plan.sensitivity == pytest.approx(change, rel=1e-15)
            and plan.noise_scale == discrete_gaussian_sigma(change, eps, delta,
                                                            plan.calibration)
            and plan.budget.event.noise_multiplier == pytest.approx(
                plan.noise_scale / plan.sensitivity, rel=1e-15))


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_projection_plan_by_hand_and_replaced_plans_caught(delta):
    plan = plan_projection(1000, 500, epsilon=0.5, delta=delta, norm_bound=2.0, sparsity=9)
    assert plan.kind == ("laplace" if delta == 0 else "gaussian")
    assert (plan.l2_bound, plan.l1_bound) == (2.0, 6.0)
    assert plan.true_sensitivity > plan.sensitivity  # the float rounding is charged
    assert plan.true_sensitivity < plan.sensitivity * (1 + 1e-6)
    assert _by_hand(plan)
    with pytest.raises(FrozenInstanceError):
        plan.noise_scale = 0.0
    assert not _by_hand(replace(plan, noise_scale=plan.noise_scale / 2))
    assert not _by_hand(replace(plan, norm_bound=2 * plan.norm_bound))


def test_threshold_plan_lambda_and_l1_recovery_plan_by_hand():
    n, d, s, eps, delta, L = 20000, 2**16, 10, 1.0, 1e-6, 1.0
    plan = plan_threshold(n, d, epsilon=eps, delta=delta, norm_bound=L, sparsity=s)
    sigma = plan.release.noise_scale
    assert plan.threshold == pytest.approx(sigma * np.sqrt(2 * np.log(d)), rel=1e-15)
    lap = plan_threshold(n, d, epsilon=eps, delta=0, norm_bound=L, sparsity=s)
    assert lap.threshold == pytest.approx(lap.release.noise_scale * np.log(d), rel=1e-15)
    rec = plan_l1_recovery(n, d, epsilon=eps, delta=delta, norm_bound=L, sparsity=s)
    m = n_measurements(n, d, s, eps, delta)
    assert rec.n_measurements == m
    assert rec.branch == ("compressed_sensing" if d >= m * np.log(m) ** 2 else "gaussian")
    small = plan_l1_recovery(200, 50, epsilon=eps, delta=delta, norm_bound=L, sparsity=s)
    assert small.branch == "gaussian" and small.budget is small.dense.budget
    big = plan_l1_recovery(500, 2**20, epsilon=eps, delta=delta, norm_bound=L, sparsity=2)
    assert big.branch == "compressed_sensing"
    assert big.sensitivity == pytest.approx(2 * MEASUREMENT_CLIP * L / 500, rel=1e-15)
    assert big.noise_scale == measurement_noise_sigma(500, epsilon=eps, delta=delta,
                                                      norm_bound=L)
    assert big.radius == pytest.approx(big.noise_scale * np.sqrt(big.n_measurements))
    assert big.budget.event.noise_multiplier == pytest.approx(
        big.noise_scale / big.sensitivity, rel=1e-15)
    with pytest.raises(ValueError, match="delta > 0"):
        plan_l1_recovery(n, d, epsilon=eps, delta=0, norm_bound=L, sparsity=s)


@pytest.mark.parametrize("method,delta", [("threshold", 1e-6), ("projection", 0.0),
                                          ("gaussian", 1e-6), ("laplace", 0.0),
                                          ("l1_recovery", 1e-6)])
def test_plan_then_run_equals_the_one_call_functions(method, delta):
    X, _ = make_sparse_vectors(400, 3000, 4, random_state=0)
    X = sp.csr_matrix(X)
    kw = dict(epsilon=1.0, delta=delta, norm_bound=1.0, sparsity=4)
    plan = plan_sparse_mean(*X.shape, method=method, **kw)
    z, info = sparse_mean(X, plan, np.random.default_rng(9))
    z_old, budget, info_old = private_sparse_mean(X, method, rng=np.random.default_rng(9),
                                                  **kw)
    np.testing.assert_array_equal(z, z_old)
    assert budget == plan.budget and info.keys() == info_old.keys()
    if method in ("projection", "gaussian", "laplace"):
        z2, b2 = projection_mechanism(bounded_mean(X, 1.0, 4), X.shape[0],
                                      rng=np.random.default_rng(9),
                                      project=method == "projection", **kw)
        np.testing.assert_array_equal(z2, projection(X, plan.release,
                                                     np.random.default_rng(9)))
    if method == "l1_recovery":
        z3, b3, _ = gaussian_l1_recovery(X, rng=np.random.default_rng(9), **kw)
        np.testing.assert_array_equal(z3, l1_recovery(X, plan.release,
                                                      np.random.default_rng(9))[0])


def test_a_plan_refuses_data_of_another_shape():
    X = sp.random(30, 20, density=0.2, format="csr", random_state=0)
    plan = plan_sparse_mean(31, 20, method="projection", epsilon=1.0, delta=1e-6,
                            norm_bound=1.0, sparsity=3)
    with pytest.raises(ValueError, match="plan is for"):
        sparse_mean(X, plan, np.random.default_rng(0))
