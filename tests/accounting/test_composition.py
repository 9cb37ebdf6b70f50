"""compose_events against independent references: the exact Gaussian DP curve, and
dp_accounting's privacy-loss-distribution (PLD) and RDP accountants.

Two directions for every composition: it is never below the true ε (checked against
dp_accounting's *optimistic* PLD, a lower bound on the true ε of mechanisms that
meet each event's guarantee), and it is at most what dp_accounting's RDP accountant
certifies (or, for continuous Gaussians, within 0.1 % of the exact curve).
"""

import doctest
import itertools
import logging
import math

import pytest
from scipy import optimize, stats

from skdpsparse.accounting import (
    ZCDP,
    ApproxDP,
    ApproxDPEvent,
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
    compose_events,
    event_of,
    events_pure_epsilon,
    events_zcdp_rho,
    gaussian_dp_delta,
    gaussian_dp_epsilon,
)
from skdpsparse.accounting import composition as composition_module
from skdpsparse.ledger import compose

dpa = pytest.importorskip("dp_accounting")
from dp_accounting.pld import pld_privacy_accountant  # noqa: E402
from dp_accounting.pld import privacy_loss_distribution as pld  # noqa: E402
from dp_accounting.rdp import rdp_privacy_accountant  # noqa: E402

Z_1_1E6 = analytic_gaussian_sigma(1.0, 1.0, 1e-6)
GRID = 1e-3  # PLD discretisation: the lower bounds are within ~k·GRID of the truth


@pytest.fixture(autouse=True)
def _quiet_dp_accounting(caplog):
    caplog.set_level(logging.ERROR)  # its optimistic PLDs warn about an algorithm choice


# --------------------------------------------------------------- exact Gaussian DP
def _gdp_epsilon_scipy(mu, delta):
    """Independent inverse of δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)."""
    def f(eps):
        return (stats.norm.cdf(-eps / mu + mu / 2)
                - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2) - delta)
    return optimize.brentq(f, 0.0, 100.0, xtol=1e-14)


@pytest.mark.parametrize("mu, delta", [(0.1, 1e-5), (0.76, 1e-5), (1.0, 1e-6), (3.0, 1e-3)])
def test_gaussian_dp_epsilon_inverts_the_gdp_curve(mu, delta):
    eps = gaussian_dp_epsilon(mu, delta)
    assert eps == pytest.approx(_gdp_epsilon_scipy(mu, delta), rel=1e-9)
    assert gaussian_dp_delta(mu, eps) <= delta  # the returned ε certifies δ


def test_gaussian_dp_epsilon_is_the_analytic_gaussian_calibration_inverted():
    for eps, delta in [(0.5, 1e-6), (1.0, 1e-5), (4.0, 1e-8)]:
        z = analytic_gaussian_sigma(1.0, eps, delta)
        assert gaussian_dp_epsilon(1.0 / z, delta) == pytest.approx(eps, rel=1e-9)


def test_gaussian_dp_edge_cases():
    assert gaussian_dp_epsilon(0.0, 1e-5) == 0.0
    assert gaussian_dp_epsilon(1e-3, 0.5) == 0.0  # δ(0) < 0.5 already
    assert gaussian_dp_delta(0.0, 1.0) == 0.0
    assert math.isfinite(gaussian_dp_epsilon(50.0, 1e-10))


# ----------------------------------------------------------- the acceptance number
def _pld_epsilon(parts, delta, pessimistic):
    """ε at δ of the composition of (pld factory, count) pairs."""
    total = None
    for make, count in parts:
        one = make(pessimistic).self_compose(count)
        total = one if total is None else total.compose(one)
    return total.get_epsilon_for_delta(delta)


def _gauss(z):
    return lambda p: pld.from_gaussian_mechanism(
        z, pessimistic_estimate=p, value_discretization_interval=GRID, use_connect_dots=p)


def test_ten_gaussian_fits_compose_to_the_pld_epsilon():
    """Issue 17: 10 Gaussian fits at (1, 1e-6) are (3.14, 1e-5)-DP, not (10, 1e-5)."""
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dpa.GaussianDpEvent(Z_1_1E6), 10)
    reference = acc.get_epsilon(1e-5)
    ours = compose_events([GaussianEvent(Z_1_1E6)] * 10, 1e-5).epsilon
    assert abs(ours - reference) <= 0.05 * reference
    assert ours == pytest.approx(3.1398, abs=1e-4)
    assert ours >= _pld_epsilon([(_gauss(Z_1_1E6), 10)], 1e-5, pessimistic=False)
    # The same through a count, and through a bare-budget sum, which is 10.
    assert compose_events([GaussianEvent(Z_1_1E6, count=10)], 1e-5).epsilon == ours
    assert compose([ApproxDP(1.0, 1e-6)] * 10, 1e-5).epsilon == pytest.approx(10.0)


# ------------------------------------------------------------------------ mixtures
def _laplace(z):
    return lambda p: pld.from_laplace_mechanism(
        z, pessimistic_estimate=p, value_discretization_interval=GRID, use_connect_dots=p)


def _rr(eps):  # ε-randomized response: the worst ε-DP pair
    return lambda p: pld.from_randomized_response(
        2.0 / (1.0 + math.exp(eps)), 2, pessimistic_estimate=p,
        value_discretization_interval=GRID)


def _dgauss(sigma):
    return lambda p: pld.from_discrete_gaussian_mechanism(
        sigma, pessimistic_estimate=p, value_discretization_interval=GRID)


def _dlaplace(t):
    return lambda p: pld.from_discrete_laplace_mechanism(
        1.0 / t, pessimistic_estimate=p, value_discretization_interval=GRID)


# (our events, PLDs of mechanisms that meet exactly those guarantees, dp_accounting
# RDP events or None). A ρ-zCDP event is met by the Gaussian with z = 1/√(2ρ).
MIXTURES = {
    "gauss+laplace": ([GaussianEvent(Z_1_1E6, count=10), LaplaceEvent(2.0, count=5)],
                      [(_gauss(Z_1_1E6), 10), (_laplace(2.0), 5)],
                      [(dpa.GaussianDpEvent(Z_1_1E6), 10), (dpa.LaplaceDpEvent(2.0), 5)]),
    "gauss+pure": ([GaussianEvent(3.0, count=4), PureDPEvent(0.2)],
                   [(_gauss(3.0), 4), (_rr(0.2), 1)], None),
    "gauss+many-pure": ([GaussianEvent(5.0), SelfComposedEvent(PureDPEvent(0.1), 30)],
                        [(_gauss(5.0), 1), (_rr(0.1), 30)], None),
    "gauss+zcdp": ([GaussianEvent(2.0, count=3), ZCDPEvent(0.05)],
                   [(_gauss(2.0), 3), (_gauss(1 / math.sqrt(0.1)), 1)],
                   [(dpa.GaussianDpEvent(2.0), 3), (dpa.ZCDpEvent(0.05), 1)]),
    "discrete-gauss": ([DiscreteGaussianEvent(3.0, count=6)], [(_dgauss(3.0), 6)], None),
    "discrete-laplace": ([DiscreteLaplaceEvent(4.0, count=8)], [(_dlaplace(4.0), 8)], None),
    "laplace-only": ([LaplaceEvent(10.0, count=20)], [(_laplace(10.0), 20)],
                     [(dpa.LaplaceDpEvent(10.0), 20)]),
    "everything": ([GaussianEvent(4.0, count=2), LaplaceEvent(5.0), DiscreteLaplaceEvent(6.0),
                    DiscreteGaussianEvent(4.0), ZCDPEvent(0.01), PureDPEvent(0.05)],
                   [(_gauss(4.0), 2), (_laplace(5.0), 1), (_dlaplace(6.0), 1),
                    (_dgauss(4.0), 1), (_gauss(1 / math.sqrt(0.02)), 1), (_rr(0.05), 1)],
                   None),
}


@pytest.mark.parametrize("name", list(MIXTURES))
@pytest.mark.parametrize("delta", [1e-5, 1e-3])
def test_mixtures_are_never_below_the_true_composition(name, delta):
    events, plds, _ = MIXTURES[name]
    ours = compose_events(events, delta).epsilon
    lower = _pld_epsilon(plds, delta, pessimistic=False)
    assert ours >= lower


@pytest.mark.parametrize("name", [k for k, v in MIXTURES.items() if v[2] is not None])
def test_mixtures_are_at_most_the_rdp_accountant(name):
    events, _, rdp_events = MIXTURES[name]
    acc = rdp_privacy_accountant.RdpAccountant()
    for event, count in rdp_events:
        acc.compose(event, count)
    assert compose_events(events, 1e-5).epsilon <= acc.get_epsilon(1e-5) * (1 + 1e-9)


def test_sampled_without_replacement_matches_the_rdp_accountant():
    event = SelfComposedEvent(SampledWithoutReplacementEvent(50, 1000, GaussianEvent(1.1)), 100)
    acc = rdp_privacy_accountant.RdpAccountant(
        neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    acc.compose(dpa.SampledWithoutReplacementDpEvent(
        1000, 50, dpa.GaussianDpEvent(1.1)), 100)
    reference = acc.get_epsilon(1e-5)
    assert compose_events([event], 1e-5).epsilon == pytest.approx(reference, rel=1e-6)


def test_opaque_events_compose_by_basic_composition():
    total = compose_events([ApproxDPEvent(1.0, 1e-6)] * 3, 3e-6)
    assert total == ApproxDP(3.0, 3e-6)
    # Beside Gaussians, the opaque δs come off the target first.
    mixed = compose_events([ApproxDPEvent(0.5, 1e-6), GaussianEvent(Z_1_1E6, count=10)], 1.1e-5)
    assert mixed.epsilon == pytest.approx(0.5 + gaussian_dp_epsilon(
        math.sqrt(10) / Z_1_1E6, 1e-5), rel=1e-12)
    with pytest.raises(ValueError, match="delta"):
        compose_events([ApproxDPEvent(0.5, 1e-6), GaussianEvent(1.0)], 1e-6)
    with pytest.raises(ValueError, match="delta"):
        compose_events([ApproxDPEvent(0.5, 1e-6)] * 2, 1e-6)


def test_pure_events_without_delta_add_up():
    assert compose_events([PureDPEvent(0.5), LaplaceEvent(4.0),
                           ApproxDPEvent(0.1, 0.0)]) == PureDP(0.85)
    assert compose_events([PureDPEvent(0.5)], 0.0) == ApproxDP(0.5, 0.0)
    with pytest.raises(ValueError, match="delta"):
        compose_events([PureDPEvent(0.5), ZCDPEvent(0.1)])
    assert compose_events([]) is None


def test_many_pure_events_with_a_delta_beat_basic_composition():
    total = compose_events([PureDPEvent(0.1)] * 100, 1e-6).epsilon
    assert total < 10.0
    assert total >= _pld_epsilon([(_rr(0.1), 100)], 1e-6, pessimistic=False)


def test_sums_of_pure_epsilon_and_rho():
    events = [GaussianEvent(2.0), PureDPEvent(0.5), ZCDPEvent(0.1)]
    assert events_zcdp_rho(events) == pytest.approx(1 / 8 + 0.125 + 0.1)
    assert events_pure_epsilon(events) is None
    assert events_pure_epsilon([LaplaceEvent(2.0, count=2)]) == pytest.approx(1.0)
    assert events_zcdp_rho([ApproxDPEvent(1.0, 1e-6)]) is None


BUDGETS = [PureDP(0.3), PureDP(1.0), ZCDP(0.01), ZCDP(0.2), ApproxDP(0.5, 1e-7),
           ApproxDP(1.0, 1e-6)]


@pytest.mark.parametrize("combo", list(itertools.combinations_with_replacement(BUDGETS, 3)))
def test_bare_budgets_compose_no_worse_than_their_values(combo):
    """Every bare-budget ledger of the old rules gets a total at most the old one."""
    delta = 1e-5
    old = compose(combo, delta)
    new = compose_events([event_of(b) for b in combo], delta)
    assert new.epsilon <= old.epsilon * (1 + 1e-12)


def test_doctests():
    result = doctest.testmod(composition_module)
    assert result.attempted > 0 and result.failed == 0
