"""DPSparseMeanEstimator: noise scales, distributions, accuracy regimes, sklearn API."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats
from sklearn.decomposition import PCA
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdpsparse.accounting import ApproxDP, PureDP
from skdpsparse.accounting.discrete import discrete_gaussian_sigma
from skdpsparse.datasets import make_sparse_vectors
from skdpsparse.mean import DPSparseMeanEstimator
from skdpsparse.mechanisms.projection import bounded_mean, mean_noise
from skdpsparse.mechanisms.sparse_mean import choose_method, predicted_error


@parametrize_with_checks([
    DPSparseMeanEstimator(random_state=0),
    DPSparseMeanEstimator(delta=0, sparsity=2, random_state=0),
])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_noise_scales_equal_the_seed_formulas():
    n, L, s, eps, delta = 1000, 2.0, 9, 0.5, 1e-5
    kind, b, budget = mean_noise(n, epsilon=eps, delta=0, norm_bound=L, sparsity=s)
    assert kind == "laplace" and budget == PureDP(eps)
    assert b == pytest.approx(2 * L * 3 / (n * eps), rel=1e-14)  # Thm 3.2: 2L√s/(nε)
    kind, sigma, budget = mean_noise(n, epsilon=eps, delta=delta, norm_bound=L,
                                     sparsity=s, calibration="classic")
    assert kind == "gaussian" and budget == ApproxDP(eps, delta)
    # Algorithm 1: σ² = 8L² ln(1.25/δ)/(nε)².
    assert sigma ** 2 == pytest.approx(8 * L**2 * np.log(1.25 / delta) / (n * eps) ** 2,
                                       rel=1e-12)
    _, sigma_a, _ = mean_noise(n, epsilon=eps, delta=delta, norm_bound=L, sparsity=s)
    # The discrete Gaussian's tight zCDP calibration (the noise is discrete).
    assert sigma_a == discrete_gaussian_sigma(2 * L / n, eps, delta)
    assert sigma_a < sigma  # the analytic calibration is tighter


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_released_noise_has_the_right_law(delta):
    """On all-zero data the dense baselines release pure noise: test its law."""
    n, d, eps = 500, 20_000, 1.0
    X = sp.csr_matrix((n, d))
    method = "laplace" if delta == 0 else "gaussian"
    est = DPSparseMeanEstimator(epsilon=eps, delta=delta, method=method,
                                sparsity=4, random_state=1).fit(X)
    kind, scale, _ = mean_noise(n, epsilon=eps, delta=delta, norm_bound=1.0, sparsity=4)
    lap = stats.laplace(scale=scale)
    gauss = stats.norm(scale=scale)
    gauss_same_var = stats.norm(scale=scale * np.sqrt(2))
    lap_same_var = stats.laplace(scale=scale / np.sqrt(2))
    if kind == "laplace":
        assert stats.kstest(est.mean_, lap.cdf).pvalue > 1e-3
        assert stats.kstest(est.mean_, gauss_same_var.cdf).pvalue < 1e-6
    else:
        assert stats.kstest(est.mean_, gauss.cdf).pvalue > 1e-3
        assert stats.kstest(est.mean_, lap_same_var.cdf).pvalue < 1e-6


# Three regimes of seed 002 Table 1 (constant, high-dimensional, low-dimensional) for the
# projection mechanism, pure and approximate DP: (n, d, s) chosen so that a different
# term of the bound is the smallest.
REGIMES = {
    "constant": (20, 20_000, 4),
    "high_dimensional": (500, 20_000, 4),
    "low_dimensional": (2000, 50, 10),
}


def _active_term(n, d, s, eps, delta, beta=0.05):
    dense = predicted_error("gaussian" if delta else "laplace", n, d, s, eps, delta, beta=beta)
    proj = predicted_error("projection", n, d, s, eps, delta, beta=beta)
    if proj == 2.0:
        return "constant"
    return "low_dimensional" if proj == dense else "high_dimensional"


@pytest.mark.parametrize("regime", sorted(REGIMES))
@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_projection_error_within_theorem_bound(regime, delta, shared_noise):
    n, d, s = REGIMES[regime]
    eps, beta, runs = 1.0, 0.05, 200
    assert _active_term(n, d, s, eps, delta, beta) == regime
    bound = predicted_error("projection", n, d, s, eps, delta, beta=beta)
    X, _ = make_sparse_vectors(n, d, s, column_distribution="power_law", random_state=0)
    target = bounded_mean(X, 1.0, s)
    errors = np.array([
        np.linalg.norm(DPSparseMeanEstimator(epsilon=eps, delta=delta, sparsity=s,
                                             method="projection", random_state=seed)
                       .fit(X).mean_ - target)
        for seed in range(runs)
    ])
    # The bound (constant 1, explicit proof constants) holds with probability ≥ 1 − β.
    assert np.mean(errors <= bound) >= 0.95
    # ... and the projection never does worse than its own dense noise would.
    dense = DPSparseMeanEstimator(epsilon=eps, delta=delta, sparsity=s,
                                  method="gaussian" if delta else "laplace")
    dense_errors = np.array([np.linalg.norm(dense.set_params(random_state=seed)
                                            .fit(X).mean_ - target) for seed in range(20)])
    assert np.all(errors[:20] <= dense_errors + 1e-12)


def test_dense_gaussian_error_concentrates_at_sigma_sqrt_d():
    """A noise scale off by a few percent would fail this (not only the loose bound)."""
    n, d, s = 1000, 40_000, 4
    X, _ = make_sparse_vectors(n, d, s, random_state=0)
    target = bounded_mean(X, 1.0, s)
    _, sigma, _ = mean_noise(n, epsilon=1.0, delta=1e-6, norm_bound=1.0, sparsity=s)
    err = np.linalg.norm(DPSparseMeanEstimator(method="gaussian", sparsity=s, random_state=3)
                         .fit(X).mean_ - target)
    assert err / (sigma * np.sqrt(d)) == pytest.approx(1.0, abs=0.02)


def test_rows_outside_bounds_are_scaled_not_rejected(shared_noise):
    rng = np.random.default_rng(0)
    n, d, s, L = 300, 1000, 5, 2.0
    X, _ = make_sparse_vectors(n, d, s, random_state=1)
    X = sp.csr_matrix(X.multiply(L))  # rows of norm exactly L: inside the bounds
    big = X.copy()
    big.data *= np.repeat(rng.uniform(1.0, 1e6, n), np.diff(big.indptr))  # out of bounds
    for method in ["projection", "gaussian"]:
        a = DPSparseMeanEstimator(norm_bound=L, sparsity=s, method=method,
                                  random_state=4).fit(X).mean_
        b = DPSparseMeanEstimator(norm_bound=L, sparsity=s, method=method,
                                  random_state=4).fit(big).mean_
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    # ℓ1 bounding: a dense row of norm L with d nonzeros has ℓ1 mass L√d > L√s.
    dense_row = np.full((1, d), L / np.sqrt(d))
    mean = bounded_mean(sp.csr_matrix(dense_row), L, s)
    assert np.abs(mean).sum() == pytest.approx(L * np.sqrt(s), rel=1e-12)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_input_raises(bad):
    X = np.zeros((5, 3))
    X[2, 1] = bad
    with pytest.raises(ValueError, match="NaN|infinity|inf"):
        DPSparseMeanEstimator(random_state=0).fit(X)
    with pytest.raises(ValueError, match="NaN|infinity|inf"):
        DPSparseMeanEstimator(random_state=0).fit(sp.csr_matrix(X))


@pytest.mark.parametrize("param, value", [
    ("epsilon", 0.0), ("epsilon", -1.0), ("epsilon", np.inf), ("delta", 1.0),
    ("delta", -1e-3), ("sparsity", 0), ("norm_bound", -1.0), ("method", "magic"),
])
def test_invalid_parameters_are_named(param, value):
    est = DPSparseMeanEstimator(**{param: value})
    with pytest.raises(ValueError, match=param):
        est.fit(np.ones((4, 3)))


def test_method_delta_mismatch_is_explained():
    with pytest.raises(ValueError, match="delta"):
        DPSparseMeanEstimator(delta=0, method="l1_recovery").fit(np.ones((4, 3)))
    with pytest.raises(ValueError, match="delta"):
        DPSparseMeanEstimator(delta=1e-6, method="laplace").fit(np.ones((4, 3)))


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "lil", "dok", "bsr"])
def test_sparse_formats_match_dense(fmt, shared_noise):
    X, _ = make_sparse_vectors(200, 300, 6, random_state=2)
    dense = DPSparseMeanEstimator(sparsity=6, random_state=5).fit(X.toarray()).mean_
    other = DPSparseMeanEstimator(sparsity=6, random_state=5).fit(X.asformat(fmt)).mean_
    np.testing.assert_allclose(dense, other, rtol=1e-10, atol=1e-13)


def test_auto_depends_only_on_public_shape_and_parameters():
    X1, _ = make_sparse_vectors(1000, 5000, 5, random_state=0)
    X2 = sp.csr_matrix(X1.shape)
    m1 = DPSparseMeanEstimator(sparsity=5, random_state=0).fit(X1).method_
    m2 = DPSparseMeanEstimator(sparsity=5, random_state=0).fit(X2).method_
    assert m1 == m2 == choose_method(1000, 5000, 5, 1.0, 1e-6)
    # Thresholding where the spread signal L√s/min(d, ns) is below the noise's
    # standard deviation (the sparse regime), else the projection (issue 19).
    assert choose_method(1000, 5000, 5, 1.0, 1e-6) == "threshold"
    assert choose_method(1000, 5000, 5, 1.0, 0.0) == "threshold"  # √5/5000 < b√2
    assert choose_method(10_000, 100_000, 10, 1.0, 1e-6) == "threshold"
    assert choose_method(100_000, 5_000, 7, 0.5, 1e-6) == "projection"  # one-hot-like
    # The cut by hand: hashed-text-like rows threshold, a dense mean projects.
    from skdpsparse.mechanisms.sparse_mean import spread_signal
    assert spread_signal(20_000, 2**18, 185) == pytest.approx(np.sqrt(185) / 2**18)
    assert spread_signal(10**5, 5_000, 7) == pytest.approx(np.sqrt(7) / 5_000)
    sigma = mean_noise(10**5, epsilon=0.5, delta=1e-6, norm_bound=1.0, sparsity=7)[1]
    assert sigma < np.sqrt(7) / 5_000  # hence the projection above


def test_method_reports_what_ran():
    """l1_recovery below Algorithm 2's threshold d >= m ln^2 m runs the dense
    Gaussian release, and says so (issue 19)."""
    X, _ = make_sparse_vectors(2000, 500, 5, random_state=0)
    est = DPSparseMeanEstimator(sparsity=5, method="l1_recovery", random_state=0).fit(X)
    assert est.method_ == "gaussian"
    ref = DPSparseMeanEstimator(sparsity=5, method="gaussian", random_state=0).fit(X)
    assert est.mean_.shape == ref.mean_.shape


@pytest.mark.parametrize("delta", [1e-6, 0.0])
def test_threshold_is_the_dense_release_thresholded(delta, shared_noise):
    """Same seed, same noise: threshold keeps exactly the coordinates of the dense
    release above λ (then the two projections, which leave this small output alone)."""
    from skdpsparse.mechanisms.sparse_mean import noise_threshold

    n, d, s = 3000, 4000, 5
    X, _ = make_sparse_vectors(n, d, s, column_distribution="power_law", random_state=0)
    dense_method = "gaussian" if delta else "laplace"
    dense = DPSparseMeanEstimator(delta=delta, sparsity=s, method=dense_method,
                                  random_state=4).fit(X).mean_
    thr = DPSparseMeanEstimator(delta=delta, sparsity=s, method="threshold",
                                random_state=4).fit(X)
    lam = noise_threshold(n, d, epsilon=1.0, delta=delta, norm_bound=1.0, sparsity=s)
    expected = np.where(np.abs(dense) > lam, dense, 0.0)
    if np.linalg.norm(expected) <= 1.0 and np.abs(expected).sum() <= np.sqrt(s):
        np.testing.assert_array_equal(thr.mean_, expected)
    assert thr.privacy_spent_ == DPSparseMeanEstimator(delta=delta).fit(X).privacy_spent_
    # The sparse output holds the same numbers.
    sparse = DPSparseMeanEstimator(delta=delta, sparsity=s, method="threshold",
                                   output="sparse", random_state=4).fit(X)
    assert sp.issparse(sparse.mean_)
    np.testing.assert_array_equal(sparse.mean_.toarray().ravel(), thr.mean_)
    assert sparse.score(X) == pytest.approx(thr.score(X), rel=1e-12)


def test_threshold_beats_zero_and_dense_in_the_sparse_regime():
    """The README quickstart's setting, 5 seeds: the default's ℓ2 error is below the
    zero vector's and the dense Gaussian's in every run (measured margins: see the
    README)."""
    X, _ = make_sparse_vectors(10_000, 100_000, 10, column_distribution="power_law",
                               random_state=0)
    mean = np.asarray(X.mean(axis=0)).ravel()
    for seed in range(5):
        ours = DPSparseMeanEstimator(sparsity=10, random_state=seed).fit(X).mean_
        dense = DPSparseMeanEstimator(sparsity=10, method="gaussian",
                                      random_state=seed).fit(X).mean_
        err = np.linalg.norm(ours - mean)
        assert err < np.linalg.norm(mean)
        assert err < np.linalg.norm(dense - mean)


def test_transform_and_score():
    X, _ = make_sparse_vectors(500, 40, 4, random_state=0)
    est = DPSparseMeanEstimator(sparsity=4, random_state=0).fit(X)
    Xd = X.toarray()
    np.testing.assert_allclose(est.transform(Xd), Xd - est.mean_)
    with pytest.raises(ValueError, match="sparse"):
        est.transform(X)
    expected = -np.mean(np.sum((Xd - est.mean_) ** 2, axis=1))
    assert est.score(X) == pytest.approx(expected, rel=1e-12)
    assert est.score(Xd) == pytest.approx(expected, rel=1e-12)


def test_grid_search_and_pipeline():
    X, _ = make_sparse_vectors(300, 200, 4, random_state=0)
    # The dense release: with the default thresholding, ε = 0.01 releases the zero
    # vector, which on these 300 rows of 200 uniform columns scores as well as ε = 10.
    grid = GridSearchCV(DPSparseMeanEstimator(method="gaussian", random_state=0),
                        {"epsilon": [0.01, 10.0], "sparsity": [4, 50]}, cv=3).fit(X)
    assert grid.best_params_["epsilon"] == 10.0  # far less noise wins on held-out rows
    pipe = Pipeline([("center", DPSparseMeanEstimator(sparsity=4, random_state=0)),
                     ("pca", PCA(n_components=2))]).fit(X.toarray())
    assert pipe.transform(X.toarray()).shape == (300, 2)


def test_seeded_fits_reproduce_and_unseeded_fits_differ():
    X, _ = make_sparse_vectors(100, 50, 3, random_state=0)
    # The dense release: the default thresholds these noisy 100 rows to the zero
    # vector in most fits, seeded or not, which would not tell the seeds apart.
    kw = dict(method="gaussian")
    a = DPSparseMeanEstimator(random_state=7, **kw).fit(X).mean_
    b = DPSparseMeanEstimator(random_state=7, **kw).fit(X).mean_
    c = DPSparseMeanEstimator(**kw).fit(X).mean_
    d = DPSparseMeanEstimator(**kw).fit(X).mean_
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(c, d)


def _project_nonnegative_reference(z, l1, l2):
    """The projection onto {v ≥ 0, Σv ≤ l1} by bisection on θ (a different algorithm
    from the sort of _project_nonnegative), then the ℓ2 scaling."""
    w = np.maximum(z, 0.0)
    if w.sum() > l1:
        lo, hi = 0.0, float(w.max())
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if np.maximum(w - mid, 0).sum() > l1 else (lo, mid)
        w = np.maximum(w - hi, 0.0)
    norm = np.linalg.norm(w)
    return w * (l2 / norm) if norm > l2 else w


def test_project_nonnegative_matches_a_reference_and_never_moves_away():
    from skdpsparse.mechanisms.sparse_mean import _project_nonnegative

    rng = np.random.default_rng(0)
    for trial in range(50):
        d = int(rng.integers(1, 60))
        z = rng.normal(0, 1, d) * rng.exponential(1, d)
        l1, l2 = float(rng.uniform(0.1, 3)), float(rng.uniform(0.1, 3))
        out = _project_nonnegative(z.copy(), l1, l2)
        np.testing.assert_allclose(out, _project_nonnegative_reference(z, l1, l2),
                                   atol=1e-9)
        assert np.all(out >= 0) and out.sum() <= l1 * (1 + 1e-12)
        assert np.linalg.norm(out) <= l2 * (1 + 1e-12)
        # A point of the set (mean of nonnegative rows within both bounds) is never
        # farther from the projection than from z (nonexpansive onto a convex set).
        mu = rng.exponential(1, d) * (rng.random(d) < 0.3)
        mu *= min(1.0, l1 / max(mu.sum(), 1e-300), l2 / max(np.linalg.norm(mu), 1e-300))
        assert np.linalg.norm(out - mu) <= np.linalg.norm(z - mu) + 1e-12


@pytest.mark.parametrize("method", ["projection", "threshold"])
def test_nonnegative_declaration_only_post_processes(method):
    """Same noise (the mechanism called twice with one seed): the declared-nonnegative
    release is the undeclared one projected further, so on one-hot rows (whose mean
    lies in the set) its error is never larger, and the budget is the same. The
    estimator releases a nonnegative mean with the same guarantee."""
    from skdpsparse.mechanisms.sparse_mean import private_sparse_mean, _project_nonnegative

    rng = np.random.default_rng(1)
    n, d, s = 4000, 300, 3
    cols = np.stack([rng.integers(100 * b, 100 * (b + 1), n) for b in range(s)], axis=1)
    X = sp.csr_matrix((np.full(n * s, 1 / np.sqrt(s)), cols.ravel(),
                       np.arange(0, n * s + 1, s)), shape=(n, d))
    mu = np.asarray(X.mean(axis=0)).ravel()
    kw = dict(epsilon=0.5, delta=1e-6, norm_bound=1.0, sparsity=s)
    for seed in range(5):
        plain, b1, _ = private_sparse_mean(X, method, rng=np.random.default_rng(seed), **kw)
        nonneg, b2, _ = private_sparse_mean(X, method, rng=np.random.default_rng(seed),
                                            nonnegative=True, **kw)
        np.testing.assert_allclose(nonneg, _project_nonnegative(plain.copy(), np.sqrt(s), 1.0),
                                   atol=1e-15)
        assert np.all(nonneg >= 0) and str(b1) == str(b2)
        assert np.linalg.norm(nonneg - mu) <= np.linalg.norm(plain - mu) + 1e-12
    est_kw = dict(epsilon=0.5, delta=1e-6, sparsity=s, method=method, random_state=3)
    est = DPSparseMeanEstimator(nonnegative=True, **est_kw).fit(X)
    assert np.all(est.mean_ >= 0)
    assert str(est.privacy_spent_) == str(DPSparseMeanEstimator(**est_kw).fit(X).privacy_spent_)
    sparse_out = DPSparseMeanEstimator(nonnegative=True, output="sparse", **est_kw).fit(X)
    assert sp.issparse(sparse_out.mean_) and sparse_out.mean_.min() >= 0


def test_nonnegative_declaration_holds_for_the_distributed_fit():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(2)
    X = (rng.random((3000, 40)) < 0.05) * 0.4
    est = DPSparseMeanEstimator(epsilon=0.5, sparsity=5, method="projection",
                                nonnegative=True, random_state=0)
    est.fit(da.from_array(X, chunks=(1000, 40)))
    assert np.all(np.asarray(est.mean_) >= 0)
    assert est.method_ == "projection"
