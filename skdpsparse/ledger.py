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
charged once. The entries live in a journal file guarded by a file lock, so worker
processes (``n_jobs=2``: joblib's loky workers are children of the process holding
the ledger) append to the same journal; a child finds it through a pointer file
named after its parent's process id, written while the ledger is active. Threads
share the in-process registry.

Composition. Pure-DP entries add up (basic composition); zCDP entries add up in ρ
(Bun and Steinke 2016, Lemma 2.3); (ε, δ) entries add up in ε and δ. A total in
(ε, δ) at a target δ converts the zCDP sum (pure entries are counted either by
basic composition or as ε²/2-zCDP, whichever gives less) with the δ left after the
(ε, δ) entries' δs.
"""

import contextlib
import fcntl
import json
import os
import tempfile
import threading

from .accounting import ZCDP, ApproxDP, PureDP, zcdp_to_epsilon
from .exceptions import BudgetExceededError

__all__ = ["PrivacyLedger", "charge_budget", "compose"]

_ACTIVE = []  # ledgers active in this process, innermost last
_LOCK = threading.Lock()
_SUSPENDED = threading.local()  # depth of _charges_suspended() in this thread


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


def compose(budgets, delta=None):
    """Total privacy loss of a sequence of budgets (see the module notes).

    Returns ``PureDP`` when every budget is pure; otherwise ``ApproxDP`` at
    ``delta``, which must exceed the sum of the (ε, δ) entries' δs when a zCDP
    entry needs converting.
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


class _Journal:
    """Append-only JSON-lines file: a header with the limit, then one line per fit."""

    def __init__(self, path):
        self.path = path

    def read(self):
        with open(self.path) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        return lines[0], lines[1:]

    def charge(self, budget, source):
        with open(self.path, "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # check-then-append is atomic across processes
            try:
                f.seek(0)
                lines = [json.loads(line) for line in f if line.strip()]
                header, entries = lines[0], lines[1:]
                budgets = [_from_json(dict(e["budget"])) for e in entries] + [budget]
                limit = header.get("limit")
                if limit is not None:
                    _check_limit(_from_json(dict(limit)), budgets, source)
                f.seek(0, os.SEEK_END)
                f.write(json.dumps({"source": source, "budget": _to_json(budget),
                                    "pid": os.getpid()}) + "\n")
                f.flush()
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


def _check_limit(limit, budgets, source):
    if isinstance(limit, PureDP):
        total = compose(budgets) if all(isinstance(b, PureDP) for b in budgets) else None
        ok = total is not None and total.epsilon <= limit.epsilon * (1 + 1e-12)
    elif isinstance(limit, ZCDP):
        if any(isinstance(b, ApproxDP) for b in budgets):
            ok = False
        else:
            rho = sum(b.rho if isinstance(b, ZCDP) else b.epsilon**2 / 2 for b in budgets)
            ok = rho <= limit.rho * (1 + 1e-12)
        total = None
    else:
        try:
            total = compose(budgets, limit.delta)
            ok = total.epsilon <= limit.epsilon * (1 + 1e-12)
        except ValueError:
            total, ok = None, False
    if not ok:
        spent = "" if total is None else f" (the total would be {total})"
        raise BudgetExceededError(
            f"{source} would exceed the ledger's limit {limit}{spent}; nothing was released.")


def _pointer_path(pid):
    return os.path.join(tempfile.gettempdir(), f"skdpsparse-ledger-{pid}.json")


def _publish():
    # Called under _LOCK: tell child processes which journals are active.
    path = _pointer_path(os.getpid())
    if _ACTIVE:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump([led._journal.path for led in _ACTIVE], f)
        os.replace(tmp, path)
    elif os.path.exists(path):
        os.remove(path)


def _active_journals():
    with _LOCK:
        if _ACTIVE:
            return [led._journal for led in _ACTIVE]
    try:
        with open(_pointer_path(os.getppid())) as f:
            return [_Journal(p) for p in json.load(f) if os.path.exists(p)]
    except (OSError, ValueError):
        return []


def charge_budget(estimator, budget):
    """Charge ``budget`` to every active ledger; called by ``fit`` before release.

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
    params = estimator.get_params(deep=False)
    shown = {k: params[k] for k in ("epsilon", "delta") if k in params}
    source = f"{type(estimator).__name__}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"
    for journal in journals:
        journal.charge(budget, source)


class PrivacyLedger:
    """Records the privacy spent by every fit made while it is active.

    Use it as a context manager. Fits in this process, in its threads and in its
    child processes (joblib's ``n_jobs``) are recorded; ``clone``, ``Pipeline``,
    ``GridSearchCV`` (every candidate, every fold, and the refit) and
    ``cross_validate`` are counted fit by fit.

    Parameters
    ----------
    limit : PureDP, ApproxDP or ZCDP, optional
        A fit that would take the total above ``limit`` raises
        :class:`~skdpsparse.exceptions.BudgetExceededError` and releases nothing
        (in ``GridSearchCV`` the default ``error_score=nan`` turns that into a
        failed candidate; pass ``error_score="raise"`` to stop the search).

    Attributes
    ----------
    entries : list of (str, budget)
        What was charged, in order: the estimator and its ε, δ, and the budget.
    processes : set of int
        The processes that charged them.

    Notes
    -----
    A grid search over k private fits on the same data costs the composition of the
    k budgets, not one of them. Private selection (seed 000, Algorithm 5;
    :mod:`skdpsparse.model_selection`) tunes for a total close to one fit's budget.
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
        os.remove(self._journal.path)
        self._journal = None
        return False

    def charge(self, budget, source="manual"):
        """Charge a budget spent outside the estimators (e.g. a custom release)."""
        if self._journal is None:
            raise RuntimeError("charge() needs the ledger to be active (use `with`).")
        self._journal.charge(budget, source)

    def _read(self):
        if self._journal is None:
            return list(self._final or [])
        _, entries = self._journal.read()
        return [(e["source"], _from_json(dict(e["budget"])), e["pid"]) for e in entries]

    @property
    def entries(self):
        return [(source, budget) for source, budget, _ in self._read()]

    @property
    def processes(self):
        """Ids of the processes whose fits were charged."""
        return {pid for _, _, pid in self._read()}

    def total(self, delta=None):
        """The composed total (:func:`compose`); ``delta`` defaults to the limit's."""
        if delta is None and isinstance(self.limit, ApproxDP):
            delta = self.limit.delta
        return compose([b for _, b in self.entries], delta)

    def total_zcdp(self):
        """The total as zCDP when every entry is pure or zCDP, else None."""
        budgets = [b for _, b in self.entries]
        if any(isinstance(b, ApproxDP) for b in budgets):
            return None
        rho = sum(b.rho if isinstance(b, ZCDP) else b.epsilon**2 / 2 for b in budgets)
        return ZCDP(rho) if rho > 0 else None

    def summary(self, delta=None):
        """Entries and total, as text."""
        entries = self.entries
        lines = [f"{len(entries)} private fits"]
        for source, budget in entries:
            lines.append(f"  {budget!s:<24} {source}")
        try:
            lines.append(f"total: {self.total(delta)}")
        except ValueError as err:
            lines.append(f"total: needs a target delta ({err})")
        return "\n".join(lines)
