"""Loops of the bias-reduced SGD (Ghazi et al. 2024, Algorithms 5-6): per-example gradient rows
of a linear model, and the fused combine-step-project-average update.

Per-example gradients of a linear model are ℓ'(z_i, y_i)·x_i (the intercept is a
constant column of ``X``), so the gradient rows of a CSR batch are the batch's rows
with their data scaled by ℓ'_i: same ``indptr`` and ``indices``, never a dense n × d
matrix. Nothing here draws noise or makes a privacy decision. Rows are bounded by the
caller (the estimators scale them into their declared norm bounds before anything
else); the margins are those of :mod:`.linear_losses`, never NaN for finite rows.
"""

import math

import numpy as np
from numba import njit

from .linear_losses import _csr_margin, _dense_margin, check_loss, loss_value_and_derivative

__all__ = ["csr_gradient_rows", "dense_gradient_rows", "bias_reduced_step"]


@njit(cache=True, nogil=True)
def csr_gradient_rows(indptr, indices, data, y, w, code, param, rows):
    """CSR parts of the per-example gradients ℓ'(⟨w, x_i⟩, y_i)·x_i for i in ``rows``.

    Parameters
    ----------
    indptr, indices, data : CSR parts of X (n_cols == len(w))
    y : ndarray of shape (n_rows,)
    w : ndarray of shape (n_cols,)
        The parameters; the margin has no separate intercept (use a constant column).
    code, param : loss code and parameter (see :mod:`.linear_losses`)
    rows : ndarray of int
        Row indices, in the order of the output rows (repeats allowed).

    Returns
    -------
    g_indptr : ndarray of int64, shape (len(rows) + 1,)
    g_indices : ndarray, dtype of ``indices``
    g_data : ndarray of float64
    """
    check_loss(code, param)
    m = rows.shape[0]
    n = indptr.shape[0] - 1
    g_indptr = np.empty(m + 1, dtype=np.int64)
    g_indptr[0] = 0
    for r in range(m):
        i = rows[r]
        if i < 0 or i >= n:
            raise IndexError("rows holds an index out of range")
        g_indptr[r + 1] = g_indptr[r] + (indptr[i + 1] - indptr[i])
    g_indices = np.empty(g_indptr[m], dtype=indices.dtype)
    g_data = np.empty(g_indptr[m], dtype=np.float64)
    for r in range(m):
        i = rows[r]
        start, stop = np.uint64(indptr[i]), np.uint64(indptr[i + 1])
        z = _csr_margin(indptr, indices, data, i, w, 0.0)  # never NaN for finite rows
        der = loss_value_and_derivative(code, z, y[i], param)[1]
        out = g_indptr[r]
        for k in range(start, stop):
            g_indices[out] = indices[k]
            g_data[out] = der * np.float64(data[k])
            out += 1
    return g_indptr, g_indices, g_data


@njit(cache=True, nogil=True)
def dense_gradient_rows(X, y, w, code, param, rows):
    """Dense (len(rows), n_cols) array of the per-example gradients ℓ'_i·x_i."""
    check_loss(code, param)
    m, d = rows.shape[0], X.shape[1]
    out = np.empty((m, d), dtype=np.float64)
    for r in range(m):
        i = rows[r]
        z = _dense_margin(X, i, w, 0.0)  # never NaN for finite rows
        der = loss_value_and_derivative(code, z, y[i], param)[1]
        for j in range(d):
            out[r, j] = der * np.float64(X[i, j])
    return out


@njit(cache=True, nogil=True)
def bias_reduced_step(x, g_batch, g_odd, g_even, g_single, inv_p, eta, radius, total):
    """One step of Ghazi et al. (2024) Algorithm 6 with the estimate of Algorithm 5, in place.

    x ← Π_{‖·‖₂ ≤ radius}(x − η·𝒢) with 𝒢 = (g_batch − (g_odd + g_even)/2)·inv_p
    + g_single, then ``total += x`` (the running sum of the average iterate). Two
    passes over x: the update with its squared norm, then the scaling (only if the
    norm exceeds ``radius``; ``inf`` means ℝᵈ) fused with the accumulation.

    Returns
    -------
    float
        The norm of x after the step.
    """
    d = x.shape[0]
    sq = 0.0
    for j in range(d):
        g = (g_batch[j] - 0.5 * (g_odd[j] + g_even[j])) * inv_p + g_single[j]
        v = x[j] - eta * g
        x[j] = v
        sq += v * v
    norm = math.sqrt(sq)
    scale = radius / norm if norm > radius else 1.0
    for j in range(d):
        v = x[j] * scale
        x[j] = v
        total[j] += v
    return norm * scale
