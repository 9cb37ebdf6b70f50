"""The (ε, δ)-DP filter of Whitehouse et al. (seed 002 Theorem A.4)."""

import math

import numpy as np
import pytest

from skdpsparse.accounting import ApproxDP
from skdpsparse.accounting.filters import ApproxDPFilter, filter_epsilon


def test_filter_epsilon_is_the_formula_of_theorem_a4():
    # ε_{[0:t]} = √(2 ln(1/δ′) Σε²) + ½Σε², by hand for ε_s = (0.1, 0.2, 0.3), δ′ = 1e-5.
    S = 0.01 + 0.04 + 0.09
    assert filter_epsilon(S, 1e-5) == pytest.approx(math.sqrt(2 * math.log(1e5) * S) + S / 2,
                                                    rel=1e-15)
    assert filter_epsilon(0.0, 1e-5) == 0.0
    # It is the zCDP route: ρ = S/2 converts to ρ + 2√(ρ ln(1/δ′)).
    rho = S / 2
    assert filter_epsilon(S, 1e-5) == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1e5)))


@pytest.mark.parametrize("seed", range(5))
def test_never_admits_more_than_the_budget_and_stops_exactly_at_the_overflow(seed):
    rng = np.random.default_rng(seed)
    eps, delta, delta_prime = 1.0, 1e-5, 4e-6
    f = ApproxDPFilter(eps, delta, delta_prime=delta_prime)
    admitted = []
    while True:
        step = (rng.uniform(0, 0.08), rng.uniform(0, 2e-7))
        before = (f.sum_sq, f.delta_sum)
        if not f.try_spend(*step):
            break
        admitted.append(step)
        assert f.epsilon_spent() <= eps and f.delta_sum <= delta - delta_prime
    # The refused step is exactly the one that would have exceeded (ε or δ″).
    eps_with = filter_epsilon(before[0] + step[0] ** 2, delta_prime)
    assert eps_with > eps or before[1] + step[1] > delta - delta_prime
    # The admitted steps are recorded exactly.
    assert f.n_admitted == len(admitted) > 0
    assert f.sum_sq == pytest.approx(sum(e * e for e, _ in admitted), rel=1e-12)
    # Closed after the first refusal, even for a free step.
    assert not f.try_spend(0.0, 0.0) and not f.admits(0.0, 0.0)
    assert f.guarantee() == ApproxDP(eps, delta)


def test_homogeneous_steps_admit_the_largest_count_within_budget():
    eps_step, eps, dp = 0.05, 1.0, 5e-7
    f = ApproxDPFilter(eps, 1e-6, delta_prime=dp)
    k = 0
    while f.try_spend(eps_step, 0.0):
        k += 1
    expected = max(j for j in range(1000) if filter_epsilon(j * eps_step**2, dp) <= eps)
    assert k == expected == 13


def test_delta_budget_binds():
    f = ApproxDPFilter(100.0, 1e-6, delta_prime=2e-7)  # δ″ = 8e-7
    k = 0
    while f.try_spend(1e-6, 1e-7):
        k += 1
    assert k == 8 and f.delta_sum <= 8e-7 + 1e-20


def test_spend_raises_and_admits_records_nothing():
    f = ApproxDPFilter(0.1, 1e-6)
    assert f.admits(0.01, 0.0) and f.n_admitted == 0
    with pytest.raises(ValueError, match="does not admit"):
        f.spend(1.0, 0.0)
    assert f.closed


def test_guarantee_with_an_iteration_cap():
    f = ApproxDPFilter(1.0, 1e-6, delta_prime=5e-7)
    g = f.guarantee(max_steps=4, max_step=(0.01, 1e-9))
    assert g.epsilon == pytest.approx(filter_epsilon(4e-4, 5e-7))
    assert g.delta == pytest.approx(5e-7 + 4e-9)
    assert g <= f.guarantee()
    assert f.guarantee(max_steps=0, max_step=(0.01, 0.0)).epsilon < 1e-300
    with pytest.raises(ValueError, match="max_step"):
        f.guarantee(max_steps=3)


@pytest.mark.parametrize("kwargs, match", [
    (dict(epsilon=0.0, delta=1e-6), "epsilon"),
    (dict(epsilon=1.0, delta=0.0), "delta"),
    (dict(epsilon=1.0, delta=1e-6, delta_prime=2e-6), "delta_prime"),
])
def test_invalid_budgets(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ApproxDPFilter(**kwargs)


def test_negative_step_is_refused():
    with pytest.raises(ValueError, match="epsilon_step"):
        ApproxDPFilter(1.0, 1e-6).try_spend(-0.1, 0.0)


# ------------------------------------------------------------------ Rényi filter
from skdpsparse.accounting.filters import RenyiFilter, renyi_budget  # noqa: E402
from skdpsparse.accounting.rdp import rdp_to_epsilon  # noqa: E402


@pytest.mark.parametrize("order", [1.5, 4.0, 20.0, 64.0])
@pytest.mark.parametrize("eps, delta", [(0.5, 1e-6), (1.0, 1e-6), (4.0, 1e-5), (8.0, 1e-9)])
def test_renyi_budget_is_the_largest_rdp_that_converts(order, eps, delta):
    b = renyi_budget(order, eps, delta)
    if b == 0.0:  # this order cannot reach (ε, δ) with a budget above δ² (where
        # the total-variation rule of rdp_to_epsilon gives ε = 0 whatever the order)
        assert rdp_to_epsilon([order], [delta], delta)[0] > eps
        return
    assert rdp_to_epsilon([order], [b], delta)[0] <= eps
    # Tight: a relative 1e-9 more converts to more than ε.
    assert rdp_to_epsilon([order], [b * (1 + 1e-9)], delta)[0] > eps


def test_renyi_filter_admits_exactly_while_the_sum_fits_and_then_closes():
    f = RenyiFilter(10.0, 1.0)
    costs = [0.3, 0.3, 0.3, 0.2, 0.05]
    assert [f.try_spend(c) for c in costs[:3]] == [True, True, True]
    assert not f.try_spend(0.2)  # 0.9 + 0.2 > 1: refused, and the filter closes
    assert not f.try_spend(0.05) and not f.admits(0.0)
    assert f.n_admitted == 3 and f.spent == pytest.approx(0.9)


def test_renyi_filter_guarantee_is_the_budget_converted():
    b = renyi_budget(20.0, 1.0, 1e-6)
    g = RenyiFilter(20.0, b).guarantee(1e-6)
    assert g.delta == 1e-6 and g.epsilon <= 1.0 and g.epsilon == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize("kwargs, match", [
    ({"order": 1.0, "budget": 1.0}, "order"), ({"order": float("inf"), "budget": 1.0}, "order"),
    ({"order": 2.0, "budget": -1.0}, "budget"),
])
def test_renyi_filter_rejects_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RenyiFilter(**kwargs)
