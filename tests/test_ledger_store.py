"""Issue 23: a privacy budget that persists. ``PrivacyLedger(store=, dataset=)`` keeps
its entries in an SQLite database or on a PostgreSQL server (the tests of the
behaviour both share run on both), adds every session on a dataset to the same total,
holds them to the dataset's limit, refuses atomically, and says so when the store is
corrupt, altered or missing instead of reading it as empty.

Processes (workers, crashes, concurrent writers, a lock held by another process) are
in test_ledger_store_processes.py.
"""

import json
import os
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from skdpsparse import BudgetExceededError, PrivacyLedger
from skdpsparse.accounting import (
    ZCDP,
    ApproxDP,
    GaussianEvent,
    LaplaceEvent,
    PureDP,
    ZCDPEvent,
    analytic_gaussian_sigma,
    with_event,
)
from skdpsparse.datasets import make_heavy_tailed
from skdpsparse.ledger import LedgerStoreError, _json_params
from skdpsparse.mean import DPHeavyTailedMean
from test_ledger_store_server import any_store  # noqa: F401 - fixture

Z = analytic_gaussian_sigma(1.0, 1.0, 1e-6)  # a (1, 1e-6)-DP Gaussian, Δ = 1


def _gaussian():
    return with_event(ApproxDP(1.0, 1e-6), GaussianEvent(Z))


@pytest.fixture(scope="module")
def data():
    X, _ = make_heavy_tailed(300, 3, random_state=0)
    return X


@pytest.fixture
def store(tmp_path):
    return str(tmp_path / "budget.sqlite")


def _pure_fit(epsilon=1.0):
    return DPHeavyTailedMean(epsilon=epsilon, delta=0, truncation=2.0)


def _rows(store, sql="SELECT * FROM ledger_entries"):
    """Rows read without skdpsparse: sqlite3 for a file, psycopg for a server."""
    if "://" in store:
        import psycopg

        with psycopg.connect(store) as conn:
            return conn.execute(sql).fetchall()
    with sqlite3.connect(store) as conn:
        return conn.execute(sql).fetchall()


def _run_script(script, *args):
    """Run ``script`` in a fresh interpreter: another session, as a second script."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]]
                                                  if env.get("PYTHONPATH") else []))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args],
                          capture_output=True, text=True, env=env, timeout=120)


# ------------------------------------------------------------------- persistence
SECOND_SCRIPT = """
    import json, sys
    from skdpsparse import BudgetExceededError, PrivacyLedger
    from skdpsparse.datasets import make_heavy_tailed
    from skdpsparse.mean import DPHeavyTailedMean

    X, _ = make_heavy_tailed(300, 3, random_state=0)
    fitted, refused = 0, 0
    # No limit given: the one the first script recorded for the dataset applies.
    with PrivacyLedger(store=sys.argv[1], dataset="patients", create=False) as ledger:
        for _ in range(3):
            est = DPHeavyTailedMean(epsilon=1.0, delta=0, truncation=2.0)
            try:
                est.fit(X)
                fitted += 1
            except BudgetExceededError:
                refused += 1
                assert not hasattr(est, "mean_")
    print(json.dumps({"fitted": fitted, "refused": refused, "total": str(ledger.total())}))
"""


def test_the_total_persists_across_scripts_and_the_limit_holds(data, store):
    """Two fits here, then a second interpreter on the same dataset gets one more:
    the limit of 3 counts the first script's two."""
    with PrivacyLedger(store=store, dataset="patients", limit=PureDP(3.0)) as first:
        _pure_fit().fit(data)
        _pure_fit().fit(data)
    out = _run_script(SECOND_SCRIPT, store)
    assert out.returncode == 0, out.stderr
    second = json.loads(out.stdout.strip().splitlines()[-1])
    assert second == {"fitted": 1, "refused": 2, "total": str(PureDP(3.0))}
    assert len(first.entries) == 3 and first.total() == PureDP(3.0)  # read from the store
    sessions = {row[0] for row in _rows(store, "SELECT session FROM ledger_entries")}
    assert len(sessions) == 2
    with PrivacyLedger(store=store, dataset="other") as other:  # datasets are separate
        _pure_fit().fit(data)
    assert len(other.entries) == 1 and len(first.entries) == 3


def test_without_a_store_nothing_persists(data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with PrivacyLedger(limit=PureDP(1.0)) as ledger:
        _pure_fit().fit(data)
    with PrivacyLedger(limit=PureDP(1.0)):
        _pure_fit().fit(data)  # a fresh budget: today's behaviour
    assert len(ledger.entries) == 1
    assert ledger.history()["dataset"].isna().all()
    assert not any(name.endswith(".sqlite") for name in os.listdir(tmp_path))


def test_a_relative_path_names_one_file_wherever_the_process_runs(data, tmp_path,
                                                                   monkeypatch):
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    with PrivacyLedger(store="budget.sqlite", dataset="d"):
        _pure_fit().fit(data)
    monkeypatch.chdir(tmp_path / "elsewhere")
    ledger = PrivacyLedger(store=tmp_path / "budget.sqlite", dataset="d", create=False)
    assert len(ledger.entries) == 1
    assert not (tmp_path / "elsewhere" / "budget.sqlite").exists()


# ------------------------------------------------------------------- what is kept
def test_history_records_each_fit(data, any_store):
    est = DPHeavyTailedMean(epsilon=0.5, truncation=np.float64(2.0), n_groups=np.int64(5),
                            random_state=0)
    with PrivacyLedger(store=any_store, dataset="patients") as ledger:
        est.fit(data)
        ledger.charge(_gaussian(), source="a Gaussian count")
    history = ledger.history()
    assert list(history.columns) == ["id", "time", "dataset", "session", "estimator",
                                     "params", "source", "guarantee", "event", "pid", "host"]
    fit, manual = history.iloc[0], history.iloc[1]
    assert fit["estimator"] == "DPHeavyTailedMean"
    assert fit["params"] == {**est.get_params(), "truncation": 2.0, "n_groups": 5}
    assert fit["guarantee"] == est.privacy_spent_ and str(fit["guarantee"]) == str(
        est.privacy_spent_)
    assert fit["pid"] == os.getpid() and fit["host"] and fit["session"] == ledger.session
    assert fit["dataset"] == "patients" and str(history["time"].dt.tz) == "UTC"
    assert pd.isna(manual["estimator"]) and manual["source"] == "a Gaussian count"
    assert manual["event"] == GaussianEvent(Z) and manual["guarantee"].event == GaussianEvent(Z)
    # The raw table: JSON a script in any language can read back.
    (budget, event, params), = _rows(any_store, "SELECT budget, event, params FROM "
                                                "ledger_entries WHERE estimator IS NULL")
    assert json.loads(budget) == {"type": "ApproxDP", "epsilon": 1.0, "delta": 1e-6}
    assert json.loads(event) == {"type": "GaussianEvent", "noise_multiplier": Z, "count": 1}
    assert params is None


def test_history_without_pandas_is_a_list_of_records(any_store, monkeypatch):
    with PrivacyLedger(store=any_store, dataset="d") as ledger:
        ledger.charge(PureDP(0.5))
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` now fails
    history = ledger.history()
    assert isinstance(history, list) and len(history) == 1
    assert history[0]["guarantee"] == PureDP(0.5) and history[0]["time"].tzinfo is not None


def test_parameters_json_with_a_repr_fallback():
    params = _json_params({"a": np.int64(3), "b": np.bool_(True), "c": (1, 2.5),
                           "d": {"k": None}, "e": object(), "f": np.arange(5000),
                           "g": float("inf")})
    assert params["a"] == 3 and params["b"] is True and params["c"] == [1, 2.5]
    assert params["d"] == {"k": None} and params["g"] == float("inf")
    assert params["e"].startswith("<object object")
    assert params["f"].startswith("array([") and len(params["f"]) <= 500
    json.dumps(params)


def test_total_composes_the_stored_events_as_the_in_memory_ledger(any_store):
    budgets = [_gaussian()] * 6 + [with_event(PureDP(0.5), LaplaceEvent(2.0)),
                                   with_event(ZCDP(0.01), ZCDPEvent(0.01)),
                                   ApproxDP(0.1, 1e-7)]
    with PrivacyLedger(store=any_store, dataset="d") as stored:
        for budget in budgets[:5]:
            stored.charge(budget)
    with PrivacyLedger(store=any_store, dataset="d") as stored_again:  # a later session
        for budget in budgets[5:]:
            stored_again.charge(budget)
    with PrivacyLedger() as reference:
        for budget in budgets:
            reference.charge(budget)
    assert stored.entries == reference.entries  # the same budgets, events included
    for delta in (1e-5, 1e-4):
        assert stored.total(delta) == reference.total(delta)
    assert stored.total_zcdp() == reference.total_zcdp()
    assert stored.total(1e-5).epsilon < 6.0 + 0.5 + 0.1 + 1  # events, not budgets, add up


# -------------------------------------------------------------------------- limits
def test_a_refused_fit_writes_nothing_anywhere_and_releases_nothing(data, any_store):
    with PrivacyLedger(store=any_store, dataset="d", limit=PureDP(1.5)):
        with PrivacyLedger() as inner:  # no limit of its own
            _pure_fit().fit(data)
            refused = _pure_fit()
            with pytest.raises(BudgetExceededError, match="dataset 'd'"):
                refused.fit(data)
            assert not hasattr(refused, "mean_") and not hasattr(refused, "privacy_spent_")
        assert len(inner.entries) == 1  # the store's refusal wrote nothing here either
    assert len(_rows(any_store)) == 1
    # The other way round: the in-memory ledger refuses, the store gets nothing.
    with PrivacyLedger(store=any_store, dataset="e"), PrivacyLedger(limit=PureDP(0.5)):
        with pytest.raises(BudgetExceededError):
            _pure_fit().fit(data)
    assert len(_rows(any_store)) == 1


def test_the_limit_belongs_to_the_dataset(data, any_store):
    with PrivacyLedger(store=any_store, dataset="d", limit=PureDP(2.0)):
        _pure_fit().fit(data)
    with pytest.raises(ValueError, match="cannot change it"):
        PrivacyLedger(store=any_store, dataset="d", limit=PureDP(10.0)).__enter__()
    with PrivacyLedger(store=any_store, dataset="d", limit=PureDP(2.0)) as same:
        _pure_fit().fit(data)
        with pytest.raises(BudgetExceededError):
            _pure_fit(0.01).fit(data)
    assert same.total() == PureDP(2.0)
    # A dataset with no limit gets one when a ledger first gives it (that only restricts).
    with PrivacyLedger(store=any_store, dataset="open"):
        _pure_fit().fit(data)
    with PrivacyLedger(store=any_store, dataset="open", limit=PureDP(1.5)):
        with pytest.raises(BudgetExceededError):
            _pure_fit().fit(data)
    # An ApproxDP limit's delta is the target of total().
    with PrivacyLedger(store=any_store, dataset="g", limit=ApproxDP(3.2, 1e-5)):
        pass
    with PrivacyLedger(store=any_store, dataset="g") as ledger:
        for _ in range(10):
            ledger.charge(_gaussian())
        with pytest.raises(BudgetExceededError):
            ledger.charge(_gaussian())
    assert ledger.total().delta == 1e-5 and ledger.total().epsilon <= 3.2
    assert "limit: (3.2, 1e-05)-DP" in ledger.summary()


def test_nested_ledgers_on_one_store_charge_each_dataset_once(data, any_store):
    """Two datasets of one store share one transaction (a second BEGIN IMMEDIATE
    would wait on the first: timeout=1 turns that into an error, not a hang)."""
    with PrivacyLedger(store=any_store, dataset="a", timeout=1) as a, \
            PrivacyLedger(store=any_store, dataset="b", timeout=1) as b, \
            PrivacyLedger(store=any_store, dataset="a", timeout=1) as a_again:
        _pure_fit().fit(data)
    assert len(a.entries) == len(b.entries) == 1
    assert a.history()["session"].tolist() == [a_again.session]  # the innermost's
    assert a_again.entries == a.entries


# ------------------------------------------------------------------ argument checks
def test_arguments(store):
    with pytest.raises(ValueError, match="dataset"):
        PrivacyLedger(store=store)
    with pytest.raises(ValueError, match="store="):
        PrivacyLedger(dataset="d")
    with pytest.raises(TypeError, match="store must be"):
        PrivacyLedger(store=3, dataset="d")
    with pytest.raises(ValueError, match="timeout"):
        PrivacyLedger(store=store, dataset="d", timeout=0)
    with pytest.raises(RuntimeError, match="active"):
        PrivacyLedger(store=store, dataset="d").charge(PureDP(1.0))


# ----------------------------------------------- missing, altered, corrupt stores
def test_create_false_refuses_a_missing_store_or_dataset(store):
    with pytest.raises(LedgerStoreError, match="no budget store"):
        PrivacyLedger(store=store, dataset="d", create=False).__enter__()
    assert not os.path.exists(store)
    with pytest.raises(LedgerStoreError, match="no budget store"):  # reading never creates
        PrivacyLedger(store=store, dataset="d").history()
    with PrivacyLedger(store=store, dataset="patients"):
        pass
    with pytest.raises(LedgerStoreError, match=r"no dataset 'patinets'.*'patients'"):
        PrivacyLedger(store=store, dataset="patinets", create=False).__enter__()
    with pytest.raises(LedgerStoreError, match="no dataset"):
        PrivacyLedger(store=store, dataset="patinets").total()


def test_a_file_that_is_not_a_budget_store(tmp_path):
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"these are not the pages of an SQLite database " * 100)
    ledger = PrivacyLedger(store=garbage, dataset="d")
    for attempt in (ledger.__enter__, ledger.history, ledger.total):
        with pytest.raises(LedgerStoreError, match="corrupt or not an SQLite database"):
            attempt()
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE patients (id INTEGER)")
    with pytest.raises(LedgerStoreError, match="not a skdpsparse budget store"):
        PrivacyLedger(store=other, dataset="d", create=False).__enter__()


def test_damaged_pages_raise_instead_of_reading_zero(store):
    with PrivacyLedger(store=store, dataset="d") as ledger:
        for _ in range(150):  # several pages of entries
            ledger.charge(PureDP(0.01), source="x" * 60)
    with open(store, "r+b") as f:  # overwrite the pages after the schema's
        f.seek(5 * 4096)
        f.write(os.urandom(os.path.getsize(store) - 5 * 4096))
    with pytest.raises(LedgerStoreError, match="corrupt"):
        ledger.total()
    with pytest.raises(LedgerStoreError, match="corrupt"):
        PrivacyLedger(store=store, dataset="d").__enter__()


def test_an_altered_entry_raises_instead_of_vanishing(data, store):
    with PrivacyLedger(store=store, dataset="d", limit=PureDP(5.0)) as ledger:
        _pure_fit().fit(data)
        _pure_fit().fit(data)
        with sqlite3.connect(store) as conn:
            conn.execute("UPDATE ledger_entries SET budget = '{\"type\": \"Pure' WHERE id = 2")
        est = _pure_fit()
        with pytest.raises(LedgerStoreError, match="entry 2"):
            est.fit(data)  # the limit check reads every entry: it cannot skip one
        assert not hasattr(est, "mean_")
        with pytest.raises(LedgerStoreError, match="entry 2"):
            ledger.total()
        with sqlite3.connect(store) as conn:
            conn.execute("UPDATE ledger_entries SET budget = '{\"type\": \"Nope\"}' WHERE id = 2")
        with pytest.raises(LedgerStoreError, match="entry 2"):
            ledger.history()
    assert len(_rows(store)) == 2


def test_a_store_deleted_during_a_session_is_not_recreated_empty(data, store):
    closing = pytest.warns(RuntimeWarning, match="could not be recorded as closed")
    with closing, PrivacyLedger(store=store, dataset="d"):
        _pure_fit().fit(data)
        os.remove(store)
        est = _pure_fit()
        with pytest.raises(LedgerStoreError, match="no budget store"):
            est.fit(data)
        assert not hasattr(est, "mean_")
    assert not os.path.exists(store)
