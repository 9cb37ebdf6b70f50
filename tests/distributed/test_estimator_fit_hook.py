"""``estimator.fit`` on a Dask collection runs the distributed fit (nothing is pulled
into memory by scikit-learn's validation), and the estimators whose statistic does
not decompose refuse it with the reason."""

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsparse import (
    DPBiasReducedSGDClassifier,
    DPCyclicSGD,
    DPNoisySGDClassifier,
    DPOutputPerturbationClassifier,
    DPSparseMeanEstimator,
)
from skdpsparse.distributed import fit_distributed

da = pytest.importorskip("dask.array")


def _dask_csr(n=400, d=64, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.05, random_state=seed, format="csr") * 0.1
    X.data = np.abs(X.data) + rng.random(X.nnz) * 0.01
    chunks = [X[i:i + 100] for i in range(0, n, 100)]
    return da.concatenate([da.from_array(c, chunks=c.shape, asarray=False) for c in chunks])


def test_fit_on_a_dask_array_is_the_distributed_fit():
    X = _dask_csr()
    est = DPSparseMeanEstimator(epsilon=1.0, delta=1e-6, sparsity=8, method="gaussian",
                                random_state=3)
    fitted = est.fit(X)
    assert fitted is est and isinstance(est.mean_, np.ndarray)
    reference = fit_distributed(DPSparseMeanEstimator(epsilon=1.0, delta=1e-6, sparsity=8,
                                                      method="gaussian", random_state=3), X)
    np.testing.assert_array_equal(est.mean_, reference.mean_)
    assert est.privacy_spent_ == reference.privacy_spent_


@pytest.mark.parametrize("make", [
    lambda: DPNoisySGDClassifier(classes=[0, 1]),
    lambda: DPBiasReducedSGDClassifier(classes=[0, 1]),
])
def test_sequential_estimators_refuse_a_dask_array_with_the_reason(make):
    X = _dask_csr()
    y = da.from_array(np.arange(X.shape[0]) % 2, chunks=100)
    with pytest.raises(ValueError, match="decompose"):
        make().fit(X, y)


def test_cyclic_sgd_says_what_its_distributed_fit_needs():
    # Its own tests: test_cyclic_sgd_dask.py. Through fit: the secret shuffle and
    # small batches (each step is a round trip) are refused with the reason.
    X = _dask_csr()
    y = da.from_array(np.arange(X.shape[0]) % 2, chunks=100)
    with pytest.raises(NotImplementedError, match="shuffle=False"):
        DPCyclicSGD(classes=[0, 1]).fit(X, y)
    with pytest.raises(ValueError, match="large batches only"):
        DPCyclicSGD(classes=[0, 1], shuffle=False).fit(X, y)


def test_heavy_tailed_regressor_fits_a_dask_array_through_its_fit():
    from skdpsparse import DPHeavyTailedRegressor

    X = _dask_csr()
    y = da.from_array(np.zeros(X.shape[0]), chunks=100)
    est = DPHeavyTailedRegressor(radius=1.0, max_iter=3, random_state=0).fit(X, y)
    assert isinstance(est.coef_, np.ndarray) and est.coef_.shape == (X.shape[1],)
    assert isinstance(est.intercept_, float) and est.n_iter_ == 3


def test_output_perturbation_fits_a_dask_array_through_its_fit():
    X = _dask_csr()
    y = da.from_array(np.arange(X.shape[0]) % 2, chunks=100)
    est = DPOutputPerturbationClassifier(classes=[0, 1], random_state=0).fit(X, y)
    assert isinstance(est.coef_, np.ndarray) and est.coef_.shape == (1, X.shape[1])
    ref = DPOutputPerturbationClassifier(classes=[0, 1], random_state=0).fit(
        X.compute(), np.arange(X.shape[0]) % 2)
    np.testing.assert_array_equal(est.coef_, ref.coef_)
