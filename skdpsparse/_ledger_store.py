"""The persistent journal behind ``PrivacyLedger(store=...)``: one schema and record
layer, two connection backends.

This module only stores and returns entries. What an entry means (its budget and
privacy event, the composition, the limit check) is decided in
:mod:`skdpsparse.ledger`, *inside* the transactions opened here, which is what makes
check-then-append one atomic step across processes.

A store is given as the path of an SQLite file (the standard library's ``sqlite3``;
:class:`~skdpsparse._ledger_store_sqlite.SQLiteStore`) or as a SQLAlchemy URL of a
PostgreSQL database (``postgresql://user@host/db``;
:class:`~skdpsparse._ledger_store_server.ServerStore`, behind the ``postgres`` extra).
This module holds what both share (the error, the schema, the statements); which
backend serves a store is decided in :mod:`skdpsparse.ledger`, the only module that
imports the backends. Both run the same statements of :class:`Transaction`
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

Every database failure is re-raised as :class:`LedgerStoreError` (public as
:class:`skdpsparse.ledger.LedgerStoreError`)
saying what went wrong (locked, corrupt, missing, unreachable, not a budget store): a
budget that cannot be read must stop the fit, never read as zero.
"""

import datetime
import json


class LedgerStoreError(RuntimeError):
    """A budget store cannot be used: locked, corrupt, missing or not a budget store.

    Raised instead of reading an unreadable store as empty: the fit that was being
    charged releases nothing.
    """


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


def locked_error(where, timeout):
    """The LedgerStoreError of a lock held by another connection past ``timeout``."""
    return LedgerStoreError(
        f"the budget store {where} is locked: another connection held its lock "
        f"for more than timeout={timeout:g} s, so nothing was charged and nothing "
        "released. Retry, raise the ledger's timeout, or stop the process that holds "
        "the database open in a transaction.")
