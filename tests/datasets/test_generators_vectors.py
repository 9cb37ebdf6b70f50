"""make_sparse_vectors: exact structure, exact population mean, determinism."""

import numpy as np
import pytest
from scipy import stats

from skdpsparse.datasets import make_sparse_vectors
from skdpsparse.datasets._generators import _power_law_rank_probabilities

SHAPES = [(40, 10, 3), (200, 1000, 16), (60, 7, 7), (30, 5, 1), (100, 17, 4), (50, 1, 1)]
LAWS = [("uniform", 1.0), ("power_law", 0.0), ("power_law", 0.5), ("power_law", 1.0),
        ("power_law", 2.5)]


@pytest.mark.parametrize("n, d, s", SHAPES)
@pytest.mark.parametrize("law, a", LAWS)
@pytest.mark.parametrize("norm", [1.0, 3.7])
def test_structure(n, d, s, law, a, norm, assert_sparse_rows, fields):
    X, mu = make_sparse_vectors(n, d, s, column_distribution=law, power_law_exponent=a,
                                norm=norm, random_state=0)
    cols = assert_sparse_rows(X, n, d, s)
    np.testing.assert_allclose(X.data, norm / np.sqrt(s), rtol=0, atol=0)
    row_norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    np.testing.assert_allclose(row_norms, norm, rtol=1e-12, atol=0)
    # One column per field, fields in column order.
    field, sizes = fields(d, s)
    np.testing.assert_array_equal(field[cols], np.broadcast_to(np.arange(s), (n, s)))
    # The population mean: nonnegative, mass norm/sqrt(s) in every field.
    assert mu.shape == (d,) and mu.dtype == np.float64
    assert np.all(mu >= 0)
    np.testing.assert_allclose(np.bincount(field, weights=mu), norm / np.sqrt(s), rtol=1e-12)


@pytest.mark.parametrize("d, s", [(10, 3), (1000, 16), (17, 4)])
def test_uniform_mean_is_exact(d, s, fields):
    _, mu = make_sparse_vectors(5, d, s, norm=2.0, random_state=1)
    field, sizes = fields(d, s)
    np.testing.assert_allclose(mu, 2.0 / np.sqrt(s) / sizes[field], rtol=1e-15)


@pytest.mark.parametrize("a", [0.0, 0.3, 1.0, 1.7, 4.0])
@pytest.mark.parametrize("m", [1, 2, 5, 300])
def test_power_law_rank_probabilities(a, m):
    p = _power_law_rank_probabilities(m, a)
    r = np.arange(m, dtype=np.float64)
    if a == 1.0:
        expected = np.log((r + 2) / (r + 1)) / np.log(m + 1)
    else:
        expected = ((r + 2) ** (1 - a) - (r + 1) ** (1 - a)) / ((m + 1) ** (1 - a) - 1)
    np.testing.assert_allclose(p, expected, rtol=1e-10)
    np.testing.assert_allclose(p.sum(), 1.0, rtol=1e-13)
    assert np.all(np.diff(p) <= 0) if a > 0 else np.allclose(p, 1 / m)


def test_power_law_exponent_is_continuous_at_one():
    p1 = _power_law_rank_probabilities(1000, 1.0)
    for a in (1 - 1e-9, 1 + 1e-9):
        np.testing.assert_allclose(_power_law_rank_probabilities(1000, a), p1, rtol=1e-7)


def test_power_law_is_zipf_like():
    """p_r ~ (r + 1) ** -a for large ranks."""
    p = _power_law_rank_probabilities(10**5, 1.5)
    r = np.array([1000, 10000])
    slope = np.diff(np.log(p[r])) / np.diff(np.log(r + 1.0))
    np.testing.assert_allclose(slope, -1.5, rtol=1e-3)


def test_power_law_mean_is_a_permuted_power_law(fields):
    d, s, a = 103, 4, 1.2
    _, mu = make_sparse_vectors(3, d, s, column_distribution="power_law",
                                power_law_exponent=a, random_state=5)
    field, sizes = fields(d, s)
    for f in range(s):
        expected = _power_law_rank_probabilities(sizes[f], a) / np.sqrt(s)
        np.testing.assert_allclose(np.sort(mu[field == f])[::-1], expected, rtol=1e-14)
    # The permutation spreads the popular columns: the most popular column is not always
    # the first of its field.
    assert any(np.argmax(mu[field == f]) != 0 for f in range(s))


@pytest.mark.parametrize("law, a", [("uniform", 1.0), ("power_law", 1.0), ("power_law", 2.0)])
def test_sample_mean_converges_to_true_mean(law, a, fields):
    """n ||mean - mu||^2 has expectation tr(Sigma) and variance ~ 2 tr(Sigma^2).

    Sigma is block diagonal with blocks v^2 (diag(p) - p p^T) per field, so both traces
    are exact; we accept 6 standard deviations of the (near-Gaussian) weighted chi^2.
    """
    n, d, s, norm = 200_000, 1000, 10, 1.5
    X, mu = make_sparse_vectors(n, d, s, column_distribution=law, power_law_exponent=a,
                                norm=norm, random_state=42)
    v = norm / np.sqrt(s)
    field, _ = fields(d, s)
    p = mu / v
    sum_p2 = np.bincount(field, weights=p**2)
    sum_p3 = np.bincount(field, weights=p**3)
    trace = v**2 * np.sum(1 - sum_p2)
    trace_sq = v**4 * np.sum(sum_p2 - 2 * sum_p3 + sum_p2**2)
    assert np.isclose(trace, norm**2 - mu @ mu)
    err = np.asarray(X.mean(axis=0)).ravel() - mu
    stat = n * (err @ err)
    assert abs(stat - trace) <= 6 * np.sqrt(2 * trace_sq), (stat, trace, trace_sq)
    # Coordinatewise: every z-score below 6 (d = 1000 of them).
    z = err * np.sqrt(n) / np.sqrt(np.maximum(mu * (v - mu), 1e-300))
    assert np.max(np.abs(z[mu > 0])) < 6


def test_column_frequencies_match_by_chi_square(fields):
    n, d, s = 50_000, 60, 3
    X, mu = make_sparse_vectors(n, d, s, column_distribution="power_law",
                                power_law_exponent=1.3, random_state=7)
    counts = np.bincount(X.indices, minlength=d)
    field, _ = fields(d, s)
    expected = mu * np.sqrt(s) * n  # n * p_j
    for f in range(s):
        sel = field == f
        assert stats.chisquare(counts[sel], expected[sel]).pvalue > 1e-4


def test_deterministic_for_int_seed():
    kw = dict(column_distribution="power_law", random_state=123)
    X1, mu1 = make_sparse_vectors(300, 500, 8, **kw)
    X2, mu2 = make_sparse_vectors(300, 500, 8, **kw)
    for attr in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(X1, attr), getattr(X2, attr))
    np.testing.assert_array_equal(mu1, mu2)
    X3, mu3 = make_sparse_vectors(300, 500, 8, column_distribution="power_law",
                                  random_state=124)
    assert not np.array_equal(X1.indices, X3.indices)
    assert not np.array_equal(mu1, mu3)
    # Uniform: the mean does not depend on the seed, the rows do.
    Xa, mua = make_sparse_vectors(300, 500, 8, random_state=1)
    Xb, mub = make_sparse_vectors(300, 500, 8, random_state=2)
    np.testing.assert_array_equal(mua, mub)
    assert not np.array_equal(Xa.indices, Xb.indices)


def test_true_mean_does_not_depend_on_n_samples():
    _, mu1 = make_sparse_vectors(10, 500, 8, column_distribution="power_law", random_state=3)
    _, mu2 = make_sparse_vectors(70_000, 500, 8, column_distribution="power_law",
                                 random_state=3)
    np.testing.assert_array_equal(mu1, mu2)


def test_generator_and_none_random_state():
    rng = np.random.default_rng(0)
    X1, _ = make_sparse_vectors(100, 400, 4, random_state=rng)
    X2, _ = make_sparse_vectors(100, 400, 4, random_state=rng)
    assert not np.array_equal(X1.indices, X2.indices)  # the generator advanced
    X3, _ = make_sparse_vectors(100, 400, 4, random_state=np.random.default_rng(0))
    np.testing.assert_array_equal(X1.indices, X3.indices)
    Xa, _ = make_sparse_vectors(100, 400, 4, random_state=None)
    Xb, _ = make_sparse_vectors(100, 400, 4, random_state=None)
    assert not np.array_equal(Xa.indices, Xb.indices)


def test_large_embedding_table(assert_sparse_rows, fields):
    n, d, s = 20_000, 2**20, 16
    X, mu = make_sparse_vectors(n, d, s, column_distribution="power_law", random_state=0)
    cols = assert_sparse_rows(X, n, d, s)
    assert X.indices.dtype == np.int32
    field, _ = fields(d, s)
    np.testing.assert_array_equal(field[cols[:50]], np.broadcast_to(np.arange(s), (50, s)))
    # Popular columns are popular: the top column of every field has p = log 2 /
    # log 65537 ~ 0.062 (a = 1, 65536 columns per field), so a row holds about one of the
    # 16 of them; the count has standard error ~ 0.007, the tolerance is 7 of those.
    top = np.argsort(mu)[-s:]
    freq = np.isin(X.indices, top).sum() / n
    np.testing.assert_allclose(freq, mu[top].sum() * np.sqrt(s), rtol=0.05)


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        (dict(n_samples=0), ValueError, "n_samples"),
        (dict(n_samples=2.0), TypeError, "n_samples"),
        (dict(n_samples=True), TypeError, "n_samples"),
        (dict(n_features=0), ValueError, "n_features"),
        (dict(n_nonzeros=0), ValueError, "n_nonzeros"),
        (dict(n_nonzeros=11), ValueError, "n_nonzeros"),
        (dict(n_nonzeros="3"), TypeError, "n_nonzeros"),
        (dict(column_distribution="zipf"), ValueError, "column_distribution"),
        (dict(power_law_exponent=-0.5), ValueError, "power_law_exponent"),
        (dict(power_law_exponent=np.nan), ValueError, "power_law_exponent"),
        (dict(norm=0.0), ValueError, "norm"),
        (dict(norm=np.inf), ValueError, "norm"),
        (dict(random_state="a"), ValueError, "random_state"),
    ],
)
def test_argument_validation(kwargs, exc, name):
    args = dict(n_samples=5, n_features=10, n_nonzeros=3)
    args.update(kwargs)
    with pytest.raises(exc, match=name):
        make_sparse_vectors(**args)


def test_public_api():
    import skdpsparse.datasets as ds

    assert sorted(ds.__all__) == ["central_moment_bound", "load_sparse_digits",
                                  "make_heavy_tailed", "make_sparse_classification",
                                  "make_sparse_regression", "make_sparse_vectors"]
    for name in ds.__all__:
        assert getattr(ds, name).__doc__
