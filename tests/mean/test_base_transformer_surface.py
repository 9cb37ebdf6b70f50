"""The private means as scikit-learn transformers: feature names out, pandas output
(per estimator and global), sparse input refused with a clear error (centering would
densify it, as scikit-learn's StandardScaler(with_mean=True) refuses), pipelines."""

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn
from sklearn.pipeline import make_pipeline

from skdpsparse.mean import DPHeavyTailedMean, DPSparseMeanEstimator

pd = pytest.importorskip("pandas")
pytestmark = pytest.mark.filterwarnings("ignore:n=.* rows are too few:UserWarning")

ESTIMATORS = [
    lambda: DPHeavyTailedMean(epsilon=2.0, bounds=(-10.0, 10.0), random_state=0),
    lambda: DPHeavyTailedMean(epsilon=2.0, random_state=0),
    lambda: DPSparseMeanEstimator(epsilon=2.0, random_state=0),
]
IDS = ["heavy_tailed_bounds", "heavy_tailed_private_clip", "sparse_mean"]


def _frame(n=3000, d=3):
    X = np.random.default_rng(0).standard_t(3, size=(n, d)) / 10.0
    return pd.DataFrame(X, columns=[f"col_{j}" for j in range(d)])


@pytest.mark.parametrize("make", ESTIMATORS, ids=IDS)
def test_feature_names_out_follow_the_input(make):
    X = _frame()
    est = make().fit(X)
    np.testing.assert_array_equal(est.get_feature_names_out(), X.columns.to_numpy())
    np.testing.assert_array_equal(est.get_feature_names_out(list(X.columns)),
                                  X.columns.to_numpy())
    with pytest.raises(ValueError, match="input_features"):
        est.get_feature_names_out(["a", "b", "c"])
    plain = make().fit(X.to_numpy())
    np.testing.assert_array_equal(plain.get_feature_names_out(), ["x0", "x1", "x2"])


@pytest.mark.parametrize("make", ESTIMATORS, ids=IDS)
def test_set_output_pandas_gives_the_centered_frame(make):
    X = _frame()
    est = make().fit(X)
    expected = X.to_numpy() - np.asarray(est.mean_).ravel()
    out = est.set_output(transform="pandas").transform(X)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == list(X.columns)
    np.testing.assert_allclose(out.to_numpy(), expected)
    assert list(out.index) == list(X.index)
    back = est.set_output(transform="default").transform(X)
    assert isinstance(back, np.ndarray)
    np.testing.assert_allclose(back, expected)


@pytest.mark.parametrize("make", ESTIMATORS, ids=IDS)
def test_global_transform_output_config(make):
    X = _frame()
    with sklearn.config_context(transform_output="pandas"):
        est = make()
        out = est.fit_transform(X)
        assert isinstance(out, pd.DataFrame)
        assert list(out.columns) == list(X.columns)
        np.testing.assert_allclose(out.to_numpy(), X.to_numpy() - np.asarray(est.mean_).ravel())
        piped = make_pipeline(make()).fit_transform(X)
        assert isinstance(piped, pd.DataFrame)


@pytest.mark.parametrize("make", ESTIMATORS, ids=IDS)
def test_sparse_input_fits_but_transform_refuses_to_densify(make):
    X = sp.csr_matrix(_frame().to_numpy() * (np.arange(3000)[:, None] % 3 == 0))
    est = make().fit(X)  # fit reads sparse rows without densifying
    assert np.asarray(est.mean_).ravel().shape == (3,)
    with pytest.raises(ValueError, match="Cannot center sparse matrices"):
        est.transform(X)
    dense = est.transform(X.toarray())
    np.testing.assert_allclose(dense, X.toarray() - np.asarray(est.mean_).ravel())
