"""The persistent journal behind ``PrivacyLedger(store=...)``: one schema and record
layer, two connection backends.

This module only stores and returns entries. What an entry means (its budget and
privacy event, the composition, the limit check) is decided in
:mod:`skdpsparse.ledger`, *inside* the transactions opened here, which is what makes
check-then-append one atomic step across processes.

A store is given as the path of an SQLite file (the standard library's ``sqlite3``;
:class:`SQLiteStore` below) or as a SQLAlchemy URL of a PostgreSQL database
(``postgresql://user@host/db``; :class:`~skdpsparse._ledger_store_server.ServerStore`,
behind the ``postgres`` extra). Both run the same statements of :class:`Transaction`
on the same tables; only the way a transaction is opened and locked differs.

Schema (version 2)::

    ledger_meta(key TEXT PRIMARY KEY, value TEXT)       -- ("schema_version", "2")
    ledger_datasets(name TEXT PRIMARY KEY,              -- the name the user chose
                    budget_limit TEXT,                  -- JSON budget, or NULL
                    created TEXT)                       -- UTC, ISO 8601
    ledger_sessions(session TEXT PRIMARY KEY,           -- one per ledger ``with`` block
                    dataset TEXT REFERENCES ledger_datasets(name),
                    opened TEXT, closed TEXT,           -- closed NULL while active
                    pid INTEGER, host TEXT)             -- the ledger's process
    ledger_entries(id INTEGER PRIMARY KEY,              -- autoincrement / identity
                   dataset TEXT REFERENCES ledger_datasets(name),
                   time TEXT, session TEXT, estimator TEXT,
                   params TEXT,                         -- JSON (values' repr as fallback)
                   source TEXT, guarantee TEXT,         -- e.g. "(1, 1e-06)-DP"
                   budget TEXT, event TEXT,             -- JSON; event NULL if none
                   pid INTEGER, host TEXT)

Transactions in SQLite. A charge is one ``BEGIN IMMEDIATE`` transaction: SQLite's
write lock is taken *before* the dataset's limit and entries are read, so no other
writer can commit between the check and the insert, and two processes cannot both
pass the check. A reader (``history()``, ``total()``) uses a deferred transaction, a
consistent snapshot of the limit and the entries. A process that dies inside a
transaction leaves SQLite's rollback journal behind; the next connection rolls it
back, so an entry is stored whole or not at all. The database keeps SQLite's default
rollback journal (``journal_mode=DELETE``, ``synchronous=FULL``): one file to copy or
back up, and a committed entry survives a power cut, which matters more here than the
speed of write-ahead logging. (PostgreSQL: see its module.)

Connections are opened per transaction (SQLite) or per process (a server's pool) and
never shared across a ``fork``, so forked children, threads and spawned workers each
get their own.

Every database failure is re-raised as :class:`~skdpsparse.ledger.LedgerStoreError`
saying what went wrong (locked, corrupt, missing, unreachable, not a budget store): a
budget that cannot be read must stop the fit, never read as zero.
"""

import contextlib
import datetime
import json
import os
import pathlib
import sqlite3

from .ledger import LedgerStoreError

SCHEMA_VERSION = 2
POSTGRES_EXTRA = 'pip install "skdpsparse[postgres]"'

# The columns of ledger_entries after id, in order, with their SQL type and nullability.
_ENTRY_TYPES = (("dataset", "TEXT NOT NULL REFERENCES ledger_datasets(name)"),
                ("time", "TEXT NOT NULL"), ("session", "TEXT NOT NULL"),
                ("estimator", "TEXT"), ("params", "TEXT"), ("source", "TEXT NOT NULL"),
                ("guarantee", "TEXT NOT NULL"), ("budget", "TEXT NOT NULL"),
                ("event", "TEXT"), ("pid", "INTEGER NOT NULL"), ("host", "TEXT NOT NULL"))
_ENTRY_COLUMNS = ("id",) + tuple(name for name, _ in _ENTRY_TYPES)
# The columns of ledger_entries holding JSON, decoded on the way out.
_JSON_COLUMNS = ("params", "budget", "event")


def schema(id_column):
    """The statements creating the tables, given the SQL of an auto-numbered primary
    key (the one part SQLite and PostgreSQL spell differently)."""
    return (
        "CREATE TABLE IF NOT EXISTS ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS ledger_datasets (name TEXT PRIMARY KEY, budget_limit "
        "TEXT, created TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS ledger_sessions (session TEXT PRIMARY KEY, dataset TEXT "
        "NOT NULL REFERENCES ledger_datasets(name), opened TEXT NOT NULL, closed TEXT, "
        "pid INTEGER NOT NULL, host TEXT NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS ledger_entries (id {id_column}, "
        + ", ".join(f"{name} {sql}" for name, sql in _ENTRY_TYPES) + ")",
        "CREATE INDEX IF NOT EXISTS ledger_entries_by_dataset ON ledger_entries (dataset, id)",
        "INSERT INTO ledger_meta VALUES ('schema_version', :version) "
        "ON CONFLICT (key) DO NOTHING",
    )


def _now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


# ----------------------------------------------------------------- where a store is
def is_url(store):
    return "://" in store


def store_location(store):
    """What every process uses to name the store ``store`` (a path or a URL): the
    absolute path of an SQLite file, or the URL of a server database, checked.

    Raises TypeError or ValueError (naming ``store``) for something that is neither,
    and ImportError when a server URL needs the ``postgres`` extra.
    """
    if isinstance(store, (str, os.PathLike)):
        location = os.fspath(store)
    else:
        location = None
    if not isinstance(location, str) or not location:
        raise TypeError("store must be the path of an SQLite file or a PostgreSQL URL, "
                        f"got {store!r}.")
    if not is_url(location):
        # Workers may run in another directory: every process must name the same file.
        return os.path.realpath(location)
    from ._ledger_store_server import server_location

    return server_location(location)


def shown(location):
    """The store's name for messages: a server URL without its password."""
    if not is_url(location):
        return location
    from ._ledger_store_server import hide_password

    return hide_password(location)


def open_store(location, timeout):
    """The store at ``location`` (from :func:`store_location`)."""
    if not is_url(location):
        return SQLiteStore(location, timeout)
    from ._ledger_store_server import ServerStore

    return ServerStore(location, timeout)


# ------------------------------------------------------------------------ records
class Transaction:
    """The reads and writes of one open transaction, in SQL that both backends run.

    Parameters
    ----------
    run : callable
        ``run(sql, params)`` executes one statement with ``:name`` parameters and
        returns its rows as tuples (an empty list for a write).
    where : str
        The store's name in messages.
    row_lock : str, default=""
        Appended to the read of a dataset's row that a charge locks: ``" FOR
        UPDATE"`` on a server; nothing in SQLite, whose write transaction already
        holds the lock on the whole file.
    integrity : callable, optional
        Returns a list of problems found by reading the whole store (SQLite's
        ``quick_check``); None where the server keeps its own files sound.
    """

    def __init__(self, run, where, row_lock="", integrity=None):
        self._run = run
        self.path = where
        self._row_lock = row_lock
        self._integrity = integrity

    def check_integrity(self):
        """Raise LedgerStoreError unless the store reads as sound (SQLite: every page
        is read, so that damage where no charge looks would not pass)."""
        problems = [] if self._integrity is None else self._integrity()
        if problems:
            raise LedgerStoreError(
                f"the budget store {self.path} is corrupt ({'; '.join(problems[:3])}); "
                "restore it from a backup.")

    def check_schema(self):
        row = self._run("SELECT value FROM ledger_meta WHERE key = 'schema_version'", {})
        if not row or row[0][0] != str(SCHEMA_VERSION):
            found = "none" if not row else row[0][0]
            raise LedgerStoreError(
                f"the budget store {self.path} has schema version {found}; this version "
                f"of skdpsparse reads version {SCHEMA_VERSION}.")

    def datasets(self):
        """Names of the datasets in the store."""
        return [r[0] for r in self._run("SELECT name FROM ledger_datasets ORDER BY name", {})]

    def has_dataset(self, name):
        return bool(self._run("SELECT 1 FROM ledger_datasets WHERE name = :name",
                              {"name": name}))

    def create_dataset(self, name, limit):
        """Add a dataset with ``limit`` (a JSON-able dict, or None) unless another
        transaction added it first (then its limit stands: read it with
        :meth:`limit`)."""
        self._run("INSERT INTO ledger_datasets VALUES (:name, :limit, :created) "
                  "ON CONFLICT (name) DO NOTHING",
                  {"name": name, "limit": None if limit is None else json.dumps(limit),
                   "created": _now()})

    def set_limit(self, name, limit):
        self._run("UPDATE ledger_datasets SET budget_limit = :limit WHERE name = :name",
                  {"limit": json.dumps(limit), "name": name})

    def limit(self, name, lock=False):
        """The dataset's limit as a dict, or None; LedgerStoreError if no such dataset.

        With ``lock``, the dataset's row stays locked until the transaction ends, so
        no other charge on the dataset can read or write its entries in between
        (what a server needs; SQLite's write transaction already excludes them).
        """
        row = self._run("SELECT budget_limit FROM ledger_datasets WHERE name = :name"
                        + (self._row_lock if lock else ""), {"name": name})
        if not row:
            known = ", ".join(repr(n) for n in self.datasets()) or "none"
            raise LedgerStoreError(f"no dataset {name!r} in the budget store {self.path} "
                                   f"(datasets: {known}).")
        value = row[0][0]
        return None if value is None else self._json(value, f"the limit of {name!r}")

    def open_session(self, name, session, pid, host):
        """Record that ``session`` (a ledger on dataset ``name``) is active."""
        self._run("INSERT INTO ledger_sessions VALUES (:session, :name, :opened, NULL, "
                  ":pid, :host)", {"session": session, "name": name, "opened": _now(),
                                   "pid": pid, "host": host})

    def close_session(self, session):
        self._run("UPDATE ledger_sessions SET closed = :closed WHERE session = :session "
                  "AND closed IS NULL", {"closed": _now(), "session": session})

    def session_closed(self, session):
        """Whether ``session`` was recorded closed (a session the store does not know
        is not: a fit is charged unless its ledger is known to be over)."""
        row = self._run("SELECT closed FROM ledger_sessions WHERE session = :session",
                        {"session": session})
        return bool(row) and row[0][0] is not None

    def entries(self, name):
        """The dataset's entries in the order they were charged, as dicts (JSON
        columns decoded)."""
        rows = self._run(f"SELECT {', '.join(_ENTRY_COLUMNS)} FROM ledger_entries "
                         "WHERE dataset = :name ORDER BY id", {"name": name})
        out = []
        for row in rows:
            entry = dict(zip(_ENTRY_COLUMNS, row))
            for column in _JSON_COLUMNS:
                if entry[column] is not None:
                    entry[column] = self._json(entry[column], f"entry {entry['id']}")
            out.append(entry)
        return out

    def spent(self, name):
        """The dataset's entries grouped by identical budget and event: a list of
        ``(first id, budget dict, event dict or None, count)``.

        What the limit check needs, at a cost that grows with the number of distinct
        releases rather than of entries (a grid search repeats the same few).
        """
        rows = self._run(
            "SELECT MIN(id), budget, event, COUNT(*) FROM ledger_entries "
            "WHERE dataset = :name GROUP BY budget, event ORDER BY MIN(id)", {"name": name})
        return [(first, self._json(budget, f"entry {first}"),
                 None if event is None else self._json(event, f"entry {first}"), count)
                for first, budget, event, count in rows]

    def append(self, name, record):
        """Insert one entry; ``record`` has the keys of ``ledger_entries`` but id."""
        values = {k: record.get(k) for k in _ENTRY_COLUMNS[1:]}
        values["dataset"] = name
        for column in _JSON_COLUMNS:
            if values[column] is not None:
                values[column] = json.dumps(values[column])
        self._run(f"INSERT INTO ledger_entries ({', '.join(values)}) "
                  f"VALUES ({', '.join(':' + k for k in values)})", values)

    def _json(self, text, what):
        try:
            return json.loads(text)
        except (TypeError, ValueError) as err:
            raise LedgerStoreError(f"{what} in the budget store {self.path} is not valid "
                                   f"JSON ({err}); the store was altered or is corrupt.") from err


# ------------------------------------------------------------------------- SQLite
def _kind(err):
    """What an sqlite3 error means for the user: locked, corrupt, cantopen, schema, other.

    Python >= 3.11 gives SQLite's error name; older versions only the message.
    """
    name = getattr(err, "sqlite_errorname", None) or ""
    text = str(err).lower()
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text or "busy" in text:
        return "locked"
    if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")) or "not a database" in text \
            or "malformed" in text:
        return "corrupt"
    if name.startswith("SQLITE_CANTOPEN") or "unable to open" in text:
        return "cantopen"
    if "no such table" in text or "no such column" in text:
        return "schema"
    return "other"


def locked_error(where, timeout):
    """The LedgerStoreError of a lock held by another connection past ``timeout``."""
    return LedgerStoreError(
        f"the budget store {where} is locked: another connection held its lock "
        f"for more than timeout={timeout:g} s, so nothing was charged and nothing "
        "released. Retry, raise the ledger's timeout, or stop the process that holds "
        "the database open in a transaction.")


def _store_error(err, path, timeout):
    """The LedgerStoreError to raise for the sqlite3 error ``err``."""
    kind = _kind(err)
    if kind == "locked":
        return locked_error(path, timeout)
    if kind == "corrupt":
        return LedgerStoreError(
            f"the budget store {path} is corrupt or not an SQLite database ({err}). The "
            "budget it records cannot be read: nothing was charged, and the fit being "
            "charged, if any, released nothing. Restore the file from a backup (a new "
            "empty store would forget what was spent).")
    if kind == "cantopen":
        return LedgerStoreError(f"cannot open the budget store {path} ({err}).")
    if kind == "schema":
        return LedgerStoreError(
            f"{path} is not a skdpsparse budget store, or its tables were altered ({err}).")
    return LedgerStoreError(f"the budget store {path} failed: {err}")


@contextlib.contextmanager
def _errors(path, timeout):
    """Re-raise any sqlite3 error as a LedgerStoreError (other exceptions pass)."""
    try:
        yield
    except sqlite3.Error as err:
        raise _store_error(err, path, timeout) from err


def _sqlite_run(conn):
    return lambda sql, params: conn.execute(sql, params).fetchall()


class SQLiteStore:
    """One SQLite budget store (a file shared by every process on the machine).

    Parameters
    ----------
    path : str
        Absolute path of the database file.
    timeout : float
        Seconds to wait for another connection's write lock before raising
        :class:`~skdpsparse.ledger.LedgerStoreError`.
    """

    id_column = "INTEGER PRIMARY KEY AUTOINCREMENT"

    def __init__(self, path, timeout):
        self.path = path
        self.timeout = timeout

    def _connect(self, create):
        if not create and not os.path.exists(self.path):
            raise LedgerStoreError(
                f"no budget store at {self.path} (a ledger creates it when entered with "
                "create=True; a mistyped path must not start a new budget at zero).")
        # mode=rw: a store deleted while a ledger is active is an error, not a new
        # empty store that a worker would silently start from zero.
        uri = f"{pathlib.Path(self.path).as_uri()}?mode={'rwc' if create else 'rw'}"
        return sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None)

    @contextlib.contextmanager
    def transaction(self, write=True, create=False):
        """A transaction on the store, committed when the block ends without error.

        Parameters
        ----------
        write : bool, default=True
            ``BEGIN IMMEDIATE`` (take the write lock first, so that what is read
            stays true until the commit) rather than a deferred read transaction.
        create : bool, default=False
            Create the file and the tables if missing (else they must exist).

        Yields
        ------
        Transaction
        """
        with _errors(self.path, self.timeout):
            conn = self._connect(create)
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                txn = Transaction(_sqlite_run(conn), self.path,
                                  integrity=lambda: self._problems(conn))
                if create:
                    for statement in schema(self.id_column):
                        conn.execute(statement, {"version": str(SCHEMA_VERSION)})
                txn.check_schema()
                yield txn
                conn.execute("COMMIT")
            except BaseException:
                # A refused charge, an error, or a KeyboardInterrupt: nothing is written.
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            finally:
                conn.close()

    @staticmethod
    def _problems(conn):
        problems = [r[0] for r in conn.execute("PRAGMA quick_check")]
        return [] if problems == ["ok"] else problems
