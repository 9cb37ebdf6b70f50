import numpy as np
import pytest
import scipy.sparse as sp

from skdpsparse._kernels.erm_passes import column_counts


def test_column_counts_are_the_stored_entries_per_column():
    rng = np.random.default_rng(0)
    X = sp.random(200, 37, density=0.2, random_state=rng, format="csr")
    X.data[::7] = 0.0  # explicit zeros are stored entries: a pass reads them
    np.testing.assert_array_equal(column_counts(X), np.bincount(X.indices, minlength=37))
    assert column_counts(X).dtype == np.int64
    Xl = sp.csr_matrix((X.data, X.indices.astype(np.int64), X.indptr.astype(np.int64)),
                       shape=X.shape)
    np.testing.assert_array_equal(column_counts(Xl), column_counts(X))
    dense = X.toarray()
    dense[3, 4] = np.nan  # NaN is nonzero, as for np.count_nonzero
    for arr in (dense, dense.astype(np.float32), np.asfortranarray(dense)):
        np.testing.assert_array_equal(column_counts(arr), (arr != 0).sum(axis=0))
        assert column_counts(arr).dtype == np.int64


def test_column_counts_refuse_an_index_out_of_range():
    X = sp.csr_matrix((np.ones(2), np.array([0, 5], dtype=np.int32), np.array([0, 1, 2])),
                      shape=(2, 5), copy=False)
    with pytest.raises(ValueError, match="out of range"):
        column_counts(X)
