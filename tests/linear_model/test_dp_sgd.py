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


def _walk(n, b, E, eps, lr, clip, delta=1e-6):
    """The noise walk λ·2zC·√T/b of a schedule, z from the accountant, by hand."""
    T = math.ceil(E * n / b)
    return lr * 2.0 * calibrate_dp_sgd_noise(eps, delta, b, n, T) * clip * math.sqrt(T) / b


@pytest.mark.parametrize("loss, lr, clip, limit, expected", [
    # logistic, R = 1 with the intercept: G = √2, λ = 1/M = 4/G² = 2, C = G/2;
    # walks at b = 128 / 256: 1.475 / 0.662 (limit 0.75 logits).
    ("logistic", 2.0, math.sqrt(2.0) / 2, 0.75, 256),
    # huber (the regressor): λ = 1/G² = 1/2, C = G/4; walks at b = 256 / 512:
    # 0.083 / 0.039 (limit 0.075 label bounds).
    ("huber", 0.5, math.sqrt(2.0) / 4, 0.075, 512),
])
def test_auto_batch_is_the_most_steps_within_the_walk_limit(loss, lr, clip, limit,
                                                            expected):
    """batch_size="auto" is the smallest power of two whose accumulated noise (the
    walk, z from the accountant) is at most the loss's limit; public numbers only."""
    from skdpsparse.linear_model._dp_sgd import _AUTO_MAX_WALK

    n, p, E, eps = 20_000, 11, 20, 2.0
    assert _AUTO_MAX_WALK[loss] == limit
    b = auto_batch_size(n, p, E, eps, 1e-6, learning_rate=lr, clip_norm=clip,
                        max_walk=limit)
    assert b == expected
    assert _walk(n, b, E, eps, lr, clip) <= limit < _walk(n, b // 2, E, eps, lr, clip)


def test_auto_batch_grows_as_epsilon_shrinks_and_caps_the_noise_draws():
    """Where the sampling amplifies, the walk is about 2cλC·E/(ε·b): a smaller ε takes
    a larger batch. The draws cap (T·p ≤ 2^28) skips the batches whose run would draw
    more noise values; when no batch reaches the limit, the one of least walk."""
    from skdpsparse.linear_model._dp_sgd import _MAX_NOISE_DRAWS

    kw = dict(learning_rate=2.0, clip_norm=math.sqrt(2.0) / 2, max_walk=0.75)
    sizes = [auto_batch_size(20_000, 11, 20, eps, 1e-6, **kw) for eps in (0.5, 1.0, 2.0)]
    assert sizes[0] > sizes[1] > sizes[2]
    wide = 1 << 20  # p: at n = 20 000, E = 20, only b ≥ 2048 draw at most 2^28 values
    b = auto_batch_size(20_000, wide, 20, 8.0, 1e-6, **kw)
    assert b == 2048 and math.ceil(20 * 20_000 / 1024) * wide > _MAX_NOISE_DRAWS
    tiny = auto_batch_size(300, 11, 20, 0.05, 1e-6, **kw)  # no batch reaches 0.75
    walks = {bb: _walk(300, bb, 20, 0.05, 2.0, math.sqrt(2.0) / 2)
             for bb in (16, 32, 64, 128, 256, 300)}
    assert min(walks.values()) > 0.75 and tiny == min(walks, key=walks.get)


def test_auto_schedule_only_chooses_parameters():
    """The auto schedule chooses b (and C, λ) and nothing else: the fitted plan is
    plan_dp_sgd's with those parameters given explicitly, its noise multiplier the
    accountant's for (ε, δ, b, n, T)."""
    from skdpsparse.mechanisms.dp_sgd import plan_dp_sgd

    X, y = _separable(3000)
    auto = DPSGDClassifier(epsilon=2.0, classes=[0, 1], random_state=5).fit(X, y)
    plan = plan_dp_sgd(3000, X.shape[1], loss="logistic", clip_norm=auto.clip_norm_,
                       batch_size=auto.batch_size_, epochs=20,
                       learning_rate=auto.learning_rate_, epsilon=2.0, delta=1e-6)
    assert (plan.n_steps, plan.noise_multiplier, plan.noise_std) == (
        auto.n_steps_, auto.noise_multiplier_, auto.accounting_["noise_std"])
    assert auto.noise_multiplier_ == calibrate_dp_sgd_noise(
        2.0, 1e-6, auto.batch_size_, 3000, auto.n_steps_)
    assert auto.n_steps_ == math.ceil(20 * 3000 / auto.batch_size_)
    assert auto.privacy_spent_ == plan.budget


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
        DPSGDClassifier(epsilon=0.5, classes=[0, 1], epochs=2, batch_size=16,
                        random_state=0).fit(X, y)
    with pytest.warns(UserWarning, match="accumulates"):
        DPSGDClassifier(epsilon=0.5, classes=[0, 1], epochs=2, batch_size=16,
                        random_state=0).fit(
            sp.csr_matrix((n, d)), np.zeros(n, dtype=int))
    # The regressor's limit is in units of the label bound: it warns from a walk of
    # 2 × 0.075 (here about 0.5), where the classifier's limit (1.5 logits) is far.
    with pytest.warns(UserWarning, match="accumulates"):
        DPSGDRegressor(epsilon=0.5, label_bound=1.0, epochs=2, batch_size=16,
                       random_state=0).fit(X, rng.normal(size=n))
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
    """clip_norm="auto": the classifier clips at half the largest gradient norm, G/2,
    the regressor at G/4 (the Huber threshold 1/4 on scaled targets; both from the
    synthetic studies of benchmarks/bench_dp_sgd.py --part 7 and 8). Public numbers
    only: the same C on any data; the noise std is z·2C, and the budget is met."""
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
    assert clf.clip_norm_ == pytest.approx(g / 2, rel=1e-12)
    assert reg.score(X, y) > 0.7
