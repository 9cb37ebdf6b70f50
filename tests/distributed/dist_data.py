"""Data shared by the distributed tests."""

import numpy as np
import scipy.sparse as sp


def sparse_rows(n=3000, d=2000, nnz=6, seed=0):
    """Rows with ``nnz`` nonzeros each, some far outside the bound L = 1 (scaled, never
    rejected), as CSR."""
    rng = np.random.default_rng(seed)
    cols = np.concatenate([rng.choice(d, nnz, replace=False) for _ in range(n)])
    vals = rng.standard_normal(n * nnz) * rng.choice([0.1, 1.0, 50.0], n * nnz)
    indptr = np.arange(0, n * nnz + 1, nnz)
    return sp.csr_matrix((vals, cols, indptr), shape=(n, d))
