"""Adversarial review of the subsample-and-aggregate scorers of PrivateParameterSelection
(skdpsparse/model_selection/_selection_scoring.py).

Both breaks below were found by the review and fixed (every outcome of a chunk's
scorer becomes a number, with its warnings kept inside); the tests stay as
regressions.

The claim: a scikit-learn scorer, evaluated on k disjoint chunks and clipped into
``score_range``, is an epsilon-DP score with sensitivity (high - low)/k. The proof
covers the value of a chunk's score, but not a scorer that *raises* on a chunk:
``ChunkedScorer.chunk_losses`` maps NaN to the worst value, yet an exception (for
example ``log_loss`` on a chunk whose labels are all one class) propagates out of
``fit``. Whether ``fit`` raises is then a deterministic function of the data.
"""

import warnings

import numpy as np

from skdpsparse.linear_model import DPOutputPerturbationClassifier
from skdpsparse.model_selection import PrivateParameterSelection


def _fit_raises(y, X):
    search = PrivateParameterSelection(
        DPOutputPerturbationClassifier(classes=[0, 1]), {"alpha": [0.1, 1.0]},
        epsilon=1.0, delta=1e-6, scoring="neg_log_loss", score_range=(-10.0, 0.0),
        score_chunks=1, random_state=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            search.fit(X, y)
        except ValueError:
            return True
    return False


def test_scorer_exception_is_not_a_data_dependent_event():
    rng = np.random.default_rng(0)
    n = 100
    X = rng.normal(size=(n, 3))
    y = np.zeros(n, dtype=int)
    y[0] = 1  # one positive row
    y_neighbour = y.copy()
    y_neighbour[0] = 0  # replace it: every label is 0
    # The neighbours differ in one row, with fresh (secret) noise on both: the fit's
    # outcome (released or ValueError) must not be determined by the data.
    assert _fit_raises(y, X) == _fit_raises(y_neighbour, X)


def _fit_warns_undefined_metric(y, X):
    from sklearn.exceptions import UndefinedMetricWarning

    search = PrivateParameterSelection(
        DPOutputPerturbationClassifier(classes=[0, 1]), {"alpha": [0.1, 1.0]},
        epsilon=1.0, delta=1e-6, scoring="roc_auc", score_chunks=1, random_state=None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search.fit(X, y)
    return any(issubclass(w.category, UndefinedMetricWarning) for w in caught)


def test_scorer_warnings_are_not_a_data_dependent_event():
    rng = np.random.default_rng(0)
    n = 100
    X = rng.normal(size=(n, 3))
    y = np.zeros(n, dtype=int)
    y[0] = 1
    y_neighbour = y.copy()
    y_neighbour[0] = 0
    assert _fit_warns_undefined_metric(y, X) == _fit_warns_undefined_metric(y_neighbour, X)
