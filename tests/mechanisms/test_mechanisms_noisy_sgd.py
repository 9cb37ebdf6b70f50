"""Noisy projected SGD of Arora et al. 2020: noise, stopping time, paper and RDP accounting."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from skdpsparse.accounting import (
    ApproxDP,
    DiscreteGaussianEvent,
    RdpCurve,
    compose_events,
    subsampled_without_replacement_discrete_gaussian_rdp,
    subsampled_without_replacement_gaussian_rdp,
    zcdp_to_epsilon,
)
from skdpsparse.accounting.discrete import discrete_gaussian_sigma
from skdpsparse.mechanisms.noisy_sgd import (
    NoisySGDResult,
    lipschitz_constant,
    noisy_projected_sgd,
    noisy_sgd_privacy,
    noisy_sgd_rdp,
    paper_epsilon,
    paper_noise_std,
    paper_step_size,
    provable_epsilon,
    provable_noise_std,
    provable_privacy,
    rdp_noise_multiplier,
    remark1_split,
)


def _run(X, y, seed, **kw):
    params = dict(loss="logistic", noise_std=1.0, step_size=0.05, radius=3.0, norm_bound=1.0,
                  rng=np.random.default_rng(seed))
    params.update(kw)
    return noisy_projected_sgd(X, y, **params)


# ------------------------------------------------------------------- formulas
def test_paper_noise_and_step_size_follow_theorem_6_and_remark_1():
    n, L, eps_bar, delta_bar, D, p = 5000, 1.7, 0.3, 1e-6, 2.5, 11
    eps, d, d_prime = remark1_split(eps_bar, delta_bar)
    assert d == d_prime == pytest.approx(delta_bar / 3, rel=1e-15)
    assert eps == pytest.approx(eps_bar / (8 * math.sqrt(math.log(3 / delta_bar))), rel=1e-14)
    # σ = 8L√log(1/δ)/(√n ε) with the per-step δ halved (notes §1.3, §1.8 item 4).
    sigma = paper_noise_std(n, eps_bar, delta_bar, L)
    assert sigma == pytest.approx(8 * L * math.sqrt(math.log(6 / delta_bar)) / (math.sqrt(n) * eps),
                                  rel=1e-14)
    # η = D/(√n(L + σ√d)) (Theorems 4 and 6).
    assert paper_step_size(n, D, L, sigma, p) == pytest.approx(
        D / (math.sqrt(n) * (L + sigma * math.sqrt(p))), rel=1e-14)


@pytest.mark.parametrize("n, eps_bar, delta_bar", [(1000, 0.1, 1e-6), (10000, 0.15, 1e-8),
                                                   (400, 0.02, 1e-5), (10**6, 0.015, 1e-9)])
def test_paper_epsilon_reproduces_theorem_6(n, eps_bar, delta_bar):
    L = 1.3
    z = paper_noise_std(n, eps_bar, delta_bar, L) / (2 * L)
    eps = eps_bar / (8 * math.sqrt(math.log(3 / delta_bar)))
    assert eps <= 1 / (2 * math.sqrt(n))  # inside the theorem's regime
    # (4ε(√log(1/δ′) + 2), δ + δ′ + 2e^{−n/16}) with δ = δ′ = δ̄/3 (notes §1.6).
    expected = 4 * eps * (math.sqrt(math.log(3 / delta_bar)) + 2)
    assert paper_epsilon(n, z, delta_bar) == pytest.approx(expected, rel=1e-9)
    assert expected == pytest.approx(eps_bar * (0.5 + 1 / math.sqrt(math.log(3 / delta_bar))),
                                     rel=1e-12)
    assert expected <= eps_bar  # Remark 1 meets its target (log(3/δ̄) ≥ 4)
    # Theorem 5's exact expression (τ = 2n, ε̃ = √n ε) is below the simplified statement.
    e0 = math.expm1(math.sqrt(n) * eps) / n
    thm5 = e0 * math.sqrt(2 * 2 * n * math.log(3 / delta_bar)) + 2 * n * e0 * math.expm1(e0)
    assert thm5 <= expected


def test_paper_epsilon_is_silent_outside_its_regime():
    z = paper_noise_std(1000, 0.1, 1e-6, 1.0) / 2
    assert math.isfinite(paper_epsilon(1000, z, 1e-6))
    assert paper_epsilon(1000, z / 10, 1e-6) == math.inf  # ε > 1/(2√n)
    assert paper_epsilon(15, 1e6, 0.5) == math.inf  # n < 16
    assert paper_epsilon(100, 1e6, 1e-6) == math.inf  # 2e^{−n/16} > δ̄/3
    assert math.isfinite(paper_epsilon(400, 1e6, 1e-6))


def test_lipschitz_constants():
    g = math.hypot(2.0, 1.0)
    for loss in ("logistic", "hinge", "smoothed_hinge"):
        assert lipschitz_constant(loss, 2.0, True) == pytest.approx(g)
        assert lipschitz_constant(loss, 2.0, False) == 2.0
    assert lipschitz_constant("huber", 2.0, True, loss_param=0.3) == pytest.approx(0.3 * g)
    assert lipschitz_constant("squared", 2.0, True, radius=3.0, label_bound=0.5) == \
        pytest.approx((3.0 * g + 0.5) * g)
    with pytest.raises(ValueError, match="label_bound"):
        lipschitz_constant("squared", 2.0, True)
    with pytest.raises(ValueError, match="sigmoid"):
        lipschitz_constant("sigmoid", 2.0, True)


# ------------------------------------------------------------------- RDP
def _one_step(m, z):
    """Reference per-step curve: the smaller of [WBK19] Thm 27 and the ternary bound."""
    a = subsampled_without_replacement_gaussian_rdp(1, m, z)
    b = subsampled_without_replacement_discrete_gaussian_rdp(1, m, z, a.orders)
    return RdpCurve(a.orders, np.minimum(a.epsilons, b.epsilons))


def test_rdp_curve_is_between_exact_and_uniform_rate_bounds():
    n, z = 41, 1.3
    k = (n + 1) // 2
    curve = noisy_sgd_rdp(n, z)
    exact = sum(_one_step(n - j + 1, z) for j in range(1, k + 1))
    uniform = k * _one_step(n - k + 1, z)  # p ≤ 2/n
    assert np.all(curve.epsilons >= exact.epsilons - 1e-12)
    assert np.all(curve.epsilons <= uniform.epsilons + 1e-12)
    assert curve.to_epsilon(1e-6)[0] < uniform.to_epsilon(1e-6)[0]


@pytest.mark.parametrize("n, eps_bar", [(1000, 0.1), (1000, 0.4), (3000, 0.1), (3000, 0.25),
                                         (10000, 0.1)])
def test_rdp_is_below_the_paper_at_moderate_epsilon(n, eps_bar):
    """Moderate ε̄ inside Theorem 6's regime: the RDP accounting is the tighter one."""
    z = paper_noise_std(n, eps_bar, 1e-6, 1.0) / 2
    priv = noisy_sgd_privacy(n, z, 1e-6, accountings=("paper", "rdp"))
    assert math.isfinite(priv.epsilon_paper)
    assert priv.epsilon_rdp < priv.epsilon_paper
    assert priv.accounting == "rdp" and priv.budget.epsilon == priv.epsilon_rdp


def test_paper_is_chosen_when_it_is_smaller():
    # Tiny ε̄: the paper's bound is linear in 1/z, while the RDP→(ε, δ) conversion over
    # orders ≤ 1024 does not go below about 0.0058 at δ = 1e-6 (with the ternary-moment
    # bound the RDP is already below the paper's at ε̄ = 0.01: 0.0058 against 0.0076).
    z = paper_noise_std(1000, 0.002, 1e-6, 1.0) / 2
    priv = noisy_sgd_privacy(1000, z, 1e-6, accountings=("paper", "rdp"))
    assert priv.epsilon_paper < priv.epsilon_rdp and math.isnan(priv.epsilon_provable)
    assert priv.accounting == "paper" and priv.budget.epsilon == priv.epsilon_paper
    assert priv.budget.delta == 1e-6 and priv.budget.event is None  # unproven: no event
    # With all three, the provable bound is smaller still at this (huge) σ.
    every = noisy_sgd_privacy(1000, z, 1e-6)
    assert every.accounting == "provable" and every.epsilon_provable < priv.epsilon_paper
    assert every.budget.event == DiscreteGaussianEvent(z)


def test_composition_over_runs():
    z, n = 2.0, 500
    priv = noisy_sgd_privacy(n, z, 1e-6, n_runs=3)
    assert priv.epsilon_rdp == pytest.approx((3 * noisy_sgd_rdp(n, z)).to_epsilon(1e-6)[0])
    assert priv.epsilon_rdp > noisy_sgd_privacy(n, z, 1e-6).epsilon_rdp


@pytest.mark.parametrize("n, eps, n_runs", [(200, 1.0, 1), (5000, 0.5, 3)])
def test_rdp_calibration_meets_the_target_tightly(n, eps, n_runs):
    z = rdp_noise_multiplier(n, eps, 1e-6, n_runs)
    assert noisy_sgd_privacy(n, z, 1e-6, n_runs).epsilon_rdp <= eps
    assert (n_runs * noisy_sgd_rdp(n, z * 0.995)).to_epsilon(1e-6)[0] > eps


# ------------------------------------------------------------------- provable
@pytest.mark.parametrize("eps, delta, n_runs", [(0.5, 1e-6, 1), (1.0, 1e-6, 3), (4.0, 1e-6, 1),
                                                 (8.0, 1e-9, 2), (200.0, 1e-5, 10)])
def test_provable_calibration_is_the_discrete_gaussian_of_sensitivity_2L(eps, delta, n_runs):
    L = 1.7
    sigma = provable_noise_std(eps, delta, L, n_runs)
    # K runs of ρ = (2L)²/(2σ²) each: the discrete Gaussian for Δ = 2L√K.
    assert sigma == pytest.approx(discrete_gaussian_sigma(2 * L * math.sqrt(n_runs), eps,
                                                          delta), rel=1e-14)
    z = sigma / (2 * L)
    eps_spent = provable_epsilon(z, delta, n_runs)
    assert 0.9999 * eps <= eps_spent <= eps  # the whole target, never more
    assert eps_spent == pytest.approx(
        zcdp_to_epsilon(n_runs * (2 * L) ** 2 / (2 * sigma**2), delta), rel=1e-12)
    budget = provable_privacy(z, delta, n_runs)
    assert budget == ApproxDP(eps_spent, delta)
    assert budget.event == DiscreteGaussianEvent(z, count=n_runs)
    assert compose_events([budget.event], delta).epsilon <= eps * (1 + 1e-9)
    # σ does not depend on n: no amplification by sampling is claimed.
    assert noisy_sgd_privacy(10, z, delta, n_runs, ("provable",)).budget == budget
    assert noisy_sgd_privacy(10**6, z, delta, n_runs, ("provable",)).budget == budget


def test_provable_privacy_validates():
    with pytest.raises(ValueError, match="n_runs"):
        provable_noise_std(1.0, 1e-6, 1.0, n_runs=0)
    with pytest.raises(ValueError, match="lipschitz"):
        provable_noise_std(1.0, 1e-6, math.inf)
    with pytest.raises(ValueError, match="noise_multiplier"):
        provable_epsilon(0.0, 1e-6)
    with pytest.raises(ValueError, match="accountings"):
        noisy_sgd_privacy(100, 1.0, 1e-6, accountings=("exact",))


def test_each_row_enters_at_most_one_gradient_step():
    """The premise of the provable bound: with row i = e_i (so a gradient touches only
    its own coordinate), no noise to speak of and no projection, coordinate i of the
    last iterate is −η·ℓ'(θ_t)·1 if row i was used once, 0 if never: never a sum of
    two gradient steps, however often index i is drawn (about 1.4 draws per row)."""
    n = 400
    X = sp.identity(n, format="csr")
    y = np.ones(n)
    eta = 0.01
    r = _run(X, y, 5, noise_std=1e-9, step_size=eta, radius=1e12, fit_intercept=False,
             loss="hinge")  # hinge at margin 0 < 1: ℓ' = −1 exactly
    last = r.last_iterate  # noise: η·σ·√τ ≈ 2e-10 per coordinate
    used = np.flatnonzero(last > eta / 2)
    assert len(used) == r.n_fresh == n // 2 and r.n_steps > r.n_fresh + 50  # stale steps
    np.testing.assert_allclose(last[used], eta, atol=1e-8)  # one step, not two
    assert np.all(np.abs(np.delete(last, used)) < 1e-8)


# ------------------------------------------------------------------- the run
def test_noise_of_the_steps_has_the_stated_std():
    """Zero gradients (x = 0, no intercept), no projection: the last iterate is
    −η Σ_{t≤τ} ξ_t, i.e. N(0, η²σ²τ) in every coordinate."""
    n, d, sigma, eta = 200, 400, 0.7, 0.01
    X = sp.csr_matrix((n, d))
    y = np.ones(n)
    z = []
    for seed in range(25):
        r = _run(X, y, seed, noise_std=sigma, step_size=eta, radius=1e12,
                 fit_intercept=False)
        z.append(r.last_iterate / (eta * sigma * math.sqrt(r.n_steps)))
    z = np.concatenate(z)
    assert abs(z.std() - 1) < 0.03  # 10_000 values: the std is known to about 0.7%
    assert abs(z.mean()) < 0.04
    assert stats.kstest(z, "norm").pvalue > 1e-3


def test_stopping_time_and_fresh_count():
    """|F_τ| = ⌈n/2⌉ always; E τ = Σ_{j<⌈n/2⌉} n/(n − j) (coupon collector, half way)."""
    n = 41
    k = (n + 1) // 2
    X = np.random.default_rng(0).standard_normal((n, 2))
    y = np.ones(n)
    taus = []
    for seed in range(400):
        r = _run(X, y, seed)
        assert r.n_fresh == k
        assert r.n_steps >= k
        taus.append(r.n_steps)
    p = (n - np.arange(k)) / n  # success probability of each geometric waiting time
    mean, var = np.sum(1 / p), np.sum((1 - p) / p**2)
    assert abs(np.mean(taus) - mean) < 4 * math.sqrt(var / len(taus))


def test_output_is_the_average_of_fresh_iterates_and_stays_in_the_ball():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 5))
    y = rng.choice([-1.0, 1.0], 60)
    r = _run(X, y, 3, radius=0.5)
    assert isinstance(r, NoisySGDResult)
    assert set(r._fields) == {"coef", "intercept", "n_steps", "n_fresh", "last_iterate"}
    assert math.hypot(np.linalg.norm(r.coef), r.intercept) <= 0.5 + 1e-12


def test_dense_csr_and_float32_agree():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((80, 12)) * 2
    X[rng.random(X.shape) < 0.6] = 0
    y = rng.choice([-1.0, 1.0], 80)
    a = _run(X, y, 7)
    b = _run(sp.csr_matrix(X), y, 7)
    c = _run(X.astype(np.float32), y, 7)
    np.testing.assert_allclose(a.coef, b.coef, atol=1e-12)
    assert a.n_steps == b.n_steps
    np.testing.assert_allclose(a.coef, c.coef, atol=1e-5)


def test_contribution_bounding_scales_rows_and_clips_labels():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((50, 4))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = rng.uniform(-1, 1, 50)
    big_X = X * 30.0
    big_y = y * 40.0
    kw = dict(loss="squared", label_bound=1.0)
    a = _run(X, np.clip(big_y, -1, 1), 4, **kw)
    b = _run(big_X, big_y, 4, **kw)
    np.testing.assert_allclose(a.coef, b.coef, atol=1e-12)
    assert a.intercept == pytest.approx(b.intercept, abs=1e-12)


def test_invalid_run_arguments():
    X, y = np.zeros((4, 2)), np.ones(4)
    with pytest.raises(ValueError, match="noise_std"):
        _run(X, y, 0, noise_std=0.0)
    with pytest.raises(ValueError, match="radius"):
        _run(X, y, 0, radius=math.inf)
    with pytest.raises(ValueError, match="loss"):
        _run(X, y, 0, loss="sigmoid")


# ------------------------- the ternary-moment bound in the (unproven) RDP accounting
@pytest.mark.parametrize("n, z", [(41, 1.3), (3000, 0.8), (3000, 2.5), (100_000, 5.0)])
def test_rdp_curve_is_never_above_the_generic_one(n, z):
    """The fresh-step curve is the minimum of two bounds: never above [WBK19] Thm 27
    alone (the curve used before), strictly below it where the noise is large."""
    k = (n + 1) // 2
    generic = k * subsampled_without_replacement_gaussian_rdp(1, n - k + 1, z)
    assert np.all(noisy_sgd_rdp(n, z).epsilons <= generic.epsilons * (1 + 1e-12))
    if z >= 2:
        assert noisy_sgd_rdp(n, z).epsilons[10] < 0.5 * generic.epsilons[10]


@pytest.mark.parametrize("n, eps", [(3000, 0.25), (10_000, 1.0), (100_000, 4.0)])
def test_rdp_noise_multiplier_is_never_above_the_generic_calibration(monkeypatch, n, eps):
    """z from the new curve ≤ z from Theorem 27 alone (the curve used before, same
    buckets, both to rtol 1e-3): each is an RDP bound of the modelled step, so the
    smaller z meets the same (ε, δ)."""
    import skdpsparse.mechanisms.noisy_sgd as mod

    new = rdp_noise_multiplier(n, eps, 1e-6)
    with monkeypatch.context() as mp:
        mp.setattr(mod, "_one_of",
                   lambda m, z: subsampled_without_replacement_gaussian_rdp(1, int(m), z))
        mod._fresh_rdp.cache_clear()
        mod.rdp_noise_multiplier.cache_clear()
        old = mod.rdp_noise_multiplier(n, eps, 1e-6)
    mod._fresh_rdp.cache_clear()
    mod.rdp_noise_multiplier.cache_clear()
    assert new <= old * (1 + 2e-3)
    assert rdp_noise_multiplier(n, eps, 1e-6) == new
