"""Attacks on the randomness rather than on the noise scale (issue: "noise an attacker
cannot exploit"). Each attack is run against a broken variant that reproduces the old
behaviour, where it must succeed, and against the library, where it must fail."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import KFold, cross_validate

from skdpsparse.accounting.discrete import discrete_gaussian_sigma
from skdpsparse.audit import float_noise, mironov_distinguisher
from skdpsparse.mean import DPHeavyTailedMean, DPSparseMeanEstimator
from skdpsparse.mechanisms.heavy_tailed import noise_smoothing_mean
from skdpsparse.mechanisms.noise import plan_grid_noise
from skdpsparse.mechanisms.projection import bounded_mean
from skdpsparse.utils import RandomSource

N, D = 200, 40


def _rows(seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (N, D)) / np.sqrt(D)


def _old_fit_random_source(random_state, estimator, *data):
    """The old policy: the noise is a function of random_state alone (a clone's
    deep-copied Generator replays the same stream)."""
    gen = random_state if isinstance(random_state, np.random.Generator) else \
        np.random.default_rng(random_state)
    return RandomSource(gen.bytes(32))


def _old_add_discrete_noise(self, grid_values, kind, scale):
    """The old draw: keyed by the source and a counter only, not by the statistic."""
    from skdpsparse._kernels import exact_sampling
    from skdpsparse.utils._random import _NOISE_CODES

    return exact_sampling.add_discrete_noise(grid_values, _NOISE_CODES[kind], scale,
                                             self._next_key(kind), 0)


def _fold_residuals(estimator, statistic, X):
    """(μ̂₁ − μ̂₀) − (μ₁ − μ₀) for the first two folds of a 10-fold cross-validation:
    zero when the two fold models share their noise."""
    out = cross_validate(estimator, X, cv=KFold(10), return_estimator=True,
                         scoring=lambda est, X_, y_=None: 0.0)
    folds = list(KFold(10).split(X))
    released = [est.mean_ for est in out["estimator"][:2]]
    exact = [statistic(X[train]) for train, _ in folds[:2]]
    return (released[1] - released[0]) - (exact[1] - exact[0])


def _sparse_mean_case():
    est = DPSparseMeanEstimator(method="gaussian", epsilon=1.0, delta=1e-5, norm_bound=1.0,
                                random_state=np.random.default_rng())
    sigma = discrete_gaussian_sigma(2.0 / (N * 9 // 10), 1.0, 1e-5)
    return est, (lambda X: bounded_mean(X, 1.0, D)), sigma


def _heavy_tailed_case():
    est = DPHeavyTailedMean(method="noise_smoothing", epsilon=1.0, delta=1e-5,
                            random_state=np.random.default_rng())
    fitted = clone(est).fit(_rows()[: N * 9 // 10])
    tau, var = fitted.truncation_, est.smoothing_variance  # folds of equal size: same τ
    return est, (lambda X: noise_smoothing_mean(X, tau=tau, smoothing_variance=var)), \
        fitted.noise_scale_


@pytest.mark.parametrize("case", [_sparse_mean_case, _heavy_tailed_case])
def test_clones_under_cross_validation_do_not_share_noise(case, monkeypatch):
    X = _rows()
    est, statistic, sigma = case()
    module = type(est).__module__
    with monkeypatch.context() as m:  # the old policy: the attack recovers the data
        m.setattr(f"{module}.fit_random_source", _old_fit_random_source)
        m.setattr(RandomSource, "add_discrete_noise", _old_add_discrete_noise)
        # Shared noise cancels: only the grid rounding (γ ≈ 2^-29 σ) is left.
        assert np.max(np.abs(_fold_residuals(est, statistic, X))) < 1e-6 * sigma
    residual = _fold_residuals(est, statistic, X)  # the library: two independent noises
    # Each coordinate is N(0, 2σ²): the norm is about σ√(2D); below σ√D/2 has
    # probability under 1e-9 (chi-square with D = 40 degrees of freedom).
    assert np.linalg.norm(residual) > 0.5 * sigma * np.sqrt(D)


def _neighbours():
    """Two datasets differing in row 0, and the estimator: the pure-DP dense Laplace
    sparse mean of Mironov's setting."""
    X0 = _rows(1)[:50]
    X1 = X0.copy()
    X1[0] = -X1[0]
    est = DPSparseMeanEstimator(method="laplace", delta=0.0, epsilon=1.0, norm_bound=1.0,
                                sparsity=D)
    return X0, X1, est


def test_mironov_attack_breaks_float_laplace_noise():
    """The release the library made before its exact samplers (the estimator's bounded
    mean plus NumPy's float Laplace draw, :func:`~skdpsparse.audit.float_noise`)."""
    X0, X1, est = _neighbours()
    means = [bounded_mean(X, 1.0, D) for X in (X0, X1)]
    scale = 2.0 * np.sqrt(D) / (50 * 1.0)  # b = 2L√s/(nε)
    rng = np.random.default_rng(0)
    certain = wrong = 0
    for t in range(40):
        truth = t % 2
        release = float_noise(means[truth], scale, rng)
        guess = mironov_distinguisher(release, *means, scale)
        certain += guess is not None
        wrong += guess is not None and guess != truth
    assert wrong == 0  # certainty means certainty
    assert certain >= 20  # the reviewer's run: 75-84 % of releases identified


def test_mironov_attack_finds_nothing_in_grid_releases():
    X0, X1, est = _neighbours()
    plan = plan_grid_noise("laplace", 2.0 * np.sqrt(D) / 50, 2.0 * np.sqrt(D) / 50, D)
    for t in range(10):
        release = clone(est).fit((X0, X1)[t % 2]).mean_
        # The support of every release is γℤ^d (the discrete Laplace has full support
        # on ℤ) whichever neighbour was used: no output rules one of them out.
        grid = np.ldexp(release, -plan.exponent)
        np.testing.assert_array_equal(grid, np.rint(grid))
        assert np.max(np.abs(grid)) < 2.0**61


def test_private_selection_seeds_inner_fits_with_256_bit_secrets(monkeypatch):
    # A 32-bit seed per inner fit let a brute-force search over 2^32 seeds recover the
    # noise of the released model, and with it which neighbour produced it.
    from skdpsparse.linear_model import DPOutputPerturbationRegressor
    from skdpsparse.model_selection import PrivateParameterSelection
    import skdpsparse.linear_model._output_perturbation as module

    seeds, original = [], module.fit_random_source

    def spy(random_state, *args):
        seeds.append(random_state)
        return original(random_state, *args)

    monkeypatch.setattr(module, "fit_random_source", spy)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3)) / 2
    y = X @ np.ones(3) / 2
    PrivateParameterSelection(DPOutputPerturbationRegressor(), {"alpha": [0.1, 1.0]},
                              epsilon=2.0, delta=1e-6, gamma=0.3,
                              scoring="neg_mean_squared_error").fit(X, y)
    assert seeds and all(isinstance(s, int) and s.bit_length() > 200 for s in seeds)
    assert len(set(seeds)) == len(seeds)
