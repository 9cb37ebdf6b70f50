"""The privacy ledger: what every private fit on the same data spent, in total.

A grid search over private fits is not free: each fit of each candidate on each fold
(and the final refit) looks at the data and spends its own budget, and the total is
their composition. :class:`PrivacyLedger` records every fit made while it is active
and reports that total, and can refuse a fit that would exceed a set limit::

    with PrivacyLedger(limit=ApproxDP(4.0, 1e-5)) as ledger:
        GridSearchCV(DPHeavyTailedMean(), {"epsilon": [0.1, 0.5]}, n_jobs=2).fit(X)
    print(ledger.summary())

To tune privately instead of paying for every candidate, use private selection
(:mod:`skdpsparse.model_selection`, seed 000 Algorithm 5).

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
"""

import contextlib
import dataclasses
import errno
import json
import os
import tempfile
import threading
import time

from .accounting import ZCDP, ApproxDP, PureDP, zcdp_to_epsilon
from .accounting.composition import compose_events, events_pure_epsilon, events_zcdp_rho
from .accounting.events import event_from_dict, event_of, implied_by
from .exceptions import BudgetExceededError

__all__ = ["PrivacyLedger", "charge_budget", "compose"]

ENV_VAR = "SKDPSPARSE_LEDGER_JOURNALS"

_ACTIVE = []  # ledgers active in this process, innermost last
_LOCK = threading.Lock()
_SUSPENDED = threading.local()  # depth of _charges_suspended() in this thread
_ENV_BEFORE = {}  # "value": the environment variable before this process set it
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
    if "event" in entry:  # checked against the budget when it was charged
        budget = dataclasses.replace(budget, event=event_from_dict(entry["event"]))
    return budget


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
    events = _events(budgets)
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
    """Append-only JSON-lines file: a header with the limit, then one line per fit."""

    def __init__(self, path):
        self.path = path

    def read(self):
        """The header and the entries; under the lock, so no entry is half-written."""
        with open(self.path) as f, _exclusive(f):
            f.seek(0)
            lines = [json.loads(line) for line in f if line.strip()]
        return lines[0], lines[1:]

    def charge(self, budget, source):
        """Append an entry unless it takes the total over the limit (then raise).

        Returns False, charging nothing, if the journal no longer exists: its
        ledger has closed, so the fit is not inside it.
        """
        record = {"source": source, "budget": _to_json(budget), "pid": os.getpid()}
        if budget.event is not None:
            record["event"] = budget.event.to_dict()
        try:
            f = open(self.path, "r+")  # never "a+": that would re-create a closed journal
        except FileNotFoundError:
            return False
        with f, _exclusive(f):
            f.seek(0)
            lines = [json.loads(line) for line in f if line.strip()]
            header, entries = lines[0], lines[1:]
            limit = header.get("limit")
            if limit is not None:
                budgets = [_entry_budget(e) for e in entries] + [budget]
                _check_limit(_from_json(dict(limit)), budgets, source)
            f.seek(0, os.SEEK_END)
            f.write(json.dumps(record) + "\n")
            f.flush()
        return True


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
    """Set the environment variable to the inherited journals plus ``own``; restore
    the value this process started with when no ledger is active here."""
    before = _ENV_BEFORE.setdefault("value", os.environ.get(ENV_VAR))
    if own:
        inherited = [p for p in _env_journals(before) if p not in own]
        os.environ[ENV_VAR] = json.dumps(inherited + own)
    elif before is None:
        os.environ.pop(ENV_VAR, None)
    else:
        os.environ[ENV_VAR] = before


def _env_journals(value=None):
    """Journal paths listed in the environment variable (or in ``value``)."""
    value = os.environ.get(ENV_VAR) if value is None else value
    try:
        paths = json.loads(value) if value else []
    except ValueError:
        return []
    return [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else []


def _active_journals():
    """The journals of every ledger this fit is inside, each once."""
    with _LOCK:
        paths = [led._journal.path for led in _ACTIVE]
    paths += _env_journals()
    for pid in _ancestors():
        paths += _pointer_journals(pid)
    unique = dict.fromkeys(p for p in paths if os.path.exists(p))
    return [_Journal(p) for p in unique]


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
        nothing (set no fitted attribute).
    """
    if getattr(_SUSPENDED, "depth", 0):
        return
    journals = _active_journals()
    if not journals:
        return
    _check_event(budget)
    params = estimator.get_params(deep=False)
    shown = {k: params[k] for k in ("epsilon", "delta") if k in params}
    source = f"{type(estimator).__name__}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"
    for journal in journals:
        journal.charge(budget, source)


class PrivacyLedger:
    """Records the privacy spent by every fit made while it is active.

    Use it as a context manager. Fits in this process, in its threads and in its
    descendant processes (joblib's ``n_jobs`` under every backend and start method)
    are recorded; ``clone``, ``Pipeline``, ``GridSearchCV`` (every candidate, every
    fold, and the refit) and ``cross_validate`` are counted fit by fit.

    Parameters
    ----------
    limit : PureDP, ApproxDP or ZCDP, optional
        A fit that would take the total above ``limit`` raises
        :class:`~skdpsparse.exceptions.BudgetExceededError` and releases nothing
        (in ``GridSearchCV`` the default ``error_score=nan`` turns that into a
        failed candidate; pass ``error_score="raise"`` to stop the search). An
        ``ApproxDP`` limit is checked against the composed total at its δ.

    Attributes
    ----------
    entries : list of (str, budget)
        What was charged, in order: the estimator and its ε, δ, and the budget
        (with its ``event`` when the fit recorded one).
    processes : set of int
        The processes that charged them.

    Notes
    -----
    A grid search over k private fits on the same data costs the composition of the
    k fits, not one of them. Private selection (seed 000, Algorithm 5;
    :mod:`skdpsparse.model_selection`) tunes for a total close to one fit's budget.
    How the total is composed, and the limits of the composition theorems when the
    fits' privacy parameters are chosen adaptively, are in
    :mod:`skdpsparse.accounting.composition`.

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
    """

    def __init__(self, limit=None):
        if limit is not None and not isinstance(limit, (PureDP, ApproxDP, ZCDP)):
            raise TypeError(f"limit must be a PureDP, ApproxDP or ZCDP budget, got {limit!r}.")
        self.limit = limit
        self._journal = None
        self._final = None

    def __enter__(self):
        if self._journal is not None:
            raise RuntimeError("this ledger is already active.")
        fd, path = tempfile.mkstemp(prefix="skdpsparse-journal-", suffix=".jsonl")
        header = {"limit": None if self.limit is None else _to_json(self.limit)}
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(header) + "\n")
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
        self._final = self._read()
        with contextlib.suppress(OSError):  # Windows: a worker may still hold it open
            os.remove(self._journal.path)
        self._journal = None
        return False

    def charge(self, budget, source="manual"):
        """Charge a budget spent outside the estimators (e.g. a custom release).

        Parameters
        ----------
        budget : PureDP, ApproxDP or ZCDP
            With ``budget.event`` set, the event is composed (it must imply the budget).
        source : str, default="manual"
            The name shown in :meth:`summary`.
        """
        if self._journal is None:
            raise RuntimeError("charge() needs the ledger to be active (use `with`).")
        if not isinstance(budget, (PureDP, ApproxDP, ZCDP)):
            raise TypeError(f"not a privacy budget: {budget!r}")
        _check_event(budget)
        self._journal.charge(budget, source)

    def _read(self):
        if self._journal is None:
            return list(self._final or [])
        _, entries = self._journal.read()
        return [(e["source"], _entry_budget(e), e["pid"]) for e in entries]

    @property
    def entries(self):
        return [(source, budget) for source, budget, _ in self._read()]

    @property
    def processes(self):
        """Ids of the processes whose fits were charged."""
        return {pid for _, _, pid in self._read()}

    def total(self, delta=None):
        """The composed total of the entries (see the module notes).

        Parameters
        ----------
        delta : float, optional
            The target δ. Without it: the limit's δ for an ``ApproxDP`` limit, else
            the sum of the entries' δs when every entry is ``PureDP`` or ``ApproxDP``
            (basic composition would spend exactly that δ; the events' composition
            then usually gives a much smaller ε at the same δ).

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
        """
        budgets = [b for _, b in self.entries]
        if not budgets:
            return None
        if delta is None and isinstance(self.limit, ApproxDP):
            delta = self.limit.delta
        if delta is None:
            delta = _default_delta(budgets)
        return compose_events(_events(budgets), delta)

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
        entries = self.entries
        lines = [f"{len(entries)} private fits"]
        for source, budget in entries:
            ran = "" if budget.event is None else f"  [{budget.event!r}]"
            lines.append(f"  {budget!s:<24} {source}{ran}")
        try:
            lines.append(f"total: {self.total(delta)}")
        except ValueError as err:
            lines.append(f"total: needs a target delta ({err})")
        return "\n".join(lines)
