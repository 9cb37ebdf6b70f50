"""make_sparse_regression and make_sparse_classification."""

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit

from skdpsparse.datasets import make_sparse_classification, make_sparse_regression

GENERATORS = [make_sparse_regression, make_sparse_classification]


@pytest.mark.parametrize("make", GENERATORS)
@pytest.mark.parametrize("law", ["uniform", "power_law"])
@pytest.mark.parametrize("n, d, s", [(50, 30, 4), (80, 17, 5), (20, 3, 3), (40, 1000, 16)])
def test_structure(make, law, n, d, s, assert_sparse_rows, fields):
    X, y, coef = make(n, d, s, column_distribution=law, random_state=0)
    cols = assert_sparse_rows(X, n, d, s)
    field, _ = fields(d, s)
    np.testing.assert_array_equal(field[cols], np.broadcast_to(np.arange(s), (n, s)))
    np.testing.assert_allclose(X.data, 1 / np.sqrt(s), rtol=1e-15)
    assert y.shape == (n,) and coef.shape == (d,) and coef.dtype == np.float64
    if make is make_sparse_classification:
        assert y.dtype == np.int64 and set(np.unique(y)) <= {0, 1}
    else:
        assert y.dtype == np.float64


@pytest.mark.parametrize("make", GENERATORS)
def test_heavy_features_are_scaled_student_t_magnitudes(make, assert_sparse_rows):
    n, d, s, nu = 20_000, 200, 8, 6.0
    X, _, _ = make(n, d, s, feature_tail="heavy", tail_parameter=nu, random_state=1)
    assert_sparse_rows(X, n, d, s)
    assert np.all(X.data > 0)
    c = np.sqrt((nu - 2) / nu / s)
    magnitudes = X.data / c  # should be |T_nu|
    assert stats.kstest(magnitudes, lambda x: 2 * stats.t.cdf(x, nu) - 1).pvalue > 1e-4
    # E ||x||^2 = 1, as for light rows (nu > 4: the Monte Carlo variance is finite).
    sq_norms = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    np.testing.assert_allclose(sq_norms.mean(), 1.0, rtol=0.03)
    assert sq_norms.std() > 0.1


def test_regression_noiseless_and_coef_norm():
    X, y, coef = make_sparse_regression(300, 60, 6, noise=0.0, coef_norm=2.5, random_state=2)
    np.testing.assert_array_equal(y, X @ coef)
    np.testing.assert_allclose(np.linalg.norm(coef), 2.5, rtol=1e-14)
    _, _, zero = make_sparse_regression(10, 60, 6, coef_norm=0.0, random_state=2)
    np.testing.assert_array_equal(zero, 0.0)


@pytest.mark.parametrize("feature_tail", ["light", "heavy"])
def test_regression_noise_level(feature_tail):
    n = 20_000
    X, y, coef = make_sparse_regression(n, 500, 10, noise=0.3, feature_tail=feature_tail,
                                        random_state=3)
    residual = y - X @ coef
    # Gaussian noise: the sample std has relative std 1 / sqrt(2n) = 0.5 %.
    np.testing.assert_allclose(residual.std(), 0.3, rtol=0.03)
    assert abs(residual.mean()) < 6 * 0.3 / np.sqrt(n)
    assert stats.kstest(residual / 0.3, "norm").pvalue > 1e-4


def test_regression_given_coef_is_used():
    coef = np.linspace(-1, 1, 40)
    X, y, out = make_sparse_regression(100, 40, 4, noise=0.0, coef=list(coef), random_state=4)
    np.testing.assert_array_equal(out, coef)
    np.testing.assert_allclose(y, X @ coef, rtol=1e-14)


@pytest.mark.parametrize("law", ["uniform", "power_law"])
@pytest.mark.parametrize("d, s, tail", [(100, 1, "light"), (100, 4, "light"),
                                         (1000, 16, "light"), (50, 10, "light"),
                                         (2**16, 32, "light"), (1000, 16, "heavy"),
                                         (2**16, 32, "heavy")])
def test_classification_default_accuracy(law, d, s, tail):
    """The true coefficients classify 85-95 % of the rows right by default."""
    X, y, coef = make_sparse_classification(20_000, d, s, column_distribution=law,
                                            feature_tail=tail, random_state=5)
    accuracy = np.mean((X @ coef > 0) == y)
    assert 0.85 <= accuracy <= 0.95, accuracy
    # E[x @ coef] = 0; with one power-law field a few columns carry most of the mass and
    # the label rate depends on their coefficients, so allow more there.
    assert abs(y.mean() - 0.5) < (0.1 if s == 1 else 0.05)


@pytest.mark.parametrize("law", ["uniform", "power_law"])
def test_classification_logit_has_std_separation(law):
    n = 50_000
    X, _, coef = make_sparse_classification(n, 400, 8, separation=2.0, column_distribution=law,
                                            random_state=6)
    z = X @ coef
    # Population mean 0 and std 2 exactly; sample versions within 6 standard errors
    # (the logit has a bounded fourth moment here).
    assert abs(z.mean()) < 6 * 2.0 / np.sqrt(n)
    np.testing.assert_allclose(z.std(), 2.0, rtol=0.03)


def test_classification_is_calibrated():
    """P(y = 1 | x) = expit(x @ coef): per-bin z-tests of the observed label rate."""
    X, y, coef = make_sparse_classification(60_000, 300, 6, feature_tail="heavy",
                                            random_state=7)
    p = expit(X @ coef)
    bins = np.minimum((p * 10).astype(int), 9)
    for b in range(10):
        sel = bins == b
        if sel.sum() < 100:
            continue
        z = (y[sel].sum() - p[sel].sum()) / np.sqrt(np.sum(p[sel] * (1 - p[sel])))
        assert abs(z) < 5, (b, z)


def test_classification_given_coef_and_degenerate_layout():
    coef = np.zeros(30)
    X, y, out = make_sparse_classification(4000, 30, 3, coef=coef, random_state=8)
    np.testing.assert_array_equal(out, coef)
    assert abs(y.mean() - 0.5) < 6 * 0.5 / np.sqrt(4000)
    # One column per field: every row is the same, no direction separates anything.
    _, _, out = make_sparse_classification(10, 5, 5, random_state=8)
    np.testing.assert_array_equal(out, 0.0)


@pytest.mark.parametrize("make", GENERATORS)
def test_deterministic_and_coef_independent_of_n_samples(make):
    kw = dict(column_distribution="power_law", feature_tail="heavy", random_state=10)
    X1, y1, c1 = make(200, 300, 5, **kw)
    X2, y2, c2 = make(200, 300, 5, **kw)
    for attr in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(X1, attr), getattr(X2, attr))
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(c1, c2)
    _, _, c3 = make(7, 300, 5, **kw)
    np.testing.assert_array_equal(c1, c3)
    X4, y4, c4 = make(200, 300, 5, column_distribution="power_law", feature_tail="heavy",
                      random_state=11)
    assert not np.array_equal(X1.indices, X4.indices) and not np.array_equal(c1, c4)


@pytest.mark.parametrize("make", GENERATORS)
@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        (dict(n_nonzeros=20), ValueError, "n_nonzeros"),
        (dict(feature_tail="medium"), ValueError, "feature_tail"),
        (dict(feature_tail="heavy", tail_parameter=2.0), ValueError, "tail_parameter"),
        (dict(coef=np.ones(3)), ValueError, "coef"),
        (dict(coef=np.full(10, np.inf)), ValueError, "coef"),
        (dict(column_distribution=None), ValueError, "column_distribution"),
        (dict(power_law_exponent=-1), ValueError, "power_law_exponent"),
    ],
)
def test_argument_validation(make, kwargs, exc, name):
    args = dict(n_samples=5, n_features=10, n_nonzeros=3)
    args.update(kwargs)
    with pytest.raises(exc, match=name):
        make(**args)


@pytest.mark.parametrize(
    "make, kwargs, name",
    [
        (make_sparse_regression, dict(noise=-0.1), "noise"),
        (make_sparse_regression, dict(coef_norm=-1.0), "coef_norm"),
        (make_sparse_classification, dict(separation=-1.0), "separation"),
        (make_sparse_classification, dict(separation=np.nan), "separation"),
    ],
)
def test_specific_argument_validation(make, kwargs, name):
    with pytest.raises(ValueError, match=name):
        make(5, 10, 3, **kwargs)
