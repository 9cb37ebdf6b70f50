"""The privacy ledger: what every private fit on the same data spent, in total.

A grid search over private fits is not free: each fit of each candidate on each fold
(and the final refit) looks at the data and spends its own budget, and the total is
their composition. :class:`PrivacyLedger` records every fit made while it is active
and reports that total, and can refuse a fit that would exceed a set limit::

    with PrivacyLedger(limit=ApproxDP(4.0, 1e-5)) as ledger:
        GridSearchCV(DPHeavyTailedMean(), {"epsilon": [0.1, 0.5]}, n_jobs=2).fit(X)
    print(ledger.summary())

To tune privately instead of paying for every candidate, use private selection
(:mod:`skdpsparse.model_selection`, Ghazi et al. (2024 v2) Algorithm 5).

How fits are counted. Every estimator of this library calls :func:`charge_budget`
at the end of ``fit``, *before* it sets any fitted attribute: a refused fit raises
:class:`~skdpsparse.exceptions.BudgetExceededError` and releases nothing. Clones,
pipelines and cross-validation call ``fit`` on a fresh estimator, so each fit is
charged once. The entries live in a journal file guarded by an exclusive file lock
(check-the-limit-then-append is one atomic step across processes). A fit finds the
journals of the active ledgers in three places, and charges each journal once:

1. its own process's registry (the ledgers opened here; threads share it, and a
   child made by ``fork`` inherits a copy);
2. the pointer file of every *ancestor* process (parent, grandparent, ...), which a
   process writes while it holds an active ledger. Walking up the whole chain, not
   only to the parent, is what reaches the ledger from a ``forkserver`` child (its
   parent is the fork server, a child of the ledger's process) and from dask's
   nanny-started workers; and because the pointer is read when the fit is charged,
   long-lived workers started *before* the ledger (loky's reusable executor, the
   fork server) see it too. The ancestors come from ``/proc`` (Linux); elsewhere
   only the parent is known, which covers ``spawn`` (Windows' and macOS's default)
   and loky;
3. the environment variable ``SKDPSPARSE_LEDGER_JOURNALS``, set while a ledger is
   active, which every process started after that inherits whatever its start
   method (the fallback where the ancestors cannot be read).

A pointer names its process's start time (Linux) so that a stale pointer of a
process that died without closing its ledger is not followed by a later process
reusing the same id.

Composition. Each budget may carry the privacy event that produced it
(:func:`~skdpsparse.accounting.with_event`); a bare budget stands for the weakest
event it allows (:func:`~skdpsparse.accounting.event_of`). The total composes the
events with :func:`~skdpsparse.accounting.compose_events`: exactly for continuous
Gaussians (Gaussian DP), in ρ for zCDP, by RDP for the rest, by basic composition
for opaque (ε, δ) entries, and the smallest of the valid bounds; it is never larger
than :func:`compose`'s sum of the budgets.

Budgets that persist. ``PrivacyLedger(store="budget.sqlite", dataset="patients")``
keeps the entries in an SQLite database instead (:mod:`skdpsparse._ledger_store`),
or on a PostgreSQL server with ``store="postgresql://..."``
(:mod:`skdpsparse._ledger_store_server`), under a dataset name, with the dataset's
limit: every session on that dataset, in any process and at any time, is charged
against the same total. A charge is one transaction that locks the dataset (SQLite's
``BEGIN IMMEDIATE``; a server's row lock), reads its limit and entries, checks the
limit and appends the entry. The ledger's temporary journal then holds only a header
naming the store, the dataset and the session, which workers find as above; and the
same three are in the environment variable ``SKDPSPARSE_LEDGER_STORES``
(:data:`STORES_ENV_VAR`), so that a process started inside the ledger charges the
store even where it finds no journal (another temporary folder; another container
that shares the server). The store records each session as open or closed, and a
process that still names a closed session (a pool started inside a ledger and reused
after it) no longer charges it.

Charging several ledgers. A fit inside several ledgers (nested ``with`` blocks, an
in-memory ledger inside a stored one) is checked against all of them before it is
written to any: each journal or store is locked and checked in a fixed order (the
same in every process, so two charges cannot wait on each other), and the entries are
written only when every check passed. A refusal therefore writes nothing anywhere.
"""

import contextlib
import dataclasses
import datetime
import errno
import json
import os
import socket
import tempfile
import threading
import time
import uuid
import warnings

from .accounting import ZCDP, ApproxDP, PureDP, zcdp_to_epsilon
from .accounting.composition import (
    compose_events,
    events_pure_epsilon,
    events_zcdp_rho,
    implied_by,
)
from .accounting.events import SelfComposedEvent, event_from_dict, event_of
from ._ledger_store import LedgerStoreError
from .exceptions import BudgetExceededError

__all__ = ["LedgerStoreError", "PrivacyLedger", "charge_budget", "compose"]

ENV_VAR = "SKDPSPARSE_LEDGER_JOURNALS"
#: The store-backed ledgers active in this process and its ancestors, as a JSON list
#: of [store, dataset, session, timeout]: a process started inside such a ledger
#: charges the store with it directly, even where it cannot find the ledger's journal
#: (another temporary folder, a container sharing the server but not the files).
STORES_ENV_VAR = "SKDPSPARSE_LEDGER_STORES"
DEFAULT_TIMEOUT = 30.0  # seconds a charge waits for a store's write lock
_MAX_REPR = 500  # a parameter stored by its repr keeps at most this many characters
HISTORY_COLUMNS = ("id", "time", "dataset", "session", "estimator", "params", "source",
                   "guarantee", "event", "pid", "host")

_ACTIVE = []  # ledgers active in this process, innermost last
_LOCK = threading.Lock()
_SUSPENDED = threading.local()  # depth of _charges_suspended() in this thread
_ENV_BEFORE = {}  # variable name -> its value before this process set it
_MAX_ANCESTORS = 64  # a bound on the walk up the process tree
_STALE_LOCK_SECONDS = 60.0  # the lock-file fallback breaks a lock held this long
_LIMIT_RTOL = 1e-12  # a total this close above the limit is rounding, not excess


def _reset_lock_in_child():
    # A fork while another thread holds _LOCK would leave the child's copy locked.
    global _LOCK
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_lock_in_child)


@contextlib.contextmanager
def _charges_suspended():
    """Inside, :func:`charge_budget` charges nothing in this thread.

    For meta-estimators that charge one composed total for the fits they make
    themselves (private selection charges the Liu-Talwar total, not each run: the
    runs' sum would double count, and the number of entries would record the
    number of runs, which the guarantee does not cover). Fits in other threads and
    processes are still charged.
    """
    _SUSPENDED.depth = getattr(_SUSPENDED, "depth", 0) + 1
    try:
        yield
    finally:
        _SUSPENDED.depth -= 1


# ------------------------------------------------------------------- serialisation
def _to_json(budget):
    if isinstance(budget, PureDP):
        return {"type": "PureDP", "epsilon": budget.epsilon}
    if isinstance(budget, ApproxDP):
        return {"type": "ApproxDP", "epsilon": budget.epsilon, "delta": budget.delta}
    if isinstance(budget, ZCDP):
        return {"type": "ZCDP", "rho": budget.rho}
    raise TypeError(f"not a privacy budget: {budget!r}")


def _from_json(obj):
    kind = obj.pop("type")
    return {"PureDP": PureDP, "ApproxDP": ApproxDP, "ZCDP": ZCDP}[kind](**obj)


def _entry_budget(entry):
    """The budget of a journal entry, with its event if it was charged with one."""
    budget = _from_json(dict(entry["budget"]))
    if entry.get("event") is not None:  # checked against the budget when it was charged
        budget = dataclasses.replace(budget, event=event_from_dict(entry["event"]))
    return budget


def _plain(value):
    """json.dumps' fallback: NumPy scalars as Python values; anything else fails."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON: {type(value).__name__}")


def _short_repr(value):
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not stop the fit from being charged
        text = f"<{type(value).__name__} object>"
    return text if len(text) <= _MAX_REPR else text[:_MAX_REPR - 3] + "..."


def _json_params(params):
    """Constructor parameters as JSON values; a value JSON cannot hold (an estimator,
    an array) is stored as its repr, shortened. Parameters only: never the data."""
    out = {}
    for name, value in params.items():
        try:
            out[str(name)] = json.loads(json.dumps(value, default=_plain))
        except (TypeError, ValueError, RecursionError):
            out[str(name)] = _short_repr(value)
    return out


def _hostname():
    try:
        return socket.gethostname()
    except OSError:
        return ""


def _describe(estimator):
    """The entry's source text: the class and its epsilon and delta."""
    params = estimator.get_params(deep=False)
    shown = {k: params[k] for k in ("epsilon", "delta") if k in params}
    return f"{type(estimator).__name__}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


def _record(budget, estimator=None, source="manual"):
    """What an entry stores: when, what ran with which parameters, what it spent
    (the reported guarantee and the event), where. The session is added by the
    journal or store it goes to."""
    if estimator is not None:
        source = _describe(estimator)
    return {
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "estimator": None if estimator is None else type(estimator).__qualname__,
        "params": None if estimator is None else _json_params(estimator.get_params(deep=False)),
        "source": source,
        "guarantee": str(budget),
        "budget": _to_json(budget),
        "event": None if budget.event is None else budget.event.to_dict(),
        "pid": os.getpid(),
        "host": _hostname(),
    }


@contextlib.contextmanager
def _readable(number, where):
    """Raise LedgerStoreError for an entry that cannot be decoded: an unreadable
    entry must stop the fit, not vanish from the total."""
    try:
        yield
    except (KeyError, TypeError, ValueError) as err:
        raise LedgerStoreError(f"entry {number} of {where} cannot be read "
                               f"({type(err).__name__}: {err}); it was altered or is "
                               "corrupt.") from err


def _history_row(entry, number, dataset, where):
    """A stored entry as a row of :meth:`PrivacyLedger.history` (``guarantee`` is the
    budget object, with its event)."""
    with _readable(entry.get("id", number), where):
        budget = _entry_budget(entry)
        time_ = entry.get("time")
        time_ = None if time_ is None else datetime.datetime.fromisoformat(time_)
    return {"id": entry.get("id", number), "time": time_, "dataset": dataset,
            "session": entry.get("session"), "estimator": entry.get("estimator"),
            "params": entry.get("params"), "source": entry.get("source"),
            "guarantee": budget, "event": budget.event, "pid": entry.get("pid"),
            "host": entry.get("host")}


# ---------------------------------------------------------------------- composition
def compose(budgets, delta=None):
    """Total privacy loss of a sequence of budgets by their values alone.

    Pure-DP budgets add up (basic composition); zCDP budgets add up in ρ (Bun and
    Steinke 2016, Lemma 2.3); (ε, δ) budgets add up in ε and δ. A total in (ε, δ)
    at a target δ converts the zCDP sum (pure budgets are counted either by basic
    composition or as ε²/2-zCDP, whichever gives less) with the δ left after the
    (ε, δ) budgets' δs. The ledger's total (:meth:`PrivacyLedger.total`) composes the
    budgets' events instead, and is never larger.

    Returns ``PureDP`` when every budget is pure; otherwise ``ApproxDP`` at
    ``delta``, which must exceed the sum of the (ε, δ) budgets' δs when a zCDP
    budget needs converting.
    """
    budgets = list(budgets)
    if not budgets:
        return None
    pure = [b.epsilon for b in budgets if isinstance(b, PureDP)]
    if len(pure) == len(budgets):
        return PureDP(sum(pure))
    if delta is None:
        raise ValueError("the total of non-pure budgets needs a target delta.")
    rho = sum(b.rho for b in budgets if isinstance(b, ZCDP))
    approx = [b for b in budgets if isinstance(b, ApproxDP)]
    eps_a = sum(b.epsilon for b in approx)
    delta_left = delta - sum(b.delta for b in approx)
    if rho == 0:  # pure and (ε, δ) entries only: basic composition
        if delta_left < 0:
            raise ValueError(f"delta={delta} is below the entries' total delta.")
        return ApproxDP(sum(pure) + eps_a, delta)
    if not delta_left > 0:
        raise ValueError(f"delta={delta} leaves nothing for the zCDP entries after the "
                         f"(epsilon, delta) entries' total delta {delta - delta_left}.")
    basic = sum(pure) + zcdp_to_epsilon(rho, delta_left)
    as_zcdp = zcdp_to_epsilon(rho + sum(e * e / 2 for e in pure), delta_left)
    return ApproxDP(eps_a + min(basic, as_zcdp), delta)


def _events(budgets):
    return [event_of(b) for b in budgets]


def _default_delta(budgets):
    """The target δ when none is given: the sum of the entries' δs.

    None when every entry is pure (the total is then pure) or when an entry has no
    δ of its own (a zCDP entry): the total then needs an explicit ``delta``.
    """
    if events_pure_epsilon(_events(budgets)) is not None:
        return None
    if not all(isinstance(b, (PureDP, ApproxDP)) for b in budgets):
        return None
    return sum(b.delta for b in budgets if isinstance(b, ApproxDP))


def _check_limit(limit, budgets, source):
    """Raise BudgetExceededError if the composed ``budgets`` exceed ``limit``."""
    _check_limit_events(limit, _events(budgets), source)


def _check_limit_events(limit, events, source):
    """Raise BudgetExceededError if the composed ``events`` exceed ``limit``."""
    total = None
    if isinstance(limit, PureDP):
        eps = events_pure_epsilon(events)
        ok = eps is not None and eps <= limit.epsilon * (1 + _LIMIT_RTOL)
        total = None if eps is None else PureDP(eps)
    elif isinstance(limit, ZCDP):
        rho = events_zcdp_rho(events)
        ok = rho is not None and rho <= limit.rho * (1 + _LIMIT_RTOL)
        total = None if rho is None else ZCDP(rho)
    else:
        try:
            total = compose_events(events, limit.delta)
            ok = total.epsilon <= limit.epsilon * (1 + _LIMIT_RTOL)
        except ValueError:
            total, ok = None, False
    if not ok:
        spent = "" if total is None else f" (the total would be {total})"
        raise BudgetExceededError(
            f"{source} would exceed the ledger's limit {limit}{spent}; nothing was released.")


# ------------------------------------------------------------------------ file locks
def _optional_module(name):
    """The module, or None where it does not exist (``fcntl`` on Windows)."""
    try:
        return __import__(name)
    except ImportError:
        return None


@contextlib.contextmanager
def _flock(fcntl, f):
    fcntl.flock(f, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def _msvcrt_lock(msvcrt, f):
    # Windows: lock the first byte. LK_LOCK retries for about 10 s, then raises
    # EDEADLOCK: wait again (another process holds it); any other error is real.
    f.seek(0)
    while True:
        try:
            msvcrt.locking(f.fileno(), msvcrt.LK_LOCK, 1)
            break
        except OSError as err:
            if err.errno not in (errno.EDEADLK, errno.EACCES):
                raise
    try:
        yield
    finally:
        f.seek(0)
        msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)


@contextlib.contextmanager
def _lock_file(path):
    """Portable last resort: a lock file created exclusively (O_EXCL)."""
    lock = path + ".lock"
    while True:
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            break
        except FileExistsError:
            with contextlib.suppress(OSError):  # a holder that died leaves the file
                if time.time() - os.path.getmtime(lock) > _STALE_LOCK_SECONDS:
                    os.remove(lock)
            time.sleep(0.001)
    try:
        yield
    finally:
        os.close(fd)
        os.remove(lock)


def _exclusive(f):
    """An exclusive lock on the open file ``f`` across processes and threads.

    ``fcntl`` and ``msvcrt`` are imported here, not at module level: each exists on
    one family of systems only, and ``import skdpsparse`` must work on both.
    """
    fcntl = _optional_module("fcntl")
    if fcntl is not None:
        return _flock(fcntl, f)
    msvcrt = _optional_module("msvcrt")
    if msvcrt is not None:
        return _msvcrt_lock(msvcrt, f)
    return _lock_file(f.name)


# --------------------------------------------------------------------------- journal
class _Journal:
    """Append-only JSON-lines file: a header, then one line per fit.

    The header holds the limit and the session id of an in-memory ledger; for a
    ledger with a store it names the store, the dataset and the session instead, and
    the entries go to the store (:class:`_StoreTarget`).
    """

    def __init__(self, path):
        self.path = path

    @property
    def key(self):
        """Orders the locks a charge takes (the same order in every process)."""
        return f"journal:{self.path}"

    def header(self):
        """The header, or None if the journal no longer exists (its ledger closed).

        Read without the lock: the header is written before the journal is published
        and never changes.
        """
        try:
            with open(self.path) as f:
                return json.loads(f.readline())
        except FileNotFoundError:
            return None

    def read(self):
        """The header and the entries; under the lock, so no entry is half-written."""
        with open(self.path) as f, _exclusive(f):
            f.seek(0)
            lines = [json.loads(line) for line in f if line.strip()]
        return lines[0], lines[1:]

    @contextlib.contextmanager
    def reserve(self, budget, record):
        """Lock, check the limit with ``budget`` added, and append ``record`` when the
        block ends without error (the caller may still be checking other ledgers).

        Yields False, writing nothing, if the journal no longer exists: its ledger
        has closed, so the fit is not inside it. Raises BudgetExceededError (writing
        nothing) if the limit would be exceeded.
        """
        try:
            f = open(self.path, "r+")  # never "a+": that would re-create a closed journal
        except FileNotFoundError:
            yield False
            return
        with f, _exclusive(f):
            f.seek(0)
            lines = [json.loads(line) for line in f if line.strip()]
            header, entries = lines[0], lines[1:]
            limit = header.get("limit")
            if limit is not None:
                budgets = [_entry_budget(e) for e in entries] + [budget]
                _check_limit(_from_json(dict(limit)), budgets, record["source"])
            yield True
            f.seek(0, os.SEEK_END)
            f.write(json.dumps(dict(record, session=header.get("session"))) + "\n")
            f.flush()

    def charge(self, budget, source):
        """Append an entry unless it takes the total over the limit (then raise).

        Returns False, charging nothing, if the journal no longer exists.
        """
        with self.reserve(budget, _record(budget, source=source)) as written:
            return written


class _StoreTarget:
    """The datasets of one budget store that a charge goes to, in one transaction.

    Several active ledgers on the same store (nested, or on different datasets)
    share one transaction: a second ``BEGIN IMMEDIATE`` on the same file from the
    same charge would wait for the first until it timed out.
    """

    def __init__(self, path, timeout):
        self.path = path
        self.timeout = timeout
        self.sessions = {}  # dataset -> session charged with it

    @property
    def key(self):
        return f"store:{self.path}"

    def add(self, dataset, session):
        # Two active ledgers on one dataset charge it once: the budget is the data's.
        # The entry goes to the session of the nearest (added first).
        self.sessions.setdefault(dataset, session)

    @contextlib.contextmanager
    def reserve(self, budget, record):
        """One write transaction: for each dataset (in the order of their names, the
        same in every process), lock it, check its limit with ``budget`` added and
        insert the entry; committed when the block ends without error."""
        with _store(self.path, self.timeout).transaction() as txn:
            for dataset, session in sorted(self.sessions.items()):
                if txn.session_closed(session):  # its ledger is over: not inside it
                    continue
                # The store's limit, which no ledger can loosen; the lock (a server's
                # row lock) holds off every other charge on the dataset until commit.
                limit = txn.limit(dataset, lock=True)
                if limit is not None:
                    events = _spent_events(txn.spent(dataset),
                                           f"dataset {dataset!r} in {txn.path}")
                    _check_limit_events(_from_json(dict(limit)), events + [event_of(budget)],
                                        f"{record['source']} on dataset {dataset!r}")
                txn.append(dataset, dict(record, session=session))
            yield True


def _spent_events(groups, where):
    """The events of a store's grouped entries (``Transaction.spent``), one
    :class:`~skdpsparse.accounting.SelfComposedEvent` per group of identical ones."""
    events = []
    for first, budget, event, count in groups:
        with _readable(first, where):
            one = event_of(_entry_budget({"budget": budget, "event": event}))
        events.append(one if count == 1 else SelfComposedEvent(one, count))
    return events


def _is_url(store):
    return "://" in store


def _store(location, timeout):
    """The store at ``location`` (from :func:`_store_path`): SQLite for a path, the
    server store for a URL. Each backend is imported only when a store is used (some
    Python builds lack sqlite3, and ``import skdpsparse`` must not need it nor
    SQLAlchemy)."""
    if not _is_url(location):
        from ._ledger_store_sqlite import SQLiteStore

        return SQLiteStore(location, timeout)
    from ._ledger_store_server import ServerStore

    return ServerStore(location, timeout)


def _shown(location):
    """The store's name in messages (a server URL without its password)."""
    if not _is_url(location):
        return location
    from ._ledger_store_server import hide_password

    return hide_password(location)


def _charge(targets, budget, record):
    """Charge every target or none: all are locked and checked (in the order of
    their keys) before any entry is written."""
    with contextlib.ExitStack() as stack:
        for target in sorted(targets, key=lambda t: t.key):
            stack.enter_context(target.reserve(budget, record))


# ------------------------------------------------------- finding the active journals
def _proc_stat(pid):
    """(parent id, start time in clock ticks) of a process from /proc, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may contain any byte.
    fields = data[data.rindex(b")") + 2:].split()
    return int(fields[1]), int(fields[19])


def _start_time(pid):
    stat = _proc_stat(pid)
    return None if stat is None else stat[1]


def _ancestors():
    """Ids of the parent, grandparent, ... of this process (only the parent where
    /proc is missing)."""
    pids, pid = [], os.getppid()
    while pid > 0 and len(pids) < _MAX_ANCESTORS and pid not in pids:
        pids.append(pid)
        stat = _proc_stat(pid)
        if stat is None or pid == 1:
            break
        pid = stat[0]
    return pids


def _pointer_path(pid):
    return os.path.join(tempfile.gettempdir(), f"skdpsparse-ledger-{pid}.json")


def _pointer_journals(pid):
    """Journals named by the pointer file of process ``pid``, if it is that process's."""
    try:
        with open(_pointer_path(pid)) as f:
            pointer = json.load(f)
    except (OSError, ValueError):
        return []
    if not isinstance(pointer, dict):
        return []
    start = pointer.get("start")
    if start is not None and _start_time(pid) not in (None, start):
        return []  # a stale pointer: that process died and its id was reused
    return list(pointer.get("journals", []))


def _publish():
    """Tell other processes which journals are active here (called under _LOCK)."""
    own = [led._journal.path for led in _ACTIVE]
    path = _pointer_path(os.getpid())
    if own:
        tmp = f"{path}.{threading.get_ident()}.tmp"
        with open(tmp, "w") as f:
            json.dump({"pid": os.getpid(), "start": _start_time(os.getpid()),
                       "journals": own}, f)
        os.replace(tmp, path)
    else:
        with contextlib.suppress(OSError):
            os.remove(path)
    _publish_env(own)


def _publish_env(own):
    """Set the environment variables to the inherited journals and stores plus this
    process's own; restore the values this process started with when no ledger is
    active here."""
    stores = [[led._store_path, led.dataset, led.session, led.timeout]
              for led in _ACTIVE if led._store_path is not None]
    for name, mine, read in ((ENV_VAR, own, _env_journals),
                             (STORES_ENV_VAR, stores, _env_stores)):
        before = _ENV_BEFORE.setdefault(name, os.environ.get(name))
        if mine:
            inherited = [p for p in read(before) if p not in mine]
            os.environ[name] = json.dumps(inherited + mine)
        elif before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def _env_list(name, value, keep):
    """The items of the JSON list in the environment variable ``name`` (or in
    ``value``) that ``keep`` accepts; a malformed value lists nothing."""
    value = os.environ.get(name) if value is None else value
    try:
        items = json.loads(value) if value else []
    except ValueError:
        return []
    return [x for x in items if keep(x)] if isinstance(items, list) else []


def _is_store_item(item):
    return (isinstance(item, list) and len(item) == 4
            and all(isinstance(x, str) for x in item[:3])
            and isinstance(item[3], (int, float)) and item[3] > 0)


def _env_stores(value=None):
    """The [store, dataset, session, timeout] listed in STORES_ENV_VAR (or ``value``)."""
    return _env_list(STORES_ENV_VAR, value, _is_store_item)


def _env_journals(value=None):
    """Journal paths listed in the environment variable (or in ``value``)."""
    return _env_list(ENV_VAR, value, lambda p: isinstance(p, str))


def _active_journals():
    """The journals of every ledger this fit is inside, each once, nearest first:
    this process's innermost ledger, ..., then those of other processes."""
    with _LOCK:
        paths = [led._journal.path for led in reversed(_ACTIVE)]
    paths += _env_journals()[::-1]
    for pid in _ancestors():
        paths += _pointer_journals(pid)
    unique = dict.fromkeys(p for p in paths if os.path.exists(p))
    return [_Journal(p) for p in unique]


def _active_targets():
    """Where a fit is charged: the in-memory journals of the active ledgers, and one
    :class:`_StoreTarget` per store that an active ledger's header names."""
    targets, stores, found = [], {}, []
    for journal in _active_journals():
        header = journal.header()
        if header is None:  # closed since it was found
            continue
        if header.get("store") is None:
            targets.append(journal)
            continue
        found.append((header["store"], header["dataset"], header["session"],
                      header.get("timeout", DEFAULT_TIMEOUT)))
    # Then the stores named in the environment, innermost first: those of ledgers
    # whose journal was not found here (their sessions' state is in the store).
    for store, dataset, session, timeout in found + _env_stores()[::-1]:
        if store not in stores:
            stores[store] = _StoreTarget(store, timeout)
        stores[store].add(dataset, session)
    return targets + list(stores.values())


def _check_event(budget):
    """A budget's event must imply the budget, or composing it would understate."""
    if budget.event is not None and not implied_by(budget.event, budget):
        raise ValueError(f"the event {budget.event!r} does not imply the budget {budget} "
                         "it was charged with.")


def charge_budget(estimator, budget):
    """Charge ``budget`` to every active ledger; called by ``fit`` before release.

    Parameters
    ----------
    estimator : estimator
        Named in the entry, with its ``epsilon`` and ``delta`` parameters.
    budget : PureDP, ApproxDP or ZCDP
        What the fit spent; with ``budget.event`` set (see
        :func:`~skdpsparse.accounting.with_event`) the ledger composes the event.

    Raises
    ------
    BudgetExceededError
        When a ledger's limit would be exceeded; the caller must then release
        nothing (set no fitted attribute). Nothing is written to any ledger.
    LedgerStoreError
        When a ledger's store cannot be used (locked past its timeout, corrupt,
        deleted); nothing is written and the caller must release nothing.
    """
    if getattr(_SUSPENDED, "depth", 0):
        return
    targets = _active_targets()
    if not targets:
        return
    _check_event(budget)
    _charge(targets, budget, _record(budget, estimator=estimator))


def _composed_total(limit, rows, delta):
    """The total of :meth:`PrivacyLedger.total` from a snapshot of the ledger."""
    budgets = [row["guarantee"] for row in rows]
    if not budgets:
        return None
    if delta is None and isinstance(limit, ApproxDP):
        delta = limit.delta
    if delta is None:
        delta = _default_delta(budgets)
    return compose_events(_events(budgets), delta)


def _store_path(store):
    """What every process uses to name the store ``store`` (a path or a URL): the
    absolute path of an SQLite file, or the URL of a server database, checked.

    Raises TypeError or ValueError (naming ``store``) for something that is neither,
    and ImportError when a server URL needs the ``postgres`` extra.
    """
    location = os.fspath(store) if isinstance(store, (str, os.PathLike)) else None
    if not isinstance(location, str) or not location:
        raise TypeError("store must be the path of an SQLite file or a PostgreSQL URL, "
                        f"got {store!r}.")
    if not _is_url(location):
        # Workers may run in another directory: every process must name the same file.
        return os.path.realpath(location)
    from ._ledger_store_server import server_location

    return server_location(location)


def _check_timeout(timeout):
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}.")
    return float(timeout)


class PrivacyLedger:
    """Records the privacy spent by every fit made while it is active.

    Use it as a context manager. Fits in this process, in its threads and in its
    descendant processes (joblib's ``n_jobs`` under every backend and start method)
    are recorded; ``clone``, ``Pipeline``, ``GridSearchCV`` (every candidate, every
    fold, and the refit) and ``cross_validate`` are counted fit by fit.

    Without ``store`` the entries live as long as the ``with`` block. With
    ``store`` and ``dataset`` they are kept in an SQLite database or on a PostgreSQL
    server under the dataset's name, and every ledger on that dataset, in any process
    or session, adds to the same total and is held to the same limit.

    Parameters
    ----------
    limit : PureDP, ApproxDP or ZCDP, optional
        A fit that would take the total above ``limit`` raises
        :class:`~skdpsparse.exceptions.BudgetExceededError` and releases nothing
        (in ``GridSearchCV`` the default ``error_score=nan`` turns that into a
        failed candidate; pass ``error_score="raise"`` to stop the search). An
        ``ApproxDP`` limit is checked against the composed total at its δ. With a
        store, the limit belongs to the dataset: the first ledger that gives one
        records it, later ledgers may omit it (the recorded one applies) or repeat
        it, and a different one raises ``ValueError``.
    store : str or os.PathLike, optional
        Path of an SQLite file holding the entries (created when the ledger is
        entered, if missing and ``create`` is true), or the SQLAlchemy URL of a
        PostgreSQL database (``"postgresql://user@host/dbname"``; needs
        ``pip install "skdpsparse[postgres]"``), whose tables are created likewise.
        Several datasets may share it.
    dataset : str, optional
        The name under which the entries are kept; required with ``store``. Use
        one name per body of sensitive data, whoever fits on it.
    create : bool, default=True
        Whether entering the ledger may create the store and the dataset. Pass False
        in scripts that must add to an existing budget: a mistyped path or dataset
        name then raises instead of starting a new budget at zero.
    timeout : float, default=30.0
        Seconds a charge waits for another process's write lock on the store before
        raising :class:`LedgerStoreError` (charges hold it for milliseconds); for a
        server, also how long to wait for it to answer a connection.

    Attributes
    ----------
    entries : list of (str, budget)
        What was charged, in order: the estimator and its ε, δ, and the budget
        (with its ``event`` when the fit recorded one). With a store: every entry
        of the dataset, from every session.
    processes : set of int
        The processes that charged them.
    session : str or None
        Identifies this ledger's entries (the ``session`` column of
        :meth:`history`); set when the ledger is entered.

    Notes
    -----
    A grid search over k private fits on the same data costs the composition of the
    k fits, not one of them. Private selection (Ghazi et al. 2024 v2, Algorithm 5;
    :mod:`skdpsparse.model_selection`) tunes for a total close to one fit's budget.
    How the total is composed, and the limits of the composition theorems when the
    fits' privacy parameters are chosen adaptively, are in
    :mod:`skdpsparse.accounting.composition`.

    A stored entry is written in one transaction that also checks the dataset's
    limit (SQLite's ``BEGIN IMMEDIATE``, or a server's lock on the dataset's row,
    taken before the entries are read), so concurrent processes cannot together
    exceed it, and a process killed mid-charge leaves the whole entry or none. A
    locked, corrupt, missing or unreachable store raises :class:`LedgerStoreError`;
    it is never read as empty.

    Examples
    --------
    Ten Gaussian releases, each calibrated to (1, 1e-6)-DP, charged with their events:

    >>> from skdpsparse.accounting import (ApproxDP, GaussianEvent,
    ...                                    analytic_gaussian_sigma, with_event)
    >>> z = analytic_gaussian_sigma(1.0, 1.0, 1e-6)
    >>> with PrivacyLedger() as ledger:
    ...     for _ in range(10):
    ...         ledger.charge(with_event(ApproxDP(1.0, 1e-6), GaussianEvent(z)))
    >>> print(ledger.total())  # at the entries' total delta, 1e-5
    (3.13976, 1e-05)-DP

    The same budget kept in a file, where a second session adds to it:

    >>> import os, tempfile
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = os.path.join(folder.name, "budget.sqlite")
    >>> for session in range(2):  # e.g. two scripts, run one after the other
    ...     with PrivacyLedger(store=path, dataset="patients",
    ...                        limit=ApproxDP(4.0, 1e-5)) as ledger:
    ...         for _ in range(5):
    ...             ledger.charge(with_event(ApproxDP(1.0, 1e-6), GaussianEvent(z)))
    >>> print(len(ledger.entries), ledger.total())
    10 (3.13976, 1e-05)-DP
    >>> folder.cleanup()
    """

    def __init__(self, limit=None, *, store=None, dataset=None, create=True,
                 timeout=DEFAULT_TIMEOUT):
        if limit is not None and not isinstance(limit, (PureDP, ApproxDP, ZCDP)):
            raise TypeError(f"limit must be a PureDP, ApproxDP or ZCDP budget, got {limit!r}.")
        if store is None and dataset is not None:
            raise ValueError("dataset= names a budget in a store: give store= as well.")
        if store is not None and (not isinstance(dataset, str) or not dataset):
            raise ValueError(f"a ledger with a store needs a dataset name, got {dataset!r}.")
        self.limit = limit
        self.store = store
        self.dataset = dataset
        self.create = bool(create)
        self.timeout = _check_timeout(timeout)
        self._store_path = None if store is None else _store_path(store)
        self.session = None
        self._journal = None
        self._final = None

    # ------------------------------------------------------------------ lifetime
    def __enter__(self):
        if self._journal is not None:
            raise RuntimeError("this ledger is already active.")
        session = uuid.uuid4().hex
        if self._store_path is None:
            header = {"limit": None if self.limit is None else _to_json(self.limit),
                      "session": session}
        else:
            self._open_store(session)
            # The limit is read from the store at each charge, not from here.
            header = {"limit": None, "session": session, "store": self._store_path,
                      "dataset": self.dataset, "timeout": self.timeout}
        fd, path = tempfile.mkstemp(prefix="skdpsparse-journal-", suffix=".jsonl")
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(header) + "\n")
        self.session = session
        self._journal = _Journal(path)
        self._final = None
        with _LOCK:
            _ACTIVE.append(self)
            _publish()
        return self

    def __exit__(self, *exc):
        with _LOCK:
            _ACTIVE.remove(self)
            _publish()
        if self._store_path is None:
            self._final = self._journal_rows()
        else:
            self._close_session()
        with contextlib.suppress(OSError):  # Windows: a worker may still hold it open
            os.remove(self._journal.path)
        self._journal = None
        return False

    def _open_store(self, session):
        """Create (if allowed) or check the store and the dataset, reconcile the limit
        with the dataset's, and record the session as active, in one transaction."""
        with _store(self._store_path, self.timeout).transaction(create=self.create) as txn:
            txn.check_integrity()  # once per session: damage must not pass for zero
            self._reconcile_limit(txn)
            txn.open_session(self.dataset, session, os.getpid(), _hostname())

    def _close_session(self):
        """Record the session as over, so that a process that still names it (a pool
        started inside the ledger, see :data:`STORES_ENV_VAR`) no longer charges it."""
        try:
            with _store(self._store_path, self.timeout).transaction() as txn:
                txn.close_session(self.session)
        except LedgerStoreError as err:
            warnings.warn("the ledger's session could not be recorded as closed, so "
                          "processes started inside it may still charge its dataset: "
                          f"{err}", RuntimeWarning, stacklevel=3)

    def _reconcile_limit(self, txn):
        """Create the dataset if missing (and allowed) with this ledger's limit, or
        hold this ledger's limit to the one recorded."""
        mine = None if self.limit is None else _to_json(self.limit)
        if not txn.has_dataset(self.dataset):
            if not self.create:
                known = ", ".join(repr(n) for n in txn.datasets()) or "none"
                raise LedgerStoreError(
                    f"no dataset {self.dataset!r} in the budget store {txn.path}"
                    f" (datasets: {known}); create=False refuses to start a new one.")
            # Unless another session created it meanwhile (a server lets two
            # transactions get here): then its limit stands, read below.
            txn.create_dataset(self.dataset, mine)
        stored = txn.limit(self.dataset, lock=True)
        if mine is None or mine == stored:
            return
        if stored is None:  # a limit where there was none only restricts
            txn.set_limit(self.dataset, mine)
            return
        raise ValueError(
            f"the dataset {self.dataset!r} in {txn.path} has the limit "
            f"{_from_json(dict(stored))}, not {self.limit}: a ledger cannot change it. "
            "Omit limit= to use the recorded one; for a stricter limit on this "
            "session only, nest an in-memory PrivacyLedger(limit=...) inside.")

    # ------------------------------------------------------------------ charging
    def _target(self):
        if self._store_path is None:
            return self._journal
        target = _StoreTarget(self._store_path, self.timeout)
        target.add(self.dataset, self.session)
        return target

    def charge(self, budget, source="manual"):
        """Charge a budget spent outside the estimators (e.g. a custom release).

        Parameters
        ----------
        budget : PureDP, ApproxDP or ZCDP
            With ``budget.event`` set, the event is composed (it must imply the budget).
        source : str, default="manual"
            The name shown in :meth:`summary`.

        Raises
        ------
        BudgetExceededError
            If the limit would be exceeded (nothing is written).
        LedgerStoreError
            If the store cannot be used (nothing is written).
        """
        if self._journal is None:
            raise RuntimeError("charge() needs the ledger to be active (use `with`).")
        if not isinstance(budget, (PureDP, ApproxDP, ZCDP)):
            raise TypeError(f"not a privacy budget: {budget!r}")
        _check_event(budget)
        _charge([self._target()], budget, _record(budget, source=source))

    # ------------------------------------------------------------------- reading
    def _journal_rows(self):
        _, entries = self._journal.read()
        where = "the ledger's journal"
        return [_history_row(e, i, None, where) for i, e in enumerate(entries, 1)]

    def _state(self):
        """(the limit that applies, the entries as history rows)."""
        if self._store_path is None:
            if self._journal is None:
                return self.limit, list(self._final or [])
            return self.limit, self._journal_rows()
        with _store(self._store_path, self.timeout).transaction(write=False) as txn:
            limit = txn.limit(self.dataset)
            entries = txn.entries(self.dataset)
        where = f"dataset {self.dataset!r} in {txn.path}"
        rows = [_history_row(e, i, self.dataset, where) for i, e in enumerate(entries, 1)]
        return (None if limit is None else _from_json(dict(limit))), rows

    @property
    def entries(self):
        return [(row["source"], row["guarantee"]) for row in self._state()[1]]

    @property
    def processes(self):
        """Ids of the processes whose fits were charged."""
        return {row["pid"] for row in self._state()[1]}

    def history(self):
        """Every entry with when, what, with which parameters, what it spent, where.

        Returns
        -------
        pandas.DataFrame or list of dict
            A DataFrame when pandas is installed, else a list of records; one row per
            entry in the order charged, with columns ``id``, ``time`` (UTC),
            ``dataset``, ``session``, ``estimator`` (class name; None for a manual
            charge), ``params`` (its constructor parameters; never the data),
            ``source``, ``guarantee`` (the reported budget, with its event),
            ``event`` (the privacy event, or None), ``pid`` and ``host``.

        Raises
        ------
        LedgerStoreError
            If the store or an entry cannot be read.
        """
        rows = self._state()[1]
        try:
            import pandas as pd  # optional: a list of records without it
        except ImportError:
            return rows
        return pd.DataFrame(rows, columns=list(HISTORY_COLUMNS))

    def total(self, delta=None):
        """The composed total of the entries (see the module notes).

        Parameters
        ----------
        delta : float, optional
            The target δ. Without it: the limit's δ for an ``ApproxDP`` limit (with a
            store, the dataset's limit), else the sum of the entries' δs when every
            entry is ``PureDP`` or ``ApproxDP`` (basic composition would spend exactly
            that δ; the events' composition then usually gives a much smaller ε at the
            same δ).

        Returns
        -------
        PureDP, ApproxDP or None
            ``PureDP`` when every entry is pure and no δ applies; ``ApproxDP`` at the
            target δ otherwise; None for no entries.

        Raises
        ------
        ValueError
            If a δ is needed but none applies (a zCDP entry has no δ of its own), or
            the δ is below the opaque (ε, δ) entries' total.
        LedgerStoreError
            If the store or an entry cannot be read.
        """
        return _composed_total(*self._state(), delta)

    def total_zcdp(self):
        """The total as zCDP when every entry has a zCDP bound, else None.

        Each entry counts with its event's ρ (a Gaussian's 1/(2z²) per release; a
        pure ε entry as ε²/2); an opaque (ε, δ) entry has none.
        """
        rhos = [events_zcdp_rho([event_of(b)]) for _, b in self.entries]
        if any(r is None for r in rhos):
            return None
        rho = sum(rhos)
        return ZCDP(rho) if rho > 0 else None

    def summary(self, delta=None):
        """Entries and total, as text."""
        limit, rows = self._state()  # one snapshot: the lines and the total agree
        lines = [f"{len(rows)} private fits"]
        if self._store_path is not None:
            lines[0] += (f" on dataset {self.dataset!r} in {_shown(self._store_path)} (limit: "
                         f"{'none' if limit is None else limit})")
        for row in rows:
            budget = row["guarantee"]
            ran = "" if budget.event is None else f"  [{budget.event!r}]"
            lines.append(f"  {budget!s:<24} {row['source']}{ran}")
        try:
            lines.append(f"total: {_composed_total(limit, rows, delta)}")
        except ValueError as err:
            lines.append(f"total: needs a target delta ({err})")
        return "\n".join(lines)
