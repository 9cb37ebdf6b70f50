"""The SQLite budget store: ``PrivacyLedger(store="path/to/file.db")``.

The tables, the statements and what an entry holds are those of
:mod:`skdpsparse._ledger_store` (shared with the server store,
:mod:`skdpsparse._ledger_store_server`); this module only opens, locks and ends the
transactions, with the standard library's ``sqlite3``, and says what an sqlite3 error
means. It is imported only when a store is used: some Python builds lack sqlite3, and
``import skdpsparse`` must not need it.
"""

import contextlib
import os
import pathlib
import sqlite3

from ._ledger_store import SCHEMA_VERSION, LedgerStoreError, Transaction, locked_error, schema


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
