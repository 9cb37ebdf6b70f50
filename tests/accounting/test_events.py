"""Privacy events: their guarantees, their (de)serialisation, and budgets that carry
them without changing how budgets compare, print or compose."""

import doctest
import json
import pickle

import mpmath
import numpy as np
import pytest

from skdpsparse.accounting import (
    DEFAULT_ORDERS,
    ZCDP,
    ApproxDP,
    ApproxDPEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PureDP,
    PureDPEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
    analytic_gaussian_sigma,
    event_from_dict,
    event_of,
    gaussian_rdp,
    laplace_rdp,
    pure_dp_rdp,
    subsampled_without_replacement_gaussian_rdp,
    with_event,
)
from skdpsparse.accounting import events as events_module

Z_1_1E6 = analytic_gaussian_sigma(1.0, 1.0, 1e-6)  # (1, 1e-6)-DP Gaussian, Δ = 1

ALL_EVENTS = [
    GaussianEvent(2.0, count=3),
    DiscreteGaussianEvent(1.5),
    LaplaceEvent(4.0, count=2),
    DiscreteLaplaceEvent(2.5),
    ZCDPEvent(0.1),
    PureDPEvent(0.3),
    ApproxDPEvent(0.5, 1e-7),
    SampledWithoutReplacementEvent(10, 1000, GaussianEvent(1.2)),
    SelfComposedEvent(GaussianEvent(3.0), 5),
    ComposedEvent([GaussianEvent(3.0), SelfComposedEvent(PureDPEvent(0.1), 2)]),
]


# ------------------------------------------------------------------ budgets + events
def test_budget_with_event_compares_prints_and_hashes_as_before():
    bare = ApproxDP(1.0, 1e-6)
    carried = with_event(bare, GaussianEvent(Z_1_1E6))
    assert carried == bare and hash(carried) == hash(bare)
    assert repr(carried) == repr(bare) == "ApproxDP(epsilon=1.0, delta=1e-06)"
    assert str(carried) == str(bare)
    assert carried.event == GaussianEvent(Z_1_1E6) and bare.event is None
    assert {carried, bare} == {bare}


def test_budget_event_survives_pickling_and_arithmetic_drops_it():
    carried = with_event(ZCDP(0.5), GaussianEvent(1.0))
    assert pickle.loads(pickle.dumps(carried)).event == GaussianEvent(1.0)
    assert (carried + ZCDP(0.1)).event is None
    assert (2 * carried).event is None


def test_budget_event_must_be_an_event():
    with pytest.raises(TypeError, match="PrivacyEvent"):
        PureDP(1.0, event="laplace")
    with pytest.raises(TypeError, match="PrivacyEvent"):
        with_event(PureDP(1.0), 1.0)
    assert PureDP(1.0, event=PureDPEvent(1.0)).event == PureDPEvent(1.0)


@pytest.mark.parametrize("budget, event", [
    (ApproxDP(1.0, 1e-6), GaussianEvent(Z_1_1E6)),
    (ZCDP(0.125), GaussianEvent(2.0)),
    (ZCDP(0.125), DiscreteGaussianEvent(2.0)),
    (PureDP(0.5), LaplaceEvent(2.0)),
    (PureDP(1.0), DiscreteLaplaceEvent(1.0)),
    (ApproxDP(0.5, 0.0), LaplaceEvent(2.0)),
    (ApproxDP(2.0, 1e-6), ComposedEvent([GaussianEvent(Z_1_1E6), LaplaceEvent(1.0)])),
])
def test_with_event_accepts_an_event_that_implies_the_budget(budget, event):
    assert with_event(budget, event).event == event


@pytest.mark.parametrize("budget, event", [
    (ApproxDP(1.0, 1e-6), GaussianEvent(0.99 * Z_1_1E6)),  # too little noise
    (ZCDP(0.124), GaussianEvent(2.0)),
    (PureDP(0.49), LaplaceEvent(2.0)),
    (PureDP(10.0), GaussianEvent(100.0)),  # a Gaussian is never pure DP
    (ZCDP(1.0), ApproxDPEvent(0.1, 1e-9)),  # (ε, δ) implies no zCDP
    (ApproxDP(1.0, 1e-7), ApproxDPEvent(1.0, 1e-6)),
])
def test_with_event_refuses_an_event_that_does_not_imply_the_budget(budget, event):
    with pytest.raises(ValueError, match="does not imply"):
        with_event(budget, event)


def test_event_of_bare_budgets():
    assert event_of(PureDP(0.5)) == PureDPEvent(0.5)
    assert event_of(ZCDP(0.2)) == ZCDPEvent(0.2)
    assert event_of(ApproxDP(1.0, 1e-6)) == ApproxDPEvent(1.0, 1e-6)
    assert event_of(with_event(ZCDP(0.125), GaussianEvent(2.0))) == GaussianEvent(2.0)
    with pytest.raises(TypeError):
        event_of(1.0)


# -------------------------------------------------------------------- serialisation
@pytest.mark.parametrize("event", ALL_EVENTS, ids=lambda e: type(e).__name__)
def test_events_round_trip_through_json(event):
    back = event_from_dict(json.loads(json.dumps(event.to_dict())))
    assert back == event and hash(back) == hash(event)


def test_invalid_events():
    with pytest.raises(ValueError):
        GaussianEvent(0.0)
    with pytest.raises(TypeError):
        GaussianEvent(1.0, count=1.5)
    with pytest.raises(ValueError):
        LaplaceEvent(1.0, count=0)
    with pytest.raises(ValueError):
        ApproxDPEvent(1.0, 1.0)
    with pytest.raises(TypeError, match="GaussianEvent"):
        SampledWithoutReplacementEvent(10, 100, LaplaceEvent(1.0))
    with pytest.raises(TypeError, match="GaussianEvent"):
        SampledWithoutReplacementEvent(10, 100, GaussianEvent(1.0, count=2))
    with pytest.raises(ValueError):
        SampledWithoutReplacementEvent(101, 100, GaussianEvent(1.0))
    with pytest.raises(TypeError):
        ComposedEvent([GaussianEvent(1.0), 3])


# ----------------------------------------------------------------- the guarantees
def test_gaussian_event_guarantees():
    e = GaussianEvent(2.0, count=3)
    assert e.gdp_mu2 == pytest.approx(3 / 4)
    assert e.zcdp_rho == pytest.approx(3 / 8)
    assert e.pure_epsilon is None and e.approx is None
    np.testing.assert_allclose(e.rdp(DEFAULT_ORDERS), 3 * gaussian_rdp(2.0).epsilons)


def test_discrete_gaussian_is_zcdp_but_not_exactly_gaussian_dp():
    e = DiscreteGaussianEvent(2.0, count=2)
    assert e.zcdp_rho == pytest.approx(2 / 8) and e.gdp_mu2 is None


def test_laplace_event_guarantees():
    e = LaplaceEvent(4.0, count=2)
    assert e.pure_epsilon == pytest.approx(0.5)
    assert e.zcdp_rho == pytest.approx(2 * 0.25**2 / 2)
    np.testing.assert_allclose(e.rdp(DEFAULT_ORDERS), 2 * laplace_rdp(4.0).epsilons)


@pytest.mark.parametrize("alpha", [1.5, 2.0, 10.0, 64.0])
@pytest.mark.parametrize("split", [(0.5, 0.5), (0.1, 0.3, 0.6), (0.9, 0.1)])
def test_laplace_rdp_of_a_split_shift_is_below_the_one_dimensional_one(alpha, split):
    """The multivariate claim of LaplaceEvent: Σ_j h(Δ_j) ≤ h(Σ Δ_j) (h convex, h(0)=0)."""
    b = 0.7

    def cgf(shift):  # (α − 1) × D_α of Laplace(0, b) vs Laplace(shift, b)
        return float((alpha - 1) * laplace_rdp(b / shift, [alpha]).epsilons[0])

    assert sum(cgf(s) for s in split) <= cgf(sum(split)) * (1 + 1e-12)


def test_discrete_laplace_and_pure_events():
    e = DiscreteLaplaceEvent(2.0, count=3)
    assert e.pure_epsilon == pytest.approx(1.5)
    np.testing.assert_allclose(e.rdp([2.0, 5.0]), 3 * pure_dp_rdp(0.5, [2.0, 5.0]))
    p = PureDPEvent(0.3)
    assert p.pure_epsilon == 0.3 and p.zcdp_rho == pytest.approx(0.045)
    assert ApproxDPEvent(0.3, 0.0).pure_epsilon == 0.3  # δ = 0: a pure event
    assert ApproxDPEvent(0.3, 1e-6).approx == (0.3, 1e-6)
    assert ApproxDPEvent(0.3, 1e-6).rdp() is None


def _rr_renyi_mp(eps, alpha):
    """D_α between the two output distributions of ε-randomized response, 50 digits."""
    with mpmath.workdps(50):
        eps, alpha = mpmath.mpf(eps), mpmath.mpf(alpha)
        num = mpmath.exp(alpha * eps) + mpmath.exp((1 - alpha) * eps)
        return float(mpmath.log(num / (1 + mpmath.exp(eps))) / (alpha - 1))


@pytest.mark.parametrize("eps", [1e-8, 1e-3, 0.1, 1.0, 5.0, 40.0])
def test_pure_dp_rdp_is_randomized_response(eps):
    orders = np.array([1.01, 1.5, 2.0, 7.5, 64.0, 1024.0])
    got = pure_dp_rdp(eps, orders)
    want = [_rr_renyi_mp(eps, a) for a in orders]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert np.all(got <= np.minimum(eps, orders * eps**2 / 2) * (1 + 1e-12))


def test_sampled_without_replacement_event():
    e = SampledWithoutReplacementEvent(10, 1000, GaussianEvent(1.2))
    want = subsampled_without_replacement_gaussian_rdp(10, 1000, 1.2).epsilons
    np.testing.assert_allclose(e.rdp(DEFAULT_ORDERS), want)
    assert e.zcdp_rho is None and e.gdp_mu2 is None and e.pure_epsilon is None


def test_composed_events_flatten_with_multiplicities():
    e = ComposedEvent([GaussianEvent(3.0), SelfComposedEvent(
        ComposedEvent([PureDPEvent(0.1), GaussianEvent(3.0)]), 4)])
    leaves = dict()
    for leaf, k in e.leaves():
        leaves[leaf] = leaves.get(leaf, 0) + k
    assert leaves == {GaussianEvent(3.0): 5, PureDPEvent(0.1): 4}


def test_doctests():
    result = doctest.testmod(events_module)
    assert result.attempted > 0 and result.failed == 0
