"""DPBiasReducedSGDClassifier / Regressor (Ghazi et al. 2024, §6-7): API, privacy, accuracy."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdpsparse.accounting import ApproxDP
from skdpsparse.exceptions import PrivacyLeakWarning
from skdpsparse.ledger import PrivacyLedger
from skdpsparse.linear_model._bias_reduced_sgd import (
    DPBiasReducedSGDClassifier,
    DPBiasReducedSGDRegressor,
)
from skdpsparse.mechanisms.bias_reduced import algorithm6_privacy, renyi_filter_privacy

pytestmark = pytest.mark.filterwarnings("ignore::skdpsparse.exceptions.PrivacyLeakWarning")


# ε large enough that at the checks' n = 150 (iris) every level's step fits in the
# Rényi filter's budget (costliest step 7.9 against a budget of 17.6 at ε = 30): with
# ε = 10 a first draw of the top level (cost 4.41 > 4.05, probability about 1 %)
# stops the run before its first step, n_iter_ = 0, which scikit-learn's
# check_non_transformer_estimators_n_iter refuses, for some seeds only. The checks
# fit iris's three classes one versus rest, each run at ε/3: hence ε = 90 (30 a run)
# and, for the two boosted runs at ε/(3·3) each, 300.
@parametrize_with_checks([
    DPBiasReducedSGDClassifier(epsilon=90.0, random_state=0),
    DPBiasReducedSGDClassifier("sigmoid", epsilon=300.0, boosting="noisy_min", n_runs=2,
                               random_state=0),
    DPBiasReducedSGDRegressor(epsilon=30.0, random_state=0),
    DPBiasReducedSGDRegressor("squared", epsilon=30.0, radius=2.0, random_state=0),
])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _easy_classification(n, d=200, noise=0.05, seed=0):
    """2-sparse unit rows (1/√2 each): column 0 or 1 tells the class (flipped w.p.
    ``noise``, so the Bayes accuracy is 1 − noise), the other column is uniform noise."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    tell = np.where(rng.random(n) < noise, 1 - y, y)
    cols = np.column_stack([tell, 2 + rng.integers(0, d - 2, n)]).ravel()
    X = sp.csr_matrix((np.full(2 * n, 2**-0.5), cols, np.arange(0, 2 * n + 1, 2)),
                      shape=(n, d))
    return X, y


def _easy_regression(n, d=200, seed=0):
    rng = np.random.default_rng(seed)
    tell = rng.integers(0, 2, n)
    cols = np.column_stack([tell, 2 + rng.integers(0, d - 2, n)]).ravel()
    X = sp.csr_matrix((np.full(2 * n, 2**-0.5), cols, np.arange(0, 2 * n + 1, 2)),
                      shape=(n, d))
    return X, np.where(tell == 0, 0.5, -0.5) + 0.05 * rng.normal(size=n)


def test_accuracy_on_easy_sparse_data_at_a_generous_epsilon():
    """ε = 10 (each of the four means of a step runs at ε/32 ≈ 0.31), n = 5·10⁴: most
    seeds reach the Bayes accuracy (0.95), but not all: a step that draws a high level
    N spends much of the filter's budget, and a run that draws one early stops after
    a few hundred steps (measured: 8 of 10 seeds ≥ 0.85 before the exact samplers,
    4-5 of 6 after, accuracy 0.75-0.82 on the others). At ε = 1 the same data gives 0.76 on
    average and chance level on bad seeds (notes in the benchmark)."""
    X, y = _easy_classification(54_000)
    scores, steps = [], []
    for seed in range(6):
        clf = DPBiasReducedSGDClassifier(epsilon=10.0, sparsity=2, classes=[0, 1],
                                         random_state=seed).fit(X[:50_000], y[:50_000])
        scores.append(clf.score(X[50_000:], y[50_000:]))
        steps.append(clf.n_iter_)
        assert clf.privacy_spent_ == renyi_filter_privacy(50_000, 10.0, 1e-6)
    # The run length is random (an early draw of a high level can end it after a few
    # steps: 17 on one seed after the key derivation changed), most runs are long.
    assert sum(t > 300 for t in steps) >= 4, steps
    # Measured over the changes of this randomness layer: medians 0.89-0.94, the worst
    # seed 0.75-0.82; chance is 0.5 and the Bayes accuracy 0.95.
    assert np.median(scores) >= 0.85 and sum(s >= 0.8 for s in scores) >= 4, scores


def test_huber_regression_beats_the_zero_predictor_and_squared_stays_in_the_ball():
    X, y = _easy_regression(54_000)
    for seed in range(2):
        reg = DPBiasReducedSGDRegressor(epsilon=10.0, sparsity=2, random_state=seed).fit(
            X[:50_000], y[:50_000])
        assert reg.score(X[50_000:], y[50_000:]) > 0.1
    sq = DPBiasReducedSGDRegressor("squared", epsilon=10.0, sparsity=2, radius=1.0,
                                   random_state=0).fit(X[:50_000], y[:50_000])
    assert np.hypot(np.linalg.norm(sq.coef_), sq.intercept_) <= 1.0 + 1e-12
    assert sq.privacy_spent_ <= ApproxDP(10.0, 1e-6)


@pytest.mark.parametrize("boosting, extra", [
    (None, {}), ("noisy_min", {"n_runs": 3}),
    ("random_stopping", {"failure_prob": 0.9}),
])
@pytest.mark.parametrize("loss", ["logistic", "sigmoid"])
def test_privacy_spent_never_exceeds_the_request_and_boosting_runs(boosting, extra, loss):
    X, y = _easy_classification(3000)
    clf = DPBiasReducedSGDClassifier(loss, epsilon=2.0, delta=1e-5, boosting=boosting,
                                     sparsity=2, classes=[0, 1], random_state=0,
                                     **extra).fit(X, y)
    assert clf.privacy_spent_ <= ApproxDP(2.0, 1e-5)
    assert clf.n_iter_ >= 1 and np.all(np.isfinite(clf.coef_))
    if boosting is None:
        assert clf.privacy_spent_ == renyi_filter_privacy(3000, 2.0, 1e-5)
    assert set(clf.predict(X[:50])) <= {0, 1}


def test_noisy_min_selects_one_of_its_runs(monkeypatch):
    import skdpsparse.mechanisms.bias_reduced as br

    outputs = []
    original = br.bias_reduced_sgd

    def recording(*args, **kwargs):
        theta, info = original(*args, **kwargs)
        outputs.append(theta.copy())
        return theta, info

    monkeypatch.setattr(br, "bias_reduced_sgd", recording)
    X, y = _easy_classification(3000)
    clf = DPBiasReducedSGDClassifier(epsilon=3.0, boosting="noisy_min", n_runs=4, sparsity=2,
                                     classes=[0, 1], random_state=1).fit(X, y)
    assert len(outputs) == 4
    assert any(np.array_equal(clf.coef_[0], o[:200]) for o in outputs)


@pytest.mark.parametrize("params, match", [
    (dict(epsilon=0.0), "epsilon"),
    (dict(delta=0.0), "delta"),
    (dict(mechanism="laplace"), "mechanism"),
    (dict(boosting="median"), "boosting"),
    (dict(n_runs=0), "n_runs"),
    (dict(learning_rate=-1.0), "learning_rate"),
    (dict(sparsity=0), "sparsity"),
    (dict(radius=-1.0), "radius"),
])
def test_invalid_parameters_are_named(params, match):
    X, y = _easy_classification(100)
    with pytest.raises(ValueError, match=match):
        DPBiasReducedSGDClassifier(classes=[0, 1], **params).fit(X, y)


@pytest.mark.parametrize("est, match", [
    (DPBiasReducedSGDRegressor("squared", radius=None), "radius"),
    (DPBiasReducedSGDRegressor(boosting="noisy_min", radius=None), "radius"),
    (DPBiasReducedSGDRegressor(radius=None), "radius"),  # learning_rate="auto", convex
    (DPBiasReducedSGDRegressor(boosting="random_stopping", epsilon=1e-6), "epsilon/10"),
])
def test_settings_that_need_a_bound_are_refused(est, match):
    X, y = _easy_regression(200)
    with pytest.raises(ValueError, match=match):
        est.fit(X, y)


def test_classes_are_declared_or_warned():
    X, y = _easy_classification(200)
    with pytest.warns(PrivacyLeakWarning, match="classes=None"):
        DPBiasReducedSGDClassifier(random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="classes"):
        DPBiasReducedSGDClassifier(classes=[0]).fit(X, y)


@pytest.mark.parametrize("sparse", [False, True])
def test_nan_raises(sparse):
    X, y = _easy_classification(100)
    X = X.toarray()
    X[3, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        DPBiasReducedSGDClassifier(classes=[0, 1]).fit(sp.csr_matrix(X) if sparse else X, y)


def test_csr_input_is_never_densified(monkeypatch, shared_noise):
    def refuse(self, *args, **kwargs):
        raise AssertionError("a sparse matrix was densified")

    X, y = _easy_classification(4000, d=50_000)
    for cls in (sp.csr_matrix, sp.csc_matrix, sp.coo_matrix, sp.csr_array):
        for name in ("toarray", "todense"):
            monkeypatch.setattr(cls, name, refuse)
    clf = DPBiasReducedSGDClassifier(epsilon=4.0, sparsity=2, classes=[0, 1], max_iter=50,
                                     random_state=0).fit(X, y)
    assert clf.predict(X[:10]).shape == (10,) and clf.n_iter_ == 50
    reg = DPBiasReducedSGDRegressor(sparsity=2, max_iter=20, random_state=0).fit(X, y - 0.5)
    assert reg.predict(X[:10]).shape == (10,)


def test_the_ledger_is_charged_once_per_fit():
    X, y = _easy_classification(500)
    with PrivacyLedger() as ledger:
        clf = DPBiasReducedSGDClassifier(epsilon=2.0, classes=[0, 1], random_state=0).fit(X, y)
    assert len(ledger.entries) == 1 and ledger.entries[0][1] == clf.privacy_spent_


def test_max_iter_caps_the_run_and_lowers_the_spend():
    X, y = _easy_classification(2000)
    clf = DPBiasReducedSGDClassifier(epsilon=1.0, classes=[0, 1], max_iter=5,
                                     random_state=0).fit(X, y)
    assert clf.n_iter_ == 5
    assert clf.privacy_spent_ == renyi_filter_privacy(2000, 1.0, 1e-6, max_iter=5)
    assert clf.privacy_spent_ <= ApproxDP(1.0, 1e-6)
    clf = DPBiasReducedSGDClassifier(epsilon=1.0, classes=[0, 1], max_iter=5,
                                     accounting="paper", random_state=0).fit(X, y)
    assert clf.n_iter_ == 5
    assert clf.privacy_spent_ == algorithm6_privacy(2000, 1.0, 1e-6, max_iter=5)
    # One step at most: the filter admits none, only the step it may overshoot by
    # is paid (a step costs up to 3/16 of ε, so a cap of a few steps already reaches
    # the filter's budget ε/2 under its √(2 ln(4/δ) Σ ε_s²) term).
    one = DPBiasReducedSGDClassifier(epsilon=1.0, classes=[0, 1], max_iter=1,
                                     accounting="paper", random_state=0).fit(X, y)
    assert one.n_iter_ == 1
    assert one.privacy_spent_.epsilon < 0.2 < algorithm6_privacy(2000, 1.0, 1e-6).epsilon


def test_warns_before_fitting_when_n_eps_is_below_what_theorem_6_7_needs():
    """Issue 18 item 4: from public numbers only (n, p, s, ε, δ, the accounting), the
    same warning for any data of that shape, and none where the theory's n·ε is met."""
    import warnings

    messages = []
    for seed in (0, 1):
        X, y = _easy_classification(300, d=200, seed=seed)
        with pytest.warns(UserWarning, match="Theorem 6.7") as record:
            DPBiasReducedSGDClassifier(epsilon=0.5, accounting="paper", max_iter=3,
                                       classes=[0, 1], random_state=0).fit(X, y)
        messages.append([str(w.message) for w in record if "Theorem 6.7" in str(w.message)])
    assert messages[0] == messages[1] and len(messages[0]) == 1
    X, y = _easy_classification(4000, d=20)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        DPBiasReducedSGDClassifier(epsilon=4.0, max_iter=3, classes=[0, 1],
                                   random_state=0).fit(X, y)


def test_every_level_fits_the_filter_at_the_common_checks_epsilon():
    """Why the scikit-learn checks above run at ε = 90 (three one-vs-rest runs at 30)
    and 300 (three classes of two boosted runs at ε/(3·3) each): at n = 150 every
    step fits the budget, so n_iter_ >= 1."""
    from skdpsparse.mechanisms.bias_reduced import plan_renyi_filter

    for eps in (90.0 / 3, 300.0 / 9):
        plan = plan_renyi_filter(150, eps, 1e-6)
        assert np.max(plan.costs) <= plan.budget
    plan = plan_renyi_filter(150, 10.0, 1e-6)
    assert np.max(plan.costs) > plan.budget  # the former ε = 10 could stop at 0 steps


def test_undeclared_label_bound_warns_before_fitting_and_clips_to_one():
    """The default of DPOutputPerturbationRegressor (issue 21, one default for one
    thing): ``label_bound=None`` is Y = 1, said before anything is read."""
    import warnings

    X, y = _easy_regression(300)
    with pytest.warns(UserWarning, match="label_bound was not declared"):
        with pytest.raises(ValueError, match="NaN"):  # warned before the data are read
            DPBiasReducedSGDRegressor(max_iter=3, random_state=0).fit(
                X.toarray() * np.nan, y)
    with pytest.warns(UserWarning, match="label_bound was not declared"):
        reg = DPBiasReducedSGDRegressor(max_iter=3, random_state=0).fit(X, 10 * y)
    declared = DPBiasReducedSGDRegressor(max_iter=3, label_bound=1.0,
                                         random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        declared.fit(X, 10 * y)
    assert reg.label_bound_ == declared.label_bound_ == 1.0
