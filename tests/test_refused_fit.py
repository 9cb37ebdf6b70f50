"""A fit that a ledger refuses releases nothing: no fitted attribute of any kind is
set, and a refused refit leaves the estimator unfitted, never with a mixture of the
earlier fit and the refused one (issue 17).

Every estimator charges its budget first and only then sets its fitted attributes, all
at once (``skdpsparse.utils._data.release``), ``n_features_in_``, ``feature_names_in_``
and ``classes_`` included, which scikit-learn's validation and the label handling set
while the data is read (``fit_input`` takes them off again until the release).
"""

import numpy as np
import pytest

from skdpsparse import BudgetExceededError, PrivacyLedger
from skdpsparse.accounting import PureDP
from skdpsparse.utils._test_instances import estimator_instances

pd = pytest.importorskip("pandas")

ESTIMATORS = [
    pytest.param(inst.make, inst.task, id=inst.id)
    for inst in estimator_instances([
        "sparse_mean", "heavy_tailed_mean", "heavy_tailed_nsme", "heavy_tailed_regressor",
        "cyclic_sgd_logistic", "cyclic_sgd_huber", "output_perturbation_classifier",
        "sparse_exponential", "output_perturbation_regressor", "bias_reduced_sgd_classifier",
        "bias_reduced_sgd_classifier_ovr", "bias_reduced_sgd_regressor", "private_selection", "noisy_sgd_classifier",
        "noisy_sgd_regressor"])
]


#: The same estimators, refitted.
REFIT_ESTIMATORS = ESTIMATORS


def _data(task, d=3):
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.standard_normal((60, d)), columns=[f"f{j}" for j in range(d)])
    y = rng.standard_normal(60)
    if task == "classification":
        y = (y > 0).astype(int)
    return X, y


def _fit(est, task, X, y):
    return est.fit(X) if task is None else est.fit(X, y)


def _fitted_attributes(est):
    return {k: v for k, v in vars(est).items() if k.endswith("_") and not k.startswith("_")}


@pytest.mark.parametrize("factory, task", ESTIMATORS)
def test_a_refused_fit_sets_no_fitted_attribute(factory, task):
    X, y = _data(task)
    est = factory()
    with PrivacyLedger(limit=PureDP(1e-9)):
        with pytest.raises(BudgetExceededError):
            _fit(est, task, X, y)
    assert _fitted_attributes(est) == {}
    assert not hasattr(est, "n_features_in_") and not hasattr(est, "feature_names_in_")


@pytest.mark.parametrize("factory, task", REFIT_ESTIMATORS)
def test_a_refused_refit_leaves_the_estimator_unfitted(factory, task):
    X, y = _data(task)
    est = _fit(factory(), task, X, y)
    assert _fitted_attributes(est) and est.n_features_in_ == 3  # a fit does set them
    X2, y2 = _data(task, d=5)
    X2.columns = [f"g{j}" for j in range(5)]
    with PrivacyLedger(limit=PureDP(1e-9)):
        with pytest.raises(BudgetExceededError):
            _fit(est, task, X2, y2)
    assert _fitted_attributes(est) == {}
    assert not hasattr(est, "n_features_in_") and not hasattr(est, "feature_names_in_")
