"""Hostile and unusual input for every public estimator (property-based).

Allowed outcomes: a fit whose released values are finite, or a ValueError/TypeError
whose message names the problem. Never a crash inside numba, a silent NaN or a hang.
``HYPOTHESIS_MAX_EXAMPLES`` (environment) scales the number of generated cases per
estimator (25 in CI); the full run is
``HYPOTHESIS_MAX_EXAMPLES=1000 pytest tests/test_hostile_input.py``, over 10⁴ cases.
"""

import os

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from skdpsparse.utils._test_instances import estimator_instances

MAX_EXAMPLES = int(os.environ.get("HYPOTHESIS_MAX_EXAMPLES", "25"))
SETTINGS = settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

#: (name, factory, task, released attribute); task None (unsupervised), "regression"
#: or "classification" (binary labels 0/1). The configurations live in one place.
ESTIMATORS = [
    (inst.id, inst.make, inst.task, inst.released)
    for inst in estimator_instances([
        "sparse_mean", "sparse_mean_pure", "heavy_tailed_mean", "heavy_tailed_nsme",
        "heavy_tailed_regressor", "heavy_tailed_regressor_cwme", "cyclic_sgd_logistic",
        "cyclic_sgd_huber", "noisy_sgd_classifier", "noisy_sgd_regressor",
        "output_perturbation_classifier", "output_perturbation_regressor_pure",
        "bias_reduced_sgd_classifier", "bias_reduced_sgd_classifier_ovr",
        "bias_reduced_sgd_regressor_boosted"])
]
IDS = [e[0] for e in ESTIMATORS]
SPARSE_FORMATS = ["csr", "csc", "coo", "lil", "dok", "bsr", "dia"]


@st.composite
def matrices(draw):
    n = draw(st.integers(1, 12))
    d = draw(st.integers(1, 6))
    exponent = draw(st.sampled_from([-300, -30, 0, 30, 300]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X = rng.standard_t(2.0, size=(n, d)) * 10.0**exponent
    if draw(st.booleans()):
        X[:, 0] = 7.0  # a constant column
    if draw(st.booleans()):
        X[rng.random((n, d)) < 0.5] = 0.0
    dtype = draw(st.sampled_from(["float64", "float32", "int64"]))
    if dtype == "int64":
        X = np.clip(np.round(X), -1e9, 1e9).astype(np.int64)
    elif dtype == "float32":
        X = np.clip(X, -1e38, 1e38).astype(np.float32)
    container = draw(st.sampled_from(["dense", "fortran", "strided", "readonly", "pandas",
                                      *SPARSE_FORMATS]))
    y = rng.standard_t(2.0, size=n) * 10.0 ** draw(st.sampled_from([-300, 0, 300]))
    return _wrap(X, container), y, container


def _wrap(X, container):
    if container == "fortran":
        return np.asfortranarray(X)
    if container == "strided":
        return np.repeat(X, 2, axis=1)[:, ::2]
    if container == "readonly":
        X = X.copy()
        X.setflags(write=False)
        return X
    if container == "pandas":
        pd = pytest.importorskip("pandas")
        return pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    if container in SPARSE_FORMATS:
        return sp.csr_matrix(X).asformat(container)
    return X


def _fit(factory, task, X, y):
    est = factory()
    if task is None:
        return est.fit(X)
    if task == "classification":
        y = (np.asarray(y) > (np.median(y) if np.size(y) else 0)).astype(int)
    return est.fit(X, y)


@pytest.mark.parametrize("name, factory, task, attr", ESTIMATORS, ids=IDS)
@SETTINGS
@given(data=matrices())
def test_any_finite_input_fits_to_finite_values(name, factory, task, attr, data):
    X, y, container = data
    try:
        est = _fit(factory, task, X, y)
    except ValueError as err:  # the only refusal allowed: a named, explained one
        msg = str(err)
        assert any(w in msg for w in ("sparse", "sample", "feature", "class")), msg
        return
    released = np.asarray(getattr(est, attr))
    # One row of d per problem: a single one, or K for a one-versus-rest classifier
    # (``coef_`` of shape (K, d)).
    n_problems = len(est.classes_) if released.ndim == 2 and released.shape[0] > 1 else 1
    assert released.shape[-1] == np.shape(X)[1]
    assert released.size == n_problems * np.shape(X)[1]
    assert np.all(np.isfinite(released)), (name, container)
    if task is not None:
        assert np.all(np.isfinite(est.predict(X)))


@pytest.mark.parametrize("name, factory, task, attr", ESTIMATORS, ids=IDS)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("sparse", [False, True])
def test_non_finite_input_is_a_clear_error(name, factory, task, attr, bad, sparse):
    X = np.arange(24.0).reshape(8, 3)
    X[5, 2] = bad
    X = sp.csr_matrix(X) if sparse else X
    with pytest.raises(ValueError, match="NaN|inf"):
        _fit(factory, task, X, np.ones(8))


@pytest.mark.parametrize("name, factory, task, attr", ESTIMATORS, ids=IDS)
def test_empty_and_wrong_shapes(name, factory, task, attr):
    with pytest.raises(ValueError, match="sample"):
        _fit(factory, task, np.empty((0, 3)), np.empty(0))
    with pytest.raises(ValueError, match="feature"):
        _fit(factory, task, np.empty((4, 0)), np.ones(4))
    with pytest.raises(ValueError, match="2D|2-D|dimension"):
        _fit(factory, task, np.ones(5), np.ones(5))
    est = _fit(factory, task, np.random.default_rng(0).normal(size=(20, 3)),
               np.arange(20.0))
    method = est.predict if task is not None else est.score
    with pytest.raises(ValueError, match="features"):
        method(np.ones((4, 5)))


@pytest.mark.parametrize("name, factory, task, attr", ESTIMATORS, ids=IDS)
@pytest.mark.parametrize("param, value", [("epsilon", 0.0), ("epsilon", -1.0),
                                          ("epsilon", np.nan), ("delta", 1.0),
                                          ("delta", -0.5), ("epsilon", "1")])
def test_invalid_privacy_parameters_are_named(name, factory, task, attr, param, value):
    est = factory().set_params(**{param: value})
    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises((ValueError, TypeError), match=param):
        est.fit(X, np.arange(20) % 2) if task is not None else est.fit(X)


@pytest.mark.parametrize("name, factory, task, attr", ESTIMATORS, ids=IDS)
def test_seeds_reproduce_and_unseeded_fits_never_share_noise(name, factory, task, attr):
    """random_state=int reproduces the release exactly; random_state=None draws fresh
    operating-system entropy for every fit (two such fits differ)."""
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(60, 3)), rng.normal(size=60)
    if task == "classification":
        y = (y > 0).astype(int)

    def release(seed):
        est = factory().set_params(random_state=seed)
        est = est.fit(X) if task is None else est.fit(X, y)
        return np.asarray(getattr(est, attr), dtype=float)

    np.testing.assert_array_equal(release(123), release(123))
    assert not np.array_equal(release(None), release(None))


# --------------------------------------------- one extreme but finite row (issue 17)
#: Largest finite magnitudes: norms, margins and products of such rows overflow.
EXTREME = [1.7e308, -1.7e308, 1e308, -1e308, 8.9e307, -3e307]
EXTREME_ESTIMATORS = ESTIMATORS + [
    (inst.id, inst.make, inst.task, inst.released)
    for inst in estimator_instances(["noisy_sgd_regressor_wide", "noisy_sgd_classifier_wide",
                                     "heavy_tailed_regressor_wide", "private_selection"])
]
EXTREME_SETTINGS = settings(max_examples=max(MAX_EXAMPLES // 3, 6), deadline=None,
                            derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def extreme_row_data(draw):
    """Ordinary rows (n in [6, 12], d in [1, 4]) and one row whose entries reach
    ±1.7e308 (its target too, sometimes); dense or CSR."""
    n = draw(st.integers(6, 12))
    d = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X = rng.standard_normal((n, d))
    y = rng.standard_normal(n)
    row = draw(st.integers(0, n - 1))
    X[row] = draw(hnp.arrays(np.float64, d, elements=st.one_of(
        st.sampled_from(EXTREME),
        st.floats(-1.7e308, 1.7e308, allow_nan=False, allow_infinity=False))))
    if draw(st.booleans()):
        y[row] = draw(st.sampled_from(EXTREME))
    return (sp.csr_matrix(X) if draw(st.booleans()) else X), y


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # predictions
@pytest.mark.parametrize("name, factory, task, attr", EXTREME_ESTIMATORS,
                         ids=[e[0] for e in EXTREME_ESTIMATORS])
@EXTREME_SETTINGS
@given(data=extreme_row_data())
def test_one_extreme_finite_row_never_releases_non_finite_values(name, factory, task, attr,
                                                                 data):
    """Finite data is bounded, never rejected, and never turns into NaN/inf: a row of
    entries up to ±1.7e308 must leave every released number finite (noisy SGD used to
    form the margin on the raw row: inf·0 = NaN; noise smoothing refused x/τ = inf)."""
    X, y = data
    est = _fit(factory, task, X, y)  # no error allowed: the data is finite
    released = est
    for part in attr.split("."):
        released = getattr(released, part)
    assert np.all(np.isfinite(np.asarray(released, dtype=float))), name
    for extra in ("intercept_",):
        if hasattr(est, extra):
            assert np.all(np.isfinite(np.asarray(getattr(est, extra), dtype=float))), name
    if task is not None:
        moderate = np.random.default_rng(0).standard_normal((5, np.shape(X)[1]))
        assert np.all(np.isfinite(np.asarray(est.decision_function(moderate)
                                             if task == "classification"
                                             and hasattr(est, "decision_function")
                                             else est.predict(moderate), dtype=float)))
