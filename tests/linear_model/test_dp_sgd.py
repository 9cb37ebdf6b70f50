"""DPSGDClassifier / DPSGDRegressor: accuracy, the ledger, refusals and defaults."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdpsparse import BudgetExceededError, PrivacyLedger
from skdpsparse.accounting import ApproxDP, PureDP
from skdpsparse.linear_model import DPSGDClassifier, DPSGDRegressor
from skdpsparse.linear_model._dp_sgd import auto_batch_size
from skdpsparse.mechanisms.dp_sgd import calibrate_dp_sgd_noise


pytestmark = pytest.mark.filterwarnings("ignore::skdpsparse.exceptions.PrivacyLeakWarning")


# scikit-learn's checks fit small data sets (n ≈ 30–150) and expect a usable model:
# a large ε, a few epochs of batches of 16.
@parametrize_with_checks([
    DPSGDClassifier(epsilon=50.0, norm_bound=5.0, epochs=20, batch_size=16, random_state=0),
    DPSGDRegressor(epsilon=50.0, norm_bound=5.0, epochs=20, batch_size=16, random_state=0),
])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _separable(n, d=5, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    X = rng.normal(size=(n, d)) / math.sqrt(d)
    return X, (X @ w > 0).astype(int)


def test_separable_binary_accuracy_and_budget():
    X, y = _separable(5000)
    clf = DPSGDClassifier(epsilon=2.0, classes=[0, 1], random_state=0).fit(X, y)
    assert clf.score(X, y) > 0.9
    assert clf.privacy_spent_ <= ApproxDP(2.0, 1e-6)
    assert clf.coef_.shape == (1, 5) and clf.intercept_.shape == (1,)
    assert clf.predict_proba(X[:3]).shape == (3, 2)


def test_multiclass_is_one_joint_softmax_model():
    rng = np.random.default_rng(1)
    centers = np.array([[2.0, 0.0], [-2.0, 0.0], [0.0, 2.0]])
    y = rng.integers(3, size=6000)
    X = (centers[y] + 0.3 * rng.normal(size=(6000, 2))) / 3
    clf = DPSGDClassifier(epsilon=2.0, classes=[0, 1, 2], random_state=0).fit(X, y)
    assert clf.coef_.shape == (3, 2) and clf.accounting_["gradient_bound"] == \
        pytest.approx(math.sqrt(2) * math.sqrt(2))
    assert clf.score(X, y) > 0.9
    proba = clf.predict_proba(X[:5])
    assert np.allclose(proba.sum(axis=1), 1.0)


def test_sparse_input_gives_the_dense_result():
    X, y = _separable(800)
    dense = DPSGDClassifier(epsilon=1.0, classes=[0, 1], batch_size=64, epochs=2,
                            random_state=3).fit(X, y)
    sparse = DPSGDClassifier(epsilon=1.0, classes=[0, 1], batch_size=64, epochs=2,
                             random_state=3).fit(sp.csr_matrix(X), y)
    # Same key material only if the data digests agree; compare the plans instead.
    assert sparse.n_steps_ == dense.n_steps_ and sparse.noise_multiplier_ == \
        dense.noise_multiplier_
    assert sparse.predict(sp.csr_matrix(X[:5])).shape == (5,)


def test_regressor_with_declared_and_private_bound():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6000, 3)) / 2
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=6000)
    reg = DPSGDRegressor(epsilon=2.0, label_bound=3.0, norm_bound=2.0,
                         random_state=0).fit(X, y)
    assert reg.score(X, y) > 0.7 and reg.label_bound_ == 3.0
    assert reg.privacy_spent_ <= ApproxDP(2.0, 1e-6)
    private = DPSGDRegressor(epsilon=2.0, norm_bound=2.0, random_state=0).fit(X, y)
    # 5 % of ε on the bound, the rest on DP-SGD, added (basic composition).
    assert private.privacy_spent_.epsilon == pytest.approx(2.0, rel=1e-3)
    assert private.privacy_spent_.epsilon <= 2.0 * (1 + 1e-12)
    q95 = np.quantile(np.abs(y), 0.95)
    assert 0.7 * q95 < private.label_bound_ < 1.5 * q95


def test_the_ledger_is_charged_once_per_fit():
    X, y = _separable(1000)
    with PrivacyLedger() as ledger:
        clf = DPSGDClassifier(epsilon=1.0, classes=[0, 1], batch_size=50, epochs=2,
                              random_state=0).fit(X, y)
    assert len(ledger.entries) == 1 and ledger.entries[0][1] == clf.privacy_spent_


def test_a_refused_fit_releases_nothing():
    X, y = _separable(500)
    with PrivacyLedger(limit=PureDP(0.1)):
        est = DPSGDClassifier(epsilon=1.0, classes=[0, 1], batch_size=50, epochs=1,
                              random_state=0)
        with pytest.raises(BudgetExceededError):
            est.fit(X, y)
    assert not [k for k in vars(est) if k.endswith("_") and not k.startswith("_")]


def test_rows_outside_the_bound_are_scaled_not_rejected():
    X, y = _separable(500)
    X[0] *= 1e6
    clf = DPSGDClassifier(epsilon=1.0, classes=[0, 1], batch_size=50, epochs=1,
                          random_state=0).fit(X, y)
    assert np.all(np.isfinite(clf.coef_))


def test_undeclared_label_is_refused_naming_classes():
    X, y = _separable(100)
    with pytest.raises(ValueError, match="classes"):
        DPSGDClassifier(classes=[0, 2]).fit(X, y)


def test_auto_batch_minimises_the_accumulated_noise():
    n, p, E, eps, delta = 20_000, 11, 20, 2.0, 1e-6
    b = auto_batch_size(n, p, E, eps, delta)
    assert b & (b - 1) == 0 and math.ceil(E * n / b) >= 500

    def walk(bb):
        T = math.ceil(E * n / bb)
        return calibrate_dp_sgd_noise(eps, delta, bb, n, T) * math.sqrt(T) / bb

    for other in (16, 32, 64, 128, 256, 512):
        if other != b and math.ceil(E * n / other) >= 500:
            assert walk(b) <= walk(other)


def test_verbose_prints_public_counts_only(capsys):
    X, y = _separable(200)
    DPSGDClassifier(epsilon=1.0, classes=[0, 1], batch_size=50, epochs=2, verbose=1,
                    random_state=0).fit(X, y)
    out = capsys.readouterr().out
    assert "[DPSGDClassifier] plan: 8 noisy steps, batches of 50" in out
    assert "step 8/8" in out


def test_noise_multiplier_given_reports_the_epsilon_reached():
    X, y = _separable(1000)
    clf = DPSGDClassifier(noise_multiplier=5.0, classes=[0, 1], batch_size=100, epochs=2,
                          random_state=0).fit(X, y)
    assert clf.noise_multiplier_ == 5.0 and clf.privacy_spent_.epsilon > 0


def test_warns_before_fitting_when_the_noise_would_swamp_rare_features():
    """Public numbers only: the same warning for any data of that shape."""
    rng = np.random.default_rng(0)
    n, d = 400, 2000
    X = sp.random(n, d, density=0.002, format="csr", random_state=0)
    y = rng.integers(2, size=n)
    with pytest.warns(UserWarning, match="accumulates"):
        DPSGDClassifier(epsilon=0.5, classes=[0, 1], epochs=2, random_state=0).fit(X, y)
    with pytest.warns(UserWarning, match="accumulates"):
        DPSGDClassifier(epsilon=0.5, classes=[0, 1], epochs=2, random_state=0).fit(
            sp.csr_matrix((n, d)), np.zeros(n, dtype=int))
    Xd, yd = _separable(5000)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        DPSGDClassifier(epsilon=2.0, classes=[0, 1], random_state=0).fit(Xd, yd)


def test_alpha_shrinks_the_coefficients_and_costs_nothing():
    X, y = _separable(2000)
    kw = dict(epsilon=1.0, classes=[0, 1], batch_size=100, epochs=2, random_state=0)
    plain = DPSGDClassifier(**kw).fit(X, y)
    ridge = DPSGDClassifier(alpha=5.0, **kw).fit(X, y)
    assert np.linalg.norm(ridge.coef_) < np.linalg.norm(plain.coef_)
    assert ridge.privacy_spent_ == plain.privacy_spent_


def test_regressor_auto_clip_is_a_quarter_of_the_gradient_bound():
    """clip_norm="auto": the classifier clips at the largest gradient norm G (never
    binds), the regressor at G/4 (the Huber threshold 1/4 on scaled targets, from the
    synthetic study of benchmarks/bench_dp_sgd.py --part 7). Public numbers only: the
    same C on any data; the noise std is z·2C at the same z, and the budget is met."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 4)) / 2
    y = X @ np.array([1.0, -1.0, 0.5, 0.0]) + 0.1 * rng.normal(size=3000)
    g = math.sqrt(2.0 ** 2 + 1.0)
    reg = DPSGDRegressor(epsilon=2.0, label_bound=3.0, norm_bound=2.0, random_state=0)
    reg.fit(X, y)
    assert reg.clip_norm_ == pytest.approx(g / 4, rel=1e-12)
    assert reg.accounting_["noise_std"] == pytest.approx(
        reg.noise_multiplier_ * 2 * reg.clip_norm_, rel=1e-12)
    assert reg.privacy_spent_ <= ApproxDP(2.0, 1e-6)
    other = DPSGDRegressor(epsilon=2.0, label_bound=3.0, norm_bound=2.0,
                           random_state=0).fit(X[::-1] * 0.5, -y[::-1])
    assert other.clip_norm_ == reg.clip_norm_ and other.batch_size_ == reg.batch_size_
    assert DPSGDRegressor(epsilon=2.0, label_bound=3.0, norm_bound=2.0, clip_norm=g,
                          random_state=0).fit(X, y).clip_norm_ == g
    clf = DPSGDClassifier(epsilon=2.0, classes=[0, 1], norm_bound=2.0,
                          random_state=0).fit(X, (y > 0).astype(int))
    assert clf.clip_norm_ == pytest.approx(g, rel=1e-12)
    assert reg.score(X, y) > 0.7
