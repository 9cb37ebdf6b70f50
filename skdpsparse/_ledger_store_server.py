"""The budget store on a PostgreSQL server: ``PrivacyLedger(store="postgresql://...")``.

The tables, the statements and what an entry holds are those of the SQLite store
(:mod:`skdpsparse._ledger_store`); this module only opens, locks and ends the
transactions, through SQLAlchemy (``pip install "skdpsparse[postgres]"``: SQLAlchemy 2
and psycopg 3).

Locking. A charge locks the row of each dataset it charges (``SELECT ... FOR UPDATE``
on ``ledger_datasets``, in the order of the datasets' names, so two charges never
wait on each other) before it reads the dataset's entries, and holds the lock until
it commits its insert. Every charge on a dataset takes that lock first, so the
check-then-append of two charges never overlaps: the second reads the entries after
the first committed. This needs PostgreSQL's default isolation, READ COMMITTED,
which it sets explicitly: there each statement reads what was committed when *it*
started, so the read of the entries, made after the lock was granted, sees the
previous holder's entry. Under REPEATABLE READ or SERIALIZABLE the snapshot would be
taken by the locking statement itself, before it waited, and the second charge would
check the limit without the first one's entry (SERIALIZABLE would then abort one of
the two, which would need a retry loop; the row lock makes them wait in turn
instead). Charges on different datasets do not wait on each other. Readers
(``history()``, ``total()``) run in REPEATABLE READ: one snapshot of the limit and
the entries, taking no lock.

Creating the tables takes a transaction-scoped advisory lock first
(``pg_advisory_xact_lock``): two sessions creating the same tables at once would
otherwise collide on PostgreSQL's catalogue. Whoever gets the lock checks again
whether the tables exist, and only the first runs the DDL (whose table locks, held to
its commit, would otherwise deadlock with charges on the store it finds created).

``lock_timeout`` is set to the ledger's ``timeout`` in each transaction, so a charge
waiting for a lock held elsewhere raises :class:`~skdpsparse.ledger.LedgerStoreError`
instead of waiting forever; ``connect_timeout`` bounds the wait for an unreachable
server.

A process that dies inside a transaction loses its connection, and the server rolls
the transaction back: an entry is stored whole or not at all, as in SQLite.

Connections. Each process keeps one SQLAlchemy engine (a small pool) per store; a
forked child never uses its parent's pool (the engines are keyed by process id), as
a database connection must not be shared across a ``fork``.
"""

import contextlib
import importlib.util
import math
import os
import threading

from ._ledger_store import (
    POSTGRES_EXTRA,
    SCHEMA_VERSION,
    LedgerStoreError,
    Transaction,
    locked_error,
    schema,
)

_DIALECTS = ("postgresql",)  # the servers whose locking this module was written and tested for
_SCHEMA_LOCK = 0x736B6470  # the advisory lock taken while the tables are created ("skdp")
_ENGINES = {}  # (pid, url, timeout) -> engine
_ENGINES_LOCK = threading.Lock()

# SQLSTATE codes (PostgreSQL's, which psycopg and psycopg2 report).
_LOCK_NOT_AVAILABLE = "55P03"  # lock_timeout expired
_UNDEFINED_TABLE = "42P01"


def _forget_engines_in_child():
    # A forked child must not use, nor close, its parent's connections (closing them
    # would end the parent's sessions on the server): drop them without closing.
    global _ENGINES_LOCK
    _ENGINES_LOCK = threading.Lock()
    for engine in _ENGINES.values():
        engine.dispose(close=False)
    _ENGINES.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_engines_in_child)


def _sqlalchemy():
    try:
        import sqlalchemy
    except ImportError as err:
        raise ImportError("a budget store on a database server needs SQLAlchemy and a "
                          f"driver: {POSTGRES_EXTRA}") from err
    return sqlalchemy


def _url(location):
    """The SQLAlchemy URL object of ``location``; ValueError naming ``store`` if it is
    not one."""
    sqlalchemy = _sqlalchemy()
    try:
        url = sqlalchemy.engine.make_url(location)
    except (sqlalchemy.exc.ArgumentError, ValueError):  # ValueError: a bad port
        # SQLAlchemy's message repeats the string, password included: not shown.
        raise ValueError(f"store={hide_password(location)!r} is not a database URL "
                         "(postgresql://user@host:port/dbname).") from None
    if url.get_backend_name() not in _DIALECTS:
        raise ValueError(
            f"store={hide_password(location)!r}: a server store must be a PostgreSQL "
            "database (a URL such as postgresql://user@host/dbname); give an SQLite "
            "file by its path.")
    if url.drivername == "postgresql" and importlib.util.find_spec("psycopg") is not None:
        # SQLAlchemy's default driver for a bare postgresql:// is psycopg2; the
        # extra installs psycopg 3.
        url = url.set(drivername="postgresql+psycopg")
    return url


def server_location(location):
    """The URL every process connects to (a bare postgresql:// is given the driver
    the extra installs); ValueError or ImportError if it cannot be used."""
    url = _url(location)
    try:
        url.get_dialect().import_dbapi()
    except Exception as err:  # NoSuchModuleError, or the driver's own ImportError
        raise ImportError(f"store={hide_password(location)!r} needs the database driver "
                          f"{url.drivername!r} ({err}): {POSTGRES_EXTRA}") from None
    return url.render_as_string(hide_password=False)


def hide_password(location):
    """``location`` with its password, if any, replaced by ``***``."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(location).render_as_string(hide_password=True)
    except Exception:  # not a URL, or no SQLAlchemy: say nothing of what follows "://"
        return location.split("://", 1)[0] + "://..."


def _engine(location, timeout):
    """This process's engine for the store (created on first use)."""
    key = (os.getpid(), location, timeout)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            sqlalchemy = _sqlalchemy()
            url = _url(location)
            connect_args = {}
            if url.get_driver_name() in ("psycopg", "psycopg2"):
                # libpq counts whole seconds, and treats 1 as 2.
                connect_args["connect_timeout"] = max(2, math.ceil(timeout))
            engine = sqlalchemy.create_engine(url, connect_args=connect_args,
                                              pool_size=1, max_overflow=4,
                                              pool_pre_ping=True)
            _ENGINES[key] = engine
    return engine


def _sqlstate(err):
    orig = getattr(err, "orig", None)
    return getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)


def _first_line(err):
    orig = getattr(err, "orig", None) or err
    text = str(orig).strip()
    return text.splitlines()[0] if text else type(orig).__name__


def _store_error(err, where, timeout, connected):
    """The LedgerStoreError to raise for the SQLAlchemy error ``err``."""
    state = _sqlstate(err)
    if state == _LOCK_NOT_AVAILABLE:
        return locked_error(where, timeout)
    if state == _UNDEFINED_TABLE:
        return LedgerStoreError(
            f"the database {where} holds no budget store, or its tables were dropped "
            f"({_first_line(err)}). A ledger creates the tables when entered with "
            "create=True; with create=False a mistyped URL must not start a new budget "
            "at zero.")
    if not connected:
        return LedgerStoreError(
            f"cannot connect to the budget store {where} ({_first_line(err)}). Nothing "
            "was charged and nothing released: the budget it records cannot be read.")
    return LedgerStoreError(f"the budget store {where} failed: {_first_line(err)}")


class ServerStore:
    """A budget store in a PostgreSQL database (see the module notes).

    Parameters
    ----------
    location : str
        The SQLAlchemy URL (from :func:`~skdpsparse._ledger_store.store_location`).
    timeout : float
        Seconds to wait for a lock held by another connection, and (rounded up, at
        least 2) for the server to answer a connection, before raising
        :class:`~skdpsparse.ledger.LedgerStoreError`.
    """

    id_column = "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"

    def __init__(self, location, timeout):
        self.location = location
        self.timeout = timeout
        self.path = hide_password(location)

    @contextlib.contextmanager
    def transaction(self, write=True, create=False):
        """A transaction on the store, committed when the block ends without error.

        Parameters
        ----------
        write : bool, default=True
            READ COMMITTED, for a charge that locks its datasets' rows (see the
            module notes), rather than a REPEATABLE READ snapshot for reading.
        create : bool, default=False
            Create the tables if missing (else they must exist).

        Yields
        ------
        Transaction
        """
        sqlalchemy = _sqlalchemy()
        connected = False
        try:
            with _engine(self.location, self.timeout).connect() as conn:
                connected = True
                conn = conn.execution_options(
                    isolation_level="READ COMMITTED" if write else "REPEATABLE READ")
                with conn.begin():  # commits at the end; rolls back on any exception
                    def run(sql, params):
                        result = conn.execute(sqlalchemy.text(sql), params)
                        return [tuple(r) for r in result] if result.returns_rows else []

                    # SET LOCAL takes no bound parameter: the number is ours, not input.
                    run(f"SET LOCAL lock_timeout = {max(1, round(self.timeout * 1000))}", {})
                    if create and not self._has_tables(run):
                        run(f"SELECT pg_advisory_xact_lock({_SCHEMA_LOCK})", {})
                        # Checked again: the DDL's table locks, held to the end of this
                        # transaction, would deadlock with the charges of a store that
                        # the holder of the advisory lock before us created.
                        if not self._has_tables(run):
                            for statement in schema(self.id_column):
                                run(statement, {"version": str(SCHEMA_VERSION)})
                    txn = Transaction(run, self.path, row_lock=" FOR UPDATE")
                    txn.check_schema()
                    yield txn
        except sqlalchemy.exc.DBAPIError as err:
            raise _store_error(err, self.path, self.timeout, connected) from err

    @staticmethod
    def _has_tables(run):
        # Checked first so that a store in use is not touched by DDL, whose table
        # locks would make opening a ledger wait for every charge in progress.
        # A query on pg_tables, not to_regclass(): that reads the backend's catalogue
        # cache, which may not have seen a creation committed while we waited.
        found = run("SELECT COUNT(*) FROM pg_catalog.pg_tables WHERE schemaname = "
                    "current_schema() AND tablename IN ('ledger_meta', 'ledger_datasets', "
                    "'ledger_sessions', 'ledger_entries')", {})
        return found[0][0] == 4
