"""Private scores for :class:`PrivateParameterSelection`: what a run's model is judged by.

Two kinds, both ε-DP for a fixed model under replacement of one row (n public):

* **Per-example losses** (``"accuracy"``, the two error names, or a callable
  ``loss(y, y_pred)`` returning one loss per row): the mean of n losses clipped into
  [0, B] has sensitivity B/n (Dwork and Roth 2014, Thm 3.6, through
  :func:`~skdpsparse.mechanisms.private_selection.private_mean_loss`).
* **scikit-learn scorers** (a name from :func:`sklearn.metrics.get_scorer_names` or an
  object from :func:`sklearn.metrics.make_scorer`), whose value on a data set is in
  general not a mean over rows (F1, ROC AUC, R²) and has no sensitivity bound at a
  public n: they are evaluated by *subsample and aggregate* (Nissim, Raskhodnikova and
  Smith 2007, "Smooth sensitivity and sampling in private data analysis", Section 4).
  The rows are cut into k disjoint chunks by a data-independent permutation; the
  scorer runs on each chunk and its value is clipped into the declared range
  [lo, hi]. Replacing one row changes one chunk only, so the mean of the k clipped
  chunk scores moves by at most (hi − lo)/k: the Laplace mechanism on it with that
  sensitivity is ε-DP. The price is utility, not privacy: a chunk score is a noisier
  (for F1, biased) estimate of the full-data score, and k trades that against the
  noise (hi − lo)/(kε).

Everything that can be checked without fitting is checked when the scoring is
resolved, before the first fit, on fixed probes rather than on the data. During the
runs, a scorer or loss that raises or warns on some data is turned into the worst
score, silently: an error or a warning that depends on the data would be an event no
noise covers.
"""

import inspect
import math
import warnings

import numpy as np
from sklearn.metrics import get_scorer, get_scorer_names
from sklearn.utils import _safe_indexing

from ..mechanisms.private_selection import private_mean_loss

__all__ = ["PER_EXAMPLE_SCORINGS", "resolve_scoring"]

PER_EXAMPLE_SCORINGS = ("accuracy", "neg_mean_squared_error", "neg_mean_absolute_error")
MIN_CHUNK_ROWS = 50  # "auto" chunks: as many as keep ≥ 50 rows each, at most 1000


def _required_positional(func):
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in params if p.kind in kinds and p.default is inspect.Parameter.empty)


def _per_example_losses(scoring, y, y_pred):
    """One loss per example (lower is better), before clipping."""
    y, y_pred = np.asarray(y), np.asarray(y_pred)
    if callable(scoring):
        return np.asarray(scoring(y, y_pred), dtype=np.float64)
    if y_pred.shape != y.shape:
        y_pred = y_pred.reshape(y.shape)
    if scoring == "accuracy":  # the 0-1 loss
        wrong = y_pred != y
        return (wrong.reshape(len(y), -1).any(axis=1)).astype(np.float64)
    diff = y_pred.astype(np.float64) - y.astype(np.float64)
    per = diff * diff if scoring == "neg_mean_squared_error" else np.abs(diff)
    return per.reshape(len(y), -1).mean(axis=1)


def _quiet_call(func, *args):
    """``float(func(*args))``, NaN if it raises, and no warning reaches the caller.

    Whether a scorer raises or warns on a chunk is a function of the data (log loss on
    a chunk with one class raises, ROC AUC warns): an exception that escapes ``fit`` on
    one data set and not on its neighbour, or a warning printed on one only, is an
    event of probability 1 against 0 that no noise covers. So every outcome of the
    call becomes a number, and its side effects stay inside.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = func(*args)
            return float(value) if np.ndim(value) == 0 else value
        except Exception:  # noqa: BLE001 - the error itself would be the leak
            return math.nan


class PerExampleLoss:
    """A mean of per-example losses clipped into [0, ``bound``]; sensitivity bound/n."""

    def __init__(self, scoring, bound):
        self.scoring, self.bound = scoring, bound

    def sensitivity(self, n):
        return self.bound / n

    def private_loss(self, estimator, X, y, *, epsilon, rng):
        n = np.asarray(y).shape[0]
        losses = np.asarray(_quiet_call(_per_example_losses, self.scoring, y,
                                        estimator.predict(X)), dtype=np.float64)
        if losses.shape != (n,):
            # A callable that raised (NaN) or gave another shape on this data: every
            # row counts as the bound (NaN is clipped to it), as for a NaN loss.
            losses = np.full(n, np.nan)
        return private_mean_loss(losses, loss_bound=self.bound, epsilon=epsilon, rng=rng)


class ChunkedScorer:
    """A scikit-learn scorer by subsample and aggregate over ``n_chunks`` chunks."""

    def __init__(self, scorer, score_range, n_chunks):
        self.scorer, self.n_chunks = scorer, n_chunks
        self.low, self.high = score_range

    def sensitivity(self, n):
        return (self.high - self.low) / self.n_chunks

    def private_loss(self, estimator, X, y, *, epsilon, rng):
        # A data-independent partition: the permutation depends on n and the key only.
        losses = self.chunk_losses(estimator, X, y, rng.permutation(np.asarray(y).shape[0]))
        # The mean of k values in [0, hi − lo]: sensitivity (hi − lo)/k, one chunk changes.
        return private_mean_loss(losses, loss_bound=self.high - self.low, epsilon=epsilon,
                                 rng=rng)

    def chunk_losses(self, estimator, X, y, order):
        """high − (chunk score clipped into [low, high]) for each of the k chunks of
        ``order``, a permutation of the row indices."""
        losses = np.empty(self.n_chunks)
        for j, rows in enumerate(np.array_split(order, self.n_chunks)):
            rows = np.sort(rows)
            score = _quiet_call(self.scorer, estimator, _safe_indexing(X, rows),
                                _safe_indexing(y, rows))
            # NaN (an undefined score, or an error, on a chunk) counts as the worst value.
            score = self.low if math.isnan(score) else min(max(score, self.low), self.high)
            losses[j] = self.high - score  # lower is better, in [0, hi − lo]
        return losses


def _check_range(score_range, owner):
    try:
        low, high = (float(v) for v in score_range)
    except (TypeError, ValueError):
        raise ValueError(f"The 'score_range' parameter of {owner} must be a pair (low, high) "
                         f"of finite numbers, got {score_range!r}.") from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"The 'score_range' parameter of {owner} must satisfy "
                         f"low < high, both finite; got {score_range!r}.")
    return low, high


def _n_chunks(score_chunks, n, owner):
    if score_chunks == "auto":
        return int(max(1, min(n // MIN_CHUNK_ROWS, 1000)))
    if isinstance(score_chunks, (bool, np.bool_)) or not isinstance(
            score_chunks, (int, np.integer)) or not 1 <= score_chunks <= n:
        raise ValueError(f"The 'score_chunks' parameter of {owner} must be 'auto' or an int "
                         f"in [1, n_samples={n}], got {score_chunks!r}.")
    return int(score_chunks)


def resolve_scoring(scoring, *, score_bound, score_range, score_chunks, y, owner):
    """The private score of ``scoring``, checked before any fit.

    Returns a :class:`PerExampleLoss` or a :class:`ChunkedScorer`; raises
    ``ValueError`` naming the parameter for anything that cannot give a private score.
    """
    n = np.asarray(y).shape[0]
    if isinstance(scoring, str):
        if scoring in PER_EXAMPLE_SCORINGS:
            return PerExampleLoss(scoring, 1.0 if scoring == "accuracy" else score_bound)
        if scoring not in get_scorer_names():
            raise ValueError(f"The 'scoring' parameter of {owner} must be one of "
                             f"{PER_EXAMPLE_SCORINGS}, a name in "
                             f"sklearn.metrics.get_scorer_names(), a scorer or a per-example "
                             f"loss callable; got {scoring!r}.")
        scoring = get_scorer(scoring)
    if not callable(scoring):
        raise ValueError(f"The 'scoring' parameter of {owner} must be a string or a callable, "
                         f"got {scoring!r}.")
    required = _required_positional(scoring)
    if required == 3:  # scorer(estimator, X, y), as make_scorer returns
        return ChunkedScorer(scoring, _check_range(score_range, owner),
                             _n_chunks(score_chunks, n, owner))
    if required == 2:  # loss(y, y_pred): check its shape before any fit
        # On a fixed probe, not on rows of y: whether the check passes must not
        # depend on the data.
        probe = np.zeros(2)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                shape = np.shape(scoring(probe, probe))
        except Exception as err:  # noqa: BLE001 - reported with the parameter's name
            raise ValueError(f"The 'scoring' parameter of {owner}: calling it as "
                             f"scoring(y, y_pred) on two numeric rows (zeros) failed "
                             f"({err!r}).") from err
        if shape != (len(probe),):
            raise ValueError(
                f"The 'scoring' parameter of {owner}: a callable scoring(y, y_pred) must "
                f"return one loss per example (shape ({len(probe)},) on two rows), got "
                f"shape {shape}. For a metric over the whole set such as f1_score, pass "
                f"sklearn.metrics.make_scorer(f1_score) (scored by subsample and "
                f"aggregate) instead.")
        return PerExampleLoss(scoring, score_bound)
    raise ValueError(f"The 'scoring' parameter of {owner} must be a per-example loss "
                     f"scoring(y, y_pred) or a scorer scorer(estimator, X, y); "
                     f"{scoring!r} takes {required} required positional arguments.")
