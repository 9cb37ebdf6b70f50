"""The threaded bounded column sum equals the single-threaded kernel and SciPy."""

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsparse import _kernels


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_threaded_bounded_sum_matches_reference(n_threads):
    rng = np.random.default_rng(0)
    n, d, per_row = 140_000, 5000, 16  # 2.24 M entries: above the threading threshold
    rows = np.repeat(np.arange(n), per_row)
    cols = rng.integers(0, d, size=n * per_row)
    vals = rng.standard_t(2, size=n * per_row)
    X = sp.csr_matrix((vals, (rows, cols)), shape=(n, d))
    X.sum_duplicates()
    l2, l1 = 1.0, 2.5
    out = _kernels.csr_bounded_column_sum_threaded(X.indptr, X.indices, X.data, d, l2, l1,
                                                   n_threads=n_threads)
    norms2 = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    norms1 = np.asarray(abs(X).sum(axis=1)).ravel()
    with np.errstate(divide="ignore"):
        scales = np.minimum(1.0, np.minimum(l2 / norms2, l1 / norms1))
    expected = \
        np.asarray((sp.diags(scales) @ X).sum(axis=0)).ravel()
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-10)
    single = _kernels.csr_bounded_column_sum(X.indptr, X.indices, X.data, d, l2, l1)
    np.testing.assert_allclose(out, single, rtol=1e-12, atol=1e-12)
