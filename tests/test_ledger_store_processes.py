"""The budget store across real processes: grid-search workers under every joblib
backend write to it, a process killed mid-fit or mid-transaction leaves whole entries
only, a lock held by another process gives a clear error, and concurrent writers lose
no entry and never exceed the limit. No database is mocked: every test uses real
processes and an SQLite file or, where the test says ``any_store``, also a database on
a real PostgreSQL server (test_ledger_store_server.py starts it). Tests whose extra
interpreters would only repeat, on the server, what another server test shows run on
SQLite alone, to keep CI short.
"""

import contextlib
import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV

from skdpsparse import BudgetExceededError, PrivacyLedger
from skdpsparse.accounting import PureDP
from skdpsparse.datasets import make_heavy_tailed
from skdpsparse.ledger import ENV_VAR, LedgerStoreError, charge_budget
from skdpsparse.mean import DPHeavyTailedMean
from test_ledger_processes import BACKENDS, _use, start_method  # noqa: F401 - fixture
from test_ledger_store_server import any_store  # noqa: F401 - fixture
from test_ledger_store_server import entries as _server_entries
from test_ledger_store_server import new_database

pytestmark = pytest.mark.filterwarnings(
    "ignore::skdpsparse.exceptions.PrivacyLeakWarning",
    "ignore::sklearn.exceptions.FitFailedWarning",
    "ignore:.*One or more of the test scores are non-finite.*:UserWarning",
)


@pytest.fixture(scope="module")
def data():
    X, _ = make_heavy_tailed(240, 3, random_state=0)
    return X


@pytest.fixture
def store(tmp_path):
    return str(tmp_path / "budget.sqlite")


def _entries(store):
    """Every row, read with the plain sqlite3 module or psycopg (no skdpsparse code)."""
    if "://" in store:
        return _server_entries(store)
    with sqlite3.connect(store) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT * FROM ledger_entries ORDER BY id")]


def _assert_whole(entry):
    """Every column of an entry is there and decodes."""
    assert entry["estimator"] and entry["source"] and entry["guarantee"]
    assert entry["session"] and entry["host"] and entry["pid"] > 0 and entry["time"]
    assert json.loads(entry["params"])["epsilon"] == 1.0
    assert json.loads(entry["budget"]) == {"type": "PureDP", "epsilon": 1.0}


def _script(body):
    """Run ``body`` in a fresh interpreter; returns the Popen object (stdout piped)."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]]
                                                  if env.get("PYTHONPATH") else []))
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(body)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


PRELUDE = """
    import os, sys
    from skdpsparse import PrivacyLedger
    from skdpsparse.accounting import PureDP
    from skdpsparse.datasets import make_heavy_tailed
    from skdpsparse.mean import DPHeavyTailedMean

    X, _ = make_heavy_tailed(240, 3, random_state=0)
    STORE = {store!r}

    def fit():
        return DPHeavyTailedMean(epsilon=1.0, delta=0, truncation=2.0).fit(X)
"""


# -------------------------------------------------------------------------- workers
@pytest.mark.parametrize("backend, method", BACKENDS)
def test_grid_search_workers_write_to_the_store(data, any_store, start_method, backend,
                                                method):
    """6 fits of 1-DP in workers against the dataset's 4-DP limit, of which 1 was
    spent by an earlier session: 3 run, 3 are refused (NaN scores)."""
    if method == "spawn" and "://" in any_store:
        pytest.skip("spawned workers start as loky's do (a fresh interpreter), which the "
                    "server store is tested with; left out to keep CI short")
    with PrivacyLedger(store=any_store, dataset="d", limit=PureDP(4.0)):
        DPHeavyTailedMean(epsilon=1.0, delta=0, truncation=2.0).fit(data)
    grid = GridSearchCV(DPHeavyTailedMean(epsilon=1.0, delta=0, random_state=0),
                        {"truncation": [2.0, 3.0]}, cv=3, refit=False)
    with _use(backend, method):  # pools started before this session's ledger
        with PrivacyLedger(store=any_store, dataset="d") as ledger:
            grid.fit(data)
    entries = _entries(any_store)
    assert len(entries) == 4 and ledger.total() == PureDP(4.0)
    scores = np.concatenate([grid.cv_results_[f"split{i}_test_score"] for i in range(3)])
    assert np.isnan(scores).sum() == 3
    session = [e for e in entries if e["session"] == ledger.session]
    assert len(session) == 3
    if backend != "threading":  # the fits really ran in worker processes
        assert {e["pid"] for e in session} - {os.getpid()}


@contextlib.contextmanager
def _journals_hidden(tmp_path):
    """Processes started inside find no journal of the active ledgers: the journals'
    environment variable is gone, and their temporary folder (where they would look
    for their ancestors' pointer files) is another. Only the store's variable is left,
    as for a process in another container that shares the server, not the files."""
    before = {name: os.environ.get(name) for name in (ENV_VAR, "TMPDIR")}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    os.environ.pop(ENV_VAR, None)
    os.environ["TMPDIR"] = str(elsewhere)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


UNTIL_CLOSED = """
    from skdpsparse.ledger import _active_journals

    assert not _active_journals()  # nothing to find the way workers used to
    fit()
    print("fitted", flush=True)
    sys.stdin.readline()  # meanwhile the test closes the ledger
    fit()
    print("fitted again", flush=True)
"""


def test_a_process_that_finds_no_journal_charges_the_store(store, tmp_path):
    """Started inside the ledger, it charges the store named in its environment, in
    the ledger's session; once the ledger has closed, its fits are no longer charged
    (the session is recorded closed in the store)."""
    with PrivacyLedger(store=store, dataset="d") as ledger:
        with _journals_hidden(tmp_path):
            child = _script(PRELUDE.format(store=store) + UNTIL_CLOSED)
        assert child.stdout.readline().strip() == "fitted", child.stderr.read()
    out, err = child.communicate("\n", timeout=120)
    assert child.returncode == 0 and out.strip() == "fitted again", err
    entry, = _entries(store)
    _assert_whole(entry)
    assert entry["pid"] == child.pid and entry["session"] == ledger.session


def _store_for_dask(tmp_path):
    """The PostgreSQL store where a server can be started (what a team's cluster
    would share), else an SQLite file."""
    try:
        return new_database()
    except pytest.skip.Exception:
        return str(tmp_path / "budget.sqlite")


def test_dask_local_cluster_workers_charge_the_store(data, tmp_path):
    """A Dask LocalCluster (worker processes) started inside the ledger, its workers
    unable to find the ledger's journal: 6 fits of 1-DP against a 4-DP limit, 4 are
    charged to the store by the workers, 2 refused."""
    distributed = pytest.importorskip("distributed")
    import joblib

    store = _store_for_dask(tmp_path)
    grid = GridSearchCV(DPHeavyTailedMean(epsilon=1.0, delta=0, random_state=0),
                        {"truncation": [2.0, 3.0]}, cv=3, refit=False)
    with PrivacyLedger(store=store, dataset="d", limit=PureDP(4.0)) as ledger:
        with _journals_hidden(tmp_path):
            cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1,
                                               processes=True, dashboard_address=None)
        with cluster, distributed.Client(cluster), joblib.parallel_config(backend="dask"):
            grid.fit(data)
    entries = _entries(store)
    assert len(entries) == 4 and ledger.total() == PureDP(4.0)
    assert {e["session"] for e in entries} == {ledger.session}
    assert os.getpid() not in {e["pid"] for e in entries}  # charged by the workers
    scores = np.concatenate([grid.cv_results_[f"split{i}_test_score"] for i in range(3)])
    assert np.isnan(scores).sum() == 2


# --------------------------------------------------------------------------- crashes
def test_a_crash_between_charge_and_release_leaves_the_whole_entry(data, any_store):
    """The fit is charged, then its process dies before setting any fitted attribute:
    the entry is stored whole (the budget was spent: whatever the process did next
    is not the ledger's to know), and the next session counts it."""
    child = _script(PRELUDE.format(store=any_store) + """
    import skdpsparse.ledger

    real = skdpsparse.ledger._charge  # what charge_budget calls, wherever it is imported

    def charge_then_die(*args):
        real(*args)  # committed
        os._exit(3)  # before charge_budget returns: before any attribute is set

    skdpsparse.ledger._charge = charge_then_die
    with PrivacyLedger(store=STORE, dataset="d", limit=PureDP(1.5)):
        print(os.getpid(), flush=True)
        fit()
    """)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 3, err
    entry, = _entries(any_store)
    _assert_whole(entry)
    assert entry["pid"] == int(out.split()[0])
    with PrivacyLedger(store=any_store, dataset="d") as ledger:
        with pytest.raises(BudgetExceededError):
            DPHeavyTailedMean(epsilon=1.0, delta=0, truncation=2.0).fit(data)
    assert ledger.total() == PureDP(1.0)


def test_a_crash_inside_the_transaction_leaves_no_entry(data, any_store):
    """The process dies after its INSERT, before COMMIT (the rollback journal it
    leaves shows the write transaction was open; a server sees its connection drop):
    the store holds no trace of it."""
    child = _script(PRELUDE.format(store=any_store) + """
    from skdpsparse.ledger import _charge, _record

    est = DPHeavyTailedMean(epsilon=1.0, delta=0)
    with PrivacyLedger(store=STORE, dataset="d", limit=PureDP(1.5)) as ledger:
        fit()
        target = ledger._target()
        reservation = target.reserve(PureDP(0.5), _record(PureDP(0.5), est))
        reservation.__enter__()  # limit checked, row inserted, not committed
        os._exit(3)
    """)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 3, err
    if "://" not in any_store:
        assert os.path.getsize(any_store + "-journal") > 0  # the insert's, left by the crash
    entry, = _entries(any_store)  # the fit before the crash; not the uncommitted charge
    _assert_whole(entry)
    with PrivacyLedger(store=any_store, dataset="d") as ledger:
        DPHeavyTailedMean(epsilon=0.5, delta=0, truncation=2.0).fit(data)
    assert ledger.total() == PureDP(1.5)


def test_a_writer_killed_at_any_moment_leaves_whole_entries(store):
    """Kill -9 a process charging as fast as it can: every stored entry is whole, and
    there are as many as it reported committed (or one more, committed before it
    could say so)."""
    child = _script(PRELUDE.format(store=store) + """
    from skdpsparse.ledger import charge_budget

    est = DPHeavyTailedMean(epsilon=1.0, delta=0)
    with PrivacyLedger(store=STORE, dataset="d"):
        for i in range(1, 100_000):
            charge_budget(est, PureDP(1.0))
            print(i, flush=True)
    """)
    committed = 0
    while committed < 30:  # well into the stream of transactions
        line = child.stdout.readline()
        assert line, child.stderr.read()
        committed = int(line)
    child.kill()
    child.wait(timeout=60)
    committed = max([committed] + [int(x) for x in child.stdout.read().split()])
    entries = _entries(store)
    assert committed <= len(entries) <= committed + 1
    for entry in entries:
        _assert_whole(entry)


# -------------------------------------------------------------------------- locking
def test_a_locked_store_gives_a_clear_error(data, store):
    with PrivacyLedger(store=store, dataset="d", timeout=0.3) as ledger:
        DPHeavyTailedMean(epsilon=1.0, delta=0, truncation=2.0).fit(data)
        holder = _script(f"""
            import sqlite3, sys
            conn = sqlite3.connect({store!r}, isolation_level=None)
            conn.execute("BEGIN EXCLUSIVE")  # e.g. a hung maintenance script
            print("locked", flush=True)
            sys.stdin.readline()
            conn.execute("ROLLBACK")
        """)
        try:
            assert holder.stdout.readline().strip() == "locked", holder.stderr.read()
            est = DPHeavyTailedMean(epsilon=1.0, delta=0, truncation=2.0)
            start = time.perf_counter()
            with pytest.raises(LedgerStoreError, match=r"locked.*timeout=0.3 s"):
                est.fit(data)
            assert time.perf_counter() - start < 10
            assert not hasattr(est, "mean_")
            with pytest.raises(LedgerStoreError, match="locked"):
                ledger.total()  # never a silent zero
        finally:
            holder.communicate("\n", timeout=60)
        est.fit(data)  # the lock is gone: the fit goes through
        assert hasattr(est, "mean_")
    assert len(ledger.entries) == 2


# ----------------------------------------------------------------------- concurrency
N_PROCESSES, N_CHARGES, EPS, LIMIT = 8, 50, 0.01, 3.0  # the limit admits 300 of 400


def _writer(store, own_session, barrier, results):
    """Charge N_CHARGES fits of EPS as fast as possible; report how many went in.

    With ``own_session`` the process opens its own ledger on the dataset (another
    script); otherwise it charges inside the test's ledger, as a worker of it."""
    est = DPHeavyTailedMean(epsilon=EPS, delta=0)
    ledger = PrivacyLedger(store=store, dataset="d") if own_session else None
    accepted = 0
    try:
        if ledger is not None:
            ledger.__enter__()
        barrier.wait(timeout=120)
        start = time.time()
        for _ in range(N_CHARGES):
            try:
                charge_budget(est, PureDP(EPS))
                accepted += 1
            except BudgetExceededError:
                pass
        span = (start, time.time())
        if ledger is not None:
            ledger.__exit__(None, None, None)
    except Exception as err:  # reported, so that the test fails at once, not by timeout
        results.put((os.getpid(), (repr(err), None, None)))
        return
    results.put((os.getpid(), (accepted, None if ledger is None else ledger.session, span)))


def test_concurrent_writers_lose_nothing_and_never_exceed_the_limit(any_store):
    # fork on Linux: the writers start in milliseconds (spawned ones would each import
    # scikit-learn first); spawn elsewhere (macOS's fork is unsafe with its libraries).
    method = "fork" if sys.platform.startswith("linux") else "spawn"
    ctx = multiprocessing.get_context(method)
    barrier, results = ctx.Barrier(N_PROCESSES), ctx.Queue()
    with PrivacyLedger(store=any_store, dataset="d", limit=PureDP(LIMIT)) as ledger:
        writers = [ctx.Process(target=_writer,
                               args=(any_store, i % 2 == 0, barrier, results))
                   for i in range(N_PROCESSES)]
        for w in writers:
            w.start()
        reports = dict(results.get(timeout=120) for _ in writers)
        for w in writers:
            w.join(timeout=60)
            assert w.exitcode == 0
    accepted = {pid: n for pid, (n, _, _) in reports.items()}
    assert all(isinstance(n, int) for n in accepted.values()), reports
    spans = [span for _, _, span in reports.values()]
    elapsed = max(end for _, end in spans) - min(start for start, _ in spans)
    print(f"{N_PROCESSES} processes x {N_CHARGES} charges ({method}): {elapsed:.2f} s, "
          f"{N_PROCESSES * N_CHARGES / elapsed:.0f} charges/s")
    entries = _entries(any_store)
    assert sum(accepted.values()) == len(entries) == round(LIMIT / EPS)  # none lost
    per_process = {pid: sum(e["pid"] == pid for e in entries) for pid in accepted}
    assert per_process == accepted
    assert ledger.total().epsilon <= LIMIT * (1 + 1e-12)
    # Each entry is in its writer's own session, or in the test's for the writers that
    # charged inside the test's ledger.
    session = {pid: own or ledger.session for pid, (_, own, _) in reports.items()}
    assert all(e["session"] == session[e["pid"]] for e in entries)


def test_threads_of_one_process(any_store):
    import threading

    est = DPHeavyTailedMean(epsilon=0.1, delta=0)
    refused = []

    def spend():
        for _ in range(25):
            try:
                charge_budget(est, PureDP(0.1))
            except BudgetExceededError:
                refused.append(1)

    with PrivacyLedger(store=any_store, dataset="d", limit=PureDP(7.0)) as ledger:
        threads = [threading.Thread(target=spend) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(ledger.entries) == 70 and len(refused) == 30
