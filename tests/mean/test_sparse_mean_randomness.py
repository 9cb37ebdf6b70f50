"""The sparse mean's key skips the data digest: attacks on that path (issue 16 §1).

Every draw of a row-level sparse-mean fit is the one noise vector of its release, keyed
by the exact statistic (grid values and integer noise scale) it is added to, so the
fit's key is a hash of (seed, parameters) alone (``skdpsparse/utils/_random.py``,
module docstring). Each attack below runs against a broken variant of that design,
where it must succeed, and against the library, where it must fail.
"""

import numpy as np
import pytest
from sklearn.model_selection import KFold, cross_validate

from skdpsparse._kernels import exact_sampling
from skdpsparse.accounting.discrete import discrete_gaussian_sigma
from skdpsparse.datasets import make_sparse_vectors
from skdpsparse.mean import DPSparseMeanEstimator
from skdpsparse.mechanisms.projection import bounded_mean, mean_noise
from skdpsparse.utils import RandomSource
from skdpsparse.utils import _random
from skdpsparse.utils._random import StatisticKeyedSource

N, D = 200, 40


def _rows(seed=0, n=N, d=D):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (n, d)) / np.sqrt(d)


def _unkeyed_draw(self, kind, grid_values, scale):
    """Broken: the noise keyed by the source and a counter only, as if the digest had
    been dropped without keying the draw by its statistic."""
    return RandomSource._next_key(self, kind)


def _keyed_without_scale(self, kind, grid_values, scale):
    """Broken: keyed by the grid values but not by the integer noise scale."""
    return RandomSource._noise_key(self, kind, grid_values, scale)


def _fold_residual(est, X, sparsity):
    """(μ̂₁ − μ̂₀) − (μ₁ − μ₀) for the first two folds of a 10-fold cross-validation:
    zero when the two fold models share their noise."""
    out = cross_validate(est, X, cv=KFold(10), return_estimator=True,
                         scoring=lambda e, X_, y_=None: 0.0)
    folds = list(KFold(10).split(X))
    released = [e.mean_ for e in out["estimator"][:2]]
    exact = [bounded_mean(X[train], 1.0, sparsity) for train, _ in folds[:2]]
    return (released[1] - released[0]) - (exact[1] - exact[0])


@pytest.mark.parametrize("method,delta", [("gaussian", 1e-5), ("laplace", 0.0)])
def test_two_folds_with_one_int_seed_do_not_cancel_their_noise(method, delta, monkeypatch):
    X = _rows()
    est = DPSparseMeanEstimator(method=method, epsilon=1.0, delta=delta, norm_bound=1.0,
                                random_state=0)
    kind, scale, _ = mean_noise(N * 9 // 10, epsilon=1.0, delta=delta, norm_bound=1.0,
                                sparsity=D)
    with monkeypatch.context() as m:  # the digest dropped, the draw not keyed: broken
        m.setattr(StatisticKeyedSource, "_noise_key", _unkeyed_draw)
        # The two folds' noise vectors are equal and cancel: the difference of the
        # releases is the difference of the statistics, up to the grid rounding
        # (γ ≤ 2^-29 of the scale): one row's change, recovered.
        assert np.max(np.abs(_fold_residual(est, X, D))) < 1e-6 * scale
    residual = _fold_residual(est, X, D)  # the library: two independent noise vectors
    # Each coordinate is the difference of two independent draws, of variance 2σ²
    # (Gaussian) or 4b² (Laplace); a norm below σ√D/2 has probability under 1e-9
    # (chi-square, D = 40), and the Laplace case is further from it.
    assert np.linalg.norm(residual) > 0.5 * scale * np.sqrt(D)


def test_equal_statistics_at_two_sample_sizes_draw_from_two_keystreams(monkeypatch):
    # All-zero rows: the statistic is 0 at n = 100 and at n = 101 (equal grid values),
    # but the integer noise scales differ (σ ∝ 1/n on a power-of-two grid). Noise of two
    # scales from one keystream is a pair of dependent draws (with an inversion
    # sampler, nearly proportional ones), and two dependent releases of one statistic
    # can locate it better than either: the scale is part of the draw's key. The
    # attack's precondition is that the two draws read one keystream; it is checked
    # on the keys themselves, whatever the sampler does with them.
    d = 2000
    est = DPSparseMeanEstimator(method="gaussian", epsilon=1.0, delta=1e-5,
                                random_state=0)
    draws = []
    original = exact_sampling.add_discrete_noise

    def spy(grid_values, code, scale, key, counter):
        draws.append((int(scale), bytes(np.asarray(key).tobytes())))
        return original(grid_values, code, scale, key, counter)

    monkeypatch.setattr(exact_sampling, "add_discrete_noise", spy)

    def keys():
        draws.clear()
        for n in (100, 101):
            est.fit(np.zeros((n, d)))
        (scale_a, key_a), (scale_b, key_b) = draws
        assert scale_a != scale_b
        return key_a, key_b

    with monkeypatch.context() as m:
        m.setattr(StatisticKeyedSource, "_noise_key", _keyed_without_scale)
        key_a, key_b = keys()
        assert key_a == key_b  # broken: one keystream at two scales
    key_a, key_b = keys()
    assert key_a != key_b


def test_the_same_seed_and_data_replay_and_other_data_changes_the_noise():
    X = _rows()
    est = DPSparseMeanEstimator(method="gaussian", epsilon=1.0, delta=1e-5, random_state=3)
    first = est.fit(X).mean_.copy()
    np.testing.assert_array_equal(est.fit(X.copy()).mean_, first)
    X2 = X.copy()
    X2[0] = -X2[0]
    sigma = discrete_gaussian_sigma(2.0 / N, 1.0, 1e-5)
    residual = (est.fit(X2).mean_ - first) - (bounded_mean(X2, 1.0, D)
                                               - bounded_mean(X, 1.0, D))
    assert np.linalg.norm(residual) > 0.5 * sigma * np.sqrt(D)


@pytest.mark.parametrize("params", [
    dict(method="threshold"), dict(method="projection"), dict(method="gaussian"),
    dict(method="laplace", delta=0.0), dict(method="projection", delta=0.0),
    dict(method="auto"), dict(method="threshold", nonnegative=True),
    dict(method="projection", nonnegative=True, output="sparse"),
    dict(method="l1_recovery"),  # below d ≥ m ln² m: the dense Gaussian branch
])
def test_every_row_level_method_draws_only_keyed_noise_and_never_digests(params,
                                                                         monkeypatch):
    def no_digest(*args):
        raise AssertionError("the sparse mean's key must not digest the data")

    monkeypatch.setattr(_random, "_digest_array", no_digest)
    X, _ = make_sparse_vectors(300, 50, 4, random_state=0)
    # A StatisticKeyedSource raises on any draw but keyed noise: a fit that draws
    # anything else fails here instead of sharing that draw across clones.
    est = DPSparseMeanEstimator(sparsity=4, random_state=0, **params).fit(X)
    assert est.method_ != "l1_recovery"


def test_the_compressed_sensing_branch_keeps_the_data_keyed_key(monkeypatch):
    # Its sensing operator is drawn before the statistic exists: a key without the data
    # would give every fold the same operator, so it keeps the digest.
    calls = []
    original = _random.fit_random_source_from_digests

    def spy(random_state, estimator, digests, **kw):
        source = original(random_state, estimator, digests, **kw)
        calls.append(type(source))
        return source

    monkeypatch.setattr(_random, "fit_random_source_from_digests", spy)
    X, _ = make_sparse_vectors(300, 2**14, 5, random_state=0)
    est = DPSparseMeanEstimator(method="l1_recovery", sparsity=5, epsilon=0.5,
                                solver_max_iter=5, random_state=0).fit(X)
    assert est.method_ == "l1_recovery"
    assert calls == [RandomSource]
