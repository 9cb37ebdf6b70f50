"""Why the sparse mean's noise key digests the data (issue 16 §1).

Every draw of a sparse-mean fit hashes the exact statistic it is added to, so a key
of (seed, parameters) alone looks enough: fits with different statistics get
independent noise, fits with equal statistics equal releases. The attack below shows
it is not: *whether* two fold models are equal depends on one row. It runs against
that variant (the key without the data digest), where it must succeed, and against the
library, where it must fail (``skdpsparse/utils/_random.py``, module docstring).
"""

import hashlib

import numpy as np
from sklearn.model_selection import KFold, cross_validate

import skdpsparse.mean._sparse_mean as sparse_mean_module
from skdpsparse.accounting.discrete import discrete_gaussian_sigma
from skdpsparse.mean import DPSparseMeanEstimator
from skdpsparse.mechanisms.projection import bounded_mean
from skdpsparse.utils import RandomSource
from skdpsparse.utils._random import _canonical


def _key_without_data(random_state, estimator, *data):
    """Broken: the key of (seed, class, parameters), the data left out."""
    params = {k: v for k, v in estimator.get_params().items() if k != "random_state"}
    message = repr(random_state).encode() + type(estimator).__qualname__.encode() \
        + _canonical(params)
    return RandomSource(hashlib.blake2b(message, digest_size=32).digest())


def _one_hot(categories, d):
    X = np.zeros((len(categories), d))
    X[np.arange(len(categories)), categories] = 1.0
    return X


def _two_fold_models(X):
    est = DPSparseMeanEstimator(method="gaussian", epsilon=1.0, delta=1e-5, sparsity=1,
                                random_state=0)
    out = cross_validate(est, X, cv=KFold(10), return_estimator=True,
                         scoring=lambda e, X_, y_=None: 0.0)
    return [e.mean_ for e in out["estimator"][:2]]


def _neighbours(d=3, chunk=20):
    """One-hot rows in 10 chunks; chunks 0 and 1 have the same column counts in D (so
    folds 0 and 1, which leave them out, have equal statistics), not in D', which
    changes the category of one row of chunk 1."""
    rng = np.random.default_rng(0)
    base = rng.integers(0, d, chunk)
    categories = np.concatenate([base, rng.permutation(base),
                                 rng.integers(0, d, 8 * chunk)])
    D = _one_hot(categories, d)
    changed = categories.copy()
    changed[chunk] = (changed[chunk] + 1) % d
    return D, _one_hot(changed, d)


def test_equal_fold_models_betray_one_row_when_the_key_skips_the_data(monkeypatch):
    D, D_prime = _neighbours()
    train = [np.delete(np.arange(len(D)), np.arange(20 * f, 20 * f + 20)) for f in (0, 1)]
    np.testing.assert_array_equal(bounded_mean(D[train[0]], 1.0, 1),
                                  bounded_mean(D[train[1]], 1.0, 1))  # the setting

    def releases_equal(X):
        a, b = _two_fold_models(X)
        return np.array_equal(a, b)

    with monkeypatch.context() as m:  # broken: the key without the data
        m.setattr(sparse_mean_module, "fit_random_source", _key_without_data)
        # D: equal statistics, one key, equal noise: equal releases, always. D': the
        # statistics differ, so do the draws' keys: equal releases with probability
        # about 2^-29 per coordinate. The pair says which one was used.
        assert releases_equal(D)
        assert not releases_equal(D_prime)
    # The library: the folds' data differ, so do their keys, for D as for D'.
    assert not releases_equal(D)
    assert not releases_equal(D_prime)


def test_two_folds_with_one_int_seed_do_not_cancel_their_noise():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (200, 40)) / np.sqrt(40)
    est = DPSparseMeanEstimator(method="gaussian", epsilon=1.0, delta=1e-5, random_state=0)
    out = cross_validate(est, X, cv=KFold(10), return_estimator=True,
                         scoring=lambda e, X_, y_=None: 0.0)
    folds = list(KFold(10).split(X))
    released = [e.mean_ for e in out["estimator"][:2]]
    exact = [bounded_mean(X[train], 1.0, 40) for train, _ in folds[:2]]
    residual = (released[1] - released[0]) - (exact[1] - exact[0])
    sigma = discrete_gaussian_sigma(2.0 / 180, 1.0, 1e-5)
    # Two independent noise vectors: norm about σ√(2·40); below σ√40/2 has
    # probability under 1e-9 (chi-square with 40 degrees of freedom).
    assert np.linalg.norm(residual) > 0.5 * sigma * np.sqrt(40)
