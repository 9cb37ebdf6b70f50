"""Inner loop of noisy projected SGD with fresh/stale steps (Arora et al. 2020, Algorithm 1).

Arora, Marinov and Ullah (2020), "Private stochastic convex optimization: efficient
algorithms for non-smooth objectives", Algorithm 1: at step t an index y_t is drawn uniformly
with replacement; if it has not been seen, a projected step with the noisy gradient
``∇f(θ_t, z_{y_t}) + ξ_t`` is taken and the iterate θ_t *before* the step is added to
the running sum of fresh iterates; otherwise a noise-only projected step
``Π_W(θ_t − η ξ_t)`` is taken. The loop stops as soon as ``target`` distinct indices
have been seen (target = ⌈n/2⌉ for the algorithm: the run stops with exactly ⌈n/2⌉ fresh steps).

The model is linear: θ = (w, b) with the intercept b in ``theta[d]`` when
``fit_intercept``, f(θ, z) = ℓ(⟨w, x̃⟩ + b, y), and x̃ = x·min(1, R_x/‖x‖₂) is the row
scaled into the ℓ2 ball of radius ``norm_bound`` (contribution bounding, never
rejection). W is the ℓ2 ball of radius ``radius`` in (w, b) jointly.

The row is bounded before any arithmetic on it: every use of an entry is of
x̃_j = s·x_j (s from :func:`._common.bounding_scale_nb`, exact for finite rows whose
norm overflows float64), so |x̃_j| ≤ R_x, the margin ⟨w, x̃⟩ is at most R_x‖θ‖ and
finite, and so is the gradient ℓ'·x̃. (Forming ⟨w, x⟩ on the raw row and scaling
afterwards overflowed for entries near ±1.7e308: inf, or inf − inf = NaN, times
s = 0 released NaN.)

The kernels only consume what the caller pre-drew: a block of indices ``rows`` and a
block of noise ``noise`` (one row of ξ_t per step, already at the standard deviation
σ; the step multiplies it by η). No randomness and no privacy decisions live here.
A block may end before the stopping time; the caller then draws the next block and
calls again with the same state arrays.
"""

import numpy as np
from numba import njit

import math

from ._common import bounding_scale_nb, on_grid_nb
from .linear_losses import check_loss, loss_value_and_derivative
from .projections import project_l2_ball_nb

__all__ = ["dense_noisy_sgd_block", "csr_noisy_sgd_block"]


@njit(cache=True)
def _check_state(theta, fresh_sum, seen, n_rows, dim, noise, rows, n_seen, target):
    if theta.shape[0] != dim or fresh_sum.shape[0] != dim:
        raise ValueError("theta and fresh_sum must have n_features + fit_intercept entries")
    if seen.shape[0] != n_rows:
        raise ValueError("seen must have one entry per row")
    if noise.shape[0] < rows.shape[0] or noise.shape[1] != dim:
        raise ValueError("noise must have shape (>= len(rows), len(theta))")
    if not 0 < target <= n_rows or n_seen < 0 or n_seen >= target:
        raise ValueError("need 0 <= n_seen < target <= n_rows")
    for t in range(rows.shape[0]):
        if rows[t] < 0 or rows[t] >= n_rows:
            raise IndexError("rows holds an index out of range")


@njit(cache=True)
def dense_noisy_sgd_block(X, y, theta, fresh_sum, seen, n_seen, target, rows, noise,
                          step_size, radius, norm_bound, code, param, fit_intercept,
                          noise_spacing=0.0):
    """Run the steps of one pre-drawn block on a dense 2-D array, in place.

    Parameters
    ----------
    X : ndarray of shape (n_rows, d), float32 or float64
    y : ndarray of shape (n_rows,)
        Labels in {−1, +1} (classification losses) or targets, already clipped by
        the caller when the Lipschitz constant needs it.
    theta : ndarray of shape (d + fit_intercept,), float64
        Current iterate θ_t ∈ W; updated in place.
    fresh_sum : ndarray of shape (d + fit_intercept,), float64
        Running sum of the iterates θ_t of fresh steps; updated in place.
    seen : ndarray of shape (n_rows,), bool
        The set F_t of indices already used; updated in place. Secret state.
    n_seen : int
        |F_t|, with ``n_seen < target``.
    target : int
        Stop once ``n_seen`` reaches it (⌈n/2⌉ for Algorithm 1).
    rows : ndarray of int, shape (B,)
        Pre-drawn indices y_t of this block (uniform, with replacement).
    noise : ndarray of shape (>= B, d + fit_intercept), float64
        Pre-drawn ξ_t ~ N(0, σ² I), one row per step.
    step_size : float
        η.
    radius : float
        Radius of W (projection onto the ℓ2 ball after every step).
    norm_bound : float
        Rows are scaled to ℓ2 norm at most this before use.
    code, param : int, float
        Loss code and parameter of :mod:`skdpsparse._kernels.linear_losses`.
    fit_intercept : bool
    noise_spacing : float, default=0.0
        γ > 0, a power of two: each fresh gradient is released on the grid γℤ,
        γ·(round(g/γ) + ξ_t) with ξ_t integers (the exact discrete noise of
        :func:`skdpsparse.mechanisms.noise.grid_noise`); a stale step moves by γξ_t.
        0 adds the float ``noise`` to the float gradient (kernel tests only).

    Returns
    -------
    n_steps : int
        Steps taken from this block (``B`` unless the stopping time came first).
    n_seen : int
        |F| after those steps; equals ``target`` iff the run has stopped.
    """
    check_loss(code, param)
    n, d = X.shape
    dim = d + 1 if fit_intercept else d
    if y.shape[0] != n:
        raise ValueError("X and y have inconsistent shapes")
    _check_state(theta, fresh_sum, seen, n, dim, noise, rows, n_seen, target)
    eta = np.float64(step_size)
    for t in range(rows.shape[0]):
        i = rows[t]
        if not seen[i]:
            # Fresh step: remember the iterate at which the fresh loss is evaluated
            # (the average of these is the output, Arora et al. 2020, Algorithm 1).
            for j in range(dim):
                fresh_sum[j] += theta[j]
            # Bound the row first (module doc): only x̃_j = s·x_j enters below.
            s = bounding_scale_nb(X[i], 0, d, norm_bound, math.inf)
            z = 0.0
            for j in range(d):
                z += (s * np.float64(X[i, j])) * theta[j]
            if fit_intercept:
                z += theta[d]
            der = loss_value_and_derivative(code, z, y[i], param)[1]
            if noise_spacing > 0.0:  # the gradient released on the grid γℤ
                inv = 1.0 / noise_spacing
                for j in range(d):
                    theta[j] -= eta * noise_spacing * (
                        on_grid_nb(der * (s * np.float64(X[i, j])) * inv) + noise[t, j])
                if fit_intercept:
                    theta[d] -= eta * noise_spacing * (on_grid_nb(der * inv) + noise[t, d])
            else:
                for j in range(d):
                    theta[j] -= eta * (der * (s * np.float64(X[i, j])) + noise[t, j])
                if fit_intercept:
                    theta[d] -= eta * (der + noise[t, d])
            seen[i] = True
            n_seen += 1
        else:
            # Noise-only step: what makes amplification by subsampling work (Arora et al. 2020 §3).
            scale = eta * noise_spacing if noise_spacing > 0.0 else eta
            for j in range(dim):
                theta[j] -= scale * noise[t, j]
        project_l2_ball_nb(theta, radius, theta)
        if n_seen >= target:
            return t + 1, n_seen
    return rows.shape[0], n_seen


@njit(cache=True)
def csr_noisy_sgd_block(indptr, indices, data, n_cols, y, theta, fresh_sum, seen, n_seen,
                        target, rows, noise, step_size, radius, norm_bound, code, param,
                        fit_intercept, noise_spacing=0.0):
    """CSR version of :func:`dense_noisy_sgd_block` (``n_cols`` = d).

    The gradient of a fresh row is scattered along its nonzeros; the noise, and so
    every step, is dense in the d (+1) coordinates. Same returns.
    """
    check_loss(code, param)
    n = indptr.shape[0] - 1
    d = n_cols
    dim = d + 1 if fit_intercept else d
    if y.shape[0] != n:
        raise ValueError("X and y have inconsistent shapes")
    _check_state(theta, fresh_sum, seen, n, dim, noise, rows, n_seen, target)
    eta = np.float64(step_size)
    released = np.zeros(dim)  # round(g/γ) of the current fresh step, zero elsewhere
    der = 0.0
    s = 1.0
    start = indptr[0]
    stop = indptr[0]
    for t in range(rows.shape[0]):
        i = rows[t]
        fresh = not seen[i]
        if fresh:
            for j in range(dim):
                fresh_sum[j] += theta[j]
            start = indptr[i]
            stop = indptr[i + 1]
            # Bound the row first (module doc): only x̃_k = s·x_k enters below.
            s = bounding_scale_nb(data, start, stop, norm_bound, math.inf)
            z = 0.0
            for k in range(np.uint64(start), np.uint64(stop)):
                z += (s * np.float64(data[k])) * theta[np.uint64(indices[k])]
            if fit_intercept:
                z += theta[d]
            der = loss_value_and_derivative(code, z, y[i], param)[1]
        if noise_spacing > 0.0:
            # The step is released on the grid γℤ as the integer V = round(g/γ) + Y: each
            # coordinate moves by ηγ·V_j in ONE rounding, as in the dense kernel (two
            # separate subtractions would make θ depend on how V splits into gradient
            # and noise: the low bits would carry the gradient).
            scale = eta * noise_spacing
            if fresh:
                inv = 1.0 / noise_spacing
                for k in range(np.uint64(start), np.uint64(stop)):
                    released[np.uint64(indices[k])] = on_grid_nb(
                        der * (s * np.float64(data[k])) * inv)
                if fit_intercept:
                    released[d] = on_grid_nb(der * inv)
            for j in range(dim):
                theta[j] -= scale * (released[j] + noise[t, j])
            if fresh:
                for k in range(np.uint64(start), np.uint64(stop)):
                    released[np.uint64(indices[k])] = 0.0
                if fit_intercept:
                    released[d] = 0.0
                seen[i] = True
                n_seen += 1
            project_l2_ball_nb(theta, radius, theta)
            if n_seen >= target:
                return t + 1, n_seen
            continue
        # Float path (kernel tests only): the noise part is the same for fresh and
        # stale steps.
        for j in range(dim):
            theta[j] -= eta * noise[t, j]
        if fresh:
            c = eta * der
            for k in range(np.uint64(start), np.uint64(stop)):
                theta[np.uint64(indices[k])] -= c * (s * np.float64(data[k]))
            if fit_intercept:
                theta[d] -= eta * der
            seen[i] = True
            n_seen += 1
        project_l2_ball_nb(theta, radius, theta)
        if n_seen >= target:
            return t + 1, n_seen
    return rows.shape[0], n_seen
