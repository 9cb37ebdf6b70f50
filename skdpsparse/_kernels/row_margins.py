"""Margins of selected dense rows, each a function of its row alone.

A noisy-gradient step charges the sensitivity of a batch sum under replacing one row
(a batch B against B − i + k). That bound holds for the sums as computed only if each
row's contribution is the same function of the row in every batch that holds it. A
BLAS product ``X[idx] @ W`` breaks this in the last bits: its micro-kernels work on
panels of rows, and a row's dot products are accumulated in an order that depends on
its position in the batch (the edge of a panel takes another kernel). Here every margin
⟨x_i, w_k⟩ is a strict left-to-right sum over the features (compiled without
``fastmath``, so the compiler may not reassociate it), read straight from row
``idx[r]`` of ``X``: its value depends on row i and W only, never on the batch.
"""

import numpy as np
from numba import njit

__all__ = ["dense_row_margins"]


@njit(cache=True)
def _dense_row_margins_nb(X, idx, W, out):
    d, k = W.shape
    for r in range(idx.shape[0]):
        i = idx[r]
        for c in range(k):
            total = 0.0
            for j in range(d):  # left to right: the same floats in every batch
                total += X[i, j] * W[j, c]
            out[r, c] = total
    return out


def dense_row_margins(X, idx, W):
    """``X[idx] @ W`` with each row's margins summed left to right over the features.

    Parameters
    ----------
    X : ndarray of shape (n, d), float32 or float64
    idx : ndarray of shape (b,), integer
        The rows to read, in any order.
    W : ndarray of shape (d, k), float64

    Returns
    -------
    ndarray of shape (b, k), float64
        Row r is row ``idx[r]`` of ``X`` times ``W``; it does not depend on r nor on
        the other entries of ``idx``.
    """
    X = np.ascontiguousarray(X)
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    W = np.ascontiguousarray(W, dtype=np.float64)
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    if X.ndim != 2 or W.ndim != 2 or X.shape[1] != W.shape[0]:
        raise ValueError(f"shapes {X.shape} and {W.shape} do not multiply")
    if idx.size and (idx.min() < 0 or idx.max() >= X.shape[0]):
        raise ValueError("idx out of range")
    return _dense_row_margins_nb(X, idx, W, np.empty((idx.size, W.shape[1])))
