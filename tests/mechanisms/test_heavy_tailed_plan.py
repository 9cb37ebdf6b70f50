"""The plans of the heavy-tailed means (issue 22: plan from public numbers, then run).

Each plan's scales against a hand computation from the theorem it cites, and the
teeth: the noise a run actually draws is read back from the random source and checked
against the guarantee recomputed from the public numbers alone; a replaced plan (half
the noise, or a ten times wider clipping with the shipped noise) fails that check.
"""

import dataclasses
import math

import numpy as np
import pytest

from skdpsparse.accounting import ZCDP, PureDP, approx_dp_to_zcdp
from skdpsparse.mechanisms import heavy_tailed as H
from skdpsparse.mechanisms import heavy_tailed_clip as HC
from skdpsparse.mechanisms.heavy_tailed_mean import heavy_tailed_mean, plan_heavy_tailed_mean
from skdpsparse.mechanisms.noise import plan_grid_noise
from skdpsparse.utils import RandomSource


class RecordingSource(RandomSource):
    """Records the integer scale N of every discrete noise draw and the integers
    k + Y it returns (the release is (k + Y)·γ: with it, γ and the noise's actual
    scale N·γ are read back from the released vector)."""

    def __init__(self, key=b"\x01" * 32):
        super().__init__(key)
        self.scales, self.noisy = [], []

    def add_discrete_noise(self, grid_values, kind, scale):
        self.scales.append((kind, int(scale)))
        out = super().add_discrete_noise(grid_values, kind, scale)
        self.noisy.append(np.array(out, dtype=np.int64))
        return out

    def effective_scale(self, release):
        """N·γ of the one draw, γ = release / (k + Y) (a power of two)."""
        (_, n_scale), = self.scales
        ints = self.noisy[0].astype(np.float64)
        j = int(np.flatnonzero(ints)[0])
        gamma = float(release[j]) / ints[j]
        assert math.frexp(gamma)[0] == 0.5  # an exact power of two
        return n_scale * gamma


# ------------------------------------------------------------ scales by hand
def test_cwme_plan_scales_are_theorem_4_1_with_our_sensitivity():
    n, d, tau = 1000, 4, 2.0
    # odd m = 3: Δ∞ = 6τ/⌊n/m⌋ = 12/333; Laplace b = dΔ∞/ε (Dwork and Roth 2014, Thm 3.6)
    plan = H.plan_cwme(n, d, tau=tau, n_groups=3, epsilon=0.5, delta=0)
    assert plan.kind == "laplace" and plan.budget == PureDP(0.5)
    assert plan.noise_scale == pytest.approx(4 * 12 / 333 / 0.5, rel=1e-15)
    # even m = 4: Δ∞ = 3τ/⌊n/m⌋ = 6/250; σ = √d Δ∞/√(2ρ) (Bun and Steinke 2016, Prop 1.6)
    plan = H.plan_cwme(n, d, tau=tau, n_groups=4, rho=0.3)
    assert plan.kind == "gaussian" and plan.budget == ZCDP(0.3)
    assert plan.noise_scale == pytest.approx(2 * 6 / 250 / math.sqrt(0.6), rel=1e-15)
    # (ε, δ) with δ > 0: ρ = approx_dp_to_zcdp(ε, δ)
    plan = H.plan_cwme(n, d, tau=tau, n_groups=4, epsilon=1.0, delta=1e-6)
    rho = approx_dp_to_zcdp(1.0, 1e-6)
    assert plan.rho == rho
    assert plan.noise_scale == pytest.approx(2 * 6 / 250 / math.sqrt(2 * rho), rel=1e-15)
    # at most n groups: m = 2000 > n uses n groups of one row (even: 3τ/1)
    assert H.plan_cwme(n, 1, tau=1.0, n_groups=2000, rho=0.5).noise_scale == pytest.approx(
        3.0 / 1.0, rel=1e-15)


@pytest.mark.parametrize("c", [0.0, 0.25, 1.0])
def test_noise_smoothing_plan_scale_is_the_corrected_algorithm_4(c):
    n, d, tau, rho = 500, 9, 3.0, 0.2
    s_c = 2 * math.sqrt(2) / 3 * (math.erf(1 / math.sqrt(2 * c)) if c > 0 else 1.0)
    plan = H.plan_noise_smoothing(n, d, tau=tau, rho=rho, smoothing_variance=c)
    assert plan.noise_scale == pytest.approx(2 * s_c * tau * 3 / n / math.sqrt(2 * rho),
                                             rel=1e-14)
    with pytest.raises(ValueError, match="delta must be positive"):
        H.plan_noise_smoothing(n, d, tau=tau, epsilon=1.0, delta=0.0)


def test_clipped_mean_plan_counts_only_columns_of_positive_width():
    n = 1000
    plan = HC.plan_clipped_mean(n, [0, -1, 2, 5], [1, 1, 2, 4], rho=0.5)
    assert plan.n_active == 3 and list(plan.lower) == [0, -1, 2, 4]
    assert plan.noise_scale == pytest.approx(math.sqrt(3) / n / 1.0, rel=1e-15)  # √m/n/√(2ρ)
    plan = HC.plan_clipped_mean(n, [0, -1, 2], [1, 1, 2], epsilon=0.5)
    assert plan.noise_scale == pytest.approx(2 / n / 0.5, rel=1e-15)  # m/n/ε
    assert plan.true_sensitivity > plan.sensitivity  # the float rounding is charged
    assert plan.true_sensitivity < plan.sensitivity * (1 + 1e-12)


def test_private_clip_plan_splits_the_budget_as_documented():
    n, d, eps, delta, f = 100_000, 3, 1.0, 1e-6, 0.1
    rho = approx_dp_to_zcdp(eps, delta)
    plan = HC.plan_quantile_clipped_mean(n, d, epsilon=eps, delta=delta, scale_fraction=f,
                                         noise="gaussian")
    # 5d quantile draws on fρ and 4d tail bins charged as 2d draws more, 2fρ/5; the
    # mean the rest.
    assert not plan.shared and plan.n_draws == 7 * d
    assert plan.quantile_epsilon == pytest.approx(math.sqrt(8 * f * rho / (5 * d)), rel=1e-14)
    assert plan.mean_rho == pytest.approx((1 - 7 * f / 5) * rho, rel=1e-12)
    assert plan.budget.rho == pytest.approx(rho, rel=1e-12)
    assert plan.noise_sd == pytest.approx(math.sqrt(d) / n / math.sqrt(2 * (1 - 7 * f / 5) * rho))
    pure = HC.plan_quantile_clipped_mean(n, d, epsilon=eps, delta=0.0, scale_fraction=f)
    assert pure.kind == "laplace"
    assert pure.quantile_epsilon == pytest.approx(f * eps / (5 * d), rel=1e-14)
    assert pure.mean_epsilon == pytest.approx((1 - 7 * f / 5) * eps, rel=1e-14)
    assert pure.budget.epsilon == pytest.approx(eps, rel=1e-14)
    # few rows for many columns: two pooled draws of the shared scale
    shared = HC.plan_quantile_clipped_mean(1000, 50, epsilon=1.0, delta=1e-6)
    assert shared.shared and shared.n_draws == HC.SHARED_DRAWS


def test_estimator_plan_resolves_corollary_4_2_and_the_groups():
    n, d, eps, delta = 20_000, 5, 1.0, 1e-6
    rho = approx_dp_to_zcdp(eps, delta)
    plan = plan_heavy_tailed_mean(n, d, epsilon=eps, delta=delta, method="cwme", moment=3,
                                  moment_bound=8.0, failure_prob=0.1)
    tau = (math.sqrt(rho) * n / math.sqrt(d)) ** (1 / 3) * 8.0 ** (1 / 3)
    m = math.ceil(4 * math.log(2 * d / 0.1))
    m += m % 2
    assert plan.truncation == pytest.approx(tau, rel=1e-14)
    assert plan.mechanism.n_groups == m and plan.shuffle
    assert plan.approx_dp.epsilon <= eps
    assert plan_heavy_tailed_mean(n, d, truncation=2.0).method == "cwme"  # a stated τ
    assert plan_heavy_tailed_mean(n, d).method == "private_clip"
    assert plan_heavy_tailed_mean(n, d, bounds=(-1, 1)).method == "clipped"


@pytest.mark.filterwarnings("ignore:n=300 rows are too few")
def test_the_plan_reads_no_data():
    """The estimator's plan is a function of (n, d) and the parameters: equal for two
    data sets of the same shape (the fitted budget and noise scales come from it)."""
    from skdpsparse.mean import DPHeavyTailedMean

    rng = np.random.default_rng(0)
    for params in (dict(method="cwme"), dict(method="noise_smoothing"), dict(),
                   dict(bounds=(-1, 1))):
        fits = [DPHeavyTailedMean(random_state=0, **params).fit(X)
                for X in (rng.standard_normal((300, 2)), 50 * rng.standard_t(2, (300, 2)))]
        plan = plan_heavy_tailed_mean(300, 2, **params)
        for est in fits:
            assert est.privacy_spent_ == plan.budget
            if plan.method in ("cwme", "noise_smoothing"):
                assert est.noise_scale_ == plan.mechanism.noise_scale


# --------------------------------------------------------------------- teeth
def _delivered(plan, source, release):
    """Whether the noise the run with ``plan`` drew delivers ``plan.budget``, from the
    plan's public numbers (n, d, τ, m or c, and the budget's ε or ρ) alone, never its
    stored scale or sensitivity: the grid plan of the hand-computed scale must ask
    for at most the integer scale the run used."""
    n, d, tau = plan.n_samples, plan.n_features, plan.tau
    if isinstance(plan, H.CWMEPlan):
        m = min(plan.n_groups, n)
        linf = (6.0 if m % 2 else 3.0) * tau / (n // m)
    else:
        c = plan.smoothing_variance
        linf = 2 * (2 * math.sqrt(2) / 3) * (math.erf(1 / math.sqrt(2 * c)) if c else 1) * tau / n
    if plan.kind == "laplace":
        sens, scale = d * linf, d * linf / plan.budget.epsilon
    else:
        sens, scale = math.sqrt(d) * linf, math.sqrt(d) * linf / math.sqrt(2 * plan.budget.rho)
    needed = plan_grid_noise(plan.kind, scale, sens, d).effective_scale
    (kind, _), = source.scales
    return kind == plan.kind and source.effective_scale(release) >= needed * (1 - 2.0**-29)


def _replaced(plan, variant):
    if variant == "noise/2":
        return dataclasses.replace(plan, noise_scale=plan.noise_scale / 2)
    return dataclasses.replace(plan, tau=10 * plan.tau)  # clipping at 10τ, noise for τ


@pytest.mark.parametrize("make", [
    lambda: H.plan_cwme(200, 3, tau=1.5, n_groups=5, epsilon=1.0, delta=0),
    lambda: H.plan_cwme(200, 3, tau=1.5, n_groups=4, epsilon=1.0, delta=1e-6),
    lambda: H.plan_noise_smoothing(200, 3, tau=1.5, epsilon=1.0, delta=1e-6),
    lambda: H.plan_noise_smoothing(200, 3, tau=1.5, rho=0.1, smoothing_variance=0.2),
], ids=["cwme_laplace", "cwme_gaussian", "nsme", "nsme_small_c"])
def test_a_replaced_plan_is_caught_by_the_delivered_noise(make):
    plan = make()
    X = np.random.default_rng(1).standard_t(2, (200, 3))
    run = H.cwme if isinstance(plan, H.CWMEPlan) else H.nsme
    source = RecordingSource()
    assert _delivered(plan, source, run(X, plan, source))  # the shipped plan delivers
    for variant in ("noise/2", "bound x10"):
        broken = _replaced(plan, variant)
        source = RecordingSource()
        assert not _delivered(broken, source, run(X, broken, source)), variant


def test_the_estimator_run_draws_the_planned_noise():
    """``heavy_tailed_mean`` adds exactly the grid noise of the plan's scale, so that
    the estimator's release is covered by ``plan.budget`` (and a plan with half the
    noise asks for half the integer scale)."""
    plan = plan_heavy_tailed_mean(400, 2, epsilon=1.0, delta=0, method="cwme",
                                  truncation=1.0, n_groups=3)
    X = np.random.default_rng(2).standard_normal((400, 2))
    source = RecordingSource()
    mean, info = heavy_tailed_mean(X, plan, source)
    mech = plan.mechanism
    expected = plan_grid_noise("laplace", mech.noise_scale, mech.sensitivity.l1, 2)
    assert source.scales == [("laplace", expected.grid_scale)]
    assert info["noise_scale"] == mech.noise_scale
    assert _delivered(mech, source, mean)
    half = dataclasses.replace(plan, mechanism=_replaced(mech, "noise/2"))
    source = RecordingSource()
    assert not _delivered(half.mechanism, source, heavy_tailed_mean(X, half, source)[0])


def test_a_run_refuses_data_of_another_shape():
    plan = H.plan_cwme(100, 2, tau=1.0, n_groups=3, rho=0.5)
    with pytest.raises(ValueError, match="plan is for"):
        H.cwme(np.zeros((101, 2)), plan, RecordingSource())


@pytest.mark.parametrize("delta", [1e-6, 0.0])
@pytest.mark.parametrize("count_draws", [1, 2, 3])
def test_the_tail_bins_spend_what_the_plan_charges_for_them(monkeypatch, delta, count_draws):
    """The plan charges the 4d tail bins as ``COUNT_DRAWS``·d draws (in ``n_draws``);
    their noise must spend exactly that: discrete Laplace of scale b for ℓ1
    sensitivity 2d is 2d/b-DP, discrete Gaussian of σ for ℓ2 √(2d) is 2d/(2σ²)-zCDP.
    The scale was written for COUNT_DRAWS = 2 (b = 1/ε_q, σ = 2/ε_q) whatever the
    constant: at 1 the bins spent twice their charge (caught here), at 3 two thirds."""
    monkeypatch.setattr(HC, "COUNT_DRAWS", count_draws)
    d = 3
    plan = HC.plan_quantile_clipped_mean(300_000, d, epsilon=2.0, delta=delta,
                                         noise="laplace" if delta == 0 else "gaussian")
    assert not plan.shared and plan.n_draws == (HC.N_DRAWS + count_draws) * d
    eps_q = plan.quantile_epsilon
    if delta == 0:
        assert plan.count_kind == "laplace"
        assert math.isclose(2 * d / plan.count_scale, count_draws * d * eps_q)
        assert math.isclose(plan.n_draws * eps_q + plan.mean_epsilon, 2.0)
    else:
        assert plan.count_kind == "gaussian"
        assert math.isclose(2 * d / (2 * plan.count_scale**2), count_draws * d * eps_q**2 / 8)
        assert math.isclose(plan.n_draws * eps_q**2 / 8 + plan.mean_rho,
                            approx_dp_to_zcdp(2.0, delta))
    if count_draws == 2:  # the shipped constant: the scales of the derivation, bit for bit
        assert plan.count_scale == (1.0 / eps_q if delta == 0 else 2.0 / eps_q)
