"""The privacy ledger: composition rules, counting through clone / Pipeline /
GridSearchCV (processes and threads) / cross_validate, and refusal at a limit."""

import dataclasses
import doctest
import json
import math
import os

import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdpsparse import BudgetExceededError, PrivacyLedger, ledger as ledger_module
from skdpsparse.accounting import (
    ZCDP,
    ApproxDP,
    ApproxDPEvent,
    DiscreteGaussianEvent,
    GaussianEvent,
    LaplaceEvent,
    PureDP,
    ZCDPEvent,
    analytic_gaussian_sigma,
    approx_dp_to_zcdp,
    compose_events,
    with_event,
    zcdp_to_epsilon,
)
from skdpsparse.datasets import make_heavy_tailed
from skdpsparse.ledger import ENV_VAR, _Journal, _pointer_journals, _pointer_path, compose
from skdpsparse.mean import DPHeavyTailedMean, DPSparseMeanEstimator


@pytest.fixture(scope="module")
def data():
    X, _ = make_heavy_tailed(600, 3, random_state=0)
    return X


def test_compose_rules():
    assert compose([PureDP(0.5), PureDP(0.25)]) == PureDP(0.75)
    rho = 0.01 + 0.02
    assert compose([ZCDP(0.01), ZCDP(0.02)], 1e-6) == ApproxDP(zcdp_to_epsilon(rho, 1e-6), 1e-6)
    # (ε, δ) entries add; their δ is taken off the target before converting the zCDP part.
    total = compose([ApproxDP(0.3, 1e-7), ZCDP(0.05)], 1e-6)
    assert total.epsilon == pytest.approx(0.3 + zcdp_to_epsilon(0.05, 9e-7), rel=1e-12)
    # Pure entries: the better of basic composition and ε²/2-zCDP.
    many = [PureDP(0.1)] * 100 + [ZCDP(1e-9)]
    as_zcdp = zcdp_to_epsilon(100 * 0.005 + 1e-9, 1e-6)
    assert compose(many, 1e-6).epsilon == pytest.approx(min(10.0, as_zcdp), rel=1e-9)
    assert as_zcdp < 10.0
    with pytest.raises(ValueError, match="delta"):
        compose([ApproxDP(0.1, 1e-5), ZCDP(0.1)], 1e-6)


def test_records_fits_and_clones(data):
    est = DPHeavyTailedMean(epsilon=0.5, truncation=2.0, random_state=0)
    with PrivacyLedger() as ledger:
        est.fit(data)
        clone(est).fit(data)
        DPSparseMeanEstimator(epsilon=0.25, delta=0, random_state=0).fit(data)
    budgets = [b for _, b in ledger.entries]
    rho = approx_dp_to_zcdp(0.5, 1e-6)
    assert budgets == [ZCDP(rho), ZCDP(rho), PureDP(0.25)]
    assert ledger.total_zcdp() == ZCDP(2 * rho + 0.25**2 / 2)
    assert "DPHeavyTailedMean(epsilon=0.5, delta=1e-06)" in ledger.summary(1e-5)
    est.fit(data)  # outside the ledger: not recorded
    assert len(ledger.entries) == 3


@pytest.mark.parametrize("n_jobs, backend", [(1, None), (2, "loky"), (2, "threading")])
def test_grid_search_counts_every_fold_and_the_refit(data, n_jobs, backend):
    grid = GridSearchCV(
        make_pipeline(StandardScaler(), DPHeavyTailedMean(truncation=2.0, random_state=0)),
        {"dpheavytailedmean__epsilon": [0.5, 1.0]}, cv=3, n_jobs=n_jobs)
    with PrivacyLedger() as ledger:
        if backend is None:
            grid.fit(data)
        else:
            with joblib.parallel_backend(backend, n_jobs=n_jobs):
                grid.fit(data)
    entries = ledger.entries
    assert len(entries) == 2 * 3 + 1
    rhos = sorted(b.rho for _, b in entries)
    r05, r1 = approx_dp_to_zcdp(0.5, 1e-6), approx_dp_to_zcdp(1.0, 1e-6)
    best = approx_dp_to_zcdp(grid.best_params_["dpheavytailedmean__epsilon"], 1e-6)
    np.testing.assert_allclose(rhos, sorted([r05] * 3 + [r1] * 3 + [best]), rtol=1e-12)
    if backend == "loky":  # the folds really ran in worker processes
        assert ledger.processes - {os.getpid()}
    else:
        assert ledger.processes == {os.getpid()}


def test_cross_validate_counts_each_fold(data):
    with PrivacyLedger() as ledger:
        cross_validate(DPHeavyTailedMean(truncation=2.0, random_state=0), data, cv=4, n_jobs=2)
    assert len(ledger.entries) == 4


def test_limit_refuses_and_releases_nothing(data):
    with PrivacyLedger(limit=PureDP(2.5)) as ledger:
        for _ in range(2):
            DPHeavyTailedMean(epsilon=1.0, delta=0, truncation=2.0).fit(data)
        third = DPHeavyTailedMean(epsilon=1.0, delta=0, truncation=2.0)
        with pytest.raises(BudgetExceededError, match="limit"):
            third.fit(data)
        assert not hasattr(third, "mean_")
        DPHeavyTailedMean(epsilon=0.5, delta=0, truncation=2.0).fit(data)  # still fits
    assert ledger.total() == PureDP(2.5)


def test_limit_in_approx_dp_stops_a_grid_search(data):
    limit = ApproxDP(1.0, 1e-5)
    grid = GridSearchCV(DPHeavyTailedMean(truncation=2.0), {"epsilon": [0.3, 0.6]}, cv=3,
                        error_score="raise")
    with PrivacyLedger(limit=limit) as ledger:
        with pytest.raises(BudgetExceededError):
            grid.fit(data)
    assert ledger.total().epsilon <= limit.epsilon
    assert len(ledger.entries) >= 1


def test_pointer_file_and_environment_while_active(data):
    before = os.environ.get(ENV_VAR)
    with PrivacyLedger() as outer:
        with PrivacyLedger() as inner:
            paths = [outer._journal.path, inner._journal.path]
            assert _pointer_journals(os.getpid()) == paths
            assert json.loads(os.environ[ENV_VAR])[-2:] == paths
        assert _pointer_journals(os.getpid()) == paths[:1]
    assert not os.path.exists(_pointer_path(os.getpid()))
    assert os.environ.get(ENV_VAR) == before


def test_a_stale_pointer_is_not_followed(tmp_path):
    """A pointer left by a dead process must not capture a later one with its id."""
    journal = tmp_path / "journal.jsonl"
    journal.write_text(json.dumps({"limit": None}) + "\n")
    path = _pointer_path(os.getpid())
    assert not os.path.exists(path)
    try:
        for start, followed in [(-1, False), (ledger_module._start_time(os.getpid()), True)]:
            with open(path, "w") as f:
                json.dump({"pid": os.getpid(), "start": start, "journals": [str(journal)]}, f)
            assert (_pointer_journals(os.getpid()) == [str(journal)]) is followed
    finally:
        os.remove(path)


def test_a_closed_journal_is_not_recreated(tmp_path):
    path = tmp_path / "closed.jsonl"
    assert _Journal(str(path)).charge(PureDP(1.0), "late fit") is False
    assert not path.exists()


def test_ancestors_reach_beyond_the_parent():
    chain = ledger_module._ancestors()
    assert chain[0] == os.getppid()
    if not os.path.exists("/proc/self/status"):
        return  # elsewhere only the parent is known
    for child, parent in zip(chain, chain[1:]):  # Linux: each one's parent, from /proc
        with open(f"/proc/{child}/status") as f:
            ppid = next(int(line.split()[1]) for line in f if line.startswith("PPid:"))
        assert parent == ppid
    assert len(chain) >= 2


def test_invalid_limit():
    with pytest.raises(TypeError, match="limit"):
        PrivacyLedger(limit=1.0)
    led = PrivacyLedger()
    with pytest.raises(RuntimeError, match="active"):
        led.charge(PureDP(1.0))


# ------------------------------------------------------------ composition by events
Z_1_1E6 = analytic_gaussian_sigma(1.0, 1.0, 1e-6)  # a (1, 1e-6)-DP Gaussian, Δ = 1


def _gaussian_fit():
    return with_event(ApproxDP(1.0, 1e-6), GaussianEvent(Z_1_1E6))


def test_ten_gaussian_fits_total_within_5_percent_of_pld():
    """Issue 17: 10 Gaussian fits at (1, 1e-6) totalled (10, 1e-5); PLD gives 3.14."""
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dpa.GaussianDpEvent(Z_1_1E6), 10)
    reference = acc.get_epsilon(1e-5)
    with PrivacyLedger() as ledger:
        for _ in range(10):
            ledger.charge(_gaussian_fit())
    total = ledger.total()  # no delta: the entries' total, 1e-5
    assert total.delta == pytest.approx(1e-5)
    assert abs(total.epsilon - reference) <= 0.05 * reference
    assert ledger.total(1e-5) == total
    assert ledger.entries[0][1] == ApproxDP(1.0, 1e-6)  # the budget reads as before
    assert ledger.entries[0][1].event == GaussianEvent(Z_1_1E6)
    assert "GaussianEvent" in ledger.summary()
    assert ledger.total_zcdp().rho == pytest.approx(10 / (2 * Z_1_1E6**2))


def test_ten_discrete_gaussian_fits_compose_in_rho():
    """Discrete Gaussian fits are zCDP, not exactly Gaussian DP: ten calibrated to
    (1, 1e-6) through zCDP total 10ρ, about the 3.14 of the continuous ones."""
    rho = approx_dp_to_zcdp(1.0, 1e-6)
    event = DiscreteGaussianEvent(1.0 / math.sqrt(2.0 * rho))
    with PrivacyLedger() as ledger:
        for _ in range(10):
            ledger.charge(with_event(ApproxDP(1.0, 1e-6), event))
    total = ledger.total()
    assert total.epsilon == pytest.approx(zcdp_to_epsilon(10 * rho, 1e-5), rel=1e-6)
    assert 3.0 < total.epsilon <= 1.05 * 3.1398


def test_limit_checks_the_composed_events():
    """A (3.2, 1e-5) limit lets ten (1, 1e-6) Gaussian fits run (basic composition
    stopped at three), and refuses the eleventh (√11 · 1/z is over it)."""
    with PrivacyLedger(limit=ApproxDP(3.2, 1e-5)) as ledger:
        for _ in range(10):
            ledger.charge(_gaussian_fit())
        with pytest.raises(BudgetExceededError, match="limit"):
            ledger.charge(_gaussian_fit())
    assert len(ledger.entries) == 10
    assert ledger.total().epsilon <= 3.2


def test_total_without_delta_uses_the_entries_deltas():
    with PrivacyLedger() as ledger:
        ledger.charge(ApproxDP(0.5, 1e-6))
        ledger.charge(ApproxDP(0.25, 2e-6))
        ledger.charge(PureDP(0.25))
    assert ledger.total() == ApproxDP(1.0, 3e-6)  # opaque entries: basic composition
    with PrivacyLedger() as ledger:
        ledger.charge(ApproxDP(0.5, 1e-6))
        ledger.charge(ZCDP(0.01))  # has no δ of its own
    with pytest.raises(ValueError, match="delta"):
        ledger.total()
    assert "needs a target delta" in ledger.summary()
    assert ledger.total(1e-5).epsilon == pytest.approx(
        0.5 + zcdp_to_epsilon(0.01, 9e-6), rel=1e-9)


def test_mixed_ledger_is_the_composition_of_its_events():
    budgets = [_gaussian_fit(), with_event(PureDP(0.5), LaplaceEvent(2.0)), ZCDP(0.01),
               ApproxDP(0.1, 1e-7)]
    with PrivacyLedger() as ledger:
        for b in budgets:
            ledger.charge(b)
    events = [GaussianEvent(Z_1_1E6), LaplaceEvent(2.0), ZCDPEvent(0.01),
              ApproxDPEvent(0.1, 1e-7)]
    assert ledger.total(1e-5) == compose_events(events, 1e-5)
    assert ledger.total(1e-5).epsilon <= compose(budgets, 1e-5).epsilon


def test_charge_refuses_an_event_that_does_not_imply_its_budget():
    wrong = dataclasses.replace(ApproxDP(1.0, 1e-6), event=GaussianEvent(1.0))
    with PrivacyLedger() as ledger:
        with pytest.raises(ValueError, match="does not imply"):
            ledger.charge(wrong)
    assert ledger.entries == []


def test_gaussian_estimator_fits_compose_by_their_events():
    """Through the estimators, once their mechanisms attach events (until then the
    fits are composed by their budgets and this test is skipped)."""
    X = np.random.default_rng(0).uniform(-0.5, 0.5, size=(500, 4))
    est = DPSparseMeanEstimator(epsilon=1.0, delta=1e-6, method="gaussian", norm_bound=1.0,
                                random_state=0)
    with PrivacyLedger() as ledger:
        for _ in range(10):
            clone(est).fit(X)
    spent = [b for _, b in ledger.entries]
    if spent[0].event is None:
        pytest.skip("DPSparseMeanEstimator does not record its privacy event yet")
    assert len(spent) == 10
    assert ledger.total(1e-5).epsilon < 3.3  # (10, 1e-5) by basic composition


def test_doctests():
    result = doctest.testmod(ledger_module)
    assert result.attempted > 0 and result.failed == 0
