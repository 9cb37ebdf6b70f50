"""Checks every public estimator shares, driven by ``all_estimators()`` and the one list
of test configurations (``skdpsparse.utils._test_instances``): a newly exported
estimator without a configuration fails here, so no common test can skip it."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone

import skdpsparse
from skdpsparse.utils._test_instances import estimator_instances
from skdpsparse.utils.discovery import all_estimators

INSTANCES = estimator_instances()
#: One configuration per estimator class (the first listed), for the costlier checks.
ONE_PER_CLASS = list({inst.name: inst for inst in reversed(INSTANCES)}.values())


def _data(task, n=80, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    y = X @ np.ones(d) + 0.1 * rng.normal(size=n)
    return X, ((y > 0).astype(int) if task == "classification" else y)


def _fit(inst, X, y):
    est = inst.make()
    return est.fit(X) if inst.task is None else est.fit(X, y)


def _released(est, path):
    for part in path.split("."):
        est = getattr(est, part)
    return est


def test_every_exported_estimator_has_a_test_configuration():
    exported = {name for name, _ in all_estimators()}
    configured = {inst.name for inst in INSTANCES}
    assert exported == configured, (exported - configured, configured - exported)


def test_all_estimators_filters_by_kind():
    names = lambda kind: {n for n, _ in all_estimators(kind)}  # noqa: E731
    assert names("transformer") == {"DPHeavyTailedMean", "DPSparseMeanEstimator"}
    assert {"DPOutputPerturbationClassifier", "DPNoisySGDClassifier"} <= names("classifier")
    assert names("classifier").isdisjoint(names("regressor"))
    assert all(getattr(skdpsparse, n) is c for n, c in all_estimators())
    with pytest.raises(ValueError, match="type_filter"):
        all_estimators("clusterer")


@pytest.mark.parametrize("inst", ONE_PER_CLASS, ids=lambda i: i.id)
def test_pickled_fit_releases_and_predicts_the_same(inst):
    X, y = _data(inst.task)
    est = _fit(inst, X, y)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(np.asarray(_released(again, inst.released), dtype=float),
                                  np.asarray(_released(est, inst.released), dtype=float))
    method = "transform" if inst.task is None else "predict"
    np.testing.assert_array_equal(getattr(again, method)(X), getattr(est, method)(X))
    assert again.privacy_spent_ == est.privacy_spent_


@pytest.mark.parametrize("inst", ONE_PER_CLASS, ids=lambda i: i.id)
def test_clone_of_a_fitted_estimator_is_unfitted_with_the_same_parameters(inst):
    X, y = _data(inst.task)
    est = _fit(inst, X, y)
    copy = clone(est)
    assert not [k for k in vars(copy) if k.endswith("_") and not k.startswith("_")]
    assert repr(copy) == repr(est)
    assert set(copy.get_params()) == set(est.get_params())


@pytest.mark.parametrize("inst", ONE_PER_CLASS, ids=lambda i: i.id)
def test_every_fit_reports_what_it_spent_within_what_it_was_given(inst):
    X, y = _data(inst.task)
    est = _fit(inst, X, y)
    spent, eps = est.privacy_spent_, est.get_params()["epsilon"]
    # ρ-zCDP estimators report ρ; their (ε, δ) conversion is checked in their own tests.
    if hasattr(spent, "epsilon"):
        assert 0 < spent.epsilon <= eps * (1 + 1e-9), (inst.id, spent, eps)
    assert skdpsparse.privacy_spent(est) is not None


@pytest.mark.parametrize("inst", ONE_PER_CLASS, ids=lambda i: i.id)
def test_a_bad_parameter_is_one_error_type_at_every_layer(inst):
    """``epsilon="a"`` on an estimator and ``PureDP("a")`` raise the same error, which
    is both a ValueError and a TypeError (scikit-learn's convention), naming it."""
    from skdpsparse.accounting import PureDP
    from skdpsparse.exceptions import InvalidParameterError

    assert issubclass(InvalidParameterError, ValueError)
    assert issubclass(InvalidParameterError, TypeError)
    X, y = _data(inst.task)
    est = inst.make().set_params(epsilon="a")
    with pytest.raises(InvalidParameterError, match="epsilon"):
        est.fit(X) if inst.task is None else est.fit(X, y)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        PureDP("a")


@pytest.mark.parametrize("inst", ONE_PER_CLASS, ids=lambda i: i.id)
def test_sample_weight_is_refused_with_the_reason_before_any_fit(inst):
    """Not a bare "unexpected keyword argument": the error names sample_weight and says
    why (a weight changes the sensitivity), and nothing is fitted or charged."""
    from skdpsparse import PrivacyLedger
    from skdpsparse.exceptions import InvalidParameterError

    X, y = _data(inst.task)
    est = inst.make()
    with PrivacyLedger() as ledger, pytest.raises(InvalidParameterError,
                                                  match="sample_weight.*sensitivity"):
        if inst.task is None:
            est.fit(X, sample_weight=np.ones(len(X)))
        else:
            est.fit(X, y, sample_weight=np.ones(len(X)))
    assert ledger.entries == []
    assert not [k for k in vars(est) if k.endswith("_") and not k.startswith("_")]
    with pytest.raises(InvalidParameterError, match="unexpected fit parameters"):
        est.fit(X, groups=np.ones(len(X))) if inst.task is None else est.fit(
            X, y, groups=np.ones(len(X)))


@pytest.mark.parametrize("inst", [i for i in ONE_PER_CLASS
                                  if i.name != "PrivateParameterSelection"],
                         ids=lambda i: i.id)
def test_float32_in_float32_out(inst):
    """As in scikit-learn: float32 data gives float32 coef_, intercept_ and mean_ (the
    computation runs in float64; the cast is post-processing of the release)."""
    X, y = _data(inst.task)
    est = _fit(inst, X.astype(np.float32), y)
    for name in ("coef_", "intercept_", "mean_"):
        if hasattr(est, name):
            assert np.asarray(getattr(est, name)).dtype == np.float32, name
    est64 = _fit(inst, X, y)
    for name in ("coef_", "mean_"):
        if hasattr(est64, name):
            assert np.asarray(getattr(est64, name)).dtype == np.float64, name
