"""The budget store on a real PostgreSQL server (issue 23): started by these tests
from the Debian binaries (``/usr/lib/postgresql/*/bin``) into a temporary folder, on a
free port, and stopped at the end; skipped, with the reason, when they or the
``postgres`` extra (SQLAlchemy, psycopg) are not installed. No database is mocked.

The behaviour shared with SQLite (limits, history, composition, refusals) is tested
on both backends in test_ledger_store.py, and concurrent writers, crashes and grid-
search workers in test_ledger_store_processes.py, through the ``pg_url`` fixture of
this module; here is what only a server has: connecting, its locks, its errors.
"""

import atexit
import glob
import itertools
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from skdpsparse import PrivacyLedger
from skdpsparse.accounting import PureDP
from skdpsparse.datasets import make_heavy_tailed
from skdpsparse.ledger import LedgerStoreError
from skdpsparse.mean import DPHeavyTailedMean


# ------------------------------------------------------------------------ the server
def _postgres_bin():
    """The folder of the newest installed PostgreSQL's initdb and pg_ctl, or None."""
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if found:
        newest = max(found, key=lambda p: [int(x) for x in re.findall(r"\d+", p)])
        return os.path.dirname(newest)
    initdb = shutil.which("initdb")
    return None if initdb is None else os.path.dirname(initdb)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Server:
    """A throw-away PostgreSQL cluster: trust authentication on 127.0.0.1 only,
    no fsync (a test's data need not survive a power cut)."""

    def __init__(self):
        self.bin = _postgres_bin()
        if self.bin is None:
            raise _Skip("PostgreSQL is not installed (apt-get install postgresql)")
        self.as_user = []
        if os.geteuid() == 0:  # postgres refuses to run as root
            if shutil.which("runuser") is None:
                raise _Skip("running as root without runuser: cannot start PostgreSQL "
                            "as another user")
            try:
                import pwd

                user = pwd.getpwnam("postgres")
            except KeyError:
                raise _Skip("running as root and there is no 'postgres' user to run "
                            "PostgreSQL as") from None
            self.as_user = ["runuser", "-u", "postgres", "--"]
        # Not under pytest's tmp_path: its folders are private to root.
        self.dir = tempfile.mkdtemp(prefix="skdpsparse-pg-")
        if self.as_user:
            os.chown(self.dir, user.pw_uid, user.pw_gid)
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "server.log")
        self.port = _free_port()
        self.started = False

    def _run(self, tool, *args, timeout=120):
        cmd = self.as_user + [os.path.join(self.bin, tool), *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            log = ""
            if os.path.exists(self.log):
                with open(self.log) as f:
                    log = f.read()[-3000:]
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n"
                               f"{done.stdout}\n{done.stderr}\n{log}")
        return done

    def start(self):
        self._run("initdb", "-D", self.data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
                  "--locale=C", "--no-sync")
        for attempt in range(3):  # another process may take the free port first
            options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} "
                       "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                       "-c max_connections=300 -c shared_buffers=32MB")
            try:
                self._run("pg_ctl", "-D", self.data, "-l", self.log, "-o", options, "-w",
                          "-t", "60", "start")
                break
            except RuntimeError:
                if attempt == 2:
                    raise
                self.port = _free_port()
        self.started = True
        atexit.register(self.stop)

    def stop(self):
        if self.started:
            self.started = False
            subprocess.run(self.as_user + [os.path.join(self.bin, "pg_ctl"), "-D",
                                           self.data, "-m", "immediate", "-w", "stop"],
                           capture_output=True, timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, database="postgres"):
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"


class _Skip(Exception):
    pass


_SERVER = {}  # "server": the running _Server, or "skip": why there is none
_DATABASES = itertools.count()


def postgres_server():
    """The one server of this test session (several test modules use it), started on
    first use and stopped when the session's interpreter exits."""
    if "skip" in _SERVER:
        pytest.skip(_SERVER["skip"])
    if "server" not in _SERVER:
        try:
            pytest.importorskip("sqlalchemy", reason="the postgres extra is not installed")
            pytest.importorskip("psycopg", reason="the postgres extra is not installed")
            server = _Server()
        except (_Skip, pytest.skip.Exception) as why:
            _SERVER["skip"] = str(why)
            pytest.skip(_SERVER["skip"])
        try:
            server.start()
        except BaseException:
            server.stop()
            raise  # installed but failing is a failure, not a skip
        _SERVER["server"] = server
    return _SERVER["server"]


def new_database():
    """The URL of a new, empty database on the session's server."""
    import psycopg

    server = postgres_server()
    name = f"ledger_{os.getpid()}_{next(_DATABASES)}"
    with psycopg.connect(server.url(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server.url(name)


@pytest.fixture
def pg_url():
    """A fresh database on the test session's PostgreSQL server."""
    return new_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store(request, tmp_path):
    """An SQLite file, then a database on a real PostgreSQL server (skipped, with the
    reason, where none can be started): the two backends behave the same."""
    if request.param == "sqlite":
        return str(tmp_path / "budget.sqlite")
    return new_database()


def entries(url):
    """Every row of ledger_entries, read with psycopg alone (no skdpsparse code)."""
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(url, row_factory=dict_row) as conn:
        return conn.execute("SELECT * FROM ledger_entries ORDER BY id").fetchall()


# ------------------------------------------------------------------------ the tests
@pytest.fixture(scope="module")
def data():
    X, _ = make_heavy_tailed(240, 3, random_state=0)
    return X


def _fit():
    return DPHeavyTailedMean(epsilon=1.0, delta=0, truncation=2.0)


def test_urls_are_checked_when_the_ledger_is_made(monkeypatch):
    """No server needed: a URL that cannot name a PostgreSQL store is refused at once,
    naming ``store``, and without the extra the error says how to install it."""
    pytest.importorskip("sqlalchemy", reason="the postgres extra is not installed")
    with pytest.raises(ValueError, match="store=.*must be a PostgreSQL database"):
        PrivacyLedger(store="mysql://user@host/db", dataset="d")
    with pytest.raises(ValueError, match="store=.*not a database URL") as err:
        PrivacyLedger(store="://user:secret@nothing", dataset="d")
    assert "secret" not in str(err.value)
    with pytest.raises(ImportError, match="needs the database driver 'postgresql\\+nodriver'"):
        PrivacyLedger(store="postgresql+nodriver://user@host/db", dataset="d")
    with pytest.raises(ValueError, match="store=.*not a database URL") as err:
        PrivacyLedger(store="postgresql://user:secret@host:port/db", dataset="d")
    assert "secret" not in str(err.value)
    ledger = PrivacyLedger(store="postgresql://user@host/db", dataset="d")  # no connection
    assert ledger.store == "postgresql://user@host/db"
    monkeypatch.setitem(sys.modules, "sqlalchemy", None)  # `import sqlalchemy` now fails
    with pytest.raises(ImportError, match=r'pip install "skdpsparse\[postgres\]"'):
        PrivacyLedger(store="postgresql://user@host/db", dataset="d")


def test_a_bare_postgresql_url_uses_psycopg_3(pg_url, data):
    with PrivacyLedger(store=pg_url, dataset="d", limit=PureDP(1.5)) as ledger:
        _fit().fit(data)
    assert ledger.store == pg_url and len(entries(pg_url)) == 1
    driver_url = pg_url.replace("postgresql://", "postgresql+psycopg://")
    assert len(PrivacyLedger(store=driver_url, dataset="d").entries) == 1


def test_create_false_refuses_a_database_without_a_store(pg_url):
    with pytest.raises(LedgerStoreError, match="holds no budget store"):
        PrivacyLedger(store=pg_url, dataset="d", create=False).__enter__()
    with pytest.raises(LedgerStoreError, match="holds no budget store"):
        PrivacyLedger(store=pg_url, dataset="d").history()  # reading never creates
    with PrivacyLedger(store=pg_url, dataset="patients"):
        pass
    with pytest.raises(LedgerStoreError, match=r"no dataset 'patinets'.*'patients'"):
        PrivacyLedger(store=pg_url, dataset="patinets", create=False).__enter__()


def test_an_unreachable_server_is_a_clear_error_and_releases_nothing(data):
    postgres_server()  # the extra and the binaries are there
    closed = f"postgresql://someone:secret@127.0.0.1:{_free_port()}/db"
    start = time.perf_counter()
    with pytest.raises(LedgerStoreError, match="cannot connect to the budget store") as err:
        PrivacyLedger(store=closed, dataset="d", timeout=1).__enter__()
    assert time.perf_counter() - start < 30
    assert "secret" not in str(err.value) and "someone:***@" in str(err.value)
    missing_db = postgres_server().url("no_such_database")
    with pytest.raises(LedgerStoreError, match="does not exist"):
        PrivacyLedger(store=missing_db, dataset="d").history()


def test_a_server_lost_during_a_session_stops_the_fit(pg_url, data):
    """The store's database disappears while a ledger is active (as the server
    going away would): the fit raises and releases nothing."""
    import psycopg

    closing = pytest.warns(RuntimeWarning, match="could not be recorded as closed")
    with closing, PrivacyLedger(store=pg_url, dataset="d", timeout=2):
        _fit().fit(data)
        with psycopg.connect(postgres_server().url(), autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {pg_url.rsplit('/', 1)[1]} WITH (FORCE)")
        est = _fit()
        with pytest.raises(LedgerStoreError, match="budget store"):
            est.fit(data)
        assert not hasattr(est, "mean_")


def test_a_locked_dataset_gives_a_clear_error(pg_url, data):
    """Another connection holds the dataset's row lock (a hung admin transaction):
    a charge or a ledger on it waits for timeout, then raises; other datasets are
    not held up."""
    import psycopg

    def lock(name):
        holder = psycopg.connect(pg_url)
        holder.execute("SELECT * FROM ledger_datasets WHERE name = %s FOR UPDATE", (name,))
        return holder

    with PrivacyLedger(store=pg_url, dataset="d"), PrivacyLedger(store=pg_url,
                                                                 dataset="other"):
        pass
    with lock("d"):
        with PrivacyLedger(store=pg_url, dataset="other", timeout=0.5) as other:
            _fit().fit(data)  # another row: not held up
        with pytest.raises(LedgerStoreError, match=r"locked.*timeout=0.5 s"):
            PrivacyLedger(store=pg_url, dataset="d", timeout=0.5).__enter__()
    with PrivacyLedger(store=pg_url, dataset="d", timeout=0.5) as ledger:
        with lock("d"):
            est = _fit()
            start = time.perf_counter()
            with pytest.raises(LedgerStoreError, match=r"locked.*timeout=0.5 s"):
                est.fit(data)
            assert time.perf_counter() - start < 10 and not hasattr(est, "mean_")
        est.fit(data)  # the lock is gone: the fit goes through
    assert len(ledger.entries) == 1 and len(other.entries) == 1


def test_two_sessions_create_the_same_store_and_dataset_at_once(pg_url):
    """Tables and dataset created concurrently: one creation, no error."""
    import threading

    errors, barrier = [], threading.Barrier(4)

    def open_ledger(i):
        try:
            barrier.wait(timeout=30)
            with PrivacyLedger(store=pg_url, dataset="d", limit=PureDP(2.0)) as ledger:
                ledger.charge(PureDP(0.5))
        except Exception as err:
            errors.append(err)

    threads = [threading.Thread(target=open_ledger, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(entries(pg_url)) == 4
