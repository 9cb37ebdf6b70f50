"""DPNoisySGDClassifier / DPNoisySGDRegressor (Arora et al. 2020): API, privacy report, utility."""

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import Normalizer
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdpsparse import BudgetExceededError, PrivacyLedger
from skdpsparse.accounting import (
    ApproxDP,
    DiscreteGaussianEvent,
    compose_events,
    zcdp_to_epsilon,
)
from skdpsparse.accounting.discrete import discrete_gaussian_sigma
from skdpsparse.exceptions import PrivacyLeakWarning
from skdpsparse.linear_model._noisy_sgd import DPNoisySGDClassifier, DPNoisySGDRegressor
from skdpsparse.mechanisms.noisy_sgd import noisy_sgd_privacy, noisy_sgd_rdp

pytestmark = pytest.mark.filterwarnings("ignore::skdpsparse.exceptions.PrivacyLeakWarning")


@parametrize_with_checks([
    DPNoisySGDClassifier(random_state=0),
    DPNoisySGDClassifier("smoothed_hinge", fit_intercept=False, random_state=0),
    DPNoisySGDRegressor(random_state=0),
    DPNoisySGDRegressor("huber", fit_intercept=False, random_state=0),
])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _circle(n, seed):
    """Separable: unit-norm rows, label = side of the line x₁ + x₂ = 0."""
    a = np.random.default_rng(seed).uniform(0, 2 * np.pi, n)
    X = np.column_stack([np.cos(a), np.sin(a)])
    return X, (X.sum(axis=1) > 0).astype(int)


@pytest.mark.parametrize("calibration, eps, n, fit_intercept",
                         [("rdp", 1.0, 20_000, True), ("paper", 1.0, 50_000, False),
                          # The provable σ does not shrink with n: 3.6 at ε = 4 (rdp: 2.3 at ε = 1).
                          ("provable", 4.0, 20_000, True)])
def test_accuracy_on_an_easy_problem(calibration, eps, n, fit_intercept):
    X, y = _circle(n, 0)
    X_test, y_test = _circle(5000, 1)
    for seed in range(3):
        clf = DPNoisySGDClassifier(epsilon=eps, noise_calibration=calibration,
                                   fit_intercept=fit_intercept, classes=[0, 1],
                                   random_state=seed).fit(X, y)
        assert clf.score(X_test, y_test) >= 0.85
        assert clf.privacy_spent_.epsilon <= eps


def test_paper_calibration_reports_the_smallest_accounting():
    # At n = 1000 the paper's σ is so large that even the provable bound beats the
    # paper's own claim at ε̄ = 0.01; at ε̄ = 0.2 the (unproven) RDP one is smallest.
    X, y = _circle(1000, 2)
    for eps, expected in [(0.01, "provable"), (0.2, "rdp")]:
        clf = DPNoisySGDClassifier(epsilon=eps, noise_calibration="paper", classes=[0, 1],
                                   random_state=0).fit(X, y)
        assert clf.accounting_ == expected
        accounts = clf.privacy_accounts_
        assert clf.privacy_spent_ == ApproxDP(min(accounts.values()), 1e-6)
        assert accounts[expected] == min(accounts.values()) <= eps
        assert accounts["paper"] <= eps  # the paper's σ meets its own target
        assert clf.noise_multiplier_ == pytest.approx(clf.noise_std_ / (2 * clf.lipschitz_))
        ref = noisy_sgd_privacy(1000, clf.noise_multiplier_, 1e-6)
        assert clf.privacy_spent_ == ref.budget
        assert (clf.privacy_spent_.event is not None) == (expected == "provable")


def test_rdp_calibration_spends_the_budget():
    X, y = _circle(2000, 3)
    paper = DPNoisySGDClassifier(epsilon=1.0, noise_calibration="paper", classes=[0, 1],
                                 random_state=0).fit(X, y)
    rdp = DPNoisySGDClassifier(epsilon=1.0, classes=[0, 1], noise_calibration="rdp",
                               random_state=0).fit(X, y)
    assert rdp.accounting_ == "rdp"
    assert 0.99 <= rdp.privacy_spent_.epsilon <= 1.0
    assert rdp.noise_std_ < paper.noise_std_ / 5  # the paper's σ is far more than needed
    # η = D/(√n(L + σ√p)) with p = 3 (two features and the intercept).
    assert rdp.learning_rate_ == pytest.approx(
        1.0 / (math.sqrt(2000) * (rdp.lipschitz_ + rdp.noise_std_ * math.sqrt(3))))


def test_paper_calibration_refuses_what_it_cannot_certify():
    X = np.zeros((100_000, 1))
    y = np.r_[np.zeros(50_000), np.ones(50_000)]
    with pytest.raises(ValueError, match="epsilon=4.0"):
        DPNoisySGDClassifier(epsilon=4.0, noise_calibration="paper",
                             classes=[0, 1]).fit(X, y)


def test_multiclass_one_vs_rest_composes():
    rng = np.random.default_rng(4)
    centers = np.array([[1.0, 0.0], [-0.5, 0.8], [-0.5, -0.8]])
    labels = rng.integers(0, 3, 3000)
    X = centers[labels] + 0.1 * rng.standard_normal((3000, 2))
    clf = DPNoisySGDClassifier(epsilon=1.0, noise_calibration="rdp", classes=[0, 1, 2],
                               random_state=0).fit(X, labels)
    assert clf.coef_.shape == (3, 2) and clf.intercept_.shape == (3,)
    assert clf.n_iter_.shape == (3,) and np.all(clf.n_iter_ >= 1500)
    eps = (3 * noisy_sgd_rdp(3000, clf.noise_multiplier_)).to_epsilon(1e-6)[0]
    assert clf.privacy_spent_.epsilon == pytest.approx(eps) and eps <= 1.0
    proba = clf.predict_proba(X[:10])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert clf.score(X, labels) > 0.6


def test_predict_proba_only_for_logistic():
    X, y = _circle(400, 5)
    clf = DPNoisySGDClassifier(classes=[0, 1], random_state=0).fit(X, y)
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba[:, 1], 1 / (1 + np.exp(-clf.decision_function(X))))
    hinge = DPNoisySGDClassifier("hinge", classes=[0, 1], random_state=0).fit(X, y)
    assert not hasattr(hinge, "predict_proba")


def test_csr_is_not_densified_and_matches_dense(monkeypatch, shared_noise):
    rng = np.random.default_rng(6)
    X = rng.standard_normal((300, 40))
    X[rng.random(X.shape) < 0.8] = 0
    y = rng.integers(0, 2, 300)
    dense = DPNoisySGDClassifier(classes=[0, 1], random_state=0).fit(X, y)

    def refuse(*args, **kwargs):
        raise AssertionError("sparse input was densified")

    for cls in (sp.csr_matrix, sp.csr_array, sp.csc_matrix):
        monkeypatch.setattr(cls, "toarray", refuse)
        monkeypatch.setattr(cls, "todense", refuse)
    for fmt in (sp.csr_matrix, sp.csc_matrix):
        sparse = DPNoisySGDClassifier(classes=[0, 1], random_state=0).fit(fmt(X), y)
        np.testing.assert_allclose(sparse.coef_, dense.coef_, atol=1e-12)
        np.testing.assert_allclose(sparse.decision_function(fmt(X)),
                                   dense.decision_function(X), atol=1e-12)


def test_regressor_squared_loss_lipschitz_and_label_clipping(shared_noise):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((2000, 3)) / 2
    y = X @ np.array([0.4, -0.3, 0.0]) + 0.05
    reg = DPNoisySGDRegressor(radius=2.0, label_bound=0.5, noise_calibration="rdp",
                              random_state=0).fit(X, y)
    g = math.sqrt(2.0)
    assert reg.lipschitz_ == pytest.approx((2.0 * g + 0.5) * g)
    assert isinstance(reg.n_iter_, int) and isinstance(reg.intercept_, float)
    shifted = DPNoisySGDRegressor(radius=2.0, label_bound=0.5, noise_calibration="rdp",
                                  random_state=0).fit(X, np.where(y > 0.5, 100.0, y))
    np.testing.assert_allclose(shifted.coef_, DPNoisySGDRegressor(
        radius=2.0, label_bound=0.5, noise_calibration="rdp", random_state=0).fit(
        X, np.minimum(y, 0.5)).coef_)
    huber = DPNoisySGDRegressor("huber", huber_threshold=0.25, random_state=0).fit(X, y)
    assert huber.lipschitz_ == pytest.approx(0.25 * g)


def test_rows_outside_the_bound_are_scaled(shared_noise):
    X, y = _circle(500, 8)
    a = DPNoisySGDClassifier(classes=[0, 1], random_state=1).fit(X, y)
    b = DPNoisySGDClassifier(classes=[0, 1], random_state=1).fit(X * 25.0, y)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-12)


@pytest.mark.parametrize("param, value", [
    ("epsilon", 0.0), ("epsilon", -1.0), ("epsilon", math.inf), ("delta", 0.0),
    ("delta", 1.0), ("delta", None), ("norm_bound", 0.0), ("radius", -2.0),
    ("radius", math.inf), ("noise_calibration", "exact"), ("learning_rate", 0.0),
    ("learning_rate", "optimal"), ("verbose", -1), ("loss", "squared"),
    ("smoothing", 0.0), ("fit_intercept", "yes"),
])
def test_invalid_parameters_name_the_parameter(param, value):
    X, y = _circle(50, 9)
    with pytest.raises(ValueError, match=f"'{param}'"):
        DPNoisySGDClassifier(classes=[0, 1], **{param: value}).fit(X, y)


@pytest.mark.parametrize("param, value", [("label_bound", 0.0), ("huber_threshold", -1.0),
                                          ("loss", "logistic")])
def test_invalid_regressor_parameters_name_the_parameter(param, value):
    X, y = _circle(50, 9)
    with pytest.raises(ValueError, match=f"'{param}'"):
        DPNoisySGDRegressor(**{param: value}).fit(X, y.astype(float))


def test_nan_and_one_class_raise():
    X, y = _circle(50, 10)
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        DPNoisySGDClassifier(classes=[0, 1]).fit(X, y)
    with pytest.raises(ValueError, match="NaN"):
        DPNoisySGDRegressor().fit(X, y.astype(float))
    with pytest.raises(ValueError, match="class"):
        DPNoisySGDClassifier().fit(np.ones((20, 2)), np.zeros(20))


def test_undeclared_classes_warn():
    X, y = _circle(100, 11)
    with pytest.warns(PrivacyLeakWarning, match="classes"):
        DPNoisySGDClassifier(random_state=0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        DPNoisySGDClassifier(classes=[0, 1], random_state=0).fit(X, y)


def test_index_sequence_is_not_stored():
    X, y = _circle(400, 12)
    clf = DPNoisySGDClassifier(classes=[0, 1], random_state=0).fit(X, y)
    for name, value in vars(clf).items():
        arr = np.asarray(value) if isinstance(value, (list, np.ndarray)) else None
        assert arr is None or arr.size < 200, name  # nothing of the length of a run


def test_verbose_reports_progress(capsys):
    X, y = _circle(300, 13)
    DPNoisySGDClassifier(classes=[0, 1], verbose=1, random_state=0).fit(X, y)
    out = capsys.readouterr().out
    assert "150/150 fresh" in out and "privacy spent" in out
    DPNoisySGDClassifier(classes=[0, 1], verbose=0, random_state=0).fit(X, y)
    assert capsys.readouterr().out == ""


def test_pipeline_and_grid_search():
    X, y = _circle(3000, 14)
    X = X * np.random.default_rng(0).uniform(0.5, 3.0, size=(3000, 1))
    pipe = Pipeline([("norm", Normalizer()),
                     ("clf", DPNoisySGDClassifier(noise_calibration="rdp", classes=[0, 1],
                                                  random_state=0))])
    search = GridSearchCV(pipe, {"clf__radius": [1.0, 4.0], "clf__epsilon": [1.0, 2.0]},
                          cv=2).fit(X, y)
    assert search.best_score_ > 0.7
    assert search.best_estimator_.named_steps["clf"].privacy_spent_.epsilon <= 2.0


# ------------------------------------------------- the provable default (issue 17)
@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0, 8.0])
def test_default_is_the_provable_discrete_gaussian_bound(eps):
    """Each row enters at most one noisy gradient step, so a run is one discrete
    Gaussian release of sensitivity 2L: σ from the discrete Gaussian's zCDP, the
    event attached, and the whole ε spent (not ~3 % of it)."""
    X, y = _circle(600, 20)
    clf = DPNoisySGDClassifier(epsilon=eps, classes=[0, 1], random_state=0).fit(X, y)
    assert clf.accounting_ == "provable"
    L = clf.lipschitz_
    # discrete_gaussian_sigma's σ, up to the last ulps that keep ε ≤ the target.
    assert clf.noise_std_ == pytest.approx(discrete_gaussian_sigma(2 * L, eps, 1e-6), rel=1e-14)
    assert clf.noise_std_ >= discrete_gaussian_sigma(2 * L, eps, 1e-6)
    assert clf.noise_multiplier_ == clf.noise_std_ / (2 * L)
    spent = clf.privacy_spent_
    assert spent.event == DiscreteGaussianEvent(clf.noise_multiplier_, count=1)
    assert spent.delta == 1e-6 and 0.999 * eps <= spent.epsilon <= eps
    # ρ = (2L)²/(2σ²) converted by the tight conversion is the reported ε.
    assert spent.epsilon == pytest.approx(
        zcdp_to_epsilon((2 * L) ** 2 / (2 * clf.noise_std_**2), 1e-6), rel=1e-9)
    assert clf.privacy_accounts_ == {"provable": spent.epsilon}


def test_provable_default_never_raises_at_large_epsilon():
    """The old default (Arora et al. 2020 Theorem 6) raised ValueError for ε ≥ 4 at large n."""
    X = np.zeros((100_000, 1))
    y = np.r_[np.zeros(50_000), np.ones(50_000)]
    for eps in (4.0, 64.0):
        clf = DPNoisySGDClassifier(epsilon=eps, classes=[0, 1], random_state=0).fit(X, y)
        assert clf.accounting_ == "provable" and clf.privacy_spent_.epsilon <= eps


def test_provable_multiclass_composes_the_runs_in_rho():
    rng = np.random.default_rng(22)
    X = rng.standard_normal((900, 2)) / 2
    labels = rng.integers(0, 3, 900)
    clf = DPNoisySGDClassifier(epsilon=1.0, classes=[0, 1, 2], random_state=0).fit(X, labels)
    L = clf.lipschitz_
    # K = 3 runs, each (2L)²/(2σ²)-zCDP: 3·(2L)²/(2σ²) = (2L√3)²/(2σ²).
    assert clf.noise_std_ == pytest.approx(
        discrete_gaussian_sigma(2 * L * math.sqrt(3), 1.0, 1e-6), rel=1e-14)
    assert clf.privacy_spent_.event == DiscreteGaussianEvent(clf.noise_multiplier_, count=3)
    assert 0.999 <= clf.privacy_spent_.epsilon <= 1.0


def test_provable_fits_compose_in_the_ledger_by_their_events():
    X, y = _circle(400, 23)
    reg_X, reg_y = X, X @ np.array([0.3, -0.2])
    with PrivacyLedger() as ledger:
        DPNoisySGDClassifier(classes=[0, 1], random_state=0).fit(X, y)
        DPNoisySGDRegressor(random_state=0).fit(reg_X, reg_y)
    budgets = [b for _, b in ledger.entries]
    assert all(isinstance(b.event, DiscreteGaussianEvent) for b in budgets)
    total = ledger.total()
    assert total == compose_events([b.event for b in budgets], 2e-6)
    assert total.epsilon < 1.5  # basic composition would say 2


def test_unproven_calibrations_say_so_and_keep_their_accounting():
    X, y = _circle(2000, 24)
    for calibration in ("paper", "rdp"):
        clf = DPNoisySGDClassifier(epsilon=1.0, noise_calibration=calibration,
                                   classes=[0, 1], random_state=0).fit(X, y)
        assert set(clf.privacy_accounts_) == {"provable", "paper", "rdp"}
        assert clf.privacy_spent_.epsilon == min(clf.privacy_accounts_.values()) <= 1.0
        if clf.accounting_ != "provable":  # an unproven claim carries no event
            assert clf.privacy_spent_.event is None
    assert "unproven" in DPNoisySGDClassifier.__doc__


# --------------------------------------- a refused fit releases nothing (issue 17, C)
@pytest.mark.parametrize("make", [
    lambda: DPNoisySGDClassifier(classes=[0, 1], random_state=0),
    lambda: DPNoisySGDClassifier(random_state=0),  # classes read from y
    lambda: DPNoisySGDRegressor(random_state=0),
])
def test_a_fit_refused_by_the_ledger_sets_no_fitted_attribute(make):
    X, y = _circle(300, 25)
    est = make()
    with PrivacyLedger(limit=ApproxDP(1e-3, 1e-6)) as ledger:
        with pytest.raises(BudgetExceededError):
            est.fit(X, y if hasattr(est, "classes") else y.astype(float))
    assert ledger.entries == []
    fitted = [k for k in vars(est) if k.endswith("_") and not k.startswith("__")]
    assert fitted == []
    # A refit refused after a successful fit leaves no stale half-model either.
    est.fit(X, y if hasattr(est, "classes") else y.astype(float))
    with PrivacyLedger(limit=ApproxDP(1e-3, 1e-6)), pytest.raises(BudgetExceededError):
        est.fit(X, y if hasattr(est, "classes") else y.astype(float))
    assert [k for k in vars(est) if k.endswith("_") and not k.startswith("__")] == []


def test_docstring_examples():
    import doctest

    from skdpsparse.linear_model import _noisy_sgd

    result = doctest.testmod(_noisy_sgd)
    assert result.attempted > 0 and result.failed == 0


def test_warns_before_fitting_when_the_noise_dominates():
    """From public numbers only: n below (1 + σ√p/L)² warns (and names that n); a
    problem above it does not."""
    from skdpsparse.linear_model._noisy_sgd import rows_needed

    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 40)) / 7
    y = (X[:, 0] > 0).astype(int)
    clf = DPNoisySGDClassifier(epsilon=1.0, classes=[0, 1], random_state=0)
    with pytest.warns(UserWarning, match="privacy noise dominates"):
        clf.fit(X, y)
    needed = rows_needed(clf.lipschitz_, clf.noise_std_, 41)
    assert needed == pytest.approx((1 + 9.0617542 * math.sqrt(41)) ** 2, rel=1e-6)
    X2 = rng.standard_normal((400, 2)) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DPNoisySGDClassifier(epsilon=8.0, classes=[0, 1], random_state=0).fit(
            X2, (X2[:, 0] > 0).astype(int))
