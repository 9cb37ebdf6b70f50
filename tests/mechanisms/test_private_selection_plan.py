"""The plan of Liu–Talwar random stopping (issue 22): the stopping rule, the
truncation and the charged budget from public numbers, checked by hand against Liu and
Talwar (2019) Theorems 3.2 and 3.4 and Ghazi et al. (2024 v2) Algorithm 5; the run's
number of runs against the planned distribution; and the teeth: a plan whose stopping
rule was replaced (a smaller γ, or a later truncation, with the same budget) fails
the hand check of its budget.
"""

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from skdpsparse.accounting import ApproxDP, PureDP
from skdpsparse.mechanisms.private_selection import (
    RandomStoppingPlan,
    plan_random_stopping,
    random_stopping,
)
from skdpsparse.utils import RandomSource


def _covered(plan):
    """Whether ``plan.budget`` follows from the plan's stopping rule and run budget by
    Liu and Talwar (2019): Theorem 3.2 (pure runs, untruncated) or Theorem 3.4 with a
    truncation T that the coins pass with probability at most δ₂."""
    eps1 = plan.run_budget.epsilon
    delta1 = plan.run_budget.delta if isinstance(plan.run_budget, ApproxDP) else 0.0
    if plan.max_runs is None:
        return delta1 == 0 and plan.budget.epsilon >= 3 * eps1
    T, g = plan.max_runs, plan.gamma
    eps = 3 * eps1 + 3 * math.sqrt(2 * delta1)
    delta = math.sqrt(2 * delta1) * T + plan.delta2
    return ((1 - g) ** T <= plan.delta2 and plan.budget.epsilon >= eps * (1 - 1e-12)
            and plan.budget.delta >= delta * (1 - 1e-12))


@pytest.mark.parametrize("split", ["paper", "tight"])
def test_plan_is_algorithm_5_and_theorem_3_4_by_hand(split):
    eps, delta, gamma = 1.0, 1e-6, 0.2
    plan = plan_random_stopping(eps, delta, gamma=gamma, split=split, score_fraction=0.25)
    T = math.ceil(math.log(2 / delta) / gamma)  # K = (1/γ) ln(2/δ), δ₂ = δ/2
    delta1 = (delta / (4 * T)) ** 2
    eps1 = eps / 6 if split == "paper" else (eps - 3 * math.sqrt(2 * delta1)) / 3
    assert plan.max_runs == T and plan.delta2 == delta / 2
    assert plan.run_budget.delta == delta1
    assert plan.run_budget.epsilon == pytest.approx(eps1, rel=1e-11)
    assert plan.score_epsilon == pytest.approx(0.25 * eps1, rel=1e-11)
    assert plan.fit_epsilon == pytest.approx(0.75 * eps1, rel=1e-11)
    assert plan.budget.epsilon == pytest.approx(3 * eps1 + 3 * math.sqrt(2 * delta1),
                                                rel=1e-11)
    assert plan.budget.delta == pytest.approx(math.sqrt(2 * delta1) * T + delta / 2)
    assert plan.budget.epsilon <= eps and plan.budget.delta <= delta
    assert _covered(plan)


def test_pure_plan_is_theorem_3_2_untruncated():
    plan = plan_random_stopping(0.9, 0.0, gamma=0.1)
    assert plan.max_runs is None and plan.fit_delta == 0
    assert plan.budget == PureDP(3 * plan.run_budget.epsilon)
    assert plan.budget.epsilon <= 0.9
    assert plan.expected_runs == pytest.approx(10.0)
    assert _covered(plan)
    assert RandomStoppingPlan.for_runs(PureDP(0.25), gamma=0.1).budget == PureDP(0.75)


def test_run_counts_follow_the_planned_geometric_truncated_at_T():
    """The number of runs of 4000 seeded selections (a data-free draw) against
    P(κ = k) = γ(1 − γ)^{k−1}, P(κ = T) = (1 − γ)^{T−1}: a chi-square test at level
    1e-3 (a wrong γ of 0.25 instead of 0.3 gave p < 1e-28 on 20 seeds at this size)."""
    plan = RandomStoppingPlan.for_runs(ApproxDP(0.1, 1e-12), gamma=0.3, delta2=0.05)
    assert plan.max_runs == 10
    assert sum(plan.run_count_pmf(k) for k in range(1, 11)) == pytest.approx(1.0)
    source = RandomSource(b"\x03" * 32)
    counts = np.zeros(plan.max_runs + 1)
    for _ in range(4000):
        counts[random_stopping(lambda k: (k, 0.0), plan, source)[2]] += 1
    expected = 4000 * np.array([plan.run_count_pmf(k) for k in range(1, 11)])
    assert stats.chisquare(counts[1:], expected).pvalue > 1e-3
    assert counts.sum() == 4000 and counts[0] == 0


def test_a_replaced_stopping_rule_is_caught():
    plan = plan_random_stopping(1.0, 1e-6, gamma=0.2)
    assert _covered(plan)
    # the same budget charged for more runs than planned, or for a smaller γ:
    assert not _covered(dataclasses.replace(plan, max_runs=2 * plan.max_runs))
    assert not _covered(dataclasses.replace(plan, gamma=plan.gamma / 2))
    # approximate runs without truncation have no guarantee at all
    assert not _covered(dataclasses.replace(plan, max_runs=None))
