"""Shared checks for the dataset tests."""

import numpy as np
import pytest
import scipy.sparse as sp


def _assert_sparse_rows(X, n_samples, n_features, n_nonzeros):
    """X is canonical float64 CSR with exactly ``n_nonzeros`` distinct columns per row."""
    assert sp.issparse(X) and X.format == "csr"
    assert X.dtype == np.float64
    assert X.shape == (n_samples, n_features)
    assert X.nnz == n_samples * n_nonzeros
    np.testing.assert_array_equal(np.diff(X.indptr), n_nonzeros)
    cols = X.indices.reshape(n_samples, n_nonzeros).astype(np.int64)
    assert cols.min() >= 0 and cols.max() < n_features
    if n_nonzeros > 1:
        assert np.all(np.diff(cols, axis=1) > 0), "columns not strictly increasing in a row"
    assert np.all(X.data != 0)
    # Canonical format, checked from the arrays rather than from scipy's cached flag.
    Y = X.copy()
    Y.has_canonical_format = False
    Y.sum_duplicates()
    np.testing.assert_array_equal(Y.indices, X.indices)
    np.testing.assert_array_equal(Y.indptr, X.indptr)
    assert X.has_canonical_format
    return cols


@pytest.fixture
def assert_sparse_rows():
    return _assert_sparse_rows


def field_of_column(n_features, n_nonzeros):
    """Field index of every column under the documented layout."""
    base, rem = divmod(n_features, n_nonzeros)
    sizes = np.array([base + 1] * rem + [base] * (n_nonzeros - rem))
    return np.repeat(np.arange(n_nonzeros), sizes), sizes


@pytest.fixture
def fields():
    return field_of_column
