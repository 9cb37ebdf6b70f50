"""DPOutputPerturbationRegressor / DPOutputPerturbationClassifier: scikit-learn API,
contribution bounding, budgets, multiclass, exponential method, errors."""

import math
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import Normalizer
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdpsparse.accounting import ApproxDP, PureDP
from skdpsparse.accounting.discrete import discrete_gaussian_sigma
from skdpsparse.datasets import load_sparse_digits, make_sparse_classification
from skdpsparse.exceptions import PrivacyLeakWarning
from skdpsparse.ledger import PrivacyLedger
from skdpsparse.linear_model._output_perturbation import (
    DPOutputPerturbationClassifier,
    DPOutputPerturbationRegressor,
)

# PrivacyLeakWarning (classes read from y) is expected in the checks.
pytestmark = pytest.mark.filterwarnings("ignore::skdpsparse.exceptions.PrivacyLeakWarning")


@parametrize_with_checks([
    DPOutputPerturbationRegressor(random_state=0),
    DPOutputPerturbationRegressor(loss="huber", delta=0, random_state=0),
    DPOutputPerturbationRegressor(radius=1.0, fit_intercept=False, random_state=0),
    DPOutputPerturbationRegressor(label_bound=(-1.0, 3.0), random_state=0),
    DPOutputPerturbationClassifier(random_state=0),
    DPOutputPerturbationClassifier(loss="smoothed_hinge", delta=0, sparsity=2,
                                   random_state=0),
    DPOutputPerturbationClassifier(radius=2.0, random_state=0),
    DPOutputPerturbationClassifier(loss="hinge", method="exponential", radius=1.0,
                                   max_net_size=2000, random_state=0),
    DPOutputPerturbationRegressor(method="exponential", radius=1.0, max_net_size=2000,
                                  random_state=0),
])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _binary(n=2000, d=300, s=6, seed=0):
    X, y, _ = make_sparse_classification(n, d, s, separation=5.0, random_state=seed)
    return X, y


def test_pipeline_and_grid_search_over_privacy_parameters():
    X, y = _binary()
    pipe = Pipeline([("norm", Normalizer()),  # row-wise: no statistic of the data
                     ("clf", DPOutputPerturbationClassifier(classes=[0, 1], random_state=0))])
    grid = GridSearchCV(pipe, {"clf__epsilon": [1.0, 50.0], "clf__sparsity": [6, None],
                               "clf__alpha": ["auto", 1e-3]}, cv=3)
    with PrivacyLedger() as ledger:
        grid.fit(X, y)
    assert grid.best_params_["clf__epsilon"] == 50.0
    assert grid.best_score_ > 0.75
    # Every fit is charged: 8 candidates × 3 folds + the refit.
    assert len(ledger.entries) == 8 * 3 + 1


def test_accuracy_grows_with_epsilon_and_approaches_non_private():
    X, y = _binary(4000, 300, 6, seed=1)
    Xte, yte = _binary(2000, 300, 6, seed=1)
    accs = {}
    for eps in [0.5, 1000.0]:
        accs[eps] = np.mean([DPOutputPerturbationClassifier(
            epsilon=eps, sparsity=6, radius=20.0, classes=[0, 1], random_state=seed)
            .fit(X, y).score(Xte, yte) for seed in range(5)])
    assert accs[1000.0] > 0.8
    assert accs[1000.0] > accs[0.5]


def test_sparse_and_dense_inputs_give_the_same_model(shared_noise):
    X, y = _binary(500, 50, 5)
    for est in [DPOutputPerturbationClassifier(classes=[0, 1], random_state=3),
                DPOutputPerturbationRegressor(loss="huber", delta=0, random_state=3)]:
        a = est.fit(X, y).coef_.copy()
        b = est.fit(X.toarray(), y).coef_
        c = est.fit(X.astype(np.float32), y).coef_
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-7)


def test_contribution_bounding_scales_rows_and_clips_labels(shared_noise):
    rng = np.random.default_rng(4)
    n, d, s, R, B = 300, 20, 4, 2.0, 3.0
    X = rng.normal(size=(n, d)) * rng.random((n, d)) * (rng.random((n, d)) < 0.3)
    y = rng.normal(scale=5.0, size=n)
    X[0] *= 1e6
    X[1] = 0.0
    X[1, :10] = 1.0  # ℓ1 = 10 > √s·R = 4 while ‖x‖₂ = √10 > R
    l2 = np.linalg.norm(X, axis=1)
    Xs = X * np.minimum(1, R / np.maximum(l2, 1e-300))[:, None]
    l1 = np.abs(Xs).sum(axis=1)
    Xs *= np.minimum(1, math.sqrt(s) * R / np.maximum(l1, 1e-300))[:, None]
    est = DPOutputPerturbationRegressor(norm_bound=R, sparsity=s, label_bound=B,
                                        random_state=5)
    a = est.fit(X, y).coef_.copy()
    b = est.fit(Xs, np.clip(y, -B, B)).coef_
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_non_finite_input_is_a_clear_error():
    X, y = _binary(50, 5, 2)
    X = X.toarray()
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        DPOutputPerturbationClassifier(classes=[0, 1]).fit(bad, y)
    yb = y.astype(float)
    yb[2] = np.inf
    with pytest.raises(ValueError, match="Input y contains infinity"):
        DPOutputPerturbationRegressor().fit(X, yb)


def test_invalid_combinations_are_explained():
    X, y = _binary(100, 10, 3)
    with pytest.raises(ValueError, match="unconstrained domain"):
        DPOutputPerturbationClassifier(delta=0, radius=1.0, classes=[0, 1]).fit(X, y)
    with pytest.raises(ValueError, match="method='exponential'"):
        DPOutputPerturbationClassifier(loss="hinge", classes=[0, 1]).fit(X, y)
    with pytest.raises(ValueError, match="bounded domain"):
        DPOutputPerturbationClassifier(method="exponential", classes=[0, 1]).fit(X, y)
    X50, y50 = _binary(100, 50, 3)  # p = 51, τ = 1/2: ≈ 4.6·10⁶ net points
    with pytest.raises(ValueError, match="max_net_size"):
        DPOutputPerturbationClassifier(method="exponential", radius=1.0, tau=0.5,
                                       classes=[0, 1]).fit(X50, y50)
    with pytest.raises(ValueError, match="'alpha' parameter"):
        DPOutputPerturbationRegressor(alpha=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="'objective' parameter"):
        DPOutputPerturbationRegressor(objective="risk").fit(X, y)


def test_declared_classes_no_warning_and_unknown_labels_are_an_error():
    X, y = _binary(400, 30, 4)
    with pytest.warns(PrivacyLeakWarning, match="classes=None"):
        DPOutputPerturbationClassifier(random_state=0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DPOutputPerturbationClassifier(classes=[0, 1], random_state=0).fit(X, y)
    # A label outside the declared set is malformed input (it used to count silently as
    # a negative): tests/utils/test_data_declared_classes.py for every classifier.
    y_odd = np.where(y == 0, 7, y)
    with pytest.raises(ValueError, match=r"not declared in classes=\[0, 1\]: 7"):
        DPOutputPerturbationClassifier(classes=[0, 1], random_state=0).fit(X, y_odd)
    with pytest.raises(ValueError, match="1 class"):
        DPOutputPerturbationClassifier().fit(X, np.zeros(400))


def test_multiclass_one_vs_rest_joint_release():
    X, y = load_sparse_digits(return_X_y=True)
    n, d = X.shape
    K, s = 10, 176
    clf = DPOutputPerturbationClassifier(epsilon=4.0, sparsity=s, norm_bound=math.sqrt(s),
                                         classes=list(range(10)), random_state=0).fit(X, y)
    assert clf.coef_.shape == (K, d) and clf.intercept_.shape == (K,)
    assert not hasattr(clf, "n_iter_")  # solver diagnostics depend on the data
    proba = clf.predict_proba(X[:50])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.predict(X[:50]), clf.classes_[proba.argmax(axis=1)])
    assert clf.privacy_spent_ == ApproxDP(4.0, 1e-6)
    # One Gaussian mechanism for the joint ℓ2 sensitivity √K·(1 + tol)·2L/(λn).
    # L = σ(ρG₂)·G₂, ρ the largest r ≤ √(2 log 2/λ) with r ≤ σ(rG₂)G₂/λ (the minimizer
    # norm bound of the mechanism's module doc), here by bisection on that inequality.
    # R = √s (the declared norm bound), times the floating-point slack of row bounding.
    from skdpsparse.mechanisms.output_perturbation import ROW_NORM_SLACK

    g2, lam = math.hypot(math.sqrt(s) * ROW_NORM_SLACK, 1.0), clf.alpha_
    lo, hi = 0.0, math.sqrt(2 * math.log(2) / lam)
    if hi > g2 / lam / (1 + math.exp(-hi * g2)):
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if mid <= g2 / lam / (1 + math.exp(-mid * g2)) else (lo, mid)
    L = g2 / (1 + math.exp(-hi * g2))
    sens = math.sqrt(K) * (1 + clf.tol_) * 2 * L / (lam * n)
    assert clf.tol_ == 1e-2  # tol='auto' at these sizes
    assert clf.noise_scale_ == pytest.approx(discrete_gaussian_sigma(sens, 4.0, 1e-6), rel=1e-12)
    assert clf.score(X, y) > 0.3  # ten classes (chance 0.1), ε = 4, n = 1797, d = 29 760


def test_binary_real_data_attributes_and_probabilities():
    X, y = load_breast_cancer(return_X_y=True)
    X = X / np.abs(X).max(axis=0)
    clf = DPOutputPerturbationClassifier(epsilon=2.0, delta=0, norm_bound=math.sqrt(30),
                                         classes=[0, 1], random_state=0).fit(X, y)
    assert clf.coef_.shape == (1, 30) and clf.intercept_.shape == (1,)
    assert clf.privacy_spent_ == PureDP(2.0) and clf.alpha_ > 0
    p = clf.predict_proba(X)
    np.testing.assert_allclose(p[:, 1], 1 / (1 + np.exp(-clf.decision_function(X))))
    assert not hasattr(DPOutputPerturbationClassifier(loss="smoothed_hinge"), "predict_proba")
    no_icpt = DPOutputPerturbationClassifier(fit_intercept=False, classes=[0, 1],
                                             random_state=0).fit(X, y)
    assert np.all(no_icpt.intercept_ == 0)


def test_exponential_method_hinge():
    rng = np.random.default_rng(6)
    n = 400
    X = rng.normal(size=(n, 2))
    y = (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)
    clf = DPOutputPerturbationClassifier(loss="hinge", method="exponential", epsilon=5.0,
                                         radius=1.0, max_net_size=5000, classes=[0, 1],
                                         random_state=0)
    accs = [clf.set_params(random_state=seed).fit(X, y).score(X, y) for seed in range(10)]
    assert clf.privacy_spent_ == PureDP(5.0) and clf.alpha_ == 0.0
    assert clf.tau_ > 0
    assert np.median(accs) > 0.8
    # Every released coefficient vector lies on the net τℤᵖ ∩ 𝒳.
    theta = np.append(clf.coef_[0], clf.intercept_[0] / clf.intercept_scaling_)
    np.testing.assert_allclose(theta / clf.tau_, np.round(theta / clf.tau_), atol=1e-9)
    assert np.linalg.norm(theta) <= 1.0 + 1e-9


# ----------------------------------------------------- label bounds (issue 18)
def test_undeclared_label_bound_warns_before_fitting_and_clips_to_one():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4)) / 2
    y = 50.0 + X @ np.ones(4)
    with pytest.warns(UserWarning, match="label_bound was not declared"):
        reg = DPOutputPerturbationRegressor(random_state=0).fit(X, y)
    assert reg.label_bound_ == 1.0
    # The warning is data-independent: it comes before the input is even read.
    with pytest.warns(UserWarning, match="label_bound was not declared"):
        with pytest.raises(ValueError):
            DPOutputPerturbationRegressor().fit(np.full((3, 2), np.nan), [1.0, 2.0, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        # n = 300 at ε = 1: the penalty's pull on the intercept warns (another warning,
        # tests/linear_model/test_output_perturbation_warnings.py).
        warnings.filterwarnings("ignore", message=".*pulls the intercept")
        DPOutputPerturbationRegressor(label_bound=60.0, random_state=0).fit(X, y)


def test_private_label_bound_composes_and_tracks_the_targets_scale():
    """label_bound='private': B is a grid point near the 0.95-quantile of |y|, and
    privacy_spent_ is ε_B + (ε − ε_B) = ε with the model's δ (basic composition)."""
    pytest.importorskip("skdpsparse.mechanisms.quantile")  # H4's private quantiles
    rng = np.random.default_rng(1)
    n, d = 20_000, 5
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    y = 100.0 * (X @ np.ones(d)) + 50.0
    reg = DPOutputPerturbationRegressor(epsilon=2.0, label_bound="private",
                                        random_state=0).fit(X, y)
    true_q = np.quantile(np.abs(y), 0.95)
    assert true_q / 1.2 <= reg.label_bound_ <= true_q * 1.2
    assert reg.privacy_spent_.epsilon == pytest.approx(2.0)
    assert reg.privacy_spent_.delta == pytest.approx(1e-6)
    pure = DPOutputPerturbationRegressor(epsilon=2.0, delta=0, label_bound="private",
                                         random_state=0).fit(X, y)
    assert type(pure.privacy_spent_).__name__ == "PureDP"
    assert pure.privacy_spent_.epsilon == pytest.approx(2.0)
    # The fit is usable where B = 1 clips every target (issue 18: R² −2.05).
    assert reg.score(X, y) > 0.5
    with pytest.raises(ValueError, match="bound_fraction"):
        DPOutputPerturbationRegressor(label_bound="private",
                                      bound_fraction=1.0).fit(X, y)


def test_private_norm_bound_scales_rows_to_a_quantile_of_their_norms():
    """norm_bound='private': R near the 0.95-quantile of the row norms; with a private
    label bound too, the two share bound_fraction·ε and everything sums to ε."""
    pytest.importorskip("skdpsparse.mechanisms.quantile")
    rng = np.random.default_rng(2)
    n, d = 20_000, 20
    X = rng.normal(size=(n, d)) * 3.0
    y = (X[:, 0] > 0).astype(int)
    clf = DPOutputPerturbationClassifier(epsilon=1.0, norm_bound="private", classes=[0, 1],
                                         random_state=0).fit(X, y)
    true_q = np.quantile(np.linalg.norm(X, axis=1), 0.95)
    assert true_q / 1.2 <= clf.norm_bound_ <= true_q * 1.2
    assert clf.privacy_spent_.epsilon == pytest.approx(1.0)
    assert clf.score(X, y) > 0.9
    reg = DPOutputPerturbationRegressor(epsilon=1.0, norm_bound="private",
                                        label_bound="private", bound_fraction=0.2,
                                        random_state=0).fit(X, 10.0 * X[:, 0])
    assert reg.privacy_spent_.epsilon == pytest.approx(1.0)
    assert reg.norm_bound_ > 1.0 and reg.label_bound_ > 1.0


def test_private_bound_finds_the_first_grid_point_above_an_atom():
    """Ratings with 15 % at the maximum 5: the bound is the first grid point ≥ 5 (the
    plain |C − r| score ties every point above 5), and the score has Δ = 2."""
    pytest.importorskip("skdpsparse.mechanisms.quantile")
    from skdpsparse.linear_model._base import private_bound
    from skdpsparse.mechanisms.quantile import geometric_grid
    from skdpsparse.utils import fit_random_source

    rng = np.random.default_rng(3)
    y = rng.choice([1.0, 2.0, 3.0, 4.0, 5.0], p=[0.1, 0.15, 0.25, 0.35, 0.15], size=60_000)
    grid = geometric_grid()
    first = grid[grid >= 5.0].min()
    draws = [private_bound(y, 0.05, fit_random_source(seed, DPOutputPerturbationRegressor(), y))
             for seed in range(20)]
    assert np.median(draws) == first
    assert max(draws) <= first * 2 ** (2 / 8) + 1e-12


# ------------------------------------------------------- the centred label interval


def _ratings_like(n=20000, d=50, seed=0):
    """One-hot rows (s = 1) and targets far from 0 next to their spread (mean ≈ 3)."""
    rng = np.random.default_rng(seed)
    X = np.eye(d)[rng.integers(d, size=n)]
    y = np.clip(3.0 + 0.3 * rng.standard_normal(n) + 0.03 * (X @ np.arange(d) - d / 2),
                0.5, 5.0)
    return X, y


def test_label_interval_centres_the_targets_and_beats_the_constant():
    """label_bound=(0.5, 5): the fit is of y − 2.75 in [−2.25, 2.25], intercept_
    includes 2.75, no pull warning (the pull acts on ȳ − m, not ȳ), and the model is
    above the constant prediction where the uncentred B = 5 is below it on average
    (issue 18: MovieLens ratings). Six seeds at ε = 1, n = 20 000: centred 0.11–0.21,
    uncentred −1.04 to 0.09 (mean −0.46) when written."""
    X, y = _ratings_like()
    centred, plain = [], []
    for seed in range(6):
        kw = dict(epsilon=1.0, sparsity=1, random_state=seed)
        with pytest.warns(UserWarning, match="pulls the intercept"):
            p = DPOutputPerturbationRegressor(label_bound=5.0, **kw).fit(X, y)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            c = DPOutputPerturbationRegressor(label_bound=(0.5, 5.0), **kw).fit(X, y)
        assert c.label_center_ == 2.75 and c.label_bound_ == 2.25
        assert p.label_center_ == 0.0 and p.label_bound_ == 5.0
        assert c.privacy_spent_ == p.privacy_spent_ == ApproxDP(1.0, 1e-6)
        centred.append(c.score(X, y))
        plain.append(p.score(X, y))
    assert min(centred) > 0.05 and np.mean(plain) < 0.0


def test_label_interval_is_the_declared_fit_of_the_shifted_targets(monkeypatch):
    """What reaches the mechanism: y − m (clipped there to [−B, B]) and a plan with
    label_bound B = (high − low)/2; what comes back gets + m on the intercept only."""
    import skdpsparse.linear_model._output_perturbation as mod

    seen = {}
    real = mod.output_perturbation

    def spy(X, targets, plan, rng, **kw):
        seen["targets"], seen["plan"] = targets.copy(), plan
        theta, info = real(X, targets, plan, rng, **kw)
        seen["theta"] = theta.copy()
        return theta, info

    monkeypatch.setattr(mod, "output_perturbation", spy)
    X, y = _ratings_like(n=500)
    y[:3] = (-7.0, 0.7, 9.0)  # outside, inside, outside the interval
    reg = DPOutputPerturbationRegressor(epsilon=2.0, sparsity=1, label_bound=(0.5, 5.0),
                                        random_state=1).fit(X, y)
    np.testing.assert_array_equal(seen["targets"][0], y - 2.75)
    assert seen["plan"].label_bound == 2.25
    c = reg.intercept_scaling_
    assert reg.intercept_ == c * seen["theta"][0, -1] + 2.75
    np.testing.assert_array_equal(reg.coef_, seen["theta"][0, :-1])


def _noise_free_release(monkeypatch, make, X, y):
    """(coef_, intercept_/c) of a fit whose mechanism returns the exact certified
    minimizer (no noise): the vector the noise is calibrated to cover; and the plan."""
    import skdpsparse.linear_model._output_perturbation as mod
    from skdpsparse.mechanisms.output_perturbation import (bound_inputs,
                                                           regularized_minimizers)

    plans = []

    def no_noise(X, targets, plan, rng, **kw):
        Xb, yb = bound_inputs(X, targets, plan.loss, norm_bound=plan.norm_bound,
                              sparsity=plan.sparsity, label_bound=plan.label_bound)
        plans.append(plan)
        return regularized_minimizers(Xb, yb, plan)

    monkeypatch.setattr(mod, "output_perturbation", no_noise)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        reg = make().fit(X, y)
    return np.append(reg.coef_, reg.intercept_ / reg.intercept_scaling_), plans[-1]


def _neighbour_moves(monkeypatch, make):
    """Over a few replacements of row 0: the largest ‖release(D) − release(D')‖₂, the
    sensitivity (1 + tol)·Δ₂ the noise is calibrated to, and whether the plan (its
    noise scale) stayed the same, as a public plan must."""
    from skdpsparse.mechanisms.output_perturbation import noise_sensitivity

    X, y = _ratings_like(n=2000)
    y = np.clip(y, 2.0, 3.0)  # every target in [2, 3]: the observed extremes move
    base, plan = _noise_free_release(monkeypatch, make, X, y)
    worst, same_plan = 0.0, True
    for new_x, new_y in ((7, 5.0), (7, 0.5), (0, 5.0), (3, -100.0)):
        X2, y2 = X.copy(), y.copy()
        X2[0] = np.eye(X.shape[1])[new_x]
        y2[0] = new_y
        other, plan2 = _noise_free_release(monkeypatch, make, X2, y2)
        same_plan &= plan2.noise_scale == plan.noise_scale
        worst = max(worst, float(np.linalg.norm(base - other)))
    return worst, noise_sensitivity(plan), same_plan


def test_label_interval_keeps_the_sensitivity_and_data_bounds_break_it(monkeypatch):
    """The privacy claim of the centring (label_interval's docstring): with m public
    (a declared pair) or released (``"private"``, its draws fixed here, as they are
    given the release), the plan is the same for neighbours and the release before
    noise moves by at most the (1 + tol)·Δ₂ the noise covers (Theorem 5.1's
    sensitivity of the centred problem). Broken variants, caught: m the midpoint of
    the observed extremes (the released intercept moves by λ/(c² + λ) of the change
    of m: ≈ 0.5 here at λ = 1, against Δ₂ ≈ 0.01), and m and B both read from the
    data (the plan, hence the noise, depends on one row)."""
    import skdpsparse.linear_model._output_perturbation as mod
    import skdpsparse.mechanisms.quantile as quantile

    kw = dict(epsilon=1.0, sparsity=1, alpha=1.0, random_state=0)
    declared = lambda: DPOutputPerturbationRegressor(label_bound=(0.5, 5.0), **kw)  # noqa: E731
    moved, allowed, same_plan = _neighbour_moves(monkeypatch, declared)
    assert same_plan and 0.0 < moved <= allowed

    with monkeypatch.context() as m:  # "private", its two draws fixed
        m.setattr(quantile, "private_quantiles",
                  lambda X, levels, **k: np.full((len(levels), 1), 2.5))
        m.setattr(mod, "private_bound", lambda values, eps, rng: 1.25)
        private = lambda: DPOutputPerturbationRegressor(label_bound="private", **kw)  # noqa: E731
        moved, allowed, same_plan = _neighbour_moves(monkeypatch, private)
        assert same_plan and 0.0 < moved <= allowed

    def data_centre(y, label_bound, epsilon, rng):
        low, high = np.clip([y.min(), y.max()], 0.5, 5.0)
        return 0.5 * (low + high), 2.25

    def data_bounds(y, label_bound, epsilon, rng):
        low, high = np.clip([y.min(), y.max()], 0.5, 5.0)
        return 0.5 * (low + high), 0.5 * (high - low)

    with monkeypatch.context() as m:
        m.setattr(mod, "label_interval", data_centre)
        moved, allowed, same_plan = _neighbour_moves(monkeypatch, declared)
        assert same_plan and moved > 10.0 * allowed
    with monkeypatch.context() as m:
        m.setattr(mod, "label_interval", data_bounds)
        assert not _neighbour_moves(monkeypatch, declared)[2]


def test_private_label_interval_is_charged_at_bound_fraction(monkeypatch):
    """``"private"``: the median draw gets ε_b/4, the quantile of |y − m| 3ε_b/4
    (ε_b = bound_fraction·ε), the model the rest; the fit spends ε, and m lands near
    the median with about 95 % of the targets inside [m − B, m + B]."""
    import skdpsparse.linear_model._output_perturbation as mod
    import skdpsparse.mechanisms.quantile as quantile

    spent = {}
    real_q, real_b, real_plan = (quantile.private_quantiles, mod.private_bound,
                                 mod.plan_output_perturbation)

    def spy_q(X, levels, *, epsilon_each, **k):
        spent["median"] = epsilon_each
        return real_q(X, levels, epsilon_each=epsilon_each, **k)

    def spy_b(values, eps, rng):
        spent["quantile"] = eps
        return real_b(values, eps, rng)

    def spy_plan(*a, epsilon, **k):
        spent["model"] = epsilon
        return real_plan(*a, epsilon=epsilon, **k)

    monkeypatch.setattr(quantile, "private_quantiles", spy_q)
    monkeypatch.setattr(mod, "private_bound", spy_b)
    monkeypatch.setattr(mod, "plan_output_perturbation", spy_plan)
    X, y = _ratings_like()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        reg = DPOutputPerturbationRegressor(epsilon=4.0, sparsity=1, label_bound="private",
                                            bound_fraction=0.2, random_state=3).fit(X, y)
    assert spent["median"] == pytest.approx(0.2)
    assert spent["quantile"] == pytest.approx(0.6)
    assert spent["model"] == pytest.approx(3.2)
    assert reg.privacy_spent_.epsilon == pytest.approx(4.0, rel=1e-12)
    assert abs(reg.label_center_ - np.median(y)) < 0.2
    inside = np.mean(np.abs(y - reg.label_center_) <= reg.label_bound_)
    assert 0.9 <= inside <= 0.99
    assert reg.score(X, y) > 0.1


@pytest.mark.parametrize("bad", [(5.0, 0.5), (1.0, 1.0), (0.0, np.inf), (np.nan, 1.0),
                                 (1.0, 2.0, 3.0), ("a", "b")])
def test_label_interval_malformed_is_a_clear_error(bad):
    from skdpsparse.exceptions import InvalidParameterError

    X, y = _ratings_like(n=50)
    with pytest.raises(InvalidParameterError, match="label_bound"):
        DPOutputPerturbationRegressor(label_bound=bad).fit(X, y)


def test_label_interval_near_the_largest_float_has_a_finite_centre():
    """(low + high)/2 overflowed to inf for (1e308, 1.7e308) (review finding): the
    centre and half-width are taken from the halves."""
    from skdpsparse.linear_model._output_perturbation import label_interval

    m, B = label_interval(np.zeros(3), (1e308, 1.7e308), 1.0, None)
    assert m == pytest.approx(1.35e308, rel=1e-15) and B == pytest.approx(0.35e308, rel=1e-15)
    assert label_interval(np.zeros(3), (0.5, 5.0), 1.0, None) == (2.75, 2.25)


def test_label_interval_on_dask_is_the_in_memory_fit():
    """The centre of a declared interval is public: the Dask workers subtract it as
    the in-memory fit does (once refused), so the release is the same bit for bit."""
    dask = pytest.importorskip("dask")
    da = pytest.importorskip("dask.array")
    X, y = _ratings_like(n=100)
    make = lambda: DPOutputPerturbationRegressor(  # noqa: E731
        label_bound=(0.5, 5.0), random_state=3)
    ref = make().fit(X, y)
    with dask.config.set(scheduler="threads"):
        est = make().fit(da.from_array(X, chunks=50), da.from_array(y, chunks=50))
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    assert est.intercept_ == ref.intercept_ and est.label_center_ == 2.75
