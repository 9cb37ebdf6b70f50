"""DPSparseMeanEstimator on Dask collections: the same release as in memory.

Bound on the difference: none. The statistic is an exact int64 sum of rows scaled
into the bounds and rounded to 2^-F (``skdpsparse._kernels.fixed_point``), so it is
the same integer vector for every chunking, merge order and scheduler; the mean is
that integer rounded once to float64 and divided by n, and the noise key is derived
from a digest that is the same function of the data for every chunking
(``skdpsparse.utils._digest``). The tests therefore assert bit-identical
releases, not a tolerance.
"""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsparse import BudgetExceededError, PrivacyLedger
from skdpsparse.accounting import PureDP
from skdpsparse.distributed import (
    fit_distributed, fit_sparse_mean_in_memory, is_distributed_input,
)
from skdpsparse.distributed import _core
from skdpsparse.mean import DPSparseMeanEstimator
from skdpsparse.mechanisms.projection import bounded_mean

from dist_data import sparse_rows

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

METHODS = ["threshold", "projection", "gaussian"]
SEED = 918273645546372819  # distinctive, to be looked for in the graphs


def _est(**kw):
    kw.setdefault("sparsity", 6)
    kw.setdefault("random_state", 7)
    return DPSparseMeanEstimator(**kw)


def _dask_csr(X, rows):
    return da.from_array(X, chunks=(rows, X.shape[1]), asarray=False)


def _threads(fn, *args, **kwargs):
    with dask.config.set(scheduler="threads"):
        return fn(*args, **kwargs)


@pytest.mark.parametrize("method", METHODS + ["laplace"])
def test_threaded_release_is_the_in_memory_one_bit_for_bit(method):
    X = sparse_rows()
    delta = 0 if method == "laplace" else 1e-6
    ref = fit_sparse_mean_in_memory(_est(method=method, delta=delta), X)
    for rows in (3000, 1000, 333):  # one chunk, aligned chunks, ragged chunks
        est = _threads(fit_distributed, _est(method=method, delta=delta), _dask_csr(X, rows))
        assert isinstance(est.mean_, np.ndarray)
        np.testing.assert_array_equal(est.mean_, ref.mean_)
        assert est.method_ == ref.method_ == method
        assert str(est.privacy_spent_) == str(ref.privacy_spent_)
        assert est.n_features_in_ == X.shape[1]


def test_dense_chunks_and_dataframes_give_the_release_of_the_dense_matrix():
    # The key's digest tags the container the fit reads (dense or sparse: another
    # compiled loop), in memory and on Dask alike: the dense chunks and the dataframe
    # reproduce the in-memory fit of the dense array.
    X = sparse_rows(n=900, d=40).toarray()
    ref = _est().fit(X)
    dense = da.from_array(X, chunks=(250, 40))
    np.testing.assert_array_equal(_threads(fit_distributed, _est(), dense).mean_, ref.mean_)
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(X, columns=[f"c{j}" for j in range(40)])
    est = _threads(fit_distributed, _est(), dd.from_pandas(frame, npartitions=3))
    np.testing.assert_array_equal(est.mean_, ref.mean_)
    assert list(est.feature_names_in_) == list(frame.columns)


def test_the_same_seed_gives_the_in_memory_estimator_bit_for_bit():
    # One digest for both paths (skdpsparse.utils._digest): the same seed gives
    # the same key, and the statistic, the noise and the post-processing are the
    # in-memory estimator's.
    X = sparse_rows()
    for method in METHODS:
        ref = _est(method=method).fit(X)
        est = _threads(fit_distributed, _est(method=method), _dask_csr(X, 700))
        np.testing.assert_array_equal(est.mean_, ref.mean_)


def test_the_merged_statistic_is_the_in_memory_bounded_mean_exactly():
    X = sparse_rows()
    from skdpsparse.distributed._dask import compute_bounded_sum, row_chunks

    chunks, shape, _ = row_chunks(_dask_csr(X, 412))
    plan = _core.sparse_mean_plan(*shape, 1.0, 6)
    part = _threads(compute_bounded_sum, chunks, plan)
    mean = np.ldexp(part.sums.astype(np.float64), -plan.frac_bits) / shape[0]
    np.testing.assert_array_equal(mean, bounded_mean(X, 1.0, 6))


def test_process_cluster_release_is_the_in_memory_one(process_client):
    X = sparse_rows()
    ref = fit_sparse_mean_in_memory(_est(), X)
    est = fit_distributed(_est(), _dask_csr(X, 500))
    np.testing.assert_array_equal(est.mean_, ref.mean_)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_every_chunk_rejects_nan_and_inf_and_nothing_is_released(bad):
    X = sparse_rows(n=1200).tolil()
    X[1100, 3] = bad  # in the last chunk only
    est = _est()
    with pytest.raises(ValueError, match="NaN|infinity"):
        _threads(fit_distributed, est, _dask_csr(X.tocsr(), 300))
    assert not hasattr(est, "mean_") and not hasattr(est, "n_features_in_")
    dense = X.toarray()
    with pytest.raises(ValueError, match="NaN|infinity"):
        _threads(fit_distributed, _est(), da.from_array(dense, chunks=(300, dense.shape[1])))
    with pytest.raises(ValueError, match="NaN|infinity"):  # the same error in memory
        _est().fit(X.tocsr())


def test_a_refused_fit_releases_nothing():
    est = _est()
    with PrivacyLedger(limit=PureDP(1e-9)):
        with pytest.raises(BudgetExceededError):
            _threads(fit_distributed, est, _dask_csr(sparse_rows(n=500), 100))
    assert [k for k in vars(est) if k.endswith("_")] == []


def test_sequential_estimators_refuse_a_dask_input_and_say_why():
    from skdpsparse.linear_model import DPBiasReducedSGDRegressor, DPNoisySGDClassifier

    X = _dask_csr(sparse_rows(n=200), 100)
    for est in (DPNoisySGDClassifier(), DPBiasReducedSGDRegressor()):
        with pytest.raises(ValueError, match="decompose"):
            fit_distributed(est, X, np.zeros(200))


def _planted_rows(n, d, seed=0):
    """Rows near a 4-sparse common vector (so the mean is worth recovering)."""
    rng = np.random.default_rng(seed)
    cols = np.concatenate([np.r_[0:4, rng.integers(4, d, 2)] for _ in range(n)])
    vals = np.tile([0.5, 0.5, -0.5, 0.4, 0.1, 0.1], n) * (1 + 0.1 * rng.standard_normal(6 * n))
    return sp.csr_matrix((vals, cols, np.arange(0, 6 * n + 1, 6)), shape=(n, d))


@pytest.mark.parametrize("d, branch", [(2**18, "l1_recovery"), (2**15, "gaussian")])
def test_l1_recovery_gives_the_in_memory_release(d, branch):
    # Compressed-sensing branch: a digest pass, the operator from the key's public
    # stream shipped to the workers, a measurement pass, the release on the driver.
    # The measurement totals are float sums (summation order differs; the bound is in
    # _sparse_mean._fit_l1_recovery): the releases agree whenever the totals round to
    # the same noise grid, as here. Below d ≥ m ln² m: the Gaussian branch, exact.
    X = _planted_rows(3000, d)
    est = lambda: _est(method="l1_recovery", epsilon=0.3)  # noqa: E731
    ref = est().fit(X)
    assert ref.method_ == branch
    for rows in (3000, 1000, 333):
        fitted = _threads(fit_distributed, est(), _dask_csr(X, rows))
        np.testing.assert_array_equal(fitted.mean_, ref.mean_)
        assert fitted.method_ == branch
        assert getattr(fitted, "n_iter_", None) == getattr(ref, "n_iter_", None)
    assert np.abs(ref.mean_[:4] - [0.5, 0.5, -0.5, 0.4]).max() < 0.2


def test_l1_recovery_measurement_pass_ships_the_public_operator_only(monkeypatch):
    from skdpsparse.distributed import _sparse_mean
    from skdpsparse.mechanisms.l1_recovery import sensing_operator

    seen = {}
    original = _sparse_mean.sensing_operator

    def spy(d, m, rng):
        seen["operator"] = op = original(d, m, rng)
        seen["draws_before"] = rng._draws
        return op

    monkeypatch.setattr(_sparse_mean, "sensing_operator", spy)
    blobs = []
    original_compute = dask.compute

    def record(*collections, **kw):
        for c in collections:
            if hasattr(c, "__dask_graph__"):
                blobs.append(pickle.dumps(dict(c.__dask_graph__())))
        return original_compute(*collections, **kw)

    monkeypatch.setattr(dask, "compute", record)
    X = _planted_rows(3000, 2**18)
    _threads(fit_distributed, _est(method="l1_recovery", epsilon=0.3, random_state=SEED),
             _dask_csr(X, 1000))
    assert seen["draws_before"] == 0  # drawing the operator used no noise draw
    for blob in blobs:
        for forbidden in (b"RandomSource", b"random_state", b"DPSparseMeanEstimator",
                          b"add_discrete_noise", str(SEED).encode(),
                          SEED.to_bytes(8, "little")):
            assert forbidden not in blob, forbidden
    assert any(b"SubsampledHadamardSensing" in blob for blob in blobs)
    assert sensing_operator  # the public function the spy wraps


def test_is_distributed_input():
    X = sparse_rows(n=10)
    assert is_distributed_input(_dask_csr(X, 5))
    assert not is_distributed_input(X) and not is_distributed_input(X.toarray())


def test_a_chunk_that_lies_about_its_size_is_refused():
    # n (hence F and the noise) comes from the chunk sizes the metadata declares.
    X = da.from_array(np.ones((10, 3)), chunks=(5, 3))
    X = X.map_blocks(lambda b: np.ones((b.shape[0] + 1, 3)), dtype=float)
    with pytest.raises(ValueError, match="metadata said"):
        _threads(fit_distributed, _est(), X)


def test_the_fitted_attributes_are_those_of_an_in_memory_fit():
    X = sparse_rows(n=600, d=40)
    for kw in ({}, {"output": "sparse"}, {"method": "laplace", "delta": 0}):
        mem = _est(**kw).fit(X)
        dist = _threads(fit_distributed, _est(**kw), _dask_csr(X, 250))
        assert set(vars(dist)) == set(vars(mem))
        assert type(dist.mean_) is type(mem.mean_)
    from skdpsparse.mean import DPHeavyTailedMean

    dense = X.toarray()
    mem = DPHeavyTailedMean(bounds=(-1.0, 1.0)).fit(dense)
    dist = _threads(fit_distributed, DPHeavyTailedMean(bounds=(-1.0, 1.0)),
                    da.from_array(dense, chunks=(250, 40)))
    assert set(vars(dist)) == set(vars(mem))
