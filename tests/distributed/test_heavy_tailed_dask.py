"""DPHeavyTailedMean on Dask collections: its two statistics (rank counts and
clipped sums) merge to the in-memory ones exactly, and with ``bounds=`` stated the
release is the in-memory estimator's bit for bit under one noise key."""

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsparse.distributed import _heavy_tailed, fit_distributed
from skdpsparse.mean import DPHeavyTailedMean
from skdpsparse.mechanisms.heavy_tailed_clip import box_clipped_mean
from skdpsparse.mechanisms.quantile import geometric_grid, rank_counts

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")


def _heavy(n=2000, d=12, seed=0, sparse=False):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(2.5, size=(n, d)) * 10 + 3
    if sparse:
        X[rng.random((n, d)) < 0.7] = 0.0
        return sp.csr_matrix(X)
    return X


def _cuts(n, k, seed=0):
    cuts = np.sort(np.random.default_rng(seed).choice(np.arange(1, n), k, replace=False))
    return [0, *cuts.tolist(), n]


@pytest.mark.parametrize("sparse", [False, True])
def test_merged_rank_counts_are_the_in_memory_ones(sparse):
    X = _heavy(sparse=sparse)
    grid = geometric_grid()
    b = _cuts(X.shape[0], 5)
    parts = [_heavy_tailed.partial_rank_counts(X[s:e], grid, X.shape[1], s)
             for s, e in zip(b, b[1:])]
    merged = parts[0]
    for p in parts[1:]:
        merged = _heavy_tailed.merge_rank_counts(merged, p)
    np.testing.assert_array_equal(merged[0], rank_counts(X, grid, strict=True))
    np.testing.assert_array_equal(merged[1], rank_counts(X, grid))


@pytest.mark.parametrize("sparse", [False, True])
def test_merged_clipped_sums_are_the_in_memory_ones(sparse):
    X = _heavy(sparse=sparse)
    n, d = X.shape
    lower, upper = np.full(d, -5.0), np.full(d, 12.0)
    upper[3] = lower[3]  # a zero-width column
    F = _heavy_tailed.clipped_frac_bits(n)
    b = _cuts(n, 4, seed=1)
    parts = [_heavy_tailed.partial_clipped_sums(X[s:e], lower, upper, F, s)
             for s, e in zip(b, b[1:])]
    merged = parts[0]
    for p in parts[1:]:
        merged = _heavy_tailed.merge_clipped(merged, p)
    ref, ref_bits = box_clipped_mean(X, lower, upper)
    assert ref_bits == F
    np.testing.assert_array_equal(_heavy_tailed.clipped_unit_mean(merged, lower, upper, F),
                                  ref)


@pytest.mark.parametrize("noise, delta", [("gaussian", 1e-6), ("laplace", 1e-6),
                                          ("laplace", 0.0)])
def test_stated_bounds_release_is_the_in_memory_one(noise, delta):
    # The same seed: one digest, hence one key, in memory and on Dask.
    X = _heavy(sparse=True)
    kw = dict(bounds=(-5.0, 12.0), noise=noise, delta=delta, random_state=0)
    ref = DPHeavyTailedMean(**kw).fit(X)
    with dask.config.set(scheduler="threads"):
        est = fit_distributed(DPHeavyTailedMean(**kw),
                              da.from_array(X, chunks=(333, 12), asarray=False))
    np.testing.assert_array_equal(est.mean_, ref.mean_)
    np.testing.assert_array_equal(est.noise_scale_, ref.noise_scale_)
    assert est.method_ == ref.method_ == "clipped"
    assert str(est.privacy_spent_) == str(ref.privacy_spent_)


def test_the_located_interval_is_refused_with_the_reason():
    X = da.from_array(_heavy(n=100), chunks=(50, 12))
    with pytest.raises(NotImplementedError, match="bounds"):
        fit_distributed(DPHeavyTailedMean(), X)


def test_nan_in_a_chunk_is_rejected():
    X = _heavy(n=300)
    X[250, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        with dask.config.set(scheduler="threads"):
            fit_distributed(DPHeavyTailedMean(bounds=(-1.0, 1.0)),
                            da.from_array(X, chunks=(100, 12)))
