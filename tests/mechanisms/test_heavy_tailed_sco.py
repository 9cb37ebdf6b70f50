"""The plan of the heavy-tailed SCO (issue 22: plan from public numbers, then run).

The oracle's per-step scale against a hand computation (the sensitivity of the module
notes of :mod:`skdpsparse.mechanisms.heavy_tailed`, σ = Δ₂/√(2ρ_t)), the wrapper
``heavy_tailed_sco`` against plan + run, the regressor against its plan
(``plan_heavy_tailed_regression``) and run (``run_heavy_tailed_regression``), and the
teeth: the noise scale of every step is read back and composed (ρ/T per step on all
rows, or ρ per disjoint batch) to at most the plan's ρ, which a replaced plan (half the
noise, or each step given the whole ρ on all rows) exceeds.
"""

import dataclasses
import math

import numpy as np
import pytest

import skdpsparse.mechanisms.heavy_tailed as H
from skdpsparse._kernels.linear_losses import HUBER
from skdpsparse.mechanisms.heavy_tailed_sco import (
    heavy_tailed_sco,
    plan_heavy_tailed_sco,
    run_heavy_tailed_sco,
)

_COMMON = dict(loss_code=0, loss_param=0.0, learning_rate=0.2, truncation=3.0, rho=0.4,
               radius=2.0, alpha=0.3)


def _groups_by_hand(p, beta, rows):
    m = math.ceil(4 * math.log(2 * p / beta))
    return min(m + m % 2, rows)


@pytest.mark.parametrize("setting", ["convex", "strongly_convex"])
def test_cwme_step_scale_by_hand(setting):
    n, p, T = 900, 4, 6
    plan = plan_heavy_tailed_sco(n, p, oracle="cwme", setting=setting, n_iter=T, **_COMMON)
    rows = n if setting == "convex" else n // T
    rho_t = 0.4 / T if setting == "convex" else 0.4
    m = _groups_by_hand(p, 0.1, rows)
    linf = (3.0 if m % 2 == 0 else 6.0) * 3.0 / (rows // m)
    assert (plan.batch_size, plan.rho_step, plan.n_groups) == (rows, rho_t, m)
    assert plan.step.noise_scale == pytest.approx(math.sqrt(p) * linf / math.sqrt(2 * rho_t),
                                                  rel=1e-14)
    assert plan.budget.rho == 0.4


def test_noise_smoothing_step_scale_by_hand():
    n, p, T = 900, 4, 6
    plan = plan_heavy_tailed_sco(n, p, oracle="noise_smoothing", setting="convex",
                                 n_iter=T, smoothing_variance=0.5, **_COMMON)
    s_c = 2 * math.sqrt(2) / 3 * math.erf(1 / math.sqrt(2 * 0.5))
    sigma = 2 * s_c * 3.0 * math.sqrt(p) / n / math.sqrt(2 * 0.4 / T)
    assert plan.step.noise_scale == pytest.approx(sigma, rel=1e-14)
    assert plan.n_groups is None


def test_too_many_disjoint_batches_are_refused_by_the_plan():
    with pytest.raises(ValueError, match="disjoint batches need at least 10 rows"):
        plan_heavy_tailed_sco(9, 2, oracle="cwme", setting="strongly_convex", n_iter=10,
                              **_COMMON)


@pytest.mark.parametrize("oracle", ["cwme", "noise_smoothing"])
def test_the_wrapper_is_plan_then_run(oracle):
    rng = np.random.default_rng(0)
    X = rng.standard_t(3, (300, 3))
    y = X @ np.array([0.5, -0.2, 0.1]) + rng.standard_t(3, 300)
    kw = dict(oracle=oracle, setting="strongly_convex", n_iter=5, **_COMMON)
    w, info = heavy_tailed_sco(X, y, rng=np.random.default_rng(1), **kw)
    plan = plan_heavy_tailed_sco(*X.shape, **kw)
    w2, info2 = run_heavy_tailed_sco(X, y, plan, np.random.default_rng(1))
    np.testing.assert_array_equal(w, w2)
    assert info == info2 and info["noise_scale"] == plan.step.noise_scale


# --------------------------------------------------------------------- teeth
def _recorded_scales(monkeypatch):
    """An observer of the oracle's noise: the scale b of every release (the grid
    noise added is at least b, :func:`~skdpsparse.mechanisms.noise.plan_grid_noise`)."""
    scales = []
    original = H.add_noise_inplace

    def add_noise_inplace(values, rng, kind, scale, **kw):
        scales.append((kind, float(scale)))
        return original(values, rng, kind, scale, **kw)

    monkeypatch.setattr(H, "add_noise_inplace", add_noise_inplace)
    return scales


def _composed_rho(plan, scales):
    """ρ of the run from the scales it used and Δ₂ by hand (cwme, even m): Σ over the
    steps on all rows (convex), the largest step on disjoint batches."""
    m = _groups_by_hand(plan.n_features, 0.1, plan.batch_size)
    l2 = math.sqrt(plan.n_features) * 3.0 * plan.truncation / (plan.batch_size // m)
    per_step = [l2**2 / (2 * s * s) for kind, s in scales if kind == "gaussian"]
    assert len(per_step) == plan.n_iter
    return sum(per_step) if plan.setting == "convex" else max(per_step)


@pytest.mark.parametrize("setting", ["convex", "strongly_convex"])
@pytest.mark.parametrize("variant", ["correct", "noise/2", "whole rho per step"])
def test_a_replaced_plan_is_caught_by_the_composed_noise(setting, variant, monkeypatch):
    rng = np.random.default_rng(2)
    X = rng.standard_t(3, (240, 3))
    y = rng.standard_t(3, 240)
    plan = plan_heavy_tailed_sco(*X.shape, oracle="cwme", setting=setting, n_iter=4,
                                 **_COMMON)
    step = plan.step
    if variant == "noise/2":
        plan = dataclasses.replace(plan, step=dataclasses.replace(
            step, noise_scale=step.noise_scale / 2))
    elif variant == "whole rho per step":  # convex: ρ, not ρ/T, at every step
        plan = dataclasses.replace(plan, step=H.plan_cwme(
            step.n_samples, step.n_features, tau=step.tau, n_groups=step.n_groups,
            rho=plan.rho))
    scales = _recorded_scales(monkeypatch)
    run_heavy_tailed_sco(X, y, plan, np.random.default_rng(3))
    within = _composed_rho(plan, scales) <= plan.budget.rho * (1 + 1e-12)
    # On disjoint batches every step may spend the whole ρ (parallel composition).
    expected = variant == "correct" or (variant == "whole rho per step"
                                        and setting == "strongly_convex")
    assert within == expected


# ------------------------------------------------- the regressor's plan and run
@pytest.mark.parametrize("alpha", [0.0, 0.5])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_the_regression_plan_is_the_schedule_at_the_converted_rho(alpha, fit_intercept):
    """ρ from (ε, δ) by Canonne, Kamath and Steinke (2020) Corollary 13, then the
    theorems' T, η, τ for p = d (+ 1) columns, and the ridge sparing the intercept."""
    from skdpsparse.accounting import approx_dp_to_zcdp
    from skdpsparse.mechanisms.heavy_tailed_sco import (plan_heavy_tailed_regression,
                                                        sco_schedule)

    n, d = 5000, 3
    p = d + fit_intercept
    plan = plan_heavy_tailed_regression(n, d, epsilon=2.0, delta=1e-5, radius=1.5,
                                        loss="huber", huber_threshold=0.7, oracle="cwme",
                                        alpha=alpha, fit_intercept=fit_intercept, moment=3)
    rho = approx_dp_to_zcdp(2.0, 1e-5)
    setting = "strongly_convex" if alpha else "convex"
    sched = sco_schedule(setting, "cwme", n, p, rho, moment=3, diameter=3.0,
                         strong_convexity=alpha)
    assert (plan.rho, plan.setting, plan.n_features, plan.fit_intercept) == (
        rho, setting, p, fit_intercept)
    assert (plan.n_iter, plan.learning_rate, plan.truncation) == (
        sched["n_iter"], sched["learning_rate"], sched["truncation"])
    assert plan.budget.rho == rho and (plan.loss_code, plan.loss_param) == (HUBER, 0.7)
    assert plan.penalized.tolist() == [1.0] * d + [0.0] * fit_intercept
    given = plan_heavy_tailed_regression(n, d, epsilon=2.0, delta=1e-5, radius=1.5,
                                         max_iter=7, learning_rate=0.3, truncation=2.5,
                                         alpha=alpha, fit_intercept=fit_intercept)
    assert (given.n_iter, given.learning_rate, given.truncation) == (7, 0.3, 2.5)


@pytest.mark.parametrize("sparse", [False, True])
def test_the_regressor_is_plan_then_run(sparse):
    """DPHeavyTailedRegressor.fit is validate -> plan -> run -> release: the same seed
    through plan_heavy_tailed_regression + run_heavy_tailed_regression gives its
    coefficients bit for bit."""
    import scipy.sparse as sp

    from skdpsparse.linear_model import DPHeavyTailedRegressor
    from skdpsparse.mechanisms.heavy_tailed_sco import (plan_heavy_tailed_regression,
                                                        run_heavy_tailed_regression)
    from skdpsparse.utils import fit_random_source

    rng = np.random.default_rng(4)
    X = rng.standard_t(3, (400, 3))
    y = X @ np.array([0.5, -0.2, 0.1]) + rng.standard_t(3, 400)
    X = sp.csr_matrix(X * (rng.random(X.shape) < 0.6)) if sparse else X
    reg = DPHeavyTailedRegressor(mean_oracle="cwme", radius=2.0, max_iter=5,
                                 random_state=0).fit(X, y)
    plan = plan_heavy_tailed_regression(*X.shape, epsilon=1.0, delta=1e-6, radius=2.0,
                                        oracle="cwme", max_iter=5)
    coef, intercept, info = run_heavy_tailed_regression(
        X, y, plan, fit_random_source(0, reg, X, y))
    np.testing.assert_array_equal(coef, reg.coef_)
    assert intercept == reg.intercept_ and info["noise_scale"] == reg.noise_scale_
    assert reg.privacy_spent_ == plan.budget


def test_the_run_draws_the_row_order_first_then_runs_the_plan():
    """The secret permutation (exchangeable groups and batches even for sorted input)
    is the key's first draw; the capped rows, with the intercept's column, then go to
    run_heavy_tailed_sco with the same key. A run without the permutation differs."""
    from skdpsparse.mechanisms.heavy_tailed_sco import (plan_heavy_tailed_regression,
                                                        run_heavy_tailed_regression)

    rng = np.random.default_rng(5)
    X = rng.standard_t(3, (300, 2))
    X[0, 0] = 1e300  # capped at 1e150
    y = np.sort(rng.standard_t(3, 300))  # sorted: the groups see the order
    plan = plan_heavy_tailed_regression(*X.shape, epsilon=1.0, delta=1e-6, radius=2.0,
                                        oracle="cwme", alpha=0.5, max_iter=3)
    coef, intercept, _ = run_heavy_tailed_regression(X, y, plan, np.random.default_rng(6))
    key = np.random.default_rng(6)
    perm = key.permutation(300)
    Xp = np.hstack([np.clip(X[perm], -1e150, 1e150), np.ones((300, 1))])
    w, _ = run_heavy_tailed_sco(Xp, y[perm], plan, key)
    np.testing.assert_array_equal(coef, w[:2])
    assert intercept == w[2]
    unpermuted, _ = run_heavy_tailed_sco(np.hstack([np.clip(X, -1e150, 1e150),
                                                    np.ones((300, 1))]),
                                         y, plan, np.random.default_rng(6))
    assert not np.array_equal(unpermuted, w)
    with pytest.raises(ValueError, match=r"plan is for \(300, 2\)"):
        run_heavy_tailed_regression(X[:, :1], y, plan, np.random.default_rng(6))
