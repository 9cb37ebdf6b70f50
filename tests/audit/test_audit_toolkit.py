"""The auditing toolkit itself: Clopper–Pearson bounds, the ε lower bound, the held-out
threshold, the broken-variant patches, the claims read from budgets and the lazily
loaded catalogue."""

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from skdpsparse import audit as A
from skdpsparse.accounting import ZCDP, ApproxDP, PureDP, gaussian_delta
from skdpsparse.linear_model import _cyclic_sgd, _noisy_sgd, _output_perturbation
from skdpsparse.mechanisms import cyclic_sgd as cs
from skdpsparse.mechanisms import heavy_tailed, noise, projection, sparse_mean
from skdpsparse.mechanisms import noisy_sgd as ns
from skdpsparse.mechanisms import output_perturbation as op
from skdpsparse.mechanisms import sparse_exponential as se

_EXPO = se.exponential_mechanism


@pytest.mark.parametrize("k, n", [(0, 10), (3, 10), (10, 10), (17, 500), (0, 1)])
def test_clopper_pearson_matches_scipy_exact_interval(k, n):
    lo, hi = A.clopper_pearson(k, n, 0.95)
    ci = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    assert lo == pytest.approx(ci.low, abs=1e-12)
    assert hi == pytest.approx(ci.high, abs=1e-12)
    # Closed forms at the edges: upper end for k = 0 is 1 - (α/2)^(1/n).
    if k == 0:
        assert hi == pytest.approx(1 - 0.025 ** (1 / n))


def test_epsilon_lower_bound_formula():
    fp, fn, n = 2, 40, 1000
    fpr = A.clopper_pearson(fp, n)[1]
    fnr = A.clopper_pearson(fn, n)[1]
    delta = 1e-3
    expected = max(math.log((1 - delta - fpr) / fnr), math.log((1 - delta - fnr) / fpr))
    assert A.epsilon_lower_bound(fp, n, fn, n, delta) == pytest.approx(expected)
    # Vectorised, never negative, decreasing in δ, zero for a useless test.
    eps = A.epsilon_lower_bound(np.array([2, 500]), n, np.array([40, 500]), n)
    assert eps.shape == (2,) and eps[1] == 0.0
    assert A.epsilon_lower_bound(fp, n, fn, n, 0.1) < A.epsilon_lower_bound(fp, n, fn, n)


def test_perfect_separation_is_bounded_by_the_number_of_runs():
    # No error at all in n runs: ε_lb = log((1 - ub(0, n)) / ub(0, n)), about log(n/3.7).
    n = 1000
    ub = 1 - 0.025 ** (1 / n)
    assert A.epsilon_lower_bound(0, n, 0, n) == pytest.approx(math.log((1 - ub) / ub))


def test_threshold_is_chosen_on_the_first_half_only():
    # First halves perfectly separated, second halves identical in law: a bound that
    # reused the selection runs would be large; the held-out one is ~0.
    rng = np.random.default_rng(0)
    s0 = np.concatenate([np.zeros(500), rng.standard_normal(500)])
    s1 = np.concatenate([np.ones(500), rng.standard_normal(500)])
    res = A.audit_scores(s0, s1, claimed_epsilon=1.0)
    assert res.threshold == 0.0 and res.greater
    assert res.epsilon_lb < 0.3 and not res.violated


@pytest.mark.parametrize("eps", [1.0, 3.0])
def test_laplace_scores_give_a_sound_and_informative_bound(eps):
    rng = np.random.default_rng(1)
    s0 = rng.laplace(0.0, 1.0, 4000)
    s1 = rng.laplace(eps, 1.0, 4000)
    res = A.audit_scores(s0, s1, claimed_epsilon=eps)
    assert 0.6 * eps < res.epsilon_lb <= eps
    # Both directions are searched: mirrored scores give the same bound.
    assert A.audit_scores(-s0, -s1).epsilon_lb == pytest.approx(res.epsilon_lb)


def test_patches_are_restored_and_calibration_cache_changes_nothing(shared_noise):
    originals = (noise.add_noise_inplace, projection.add_noise_inplace,
                 heavy_tailed.add_noise_inplace, sparse_mean.bounded_mean,
                 heavy_tailed.trimmed_median_of_means, projection.discrete_gaussian_sigma)
    X = np.eye(4)

    def release():
        return projection.projection_mechanism(
            projection.bounded_mean(X, 1.0, 1), 4, epsilon=2.0, delta=1e-5, norm_bound=1.0,
            sparsity=1, rng=np.random.default_rng(3), project=False)[0]

    plain = release()
    with A.memoized_calibration():
        assert projection.discrete_gaussian_sigma is not originals[-1]
        np.testing.assert_array_equal(release(), plain)
    with A.scaled_noise(0.5):
        assert projection.add_noise_inplace is not originals[1]
        half = release()
    np.testing.assert_allclose(half - X.mean(0), 0.5 * (plain - X.mean(0)))
    with A.inflated_bounds(10.0):
        assert sparse_mean.bounded_mean is not originals[3]
        # Rows of norm 20 scaled to 10 = 10 L, not to L: the mean is 10/4 per column.
        np.testing.assert_allclose(sparse_mean.bounded_mean(20 * X, 1.0, 1), 2.5)
    current = (noise.add_noise_inplace, projection.add_noise_inplace,
               heavy_tailed.add_noise_inplace, sparse_mean.bounded_mean,
               heavy_tailed.trimmed_median_of_means, projection.discrete_gaussian_sigma)
    assert all(a is b for a, b in zip(current, originals))


def test_claims_read_from_budgets():
    assert A.claimed_epsilons(PureDP(2.0), (0.0, 0.2)) == [(0.0, 2.0)]
    rho = 0.5
    claims = A.claimed_epsilons(ZCDP(rho), (1e-5, 0.2))
    assert [d for d, _ in claims] == [1e-5, 0.2]
    assert claims[0][1] == pytest.approx(ZCDP(rho).to_approx_dp(1e-5).epsilon)
    assert claims[1][1] < claims[0][1]
    # Analytic Gaussian: the budget's own point, and the exact curve elsewhere.
    sigma, sens = 0.7, 1.0
    claims = A.claimed_epsilons(ApproxDP(3.0, 1e-5), (1e-5, 0.2), gaussian=(sigma, sens))
    assert claims[0] == (1e-5, 3.0)
    assert gaussian_delta(sigma, sens, claims[1][1]) == pytest.approx(0.2, rel=1e-6)
    # An accountant's own statement at another δ (same noise), e.g. an RDP conversion.
    assert A.claimed_epsilons(ApproxDP(3.0, 1e-5), (1e-5, 0.01),
                              epsilon_at=lambda d: 7.0 * d) == [(1e-5, 3.0), (0.01, 0.07)]


def test_exponential_mechanism_temperature_is_halved():
    scores = np.array([0.0, 1.0, 2.5, 0.3])
    with A.scaled_noise(0.5):
        assert se.exponential_mechanism is not _EXPO
        half = se.exponential_mechanism(scores, 1.0, 2.0, np.random.default_rng(0), 200)
    assert se.exponential_mechanism is _EXPO
    np.testing.assert_array_equal(
        half, _EXPO(scores, 1.0, 4.0, np.random.default_rng(0), 200))


def _linear_model_functions():
    return (cs.cyclic_sgd, _cyclic_sgd.cyclic_sgd, ns.noisy_projected_sgd,
            _noisy_sgd.noisy_projected_sgd, op.output_perturbation,
            _output_perturbation.output_perturbation, op.bound_inputs, se.bound_inputs,
            se.exponential_mechanism, cs.plan_cyclic_sgd, _cyclic_sgd.plan_cyclic_sgd,
            op.plan_output_perturbation, ns.noisy_sgd_privacy)


def test_linear_model_bounds_are_inflated_with_the_noise_kept(shared_noise):
    originals = _linear_model_functions()
    run_cyclic, run_noisy, run_op = cs.cyclic_sgd, ns.noisy_projected_sgd, op.output_perturbation
    X = np.array([[20.0, 0.0], [0.0, 0.5]])  # row 0 far outside R = 1
    y = np.array([1e6, 0.0])
    plan = cs.plan_cyclic_sgd(2, 2, loss="squared", norm_bound=1.0, fit_intercept=False,
                              batch_size=2, epochs=2, delta=1e-5, noise_multiplier=1.0)
    wide = dataclasses.replace(plan, norm_bound=10.0, clip_norm=10.0 * plan.clip_norm)
    noisy_kw = dict(loss="huber", noise_std=1.0, step_size=1.0, radius=1e6,
                    fit_intercept=False)
    op_plan = op.plan_output_perturbation(2, 2, 1, loss="huber", epsilon=1.0, delta=1e-5,
                                          alpha=1.0, norm_bound=1.0, intercept_scaling=0.0,
                                          label_bound=100.0)

    def rng():
        return np.random.default_rng(0)

    plain = run_op(X, y[None, :], op_plan, rng())[0]
    with A.inflated_bounds(10.0):
        assert all(a is not b for a, b in zip(_linear_model_functions()[:6], originals[:6]))
        assert op.bound_inputs is originals[6]  # output perturbation: via its plan only
        # Cyclic SGD: rows at 10R, clip at 10C, the noise std of the true plan.
        np.testing.assert_array_equal(
            _cyclic_sgd.cyclic_sgd(X, y, plan, rng(), shuffle=False)[0],
            run_cyclic(X, y, wide, rng(), shuffle=False)[0])
        # Noisy SGD: rows at 10R.
        np.testing.assert_array_equal(
            _noisy_sgd.noisy_projected_sgd(X, y, norm_bound=1.0, rng=rng(), **noisy_kw).coef,
            run_noisy(X, y, norm_bound=10.0, rng=rng(), **noisy_kw).coef)
        # Output perturbation: the same noise, around a minimizer whose coordinate 0 is
        # κ·10R/(λn) = 5 instead of κR/(λn) = 0.5 (each certified to tol·Δ/2).
        inflated = _output_perturbation.output_perturbation(X, y[None, :], op_plan, rng())[0]
        np.testing.assert_allclose(inflated - plain, [[4.5, 0.0]], atol=0.06)
        # Sparse exponential mechanism: rows and labels bounded at 10x.
        Xb, _ = se.bound_inputs(X, y[None, :], "huber", norm_bound=1.0, sparsity=2.0,
                                label_bound=1.0)
        np.testing.assert_allclose(Xb[0], [10.0, 0.0])
    assert all(a is b for a, b in zip(_linear_model_functions(), originals))


def test_calibration_cache_leaves_linear_models_bit_identical():
    from skdpsparse.linear_model import (
        DPCyclicSGD,
        DPNoisySGDRegressor,
        DPOutputPerturbationRegressor,
    )

    X = np.random.default_rng(0).uniform(-1, 1, (30, 3))
    y = X @ np.array([1.0, -1.0, 0.5])
    estimators = [
        DPCyclicSGD("squared", epsilon=2.0, delta=1e-5, batch_size=10, random_state=3),
        DPNoisySGDRegressor(epsilon=2.0, delta=1e-5, noise_calibration="rdp", random_state=3),
        DPOutputPerturbationRegressor(epsilon=2.0, delta=1e-5, random_state=3),
    ]
    plain = [est.fit(X, y).coef_.copy() for est in estimators]
    originals = _linear_model_functions()
    with A.memoized_calibration():
        assert _cyclic_sgd.plan_cyclic_sgd is not cs.plan_cyclic_sgd.__wrapped__
        for _ in range(2):  # the second round hits the cache
            for est, coef in zip(estimators, plain):
                np.testing.assert_array_equal(est.fit(X, y).coef_, coef)
    assert all(a is b for a, b in zip(_linear_model_functions(), originals))


def test_catalogue_is_served_lazily_by_the_audit_module():
    from skdpsparse import _audit_cases

    assert A.CASES is _audit_cases.CASES and A.run_case is _audit_cases.run_case
    assert A.case_projection is _audit_cases.case_projection
    assert {"CASES", "VARIANTS", "audit"} <= set(dir(A))
    assert set(A.__all__) >= set(_audit_cases.__all__)
    with pytest.raises(AttributeError):
        A.no_such_name
