"""DPOutputPerturbationRegressor's data-independent warnings (issue 18)."""

import warnings

import numpy as np
import pytest

from skdpsparse.linear_model import DPOutputPerturbationRegressor


def test_regressor_warns_before_the_solve_when_the_penalty_pulls_the_intercept():
    """Public numbers only: λ/(c² + λ) from the plan, the same warning for any data of
    that shape, raised before the solver runs; a fit with a small pull is silent. The
    attack it guards against is not a privacy one: ratings-like targets (far from 0)
    fitted below the constant prediction without a word (issue 18)."""
    from skdpsparse.linear_model._output_perturbation import intercept_pull

    rng = np.random.default_rng(0)
    n, d = 2000, 50
    X = np.eye(d)[rng.integers(d, size=n)]  # one-hot: s = 1
    y = np.clip(3.5 + 0.3 * rng.standard_normal(n), 0.5, 5.0)
    kw = dict(epsilon=1.0, sparsity=1, label_bound=5.0, random_state=0)
    with pytest.warns(UserWarning, match="pulls the intercept toward 0") as rec:
        reg = DPOutputPerturbationRegressor(**kw).fit(X, y)
    pull = intercept_pull(reg.alpha_, reg.intercept_scaling_)
    assert pull == reg.alpha_ / (reg.intercept_scaling_ ** 2 + reg.alpha_) > 0.02
    assert f"{100 * pull:.1f} %" in str(rec[0].message)
    # The same words for other data of the same shape (public numbers only) ...
    with pytest.warns(UserWarning, match="pulls the intercept") as other:
        DPOutputPerturbationRegressor(**kw).fit(X[::-1], -y)
    assert str(other[0].message) == str(rec[0].message)
    # ... and below the constant prediction here, as the warning says it can be.
    assert reg.score(X, y) < 0.0
    # A large n·ε: the pull is under 2 %, no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        big = DPOutputPerturbationRegressor(**dict(kw, epsilon=1000.0)).fit(X, y)
    assert intercept_pull(big.alpha_, big.intercept_scaling_) <= 0.02
