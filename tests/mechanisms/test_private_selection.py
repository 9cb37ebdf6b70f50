"""Private selection: report-noisy-min (ε-DP ratio, and a halved scale caught),
random stopping (Geom(γ) truncated at T, best-so-far argmin), the LT19 budgets and
the arithmetic of seed 000 Theorem 6.1."""

import math

import numpy as np
import pytest
from scipy import stats

from skdpsparse.accounting import ZCDP, ApproxDP, PureDP
from skdpsparse.mechanisms.private_selection import (
    gamma_for_failure_prob,
    noisy_score,
    private_mean_loss,
    random_stopping_budget,
    random_stopping_max_runs,
    random_stopping_selection,
    report_noisy_min,
    split_budget_for_random_stopping,
)

# ------------------------------------------------------------------ report noisy min
N_DRAWS = 30_000
Z = 4.5  # one-sided tolerance, in standard errors of p̂ − e^ε p̂'


def _frequencies(scores, sensitivity, epsilon, seed):
    rng = np.random.default_rng(seed)
    counts = np.bincount([report_noisy_min(scores, sensitivity=sensitivity, epsilon=epsilon,
                                           rng=rng) for _ in range(N_DRAWS)],
                         minlength=len(scores))
    return counts / N_DRAWS


def _worst_excess(p, q, epsilon):
    """max over outcomes and directions of (p̂ − e^ε q̂) / SE, the ε-DP violation in SEs."""
    worst = -np.inf
    for a, b in ((p, q), (q, p)):
        se = np.sqrt((a * (1 - a) + math.exp(2 * epsilon) * b * (1 - b)) / N_DRAWS)
        worst = max(worst, float(np.max((a - math.exp(epsilon) * b) / np.maximum(se, 1e-12))))
    return worst


# Neighbouring score vectors: every score moves by at most Δ = 1, in either direction.
PAIRS = [
    ([0.0, 0.0], [1.0, -1.0]),
    ([0.0, 1.0, 2.0], [1.0, 0.0, 1.0]),
]


@pytest.mark.parametrize("s, s_prime", PAIRS)
def test_report_noisy_min_selection_probabilities_satisfy_the_dp_ratio(s, s_prime):
    eps = 1.0
    p = _frequencies(s, 1.0, eps, seed=1)
    q = _frequencies(s_prime, 1.0, eps, seed=2)
    assert _worst_excess(p, q, eps) < Z
    if len(s) == 2:  # pins the scale b = 2Δ/ε: P[r₁ − r₂ > 2] = e^{-1}(1 + 1/2)/2
        assert abs(q[0] - 0.75 * math.exp(-1.0)) < 0.01


def test_report_noisy_min_with_half_the_scale_violates_the_dp_ratio():
    # Lap(Δ/ε) (the monotone scale, seed 002 Alg 7) on non-monotone scores: at a gap
    # of 0, P[choose 0] goes from 1/2 to e^{-2}·(1 + 1)/2: ratio e²/2 = 3.69 > e.
    eps = 1.0
    s, s_prime = PAIRS[0]
    p = _frequencies(s, 0.5, eps, seed=1)  # sensitivity halved = scale halved
    q = _frequencies(s_prime, 0.5, eps, seed=2)
    assert abs(q[0] - math.exp(-2.0)) < 0.01  # the closed form of the note
    assert _worst_excess(p, q, eps) > Z


def test_report_noisy_min_monotone_scale_and_validation():
    rng = np.random.default_rng(0)
    assert report_noisy_min([5.0, -100.0, 7.0], sensitivity=1.0, epsilon=1.0, rng=rng) == 1
    assert report_noisy_min([3.0], sensitivity=1.0, epsilon=1.0, rng=rng, monotone=True) == 0
    for kwargs, name in [(dict(sensitivity=0.0, epsilon=1.0), "sensitivity"),
                         (dict(sensitivity=1.0, epsilon=-1.0), "epsilon")]:
        with pytest.raises(ValueError, match=name):
            report_noisy_min([1.0, 2.0], rng=rng, **kwargs)
    with pytest.raises(ValueError, match="finite"):
        report_noisy_min([1.0, np.nan], sensitivity=1.0, epsilon=1.0, rng=rng)
    with pytest.raises(ValueError, match="empty"):
        report_noisy_min([], sensitivity=1.0, epsilon=1.0, rng=rng)


def test_noisy_scores_have_the_laplace_scale_of_the_sensitivity():
    rng = np.random.default_rng(3)
    draws = np.array([noisy_score(0.0, sensitivity=0.5, epsilon=2.0, rng=rng)
                      for _ in range(10_000)])
    assert stats.kstest(draws, stats.laplace(scale=0.25).cdf).pvalue > 1e-3
    # Mean loss: clipped into [0, B] (NaN counts as B), scale B/(nε).
    losses = np.array([0.5, 7.0, -3.0, np.nan])  # -> 0.5, 2, 0, 2: mean 1.125
    draws = np.array([private_mean_loss(losses, loss_bound=2.0, epsilon=1.0, rng=rng)
                      for _ in range(10_000)])
    assert stats.kstest(draws, stats.laplace(loc=1.125, scale=0.5).cdf).pvalue > 1e-3


# ------------------------------------------------------------------ random stopping
def _truncated_geometric(gamma, T):
    k = np.arange(1, T + 1)
    pmf = (1 - gamma) ** (k - 1) * gamma
    pmf[-1] = (1 - gamma) ** (T - 1)
    return pmf


def _run_counts(gamma, T, n_seeds):
    counts = np.zeros(T, dtype=np.int64)
    for seed in range(n_seeds):
        _, _, n_runs = random_stopping_selection(lambda k: (k, 0.0), gamma=gamma, max_runs=T,
                                                 rng=np.random.default_rng(seed))
        counts[n_runs - 1] += 1
    return counts


def test_number_of_runs_is_truncated_geometric():
    gamma, T, n_seeds = 0.3, 6, 20_000
    counts = _run_counts(gamma, T, n_seeds)
    assert stats.chisquare(counts, n_seeds * _truncated_geometric(gamma, T)).pvalue > 1e-3
    # Power: the same counts reject a law with γ off by 0.03.
    assert stats.chisquare(counts, n_seeds * _truncated_geometric(0.33, T)).pvalue < 1e-3


def test_untruncated_and_gamma_one():
    rng = np.random.default_rng(0)
    assert random_stopping_selection(lambda k: (k, 1.0), gamma=1.0, max_runs=None,
                                     rng=rng)[2] == 1
    runs = [random_stopping_selection(lambda k: (k, 1.0), gamma=0.25, max_runs=None,
                                      rng=rng)[2] for _ in range(4000)]
    assert abs(np.mean(runs) - 4.0) < 0.25  # E[Geom(1/4)] = 4, sd 3.46/√4000 ≈ 0.055
    assert max(runs) > 20  # no truncation


def test_selection_keeps_the_best_so_far():
    scores = np.random.default_rng(5).normal(size=50)
    scores[7] = scores[30] = -10.0  # a tie: the earlier run is kept
    for seed in range(200):
        best, best_score, n_runs = random_stopping_selection(
            lambda k: (k, scores[k]), gamma=0.1, max_runs=50, rng=np.random.default_rng(seed))
        assert best == int(np.argmin(scores[:n_runs]))
        assert best_score == scores[:n_runs].min()


def test_selection_validation():
    rng = np.random.default_rng(0)
    for gamma in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="gamma"):
            random_stopping_selection(lambda k: (k, 0.0), gamma=gamma, max_runs=3, rng=rng)
    with pytest.raises(ValueError, match="max_runs"):
        random_stopping_selection(lambda k: (k, 0.0), gamma=0.5, max_runs=0, rng=rng)
    with pytest.raises(ValueError, match="NaN"):
        random_stopping_selection(lambda k: (k, np.nan), gamma=0.5, max_runs=3, rng=rng)


# ------------------------------------------------------------------------- budgets
@pytest.mark.parametrize("gamma, delta2", [(0.5, 1e-6), (0.05, 5e-7), (1.0, 0.01), (0.3, 0.2)])
def test_max_runs_is_lt19_truncation(gamma, delta2):
    T = random_stopping_max_runs(gamma, delta2)
    assert T == math.ceil(math.log(1 / delta2) / gamma)
    assert (1 - gamma) ** T <= delta2  # P[Geom(γ) > T] ≤ δ₂


def test_random_stopping_budget_reproduces_lt19():
    pure = random_stopping_budget(PureDP(0.4), gamma=0.1)  # untruncated: 3ε₁ (Thm 3.2)
    assert isinstance(pure, PureDP) and math.isclose(pure.epsilon, 1.2)
    eps1, delta1, gamma, delta2 = 0.2, 1e-14, 0.1, 1e-6
    T = math.ceil(math.log(1 / delta2) / gamma)
    b = random_stopping_budget(ApproxDP(eps1, delta1), gamma=gamma, delta2=delta2)
    assert isinstance(b, ApproxDP)
    assert math.isclose(b.epsilon, 3 * eps1 + 3 * math.sqrt(2 * delta1))
    assert math.isclose(b.delta, math.sqrt(2 * delta1) * T + delta2)
    # Pure runs, truncated: Thm 3.4 with δ₁ = 0; ApproxDP(ε, 0) untruncated is pure.
    b = random_stopping_budget(PureDP(0.2), gamma=0.5, delta2=1e-5)
    assert isinstance(b, ApproxDP) and math.isclose(b.epsilon, 0.6) and b.delta == 1e-5
    assert isinstance(random_stopping_budget(ApproxDP(0.2, 0.0), gamma=0.5), PureDP)


def test_random_stopping_budget_validation():
    with pytest.raises(ValueError, match="delta2"):
        random_stopping_budget(ApproxDP(0.2, 1e-9), gamma=0.5)
    with pytest.raises(TypeError, match="zCDP"):
        random_stopping_budget(ZCDP(0.1), gamma=0.5, delta2=1e-6)
    with pytest.raises(ValueError, match="vacuous"):
        random_stopping_budget(ApproxDP(0.2, 0.01), gamma=0.01, delta2=1e-6)
    with pytest.raises(ValueError, match="gamma"):
        random_stopping_budget(PureDP(0.2), gamma=0.0)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 8.0])
@pytest.mark.parametrize("delta_ratio", [1e-8, 1e-3, 0.1])  # δ = ratio·ε ≤ ε/10
@pytest.mark.parametrize("gamma", [0.01, 0.05, 0.5, 1.0])
def test_theorem_6_1_split_stays_within_the_request(epsilon, delta_ratio, gamma):
    delta = min(delta_ratio * epsilon, 0.5)
    if delta > epsilon / 10:
        return
    out = split_budget_for_random_stopping(epsilon, delta, gamma=gamma)
    K = math.ceil(math.log(2 / delta) / gamma)
    assert out["max_runs"] == K and out["delta2"] == delta / 2
    assert out["run_epsilon"] == out["score_epsilon"] == epsilon / 12
    assert out["run_delta"] == (delta / (4 * K)) ** 2
    # The pair (run, score) is (ε/6, (δ/4K)²)-DP; LT19 Thm 3.4 of it is within (ε, δ).
    total = random_stopping_budget(ApproxDP(epsilon / 6, (delta / (4 * K)) ** 2), gamma=gamma,
                                   delta2=delta / 2)
    assert total.epsilon <= epsilon and total.delta <= delta
    assert math.isclose(total.epsilon, epsilon / 2 + 3 * math.sqrt(2) * delta / (4 * K))
    assert math.isclose(total.delta, (math.sqrt(2) / 4 + 0.5) * delta)
    assert out["total"] == total
    tight = split_budget_for_random_stopping(epsilon, delta, gamma=gamma, split="tight",
                                             score_fraction=0.25)
    t = tight["total"]
    assert t.epsilon <= epsilon and t.delta <= delta and t.epsilon > 0.999999 * epsilon
    assert math.isclose(tight["score_epsilon"], tight["run_epsilon"] / 3)
    assert t == random_stopping_budget(
        ApproxDP(tight["run_epsilon"] + tight["score_epsilon"], tight["run_delta"]),
        gamma=gamma, delta2=delta / 2)


def test_pure_split_and_split_validation():
    out = split_budget_for_random_stopping(0.9, 0.0, gamma=0.2)
    assert out["max_runs"] is None and out["run_delta"] == 0.0
    assert math.isclose(out["run_epsilon"], 0.15) and math.isclose(out["score_epsilon"], 0.15)
    assert out["total"].epsilon <= 0.9 and isinstance(out["total"], PureDP)
    with pytest.raises(ValueError, match="delta"):
        split_budget_for_random_stopping(1.0, 0.2, gamma=0.5)  # δ > ε/10
    with pytest.raises(ValueError, match="delta"):
        split_budget_for_random_stopping(1.0, 1.0, gamma=0.5)
    with pytest.raises(ValueError, match="epsilon"):
        split_budget_for_random_stopping(0.0, 0.0, gamma=0.5)
    with pytest.raises(ValueError, match="gamma"):
        split_budget_for_random_stopping(1.0, 1e-6, gamma=2.0)
    with pytest.raises(ValueError, match="split"):
        split_budget_for_random_stopping(1.0, 1e-6, gamma=0.5, split="loose")
    with pytest.raises(ValueError, match="score_fraction"):
        split_budget_for_random_stopping(1.0, 1e-6, gamma=0.5, score_fraction=1.0)


def _never_succeeds(gamma, p):
    """P[none of κ ~ Geom(γ) independent runs succeeds], untruncated."""
    return gamma * (1 - p) / (p + gamma * (1 - p))


@pytest.mark.parametrize("beta", [0.01, 0.1, 0.5, 0.9])
def test_gamma_for_failure_prob(beta):
    gamma = gamma_for_failure_prob(beta)
    assert gamma == min(0.5, beta / 2)
    assert _never_succeeds(gamma, 0.5) <= beta / 2  # runs succeed w.p. 1/2 (Thm 6.1)
    for p in (0.05, 0.25, 0.5, 0.9):
        assert _never_succeeds(gamma_for_failure_prob(beta, success_prob=p), p) <= beta / 2 + 1e-15
    assert gamma_for_failure_prob(beta, success_prob=1.0) == 0.5


def test_printed_gamma_misses_the_stated_failure_probability():
    # The notes' §2.4 caveat: γ = 3β/4 leaves γ/(1+γ) > β/2 for this term alone.
    beta = 0.1
    assert _never_succeeds(0.75 * beta, 0.5) > beta / 2


def test_gamma_for_failure_prob_validation():
    for beta in (0.0, 1.0, -0.5, np.nan):
        with pytest.raises(ValueError, match="beta"):
            gamma_for_failure_prob(beta)
    with pytest.raises(ValueError, match="success_prob"):
        gamma_for_failure_prob(0.1, success_prob=1.5)
