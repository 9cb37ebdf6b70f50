"""Compiled passes of the certified ERM solver (:mod:`skdpsparse._solvers.erm`) and the
loss sums of the sparse exponential mechanism's net.

Solver passes
-------------
:func:`loss_curvatures` gives the second derivatives ℓ'' of the losses at given margins
(the Hessian-vector products of the solver's Newton-CG steps); :func:`column_counts`
and :func:`max_abs_entry` give the stored entries per column and the largest entry of
a chunk of rows, which size the fixed-point grid of the exact sums.

Net loss sums
-------------
:func:`csc_net_loss_sums` scores every point of a net of sparse vectors
(:mod:`skdpsparse.mechanisms.sparse_exponential`): for every support and every value
vector on it, :math:`\\sum_i \\ell(\\langle \\theta, x_i\\rangle, y_i)`, touching only the
rows with a nonzero in the support.
"""

import math

import numpy as np
import scipy.sparse as sp
from numba import njit

from .linear_losses import HUBER, LOGISTIC, SMOOTHED_HINGE, SQUARED, check_loss, loss_value

__all__ = ["column_counts", "csc_net_loss_sums", "loss_curvatures", "max_abs_entry"]


@njit(cache=True)
def loss_curvatures(margins, y, code, param):
    """Second derivatives ℓ''(zᵢ, yᵢ) in the margin (labels ±1 for classification).

    Squared 1; logistic σ(t)σ(−t) with t = yz; smoothed hinge 1/h for 1 − h < t < 1,
    else 0; Huber 1 for |z − y| ≤ κ, else 0 (one-sided values at the kinks).
    """
    check_loss(code, param)
    out = np.empty(margins.shape[0])
    for i in range(margins.shape[0]):
        z = margins[i]
        yi = np.float64(y[i])
        if code == SQUARED:
            out[i] = 1.0
        elif code == LOGISTIC:
            e = math.exp(-abs(yi * z))
            out[i] = e / ((1.0 + e) * (1.0 + e))
        elif code == SMOOTHED_HINGE:
            t = yi * z
            out[i] = 1.0 / param if 1.0 - param < t < 1.0 else 0.0
        elif code == HUBER:
            out[i] = 1.0 if abs(z - yi) <= param else 0.0
        else:
            raise ValueError("loss_curvatures: no second derivative for this loss")
    return out


@njit(cache=True)
def _index_counts(indices, d):
    out = np.zeros(d, dtype=np.int64)
    for k in range(indices.shape[0]):
        j = indices[k]
        if j < 0 or j >= d:
            raise ValueError("a CSR column index is out of range")
        out[j] += 1
    return out


def column_counts(X):
    """Entries per column that a pass reads: stored entries of a CSR matrix, nonzeros
    of a dense array (int64 of shape (d,))."""
    if sp.issparse(X):
        # np.bincount first converts int32 indices to intp: 3× the time of this loop.
        return _index_counts(X.indices, X.shape[1])
    X = np.asarray(X)
    if X.ndim == 2 and X.flags.c_contiguous:
        return _dense_nonzero_counts(X)
    return np.count_nonzero(X, axis=0).astype(np.int64)


@njit(cache=True)
def _max_abs_nb(values):
    m = 0.0
    for k in range(values.shape[0]):
        a = abs(np.float64(values[k]))
        if not a <= m:  # NaN propagates
            m = a
    return m


def max_abs_entry(X):
    """max |x_ij| over the stored entries of a CSR matrix or a dense array (0.0 if
    empty; NaN if any entry is NaN), without a temporary copy."""
    if sp.issparse(X):
        return float(_max_abs_nb(X.data))
    X = np.asarray(X)
    flat = X.reshape(-1) if X.flags.c_contiguous else np.ravel(X, order="K")
    return float(_max_abs_nb(flat))


@njit(cache=True)
def _dense_nonzero_counts(X):
    # np.count_nonzero(X, axis=0) reduces along the strided axis: 3× this row-wise loop.
    out = np.zeros(X.shape[1], dtype=np.int64)
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            out[j] += X[i, j] != 0
    return out


@njit(cache=True)
def csc_net_loss_sums(indptr, indices, data, n_rows, supports, values, y, code, param):
    """Σᵢ ℓ(⟨θ, xᵢ⟩, yᵢ) for every θ with support ``supports[a]`` and values ``values[v]``.

    Parameters
    ----------
    indptr, indices, data : CSC parts of X (n_rows × p)
    n_rows : int
    supports : ndarray of shape (n_supports, j), int64
        Column indices of each support (distinct within a row).
    values : ndarray of shape (n_values, j), float64
        Values of θ on the support, in the order of the support's columns.
    y : ndarray of shape (n_rows,)
    code, param : int, float
        Loss code and parameter.

    Returns
    -------
    ndarray of shape (n_supports, n_values), float64
        Entry (a, v): the summed loss of θ with θ[supports[a]] = values[v], 0 elsewhere.
    """
    check_loss(code, param)
    n_sup, j = supports.shape
    n_val = values.shape[0]
    base = 0.0  # Σᵢ ℓ(0, yᵢ): rows outside the support's columns keep margin 0
    zero_loss = np.empty(n_rows)
    for i in range(n_rows):
        zero_loss[i] = loss_value(code, 0.0, y[i], param)
        base += zero_loss[i]
    out = np.empty((n_sup, n_val))
    buf = np.zeros((n_rows, j))
    touched = np.zeros(n_rows, dtype=np.bool_)
    rows = np.empty(n_rows, dtype=np.int64)
    for a in range(n_sup):
        m = 0
        for t in range(j):
            col = supports[a, t]
            for k in range(indptr[col], indptr[col + 1]):
                i = indices[k]
                buf[i, t] = data[k]
                if not touched[i]:
                    touched[i] = True
                    rows[m] = i
                    m += 1
        for v in range(n_val):
            total = base
            for r in range(m):
                i = rows[r]
                z = 0.0
                for t in range(j):
                    z += buf[i, t] * values[v, t]
                total += loss_value(code, z, y[i], param) - zero_loss[i]
            out[a, v] = total
        for r in range(m):
            i = rows[r]
            touched[i] = False
            for t in range(j):
                buf[i, t] = 0.0
    return out
