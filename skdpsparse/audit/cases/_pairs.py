"""Neighbouring pairs shared by several case families."""

import numpy as np
import scipy.sparse as sp


def sparse_pair(n, d, L, seed=0):
    """CSR pair: n - 1 rows with one entry ±L/2 on columns 1..d-1; row 0 is -10L·e₀ in
    D and +10L·e₀ in D' (column 0 touched by no other row; both far outside the ℓ2
    bound L, so bounding must scale them to ∓L: the largest possible change)."""
    rng = np.random.default_rng(seed)
    cols = np.concatenate([[0], rng.integers(1, d, n - 1)])
    vals = np.concatenate([[-10.0 * L], rng.choice([-0.5, 0.5], n - 1) * L])
    X0 = sp.csr_matrix((vals, (np.arange(n), cols)), shape=(n, d))
    X1 = X0.copy()
    X1.data[0] = 10.0 * L
    return X0, X1


def dense_pair(rows, target):
    """``rows`` with row 0 set to -``target`` (D) and +``target`` (D')."""
    X0, X1 = rows.copy(), rows.copy()
    X0[0], X1[0] = -target, target
    return X0, X1


def linear_pair(n, d, R, classification=False, seed=0):
    """CSR pair of a linear model: rows 1..n-1 have one entry ±R/2 on columns 1..d-1
    and ordinary targets (N(0, 1), or random ±1 labels); row 0 is 10R·e₀ (column 0
    touched by no other row; bounding scales it to R·e₀) with the extreme target -10⁶
    in D and +10⁶ in D' (labels -1 and +1 for a classifier). Its gradient then
    saturates the bound of the loss with opposite signs in D and D' and, without an
    intercept, nothing else moves coordinate 0 of the model.

    Returns ``((X, y), (X, y'))``.
    """
    rng = np.random.default_rng(seed)
    cols = np.concatenate([[0], rng.integers(1, d, n - 1)])
    vals = np.concatenate([[10.0 * R], rng.choice([-0.5, 0.5], n - 1) * R])
    X = sp.csr_matrix((vals, (np.arange(n), cols)), shape=(n, d))
    y = rng.choice([-1.0, 1.0], n) if classification else rng.standard_normal(n)
    y0, y1 = y.copy(), y.copy()
    y0[0], y1[0] = (-1.0, 1.0) if classification else (-1e6, 1e6)
    return (X, y0), (X, y1)


def finite(value, sentinel=1e300):
    """The attack statistic of a release that may be NaN or infinite (a broken
    variant's): non-finite values become ±``sentinel`` (NaN: +), an outcome of its own
    that the threshold attack can separate."""
    value = float(value)
    if np.isnan(value):
        return sentinel
    return float(np.clip(value, -sentinel, sentinel))
