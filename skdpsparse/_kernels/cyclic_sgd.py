"""The step loop of cyclic DP-SGD (seed 003, Algorithm 1), dense and CSR.

One call runs a block of noisy proximal steps whose Gaussian noise was drawn
beforehand by the caller (this module draws nothing: see ``mechanisms/noise.py``).
Step t, with θ = (w, b) and batch B_t the next b indices of ``order`` taken
cyclically (wrapping at the end, kong_ribero.md §2):

.. math::

    v = \\theta - \\frac{\\lambda}{b} \\sum_{i \\in B_t} \\mathrm{clip}_C(\\nabla f_i(\\theta))
        + N_t, \\qquad \\theta \\leftarrow \\operatorname{prox}_{\\lambda h}(v),

where the clipped sum is :func:`.linear_losses.dense_clipped_gradient_sum` (or its
CSR twin, called from compiled code: no per-step Python) and ``N_t`` is row t of
``noise``. The proximal map of h = g + ι_K, g(w) = α(ρ‖w‖₁ + (1−ρ)/2‖w‖²) on the
coefficients only and K an ℓ2 ball {‖θ‖ ≤ r} (``BALL``) or a box [l, u]^p (``BOX``)
over θ, is computed exactly. Box: it is separable, and in 1-D the prox of a convex
function plus an interval is the clipped prox. Ball: the optimality conditions give
w = soft(v_w, λαρ)/(1 + a + μ), b = v_b/(1 + μ) with a = λα(1−ρ) and μ ≥ 0 the
multiplier of the ball, zero if that point with μ = 0 is inside; μ is one root of a
decreasing function, in closed form (a projection after the elastic-net prox) unless
a > 0 and b is in the ball, where Newton's method finds it. No noise is drawn here.

``theta`` has length d + 1 (the last entry is the intercept, left at its value when
``fit_intercept`` is false); ``noise`` has d + 1 columns with an intercept, d without.
"""

import numpy as np
from numba import njit

from ._common import on_grid_nb
from .linear_losses import csr_clipped_gradient_sum, dense_clipped_gradient_sum
from .projections import project_box_nb, project_l2_ball_nb
from .prox import prox_elastic_net_nb, soft_threshold_nb

__all__ = [
    "NO_CONSTRAINT",
    "BALL",
    "BOX",
    "dense_cyclic_sgd_steps",
    "csr_cyclic_sgd_steps",
]

NO_CONSTRAINT = 0
BALL = 1
BOX = 2


@njit(cache=True, inline="always")
def _next_batch(order, start, rows):
    # The next len(rows) entries of `order` from position `start`, wrapping at the
    # end (Algorithm 1's B_t); returns the position after them.
    n = order.shape[0]
    for k in range(rows.shape[0]):
        rows[k] = order[start]
        start += 1
        if start == n:
            start = 0
    return start


@njit(cache=True)
def _elastic_net_ball_prox(theta, d, t, alpha, l1_ratio, radius):
    # Exact prox of t·g(w) + ι{‖(w, b)‖ ≤ r} when g has an ℓ2 part a = tα(1−ρ) > 0 and
    # the intercept b is in the ball (then w and b shrink by different factors).
    a = t * alpha * (1.0 - l1_ratio)
    w = theta[:d]
    soft_threshold_nb(w, t * alpha * l1_ratio, w)
    s2 = 0.0
    for j in range(d):
        s2 += w[j] * w[j]
    b2 = theta[d] * theta[d]
    r2 = radius * radius
    mu = 0.0
    # f(μ) = s2/(1+a+μ)² + b2/(1+μ)² − r² is convex and decreasing on μ ≥ 0: Newton
    # from μ = 0 < root increases monotonically to the root.
    for _ in range(100):
        u = 1.0 / (1.0 + a + mu)
        v = 1.0 / (1.0 + mu)
        f = s2 * u * u + b2 * v * v - r2
        if f <= 0.0:
            break
        step = f / (2.0 * (s2 * u * u * u + b2 * v * v * v))
        mu += step
        if step <= 1e-16 * (1.0 + mu):
            break
    for j in range(d):
        w[j] /= 1.0 + a + mu
    theta[d] /= 1.0 + mu
    project_l2_ball_nb(theta, radius, theta)  # rounding only: keep ‖θ‖ ≤ r exactly


@njit(cache=True, inline="always")
def _noisy_prox_step(theta, coef_sum, intercept_sum, step, noise_row, fit_intercept,
                     learning_rate, alpha, l1_ratio, constraint, radius, lower, upper,
                     spacing):
    d = coef_sum.shape[0]
    if spacing > 0.0:
        # Exact release on the grid γℤ: the displacement is rounded to the grid
        # (x/γ is exact, γ a power of two) and the integer noise added to it.
        inv = 1.0 / spacing
        for j in range(d):
            theta[j] += spacing * (noise_row[j] - on_grid_nb(step * coef_sum[j] * inv))
        if fit_intercept:
            theta[d] += spacing * (noise_row[d] - on_grid_nb(step * intercept_sum * inv))
    else:
        for j in range(d):
            theta[j] += noise_row[j] - step * coef_sum[j]
        if fit_intercept:
            theta[d] += noise_row[d] - step * intercept_sum
    if constraint == BALL and fit_intercept and alpha * (1.0 - l1_ratio) > 0.0:
        _elastic_net_ball_prox(theta, d, learning_rate, alpha, l1_ratio, radius)
        return
    # Otherwise w and (w, b) shrink alike: the elastic-net prox, then the projection.
    w = theta[:d]
    if alpha > 0.0:
        prox_elastic_net_nb(w, learning_rate, alpha, l1_ratio, w)
    p = d + 1 if fit_intercept else d
    if constraint == BALL:
        project_l2_ball_nb(theta[:p], radius, theta[:p])
    elif constraint == BOX:
        project_box_nb(theta[:p], lower, upper, theta[:p])


@njit(cache=True, inline="always")
def _check_step_args(theta, d, order, n, batch_size, start, noise, fit_intercept,
                     constraint, lower, upper):
    if theta.shape[0] != d + 1:
        raise ValueError("theta must have n_features + 1 entries")
    if order.shape[0] != n:
        raise ValueError("order must have one entry per row")
    # (Entries of order are range-checked per batch by the gradient kernels.)
    if not 1 <= batch_size <= n or not 0 <= start < n:
        raise ValueError("need 1 <= batch_size <= n_rows and 0 <= start < n_rows")
    if noise.shape[1] != (d + 1 if fit_intercept else d):
        raise ValueError("noise must have one column per parameter")
    if constraint == BOX and (lower.shape[0] != 1 or upper.shape[0] != 1):
        raise ValueError("BOX takes scalar bounds as arrays of length 1")


@njit(cache=True)
def dense_cyclic_sgd_steps(X, y, theta, order, start, code, param, clip_norm, batch_size,
                           learning_rate, noise, alpha, l1_ratio, constraint, radius, lower,
                           upper, fit_intercept, noise_spacing=0.0):
    """Run ``len(noise)`` noisy proximal steps of cyclic DP-SGD on dense rows, in place.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Rows already scaled to the contribution bound (the caller's job).
    y : ndarray of shape (n,)
        ±1 labels (classification losses) or targets.
    theta : ndarray of shape (d + 1,), float64
        (w, b), updated in place.
    order : ndarray of shape (n,), int64
        The pass order (a permutation of ``range(n)``; the mechanism permutes the rows
        once in memory and passes ``arange(n)``, which reads rows sequentially).
    start : int
        Position in ``order`` of the first row of the first batch.
    code, param : int, float
        Loss code and parameter (see :mod:`.linear_losses`).
    clip_norm : float
        C; each per-example gradient of (w, b) is clipped to ℓ2 norm C.
    batch_size : int
        b, 1 ≤ b ≤ n.
    learning_rate : float
        λ; the step is λ times the mean clipped gradient.
    noise : ndarray of shape (n_steps, d + fit_intercept), float64
        Row t is N_t, added to the displacement of step t (in grid units when
        ``noise_spacing`` > 0).
    alpha, l1_ratio : float
        Elastic-net penalty on w (``alpha = 0``: none; ``l1_ratio`` 1: ℓ1, 0: ℓ2²).
    constraint : int
        ``NO_CONSTRAINT``, ``BALL`` (‖θ‖₂ ≤ ``radius``) or ``BOX``
        (``lower[0] ≤ θ_j ≤ upper[0]``); over the d + fit_intercept parameters.
    radius : float
    lower, upper : ndarray of shape (1,), float64
    fit_intercept : bool
    noise_spacing : float, default=0.0
        γ > 0, a power of two: the displacement is released on the grid γℤ,
        γ·(N_t − round(λ ḡ_t/γ)), with N_t integers (the exact discrete noise of
        :func:`skdpsparse.mechanisms.noise.grid_noise`). 0 adds the float ``noise``
        to the float displacement (kernel tests only).

    Returns
    -------
    int
        The position in ``order`` where the next block starts.
    """
    n, d = X.shape
    _check_step_args(theta, d, order, n, batch_size, start, noise, fit_intercept,
                     constraint, lower, upper)
    if y.shape[0] != n:
        raise ValueError("y must have one entry per row")
    rows = np.empty(batch_size, dtype=np.int64)
    step = learning_rate / batch_size
    for t in range(noise.shape[0]):
        start = _next_batch(order, start, rows)
        coef_sum, intercept_sum = dense_clipped_gradient_sum(
            X, y, theta[:d], theta[d], code, param, clip_norm, rows, fit_intercept)
        _noisy_prox_step(theta, coef_sum, intercept_sum, step, noise[t], fit_intercept,
                         learning_rate, alpha, l1_ratio, constraint, radius, lower, upper,
                         noise_spacing)
    return start


@njit(cache=True)
def csr_cyclic_sgd_steps(indptr, indices, data, n_cols, y, theta, order, start, code, param,
                         clip_norm, batch_size, learning_rate, noise, alpha, l1_ratio,
                         constraint, radius, lower, upper, fit_intercept, noise_spacing=0.0):
    """CSR version of :func:`dense_cyclic_sgd_steps` (``X`` given by its canonical CSR
    parts and ``n_cols``); each batch gradient is scattered along the rows' nonzeros,
    the update of θ is dense (the noise is).

    Returns
    -------
    int
        The position in ``order`` where the next block starts.
    """
    n = indptr.shape[0] - 1
    _check_step_args(theta, n_cols, order, n, batch_size, start, noise, fit_intercept,
                     constraint, lower, upper)
    rows = np.empty(batch_size, dtype=np.int64)
    step = learning_rate / batch_size
    for t in range(noise.shape[0]):
        start = _next_batch(order, start, rows)
        coef_sum, intercept_sum = csr_clipped_gradient_sum(
            indptr, indices, data, y, theta[:n_cols], theta[n_cols], code, param, clip_norm,
            n_cols, rows, fit_intercept)
        _noisy_prox_step(theta, coef_sum, intercept_sum, step, noise[t], fit_intercept,
                         learning_rate, alpha, l1_ratio, constraint, radius, lower, upper,
                         noise_spacing)
    return start
