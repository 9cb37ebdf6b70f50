"""The step loop of cyclic DP-SGD (Kong and Ribero 2024, "Privacy of the last iterate
in cyclically-sampled DP-SGD on nonconvex composite losses", Algorithm 1), dense and
CSR, and its lazy-noise variant for CSR steps without a proximal map or with the
ℓ2² penalty's (then in the scaled release, w = s·u).

One call runs a block of noisy proximal steps whose Gaussian noise was drawn
beforehand by the caller (this module draws nothing: see ``mechanisms/noise.py``).
Step t, with θ = (w, b) and batch B_t the next b indices of ``order`` taken
cyclically (wrapping at the end):

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

import math
from fractions import Fraction

import numpy as np
from llvmlite import ir
from numba import njit, prange
from numba.core import cgutils, types
from numba.extending import intrinsic

from ._common import (
    _DBL_MIN,
    bounding_scale_nb,
    l2_norm_range_nb,
    on_grid_nb,
    threads_are_fork_safe,
)
from .exact_sampling import _SATURATED, _bit_length, _bits, _uniform_below_bits
from .grid_noise import (
    _GROUP_CELL,
    _MAX_DEPTH,
    GROUP as _GROUP,
    MARGIN,
    _below_exp_neg_from,
    _below_from,
    _cached_tables,
    _exp_neg,
    _offset,
    _reader_at,
    _remainder_part,
    _table_parts,
    noise_tables,
)
from .grid_noise_exact import H_BITS as EXACT_H_BITS
from .grid_noise_exact import KeyBits
from .grid_noise_exact import _tables as exact_tables
from .grid_noise_exact import below as exact_below
from .grid_noise_exact import count_above as exact_count_above
from .grid_noise_exact import exp_neg as exact_exp_neg
from .linear_losses import (
    LOGISTIC,
    _clipped_derivative,
    _csr_margin,
    _csr_margin_rescaled,
    _dense_margin_rescaled,
    check_loss,
    csr_clipped_gradient_sum,
    dense_clipped_gradient_sum,
    loss_value_and_derivative,
)
from .projections import project_box_nb, project_l2_ball_nb
from .prox import prox_elastic_net_nb, soft_threshold_nb

__all__ = [
    "NO_CONSTRAINT",
    "BALL",
    "BOX",
    "dense_cyclic_sgd_steps",
    "dense_gather_bounded_rows",
    "dense_sequential_cyclic_sgd_steps",
    "dense_permuted_cyclic_sgd_steps",
    "csr_cyclic_sgd_steps",
    "csr_lazy_cyclic_sgd_steps",
    "dense_multiclass_cyclic_sgd_steps",
    "csr_multiclass_cyclic_sgd_steps",
    "discrete_gaussian_sums",
    "exact_gaussian_sum",
    "lazy_final_flush",
    "lazy_max_count",
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


@njit(cache=True, inline="always")
def _derivative(code, z, y, param):
    """ℓ'(z, y): ``loss_value_and_derivative(code, z, y, param)[1]``, bit for bit (the
    same operations), without the logistic loss's log1p, whose value the steps never
    use (a libm call the compiler keeps)."""
    if code == LOGISTIC:
        z = np.float64(z)
        y = np.float64(y)
        t = y * z
        if t > 0.0:
            e = math.exp(-t)
            return -y * e / (1.0 + e)
        return -y / (1.0 + math.exp(t))
    return loss_value_and_derivative(code, z, y, param)[1]


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


# ------------------------------------------------ dense rows in memory order (fast path)
# The mechanism copies the rows once, in pass order and bounded, with their norms
# (dense_gather_bounded_rows); the steps then read the copy sequentially and take
# each row's norm from that table instead of recomputing it at every visit.


@njit(cache=True)
def dense_gather_bounded_rows(X, order, norm_bound, out, norms):
    """``out[k]`` = row ``order[k]`` of ``X`` scaled into ‖x‖₂ ≤ ``norm_bound``, and
    ``norms[k]`` its ℓ2 norm, in one pass over the rows.

    The same values as permuting ``X`` by ``order`` and applying
    :func:`~skdpsparse._kernels.dense_scale_rows` with
    :func:`~skdpsparse._kernels.dense_bounding_scales` (the factor multiplies each entry
    before any other arithmetic); ``norms[k]`` is ``l2_norm_range_nb(out[k])``, the norm
    :func:`dense_cyclic_sgd_steps` computes at every visit of the row.

    Parameters
    ----------
    X : ndarray of shape (n, d), float32 or float64
    order : ndarray of shape (n,), int64
        A permutation of ``range(n)``.
    norm_bound : float
        R ≥ 0.
    out : ndarray of shape (n, d), float64, C-contiguous
    norms : ndarray of shape (n,), float64

    Returns
    -------
    out, norms
    """
    n, d = X.shape
    if order.shape[0] != n or out.shape[0] != n or out.shape[1] != d or norms.shape[0] != n:
        raise ValueError("order, out and norms must have one entry (row) per row of X")
    for k in range(n):
        if order[k] < 0 or order[k] >= n:
            raise IndexError("order holds an index out of range")
    # Four rows per loop: the copy and the left-to-right sums of squares of four rows
    # (l2_norm_range_nb's first pass, each the same floats as alone) overlap their
    # additions and their cache misses. A row above the bound gets bounding_scale_nb's
    # factor R/‖x‖ from that same norm and is scaled and re-measured (left to right
    # again) with the others of its group, still in cache; a row whose sum of squares
    # under- or overflows takes the one-row path below.
    n4 = n - n % 4
    sq = np.empty(4)
    sc = np.empty(4)
    for k in range(0, n4, 4):
        i0, i1, i2, i3 = order[k], order[k + 1], order[k + 2], order[k + 3]
        s0 = s1 = s2 = s3 = 0.0
        for j in range(d):
            a0 = np.float64(X[i0, j])
            a1 = np.float64(X[i1, j])
            a2 = np.float64(X[i2, j])
            a3 = np.float64(X[i3, j])
            out[k, j] = a0
            out[k + 1, j] = a1
            out[k + 2, j] = a2
            out[k + 3, j] = a3
            s0 += a0 * a0
            s1 += a1 * a1
            s2 += a2 * a2
            s3 += a3 * a3
        sq[0], sq[1], sq[2], sq[3] = s0, s1, s2, s3
        rescale = False
        for r in range(4):
            sc[r] = 1.0
            if not (_DBL_MIN <= sq[r] < math.inf):
                _gather_one_row(X, order[k + r], k + r, norm_bound, out, norms)
                sq[r] = -1.0  # done
                continue
            norm = math.sqrt(sq[r])
            norms[k + r] = norm
            if norm > norm_bound:
                sc[r] = norm_bound / norm  # bounding_scale_nb's factor, same norm
                rescale = True
        if not rescale:
            continue
        t0 = t1 = t2 = t3 = 0.0
        for j in range(d):  # scale factor 1 rewrites the same values
            b0 = sc[0] * np.float64(X[i0, j])
            b1 = sc[1] * np.float64(X[i1, j])
            b2 = sc[2] * np.float64(X[i2, j])
            b3 = sc[3] * np.float64(X[i3, j])
            if sq[0] >= 0.0:
                out[k, j] = b0
            if sq[1] >= 0.0:
                out[k + 1, j] = b1
            if sq[2] >= 0.0:
                out[k + 2, j] = b2
            if sq[3] >= 0.0:
                out[k + 3, j] = b3
            t0 += b0 * b0
            t1 += b1 * b1
            t2 += b2 * b2
            t3 += b3 * b3
        t = (t0, t1, t2, t3)
        for r in range(4):
            if sq[r] < 0.0 or sc[r] == 1.0:
                continue
            if _DBL_MIN <= t[r] < math.inf:
                norms[k + r] = math.sqrt(t[r])
            else:
                norms[k + r] = l2_norm_range_nb(out[k + r], 0, d)
    for k in range(n4, n):
        _gather_one_row(X, order[k], k, norm_bound, out, norms)
    return out, norms


@njit(cache=True)
def _gather_one_row(X, i, k, norm_bound, out, norms):
    # dense_gather_bounded_rows for one row, with the robust norm and overflow bounding.
    d = X.shape[1]
    sumsq = 0.0
    for j in range(d):
        a = np.float64(X[i, j])
        out[k, j] = a
        sumsq += a * a
    norm = math.sqrt(sumsq)
    if not (_DBL_MIN <= sumsq < math.inf):
        norm = l2_norm_range_nb(out[k], 0, d)
    if norm > norm_bound:
        s = bounding_scale_nb(X[i], 0, d, norm_bound, math.inf)
        for j in range(d):
            out[k, j] = s * np.float64(X[i, j])
        norm = l2_norm_range_nb(out[k], 0, d)
    norms[k] = norm


@njit(cache=True, fastmath={"reassoc"})
def _dot(x, w):
    # ⟨x, w⟩ summed in any order (vectorised); |error| ≤ d·ε·Σ|x_j w_j|, as for the
    # left-to-right sum.
    acc = 0.0
    for j in range(x.shape[0]):
        acc += x[j] * w[j]
    return acc


@njit(cache=True)
def dense_sequential_cyclic_sgd_steps(X, row_norms, y, theta, start, code, param,
                                      clip_norm, batch_size, learning_rate, noise, alpha,
                                      l1_ratio, constraint, radius, lower, upper,
                                      fit_intercept, noise_spacing=0.0):
    """:func:`dense_cyclic_sgd_steps` with the pass order ``range(n)`` and the row norms
    given: the rows of ``X`` are visited in memory order (the caller stored them in
    pass order, :func:`dense_gather_bounded_rows`), and row i's ℓ2 norm is
    ``row_norms[i]`` instead of being recomputed at every visit.

    Each example's gradient is clipped as :func:`dense_cyclic_sgd_steps` clips it, with
    c = ℓ'·min(1, C/(|ℓ'|·‖x̃‖)) from the same norm; the margin ⟨w, x⟩ + b is summed in
    a vectorised order (it differs from the left-to-right sum by rounding only, and
    the clipping bounds every contribution whatever the margin).

    Returns
    -------
    int
        The position where the next block starts.
    """
    n, d = X.shape
    if row_norms.shape[0] != n or y.shape[0] != n:
        raise ValueError("row_norms and y must have one entry per row")
    if theta.shape[0] != d + 1:
        raise ValueError("theta must have n_features + 1 entries")
    if not 1 <= batch_size <= n or not 0 <= start < n:
        raise ValueError("need 1 <= batch_size <= n_rows and 0 <= start < n_rows")
    if noise.shape[1] != (d + 1 if fit_intercept else d):
        raise ValueError("noise must have one column per parameter")
    if constraint == BOX and (lower.shape[0] != 1 or upper.shape[0] != 1):
        raise ValueError("BOX takes scalar bounds as arrays of length 1")
    check_loss(code, param)
    step = learning_rate / batch_size
    coef_sum = np.empty(d)
    w = theta[:d]
    for t in range(noise.shape[0]):
        coef_sum[:] = 0.0
        intercept_sum = 0.0
        b = theta[d]
        i = start
        for _ in range(batch_size):
            x = X[i]
            z = _dot(x, w) + b
            if not abs(z) < math.inf:
                z = _dense_margin_rescaled(X, i, w, b)
            der = _derivative(code, z, y[i], param)
            if der != 0.0:
                x_norm = row_norms[i]
                g_norm = abs(der) * (math.hypot(x_norm, 1.0) if fit_intercept else x_norm)
                if g_norm <= clip_norm:
                    c = der
                elif g_norm < math.inf:
                    c = der * (clip_norm / g_norm)
                else:
                    c = _clipped_derivative(der, x, 0, d, clip_norm, fit_intercept)
                for j in range(d):
                    coef_sum[j] += c * x[j]
                intercept_sum += c
            i += 1
            if i == n:
                i = 0
        start = i
        _noisy_prox_step(theta, coef_sum, intercept_sum, step, noise[t], fit_intercept,
                         learning_rate, alpha, l1_ratio, constraint, radius, lower, upper,
                         noise_spacing)
    return start


@njit(cache=True, fastmath={"reassoc"})
def _dot_sumsq(X, i, w):
    # ⟨x_i, w⟩ and ‖x_i‖² in one vectorised pass over row i (any order of summation:
    # each within d·ε·Σ|terms| of the exact value, as for the left-to-right sums).
    acc = 0.0
    ss = 0.0
    for j in range(X.shape[1]):
        x = np.float64(X[i, j])
        acc += x * np.float64(w[j])
        ss += x * x
    return acc, ss


@njit(cache=True, fastmath={"reassoc"})
def _dot_sumsq4(X, i0, i1, i2, i3, w, out, m):
    # _dot_sumsq of four rows in one loop: their loads are independent, so four rows'
    # memory latency overlaps (rows visited in a random order are each a cache miss).
    a0 = a1 = a2 = a3 = 0.0
    s0 = s1 = s2 = s3 = 0.0
    for j in range(X.shape[1]):
        wj = np.float64(w[j])
        x0 = np.float64(X[i0, j])
        x1 = np.float64(X[i1, j])
        x2 = np.float64(X[i2, j])
        x3 = np.float64(X[i3, j])
        a0 += x0 * wj
        a1 += x1 * wj
        a2 += x2 * wj
        a3 += x3 * wj
        s0 += x0 * x0
        s1 += x1 * x1
        s2 += x2 * x2
        s3 += x3 * x3
    out[m, 0] = a0
    out[m, 1] = s0
    out[m + 1, 0] = a1
    out[m + 1, 1] = s1
    out[m + 2, 0] = a2
    out[m + 2, 1] = s2
    out[m + 3, 0] = a3
    out[m + 3, 1] = s3


@intrinsic
def _prefetch_read(typingctx, array, i, j):
    """Hint the CPU to fetch ``array[i, j]`` (2-D) into the cache for a read (LLVM's
    ``llvm.prefetch``: read, high locality, data cache); ``(i, j)`` must be within the
    array. No effect on any value."""
    if not (isinstance(array, types.Array) and array.ndim == 2
            and isinstance(i, types.Integer) and isinstance(j, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        ary = context.make_array(array_type)(context, builder, args[0])
        idx = [context.cast(builder, args[k], signature.args[k], types.intp) for k in (1, 2)]
        ptr = cgutils.get_item_pointer(context, builder, array_type, ary, idx,
                                       wraparound=False, boundscheck=False)
        bytes_ptr = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        # LLVM names the intrinsic by its pointer type: "p0" with opaque pointers.
        name = "llvm.prefetch.p0" if str(bytes_ptr) == "ptr" else "llvm.prefetch.p0i8"
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [bytes_ptr, i32, i32, i32]), name)
        builder.call(fn, [builder.bitcast(ptr, bytes_ptr), ir.Constant(i32, 0),
                          ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(array, i, j), codegen


# Rows ahead of the one being read at which the permuted pass prefetches (a row in a
# secret random order is a cache miss on each of its lines; measured at n = 10⁵,
# d = 100: 8 rows ahead hides most of it, as the sequential order's time shows).
_PREFETCH_ROWS = 8


@njit(cache=True, inline="always")
def _prefetch_row(X, i, step):
    # Every cache line of row i (``step`` entries per line), and its last entry.
    d = X.shape[1]
    for j in range(0, d, step):
        _prefetch_read(X, i, j)
    if d > 0:
        _prefetch_read(X, i, d - 1)


@njit(cache=True)
def _row_is_finite(X, i):
    for j in range(X.shape[1]):
        x = np.float64(X[i, j])
        if not x - x == 0.0:  # NaN for NaN and ±inf
            return False
    return True


@njit(cache=True)
def _bounded_row_cold(X, i, norm_bound, w, b, tmp):
    # Row i scaled into ‖x‖ ≤ R as dense_gather_bounded_rows scales it (the factor
    # multiplies each entry first), into tmp; returns (factor, its norm, the margin).
    # For rows whose sum of squares under- or overflows and for margins that overflow.
    d = X.shape[1]
    s = bounding_scale_nb(X[i], 0, d, norm_bound, math.inf)
    for j in range(d):
        tmp[j] = s * np.float64(X[i, j])
    z = b
    for j in range(d):
        z += tmp[j] * w[j]
    if not abs(z) < math.inf:
        z = _dense_margin_rescaled(tmp.reshape((1, d)), 0, w, b)
    return s, l2_norm_range_nb(tmp, 0, d), z


@njit(cache=True, inline="always")
def _permuted_row_factor(X, i, yk, code, param, norm_bound, clip_norm, fit_intercept, w, b,
                         dot, ss, tmp):
    # One visited row of dense_permuted_cyclic_sgd_steps from its ⟨x, w⟩ and ‖x‖²:
    # (finite, c, s, cold) with c the clipped ℓ' (0 when ℓ' = 0) and s the bounding
    # factor, its term (c·s)·x; cold: the term is c·tmp, the row scaled into tmp by
    # _bounded_row_cold (sums of squares that under- or overflow, margins or
    # gradient norms that overflow). finite is False for a NaN or ±inf entry.
    cold = not (_DBL_MIN <= ss < math.inf)
    # A NaN or ±inf entry makes ss NaN or inf (so does a finite row whose squares
    # overflow: looked at entry by entry, on this rare path only).
    if not ss < math.inf and not _row_is_finite(X, i):
        return False, 0.0, 0.0, cold
    if cold:
        s, x_norm, z = _bounded_row_cold(X, i, norm_bound, w, b, tmp)
    else:
        norm = math.sqrt(ss)
        s = norm_bound / norm if norm > norm_bound else 1.0
        x_norm = s * norm if s < 1.0 else norm
        z = s * dot + b
        if not abs(z) < math.inf:
            s, x_norm, z = _bounded_row_cold(X, i, norm_bound, w, b, tmp)
            cold = True
    der = _derivative(code, z, yk, param)
    if der == 0.0:
        return True, 0.0, s, cold
    g_norm = abs(der) * (math.hypot(x_norm, 1.0) if fit_intercept else x_norm)
    if g_norm <= clip_norm:
        return True, der, s, cold
    if g_norm < math.inf:
        return True, der * (clip_norm / g_norm), s, cold
    if not cold:
        s, x_norm, z = _bounded_row_cold(X, i, norm_bound, w, b, tmp)
        cold = True
    return True, _clipped_derivative(der, tmp, 0, X.shape[1], clip_norm, fit_intercept), s, cold


@njit(cache=True, inline="always")
def _four_hot_factors(dots, y, k0, n, code, param, norm_bound, clip_norm, fit_intercept, b,
                      cvals, cs, tmp4):
    # _permuted_row_factor of four rows at once when all four are on its common path
    # (sum of squares normal, margin and gradient norm finite), with the same
    # operations: straight-line code, each stage over the four rows, so that their
    # square roots, exponentials and divisions overlap (0.78x the steps' time with
    # rows in memory order, 0.88x in a random order; n = 10⁵, d = 100, process time
    # on a loaded 2-core machine). Fills cvals (c) and cs (c·s); False when a row is
    # not on that path (the caller then takes the rows one by one: nothing is kept).
    for r in range(4):
        if not (_DBL_MIN <= dots[r, 1] < math.inf):
            return False
    for r in range(4):  # bounding factor s, bounded norm, margin
        norm = math.sqrt(dots[r, 1])
        s = norm_bound / norm if norm > norm_bound else 1.0
        tmp4[0, r] = s
        tmp4[1, r] = s * norm if s < 1.0 else norm
        tmp4[2, r] = s * dots[r, 0] + b
        if not abs(tmp4[2, r]) < math.inf:
            return False
    k = k0
    for r in range(4):  # ℓ'
        tmp4[3, r] = _derivative(code, tmp4[2, r], y[k], param)
        k += 1
        if k == n:
            k = 0
    for r in range(4):  # gradient norm
        x_norm = tmp4[1, r]
        g_norm = abs(tmp4[3, r]) * (math.hypot(x_norm, 1.0) if fit_intercept else x_norm)
        if not g_norm < math.inf:
            return False
        tmp4[2, r] = g_norm
    for r in range(4):  # the clipped ℓ'
        der = tmp4[3, r]
        g_norm = tmp4[2, r]
        if der == 0.0:
            c = 0.0
        elif g_norm <= clip_norm:
            c = der
        else:
            c = der * (clip_norm / g_norm)
        cvals[r] = c
        cs[r] = c * tmp4[0, r]
    return True


@njit(cache=True)
def dense_permuted_cyclic_sgd_steps(X, order, norm_bound, y, theta, start, code, param,
                                    clip_norm, batch_size, learning_rate, noise, alpha,
                                    l1_ratio, constraint, radius, lower, upper,
                                    fit_intercept, noise_spacing=0.0):
    """The steps of :func:`dense_sequential_cyclic_sgd_steps` on the rows of ``X`` as
    :func:`dense_gather_bounded_rows` would copy them (``order[k]`` scaled into
    ‖x‖₂ ≤ ``norm_bound``), without the copy: each visit reads row ``order[k]`` of the
    caller's ``X`` and bounds it on the fly.

    For one or two passes this is the cheaper path: the copy (a write of n·d floats
    into fresh pages, and a left-to-right sum of squares per row) cost 57 ms at
    n = 10⁵, d = 100, four times the 14 ms of the steps themselves and twice a whole
    vectorised NumPy epoch. Here the batch is read once, four rows at a time: one
    vectorised loop over the four rows for their margins and squared norms, then one
    that adds their four gradient terms while they are in cache, in row order (the
    same sums, bit for bit, as adding one row at a time; 0.9x the time of a second
    pass over the whole batch at n = 10⁵, d = 100, b = 256, process time on a loaded
    2-core machine). Batch-level BLAS (gather X_b, then X_b·w and X_bᵀ·(c·s)) took
    1.17x this loop there: the gather is the same random reads plus a copy.

    Contribution bounding is the gather's: factor s = min(1, R/‖x‖₂) (the rare rows
    whose sum of squares under- or overflows take :func:`bounding_scale_nb` itself),
    bounded norm s‖x‖, margin s⟨x, w⟩ + b, gradient term (c·s)·x. These differ from
    the gathered row's by rounding only (a product (c·s)·x_j for c·(s·x_j), sums in
    another order), and clipping bounds each term by C up to that rounding, as on
    every path. A margin s⟨x, w⟩ that overflows is taken again on the scaled row.

    Parameters
    ----------
    X : ndarray of shape (n, d), float32 or float64, C-contiguous
        The caller's rows, unbounded.
    order : ndarray of shape (n,), int64
        Pass order: position k of a pass reads row ``order[k]``.
    norm_bound : float
        R ≥ 0.
    y : ndarray of shape (n,)
        Labels in pass order (``y[k]`` belongs to row ``order[k]``).
    theta, start, code, param, clip_norm, batch_size, learning_rate, noise, alpha, l1_ratio, constraint, radius, lower, upper, fit_intercept, noise_spacing
        As in :func:`dense_sequential_cyclic_sgd_steps` (``start`` is a pass position).

    Returns
    -------
    int
        The position where the next block starts, or -1 when a visited row holds a
        NaN or an infinite entry (``theta`` is then partly updated and must not be
        used): the finiteness check of ``X`` in the pass that reads it. Every row is
        visited in each pass of ⌈n/b⌉ steps.
    """
    n, d = X.shape
    _check_step_args(theta, d, order, n, batch_size, start, noise, fit_intercept,
                     constraint, lower, upper)
    if y.shape[0] != n:
        raise ValueError("y must have one entry per row")
    for k in range(n):
        if order[k] < 0 or order[k] >= n:
            raise IndexError("order holds an index out of range")
    check_loss(code, param)
    step = learning_rate / batch_size
    coef_sum = np.empty(d)
    tmp = np.empty(d)
    rows = np.empty(4, dtype=np.int64)
    dots = np.empty((4, 2))  # (⟨x, w⟩, ‖x‖²) of the group's rows
    cs = np.empty(4)  # the group's factors c·s (0 for ℓ' = 0)
    cvals = np.empty(4)
    colds = np.zeros(4, dtype=np.bool_)
    tmp4 = np.empty((4, 4))  # _four_hot_factors' stages
    w = theta[:d]
    line = max(1, 64 // X.itemsize)  # entries per 64-byte cache line
    for t in range(noise.shape[0]):
        coef_sum[:] = 0.0
        intercept_sum = 0.0
        b = theta[d]
        k = start
        # One pass over the batch, four rows at a time (w is fixed within a step):
        # their margins and norms in one loop, their factors, then their four
        # gradient terms in one loop while the rows are in cache.
        for m in range(0, batch_size, 4):
            g = min(4, batch_size - m)
            # The rows _PREFETCH_ROWS positions ahead in the pass (into the next batch
            # near the end of this one): fetched while these are summed.
            for q in range(m + _PREFETCH_ROWS, m + _PREFETCH_ROWS + g):
                _prefetch_row(X, order[(start + q) % n], line)
            k0 = k
            for r in range(g):
                rows[r] = order[k]
                k += 1
                if k == n:
                    k = 0
            if g == 4:
                _dot_sumsq4(X, rows[0], rows[1], rows[2], rows[3], w, dots, 0)
            else:
                for r in range(g):
                    dots[r, 0], dots[r, 1] = _dot_sumsq(X, rows[r], w)
            fused = g == 4 and _four_hot_factors(dots, y, k0, n, code, param, norm_bound,
                                                 clip_norm, fit_intercept, b, cvals, cs,
                                                 tmp4)
            if fused:
                for r in range(4):
                    if cvals[r] != 0.0:
                        intercept_sum += cvals[r]
            kr = k0
            for r in range(0 if fused else g):
                ok, c, s, cold = _permuted_row_factor(X, rows[r], y[kr], code, param,
                                                      norm_bound, clip_norm, fit_intercept,
                                                      w, b, dots[r, 0], dots[r, 1], tmp)
                if not ok:
                    return -1
                cvals[r] = c
                cs[r] = c * s
                colds[r] = cold
                fused = fused and not cold
                if c != 0.0:
                    intercept_sum += c
                kr += 1
                if kr == n:
                    kr = 0
            if fused:
                # The four terms added in row order, as one row at a time adds them
                # (bit for bit: a factor 0 adds ±0.0, which leaves every sum as it
                # is, since a sum started at +0.0 is never −0.0).
                c0, c1, c2, c3 = cs[0], cs[1], cs[2], cs[3]
                i0, i1, i2, i3 = rows[0], rows[1], rows[2], rows[3]
                for j in range(d):
                    v = coef_sum[j]
                    v += c0 * np.float64(X[i0, j])
                    v += c1 * np.float64(X[i1, j])
                    v += c2 * np.float64(X[i2, j])
                    v += c3 * np.float64(X[i3, j])
                    coef_sum[j] = v
                continue
            for r in range(g):  # the tail, or a group with a cold row: one by one
                if cvals[r] == 0.0:
                    continue
                if colds[r]:  # the scaled row again (the same values) into tmp
                    _bounded_row_cold(X, rows[r], norm_bound, w, b, tmp)
                    for j in range(d):
                        coef_sum[j] += cvals[r] * tmp[j]
                else:
                    c = cs[r]
                    i = rows[r]
                    for j in range(d):
                        coef_sum[j] += c * np.float64(X[i, j])
        start = k
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


# --------------------------------------------------------------- lazy noise (CSR)
# When no proximal map acts between two reads of a coordinate (no penalty, no
# constraint), the grid noise of the steps that do not read it only adds up: the
# coordinate is released once per interval between reads, with one draw of the sum.
# With the ℓ2² penalty the scaled release (w = s·u, the decay in the public s) keeps
# that property for u.
# The privacy argument is in ``doc/derivations/lazy_noise.rst``; the draw of a sum
# of k discrete Gaussians is replaced by one discrete Gaussian of variance k·N²,
# whose probabilities differ from the sum's by a factor within e^{±6·exp(−π²N²/2)}.

LAZY_MAX_SCALE = 1 << 50  # t = a·N of the Laplace proposal (exact_sampling's bound)


@njit(cache=True, _nrt=False, inline="always")
def _ceil_sqrt(k):
    a = max(1, int(math.sqrt(float(k))))  # within one of ⌈√k⌉ (k < 2⁵³): corrected below
    while a * a < k:
        a += 1
    while a > 1 and (a - 1) * (a - 1) >= k:
        a -= 1
    return a


@njit(cache=True, _nrt=False, inline="always")
def _lazy_draw(io, r, k, n, b, log_k, lower, guide, upper, h_max, margin):
    """One draw of N_Z(0, k·n²), or (0, False, r) when a decision is undecided.

    The algorithm (its exact statement is :func:`exact_gaussian_sum`): Canonne, Kamath
    and Steinke 2020, Algorithm 3 with the proposal scale t = a·n, a = ⌈√k⌉ (any t > 0
    is valid), accepted with probability exp(−(a|Y| − kn)²/(2k·t²)). The proposal's
    magnitude is a·M + R: M with P(M = m) ∝ exp(−m/n) (the magnitude of the table
    sampler of :mod:`.grid_noise` at the fixed scale n: its parts H, L, and its
    remainder), R uniform on [0, a) accepted with probability exp(−R/t), so that
    P(a·M + R = y) ∝ exp(−y/t); then a sign, −0 rejected. Every coin "uniform W <
    threshold" reads W four bits at a time (:func:`.grid_noise._below`) against the
    threshold computed in floating point with an absolute error below 2⁻⁴⁸; a cell
    within ``margin`` of it aborts the draw, so every decision taken is the exact one.
    """
    a = _ceil_sqrt(k)
    t = a * n
    a_bits = _bit_length(a - 1)
    # M = j·2^b + rem with j·a² < 2^(61 − b) keeps a·|y| ≤ a²(j + 2)·2^b < 2⁶²
    # (a²·2^b ≤ a²n/2 ≤ 2⁶⁰); a larger j aborts (always allowed: the exact algorithm
    # then makes the draw from the same bits).
    j_cap = float(np.int64(1) << (61 - b)) / (float(a) * float(a))
    inv_t = 1.0 / float(t)
    inv_den = 0.5 / (float(k) * float(t) * float(t))
    while True:
        h, bucket, r = _table_parts(io, r, upper, h_max, lower, guide, log_k, _MAX_DEPTH)
        if h < 0 or bucket < 0:
            return 0, False, r
        rem, r = _remainder_part(io, r, n, b, margin)
        if rem < 0:
            return 0, False, r
        j = (h << log_k) + bucket
        if float(j) >= j_cap:
            return 0, False, r  # a|y| near int64's end: the exact algorithm takes it
        m = (j << b) + rem
        rr = 0
        while a > 1:  # R: uniform on [0, a), accepted with probability exp(−R/t)
            rr, r = _uniform_below_bits(io, r, a, a_bits)
            if rr == 0:
                break
            # W's first cell against the lower bound 1 − x ≤ exp(−x) decides most
            # coins (x < 1/n): the same decision, on the same bits, as against exp(−x).
            x = float(rr) * inv_t
            w, r = _bits(io, r, _GROUP)
            if (w + 1) * _GROUP_CELL <= (1.0 - x) - margin:
                break
            decision, r = _below_from(io, r, w, _exp_neg(x), margin)
            if decision == 1:
                break
            if decision == -1:
                return 0, False, r
        bit, r = _bits(io, r, 1)
        negative = bit == 1
        if negative and m == 0 and rr == 0:
            continue  # zero would otherwise be counted twice
        y = a * m + rr
        g = a * y - k * n  # |g| < 2⁶² (k·n ≤ a²n ≤ 2⁶¹ by lazy_max_count)
        if g != 0:
            x = float(g)
            w, r = _bits(io, r, _GROUP)
            decision, r = _below_exp_neg_from(io, r, w, x * x * inv_den, margin)
            if decision == -1:
                return 0, False, r
            if decision == 0:
                continue
        return (-y if negative else y), True, r


@njit(cache=True, _nrt=False)
def _lazy_draw_range(io, r, out, counts, start, stop, n, b, log_k, lower, guide, upper,
                     h_max, margin, state, c):
    # As grid_noise._draw_range: no reference counting, helpers inlined.
    for i in range(start, stop):
        before = r
        y, ok, r = _lazy_draw(io, r, counts[i], n, b, log_k, lower, guide, upper, h_max,
                              margin)
        if not ok:  # draw i is left to the exact algorithm, from the bits it started at
            state[c, 0] = i
            state[c, 1] = _offset(before)
            return
        out[i] = y
    state[c, 0] = -1


@njit(cache=True)
def _lazy_fill_chunk(out, counts, n, b, log_k, lower, guide, upper, h_max, key, domain,
                     chunk, margin, state, c):
    """Chunk c from draw ``state[c, 0]`` at bit ``state[c, 1]`` of stream (c, domain)."""
    io, r = _reader_at(key, c, domain, state[c, 1])
    stop = min(out.size, (c + 1) * chunk)
    _lazy_draw_range(io, r, out, counts, state[c, 0], stop, n, b, log_k, lower, guide, upper,
                     h_max, margin, state, c)


# Two functions, not one compiled twice (numba's cache does not key on ``parallel=``:
# see exact_sampling).
@njit(cache=True, parallel=True)
def _lazy_fill_parallel(out, counts, n, b, log_k, lower, guide, upper, h_max, key, domain,
                        chunk, margin, state):
    for c in prange(state.shape[0]):
        _lazy_fill_chunk(out, counts, n, b, log_k, lower, guide, upper, h_max, key, domain,
                         chunk, margin, state, c)


@njit(cache=True)
def _lazy_fill_serial(out, counts, n, b, log_k, lower, guide, upper, h_max, key, domain,
                      chunk, margin, state):
    for c in range(state.shape[0]):
        if state[c, 0] >= 0:
            _lazy_fill_chunk(out, counts, n, b, log_k, lower, guide, upper, h_max, key,
                             domain, chunk, margin, state, c)


def exact_gaussian_sum(bits, k, n):
    """The algorithm of the lazy draws in exact arithmetic: one draw of N_Z(0, k·n²)
    from ``bits`` (a :class:`.grid_noise_exact.KeyBits`), an unbounded Python int.

    Canonne, Kamath and Steinke 2020, "The discrete Gaussian for differential
    privacy", Algorithm 3 with t = a·n, a = ⌈√k⌉. The proposal, P(y) ∝ exp(−|y|/t), is
    a·M + R with a sign: M the magnitude of the exact algorithm of
    :mod:`.grid_noise_exact` at scale n (its parts H, L and remainder, P(M = m) ∝
    exp(−m/n)) and R uniform on [0, a) accepted with probability exp(−R/t). Every coin
    is a uniform W read four bits at a time until its cell lies on one side of the
    threshold (:func:`.grid_noise_exact.below`, exact decimal brackets). The thresholds
    are irrational for a nonzero exponent (Lindemann–Weierstrass), so each comparison
    ends with probability one. The kernel (:func:`discrete_gaussian_sums`) takes the
    same decisions on the same bits and leaves here the draws it cannot certify.
    """
    b, log_k, _, _, upper_words = noise_tables(n)
    h_max = len(upper_words)
    lower, upper = exact_tables(n, b, log_k, h_max)
    a = math.isqrt(k - 1) + 1
    t = a * n
    a_bits = (a - 1).bit_length()
    while True:
        h = 0
        while True:  # H: geometric, memoryless past the table (grid_noise_exact.draw)
            step = exact_count_above(bits, upper, EXACT_H_BITS)
            h += step
            if step < h_max:
                break
        bucket = exact_count_above(bits, lower, log_k + 4)
        while True:  # the remainder on [0, 2^b), accepted with probability exp(−rem/n)
            rem = bits.take(b) if b else 0
            if rem == 0 or exact_below(bits, exact_exp_neg(Fraction(rem, n))):
                break
        m = (((h << log_k) + bucket) << b) + rem
        rr = 0
        while a > 1:
            rr = bits.take(a_bits)
            while rr >= a:
                rr = bits.take(a_bits)
            if rr == 0 or exact_below(bits, exact_exp_neg(Fraction(rr, t))):
                break
        negative = bits.take(1) == 1
        if negative and m == 0 and rr == 0:
            continue
        y = a * m + rr
        g = a * y - k * n
        if g != 0 and not exact_below(bits, exact_exp_neg(Fraction(g * g, 2 * k * t * t))):
            continue
        return -y if negative else y


#: Fewer draws than this are filled on one thread (grid_noise's threshold).
_MIN_THREADED_DRAWS = 1 << 16


def lazy_max_count(scale):
    """The largest k that one draw of :func:`discrete_gaussian_sums` takes at grid
    scale N: ⌈√k⌉·N ≤ 2⁵⁰ (the Laplace proposal) and ⌈√k⌉²·N ≤ 2⁶¹ (no overflow);
    longer intervals are split into several draws."""
    a = min(LAZY_MAX_SCALE // int(scale), math.isqrt((1 << 61) // int(scale)))
    if a < 1:
        raise ValueError(f"the grid scale {scale} is above 2^50")
    return a * a


def discrete_gaussian_sums(counts, scale, key, domain=0, *, chunk=4096, margin=MARGIN):
    """Entry i: one draw of the discrete Gaussian with σ² = counts[i]·N² (exact).

    Entry i belongs to chunk c = i // ``chunk`` and reads stream (c, ``domain``) of
    the key. The kernel certifies each decision in floating point; a draw it cannot
    certify (about one in 10⁸ at the default margin) is made by
    :func:`exact_gaussian_sum` from the same bits, and the chunk resumes after it, so
    the output depends neither on ``margin`` nor on the thread count.

    Parameters
    ----------
    counts : ndarray of int64
        k ≥ 1 each, at most :func:`lazy_max_count` (scale).
    scale : int
        N in [2, 2⁵⁰].
    key : int64 array of shape (8,)
        ChaCha20 key words.
    domain : int
    chunk : int
        Entries per keystream (part of the output's definition, as in
        :func:`.exact_sampling.discrete_noise`).
    margin : float
        The certified decisions' margin, in [2⁻⁴⁰, 1/4) (tests raise it to exercise
        the exact fallback).

    Returns
    -------
    ndarray of int64, saturated at ±2⁶² (probability below exp(−2⁴⁰)).
    """
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    n = int(scale)
    if not 2 <= n <= LAZY_MAX_SCALE:
        raise ValueError(f"the grid scale must be an integer in [2, 2^50], got {scale}.")
    if counts.size and (counts.min() < 1 or counts.max() > lazy_max_count(n)):
        raise ValueError("counts must be in [1, lazy_max_count(scale)].")
    if key.dtype != np.int64 or key.shape != (8,):
        raise ValueError("key must be the 8 key words of a ChaCha20 key (chacha.key_words).")
    if not MARGIN <= margin < 0.25:
        raise ValueError(f"margin must be in [2^-40, 1/4), got {margin}.")
    chunk, domain = int(chunk), int(domain)
    out = np.zeros(counts.size, np.int64)
    state = np.zeros((-(-counts.size // chunk), 2), np.int64)
    state[:, 0] = np.arange(state.shape[0]) * chunk  # each chunk's first draw, at bit 0
    b, log_k, _, guide, upper = noise_tables(n)
    lower_words, upper_words = _cached_tables(n)[1]  # the kernel's layout of the tables
    args = (out, counts, n, int(b), int(log_k), lower_words, guide, upper_words, upper.size,
            key, domain, chunk, float(margin), state)
    threaded = counts.size > max(chunk, _MIN_THREADED_DRAWS) and threads_are_fork_safe()
    (_lazy_fill_parallel if threaded else _lazy_fill_serial)(*args)
    while (state[:, 0] >= 0).any():
        for c in np.flatnonzero(state[:, 0] >= 0):
            i, offset = int(state[c, 0]), int(state[c, 1])
            bits = KeyBits(key, int(c), domain, offset)
            y = exact_gaussian_sum(bits, int(counts[i]), n)
            out[i] = min(max(y, -_SATURATED), _SATURATED)
            state[c, 1] = bits.offset
            state[c, 0] = i + 1 if i + 1 < min(out.size, (c + 1) * chunk) else -1
        _lazy_fill_serial(*args)
    return out


@njit(cache=True, inline="always")
def _flush(j, t, last, kmax, theta, spacing, sums, pos, counts, coords, starts, count_only):
    # Add the pending noise of coordinate j (steps last[j] .. t − 1), in draws of at
    # most kmax steps each; in the counting pass, record the draws instead.
    c = t - last[j]
    s0 = last[j]
    while c > 0:
        kk = min(c, kmax)
        if count_only:
            counts[pos] = kk
            if coords.shape[0]:  # only tests ask for them
                coords[pos] = j
                starts[pos] = s0
        else:
            theta[j] += spacing * sums[pos]
        pos += 1
        s0 += kk
        c -= kk
    last[j] = t
    return pos


@njit(cache=True)
def csr_lazy_cyclic_sgd_steps(indptr, indices, data, n_cols, y, theta, order, start, step0,
                              n_steps, code, param, clip_norm, batch_size, learning_rate,
                              fit_intercept, noise_spacing, last, scratch, kmax, sums,
                              counts, coords, starts, count_only, scale=1.0, decay=1.0):
    """Steps ``step0 .. step0 + n_steps − 1`` of cyclic DP-SGD on CSR rows with lazy noise.

    Only for steps without a proximal map (no penalty, no constraint) and with grid
    noise: then :func:`csr_cyclic_sgd_steps` moves coordinate j by γ·(N_{t,j} −
    round(λḡ_{t,j}/γ)) at every step, and θ_j is read only by the steps whose batch
    has a nonzero in column j (and the intercept by every step). Here the noise of
    coordinate j is added when it is next read, as the sum of the steps since its
    last read (``sums``, one entry per draw, in the order this loop asks for them),
    and the gradient part at the step itself. The work of a step is O(nnz of its
    batch). θ stays on the grid γℤ, so with the sums of the same integers the result
    is bitwise that of :func:`csr_cyclic_sgd_steps` (tested).

    Two passes over the same steps: ``count_only=True`` records the draws the steps
    need (``counts[i]`` steps of noise of coordinate ``coords[i]``, from step
    ``starts[i]``; touches neither θ nor the data values), then the caller draws
    ``sums`` and runs ``count_only=False``.

    A coordinate is read at step t unless ``last[j] == t`` already: it was flushed
    earlier in the step, or t = 0, when nothing is pending. The gradient part is
    applied once per coordinate where the accumulated sum is nonzero (a zero sum
    moves θ_j by γ·round(0) = 0, as in the eager kernel), so no per-coordinate mark
    is kept: two arrays of d entries read at random, not three.

    With ``decay`` a < 1 (the ℓ2² penalty's prox, a = 1/(1 + λα)) the steps are those
    of the *scaled release* (``doc/derivations/lazy_noise.rst``, "The ℓ2² penalty"):
    ``theta[:d]`` holds u with w = s·u, s = ``scale`` at step ``step0`` and multiplied
    by a after every step; step t reads w_j = s_t·u_j, releases Y_t −
    round(λḡ_t/(γs_t)) on the coefficients (the intercept as above, unscaled) and adds
    γ times it to u, so that u only ever receives γ·(integer) and the pending noise is
    again a plain sum. ``scale`` = ``decay`` = 1 is the unscaled run, bit for bit (a
    product by 1.0 and a quotient by 1.0 are exact). The caller keeps every s ≥ its
    floor and folds s into u between blocks (``mechanisms/cyclic_sgd.py``).

    Parameters
    ----------
    last : ndarray of int64, shape (d + 1,)
        Per coordinate, the first step whose noise is pending; updated.
    scratch : ndarray of float64, shape (d,)
        Zeros; the batch gradient is accumulated on the read coordinates and zeroed.
    kmax : int
        The most steps one draw covers (:func:`lazy_max_count`).
    sums, counts, coords, starts : ndarrays
        See above (``counts``/``coords``/``starts`` are written in the counting pass,
        ``sums`` read in the other; ``coords`` and ``starts`` may be empty, and are then
        not written); both passes return the number of draws used.
    scale : float, default=1.0
        s at step ``step0``, in (0, 1] (the scaled release only).
    decay : float, default=1.0
        a in (0, 1]: s ← a·s after every step.

    Returns
    -------
    next_start : int
    n_draws : int
    """
    n = indptr.shape[0] - 1
    d = n_cols
    if theta.shape[0] != d + 1 or last.shape[0] != d + 1 or scratch.shape[0] != d \
            or order.shape[0] != n or y.shape[0] != n:
        raise ValueError("inconsistent shapes")
    if not 1 <= batch_size <= n or not 0 <= start < n or not noise_spacing > 0.0 \
            or kmax < 1:
        raise ValueError("need 1 <= batch_size <= n_rows, 0 <= start < n_rows, "
                         "noise_spacing > 0 and kmax >= 1")
    if not (0.0 < scale <= 1.0 and 0.0 < decay <= 1.0):
        raise ValueError("need 0 < scale <= 1 and 0 < decay <= 1")
    check_loss(code, param)
    rows = np.empty(batch_size, dtype=np.int64)
    step = learning_rate / batch_size
    inv = 1.0 / noise_spacing
    pos = 0
    sc = np.float64(scale)
    for s in range(n_steps):
        t = step0 + s
        start = _next_batch(order, start, rows)
        for r_ in range(batch_size):
            i = rows[r_]
            if i < 0 or i >= n:
                raise IndexError("order holds an index out of range")
            for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
                j = np.int64(indices[k])
                if last[j] != t:
                    pos = _flush(j, t, last, kmax, theta, noise_spacing, sums, pos, counts,
                                 coords, starts, count_only)
        if fit_intercept:
            pos = _flush(d, t, last, kmax, theta, noise_spacing, sums, pos, counts, coords,
                         starts, count_only)
        if count_only:
            continue
        # The clipped gradient sum, as _csr_clipped_gradient_sum computes it (same
        # order of operations) at w = s·u, on the read coordinates only.
        u = theta[:d]
        intercept_sum = 0.0
        for r_ in range(batch_size):
            i = rows[r_]
            z = _csr_margin_scaled(indptr, indices, data, i, u, sc, theta[d])
            der = _derivative(code, z, y[i], param)
            if der == 0.0:
                continue
            c = _clipped_derivative(der, data, indptr[i], indptr[i + 1], clip_norm,
                                    fit_intercept)
            for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
                scratch[np.uint64(indices[k])] += c * np.float64(data[k])
            if fit_intercept:
                intercept_sum += c
        for r_ in range(batch_size):
            i = rows[r_]
            for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
                j = np.int64(indices[k])
                g = scratch[j]
                if g != 0.0:  # once per coordinate: zeroed after
                    # round(λḡ_j/(γs)): x/1.0 is x, so s = 1 is the unscaled release.
                    theta[j] -= noise_spacing * on_grid_nb(step * g * inv / sc)
                    scratch[j] = 0.0
        if fit_intercept:
            theta[d] -= noise_spacing * on_grid_nb(step * intercept_sum * inv)
        sc *= decay
    return start, pos


@njit(cache=True, inline="always")
def _csr_margin_scaled(indptr, indices, data, i, u, s, b):
    # ⟨x_i, w⟩ + b at w = s·u, each w_j formed as the product s·u_j (so that a caller
    # holding w = s*u as an array, _csr_margin's order, gets the same bits; s = 1
    # gives _csr_margin's bits). Overflow: as _csr_margin, in units of the row's
    # largest entry.
    z = b
    for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
        z += np.float64(data[k]) * (s * np.float64(u[np.uint64(indices[k])]))
    if abs(z) < math.inf:
        return z
    return _csr_margin_rescaled(indptr, indices, data, i, u, b, s)


@njit(cache=True)
def lazy_final_flush(theta, last, n_steps, p, kmax, noise_spacing, sums, counts, coords,
                     starts, count_only):
    """Add the pending noise of the first ``p`` coordinates up to step ``n_steps``
    (the end of the run), or record the draws it needs; returns the number of draws."""
    pos = 0
    for j in range(p):
        pos = _flush(j, n_steps, last, kmax, theta, noise_spacing, sums, pos, counts,
                     coords, starts, count_only)
    return pos


# ------------------------------------------------------------- multiclass (K outputs)
# θ is the K × (d + 1) matrix Θ (row k: the coefficients and intercept of output k),
# stored flat (C order) so that the ℓ2 ball is a projection of one vector. Example i
# contributes the K × p gradient g_i ⊗ x̃_i, g_i ∈ ℝ^K the derivative of its loss in
# the K margins z_k = ⟨θ_k, x̃_i⟩, clipped jointly to Frobenius norm C:
#   softmax (multinomial logistic): g = softmax(z) − e_y, ‖g‖₂ < √2;
#   otherwise one-vs-rest: g_k = ℓ'(z_k, ±1) (+1 for k = y), ‖g‖₂ ≤ √K·sup|ℓ'|.
# The noise row has K·p entries, entry k·p + j for coordinate j of output k.


@njit(cache=True, inline="always")
def _multiclass_derivatives(z, label, code, softmax, param, g):
    # g ← ∂ loss / ∂ z for one example of class index `label`; returns ‖g‖₂.
    n_out = z.shape[0]
    if softmax:
        zmax = z[0]
        for k in range(1, n_out):
            zmax = max(zmax, z[k])
        total = 0.0
        for k in range(n_out):
            # (Infinite margins: the limit, p uniform over the largest ones.)
            g[k] = (1.0 if z[k] == zmax else 0.0) if abs(zmax) == math.inf \
                else math.exp(z[k] - zmax)
            total += g[k]
        for k in range(n_out):
            g[k] /= total
        g[label] -= 1.0
    else:
        for k in range(n_out):
            g[k] = loss_value_and_derivative(code, z[k], 1.0 if k == label else -1.0,
                                             param)[1]
    s = 0.0
    for k in range(n_out):
        s += g[k] * g[k]
    return math.sqrt(s)


@njit(cache=True, inline="always")
def _clip_factor(g_norm, x_norm, clip_norm, fit_intercept):
    # min(1, C/(‖g‖·‖x̃‖)); rows are bounded by the caller, so ‖x̃‖ is finite.
    total = g_norm * (math.hypot(x_norm, 1.0) if fit_intercept else x_norm)
    if total <= clip_norm:
        return 1.0
    return clip_norm / total


@njit(cache=True)
def _multiclass_elastic_net_ball_prox(theta, th, t, alpha, l1_ratio, radius):
    # _elastic_net_ball_prox for Θ: w-entries shrink by 1/(1 + a + μ) after the soft
    # threshold, intercepts by 1/(1 + μ), μ ≥ 0 the one multiplier of the joint ball.
    n_out, d1 = th.shape
    d = d1 - 1
    a = t * alpha * (1.0 - l1_ratio)
    s2 = 0.0
    b2 = 0.0
    for k in range(n_out):
        w = th[k, :d]
        soft_threshold_nb(w, t * alpha * l1_ratio, w)
        for j in range(d):
            s2 += w[j] * w[j]
        b2 += th[k, d] * th[k, d]
    r2 = radius * radius
    mu = 0.0
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
    for k in range(n_out):
        for j in range(d):
            th[k, j] /= 1.0 + a + mu
        th[k, d] /= 1.0 + mu
    project_l2_ball_nb(theta, radius, theta)  # rounding only: keep ‖Θ‖ ≤ r exactly


@njit(cache=True, inline="always")
def _multiclass_noisy_prox_step(theta, th, coef_sum, intercept_sum, step, noise_row,
                                fit_intercept, learning_rate, alpha, l1_ratio, constraint,
                                radius, lower, upper, spacing):
    n_out, d1 = th.shape
    d = d1 - 1
    p = d + 1 if fit_intercept else d
    for k in range(n_out):
        off = k * p
        if spacing > 0.0:
            inv = 1.0 / spacing
            for j in range(d):
                th[k, j] += spacing * (noise_row[off + j] - on_grid_nb(step * coef_sum[k, j] * inv))
            if fit_intercept:
                th[k, d] += spacing * (noise_row[off + d]
                                       - on_grid_nb(step * intercept_sum[k] * inv))
        else:
            for j in range(d):
                th[k, j] += noise_row[off + j] - step * coef_sum[k, j]
            if fit_intercept:
                th[k, d] += noise_row[off + d] - step * intercept_sum[k]
    if constraint == BALL and fit_intercept and alpha * (1.0 - l1_ratio) > 0.0:
        _multiclass_elastic_net_ball_prox(theta, th, learning_rate, alpha, l1_ratio, radius)
        return
    if alpha > 0.0:
        for k in range(n_out):
            w = th[k, :d]
            prox_elastic_net_nb(w, learning_rate, alpha, l1_ratio, w)
    if constraint == BALL:
        # Intercepts that are not fitted stay 0, so the flat projection is the
        # projection of the fitted parameters.
        project_l2_ball_nb(theta, radius, theta)
    elif constraint == BOX:
        for k in range(n_out):
            project_box_nb(th[k, :p], lower, upper, th[k, :p])


@njit(cache=True, inline="always")
def _check_multiclass_args(theta, n_out, d, y, n, order, batch_size, start, noise,
                           fit_intercept, constraint, lower, upper):
    if n_out < 1 or theta.shape[0] != n_out * (d + 1):
        raise ValueError("theta must have n_outputs * (n_features + 1) entries")
    if y.shape[0] != n or order.shape[0] != n:
        raise ValueError("y and order must have one entry per row")
    for i in range(n):
        if y[i] < 0 or y[i] >= n_out:
            raise ValueError("y must hold class indices in [0, n_outputs)")
    if not 1 <= batch_size <= n or not 0 <= start < n:
        raise ValueError("need 1 <= batch_size <= n_rows and 0 <= start < n_rows")
    if noise.shape[1] != n_out * (d + 1 if fit_intercept else d):
        raise ValueError("noise must have one column per parameter")
    if constraint == BOX and (lower.shape[0] != 1 or upper.shape[0] != 1):
        raise ValueError("BOX takes scalar bounds as arrays of length 1")


@njit(cache=True)
def dense_multiclass_cyclic_sgd_steps(X, y, theta, n_outputs, order, start, code, softmax,
                                      param, clip_norm, batch_size, learning_rate, noise,
                                      alpha, l1_ratio, constraint, radius, lower, upper,
                                      fit_intercept, noise_spacing=0.0):
    """:func:`dense_cyclic_sgd_steps` for a model of K = ``n_outputs`` linear outputs.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Rows already scaled to the contribution bound.
    y : ndarray of shape (n,), int64
        Class indices in [0, K).
    theta : ndarray of shape (K·(d + 1),), float64
        Θ flat in C order (row k: w_k then b_k), updated in place.
    n_outputs : int
        K.
    code, softmax, param
        ``softmax``: the multinomial logistic loss −log softmax(z)_y (``code`` is then
        ignored); else the loss ``code`` one-vs-rest, summed over the K outputs.
    noise : ndarray of shape (n_steps, K·(d + fit_intercept))
        Row t: N_t, entry k·p + j for coordinate j of output k.

    The other parameters are those of :func:`dense_cyclic_sgd_steps`; the penalty acts
    on every w_k, ``radius`` bounds the Frobenius norm of Θ and ``box`` every entry.

    Returns
    -------
    int
        The position in ``order`` where the next block starts.
    """
    n, d = X.shape
    _check_multiclass_args(theta, n_outputs, d, y, n, order, batch_size, start, noise,
                           fit_intercept, constraint, lower, upper)
    if not softmax:
        check_loss(code, param)
    th = theta.reshape((n_outputs, d + 1))
    rows = np.empty(batch_size, dtype=np.int64)
    z = np.empty(n_outputs)
    g = np.empty(n_outputs)
    coef_sum = np.empty((n_outputs, d))
    intercept_sum = np.empty(n_outputs)
    step = learning_rate / batch_size
    for t in range(noise.shape[0]):
        start = _next_batch(order, start, rows)
        coef_sum[:] = 0.0
        intercept_sum[:] = 0.0
        for r_ in range(batch_size):
            i = rows[r_]
            if i < 0 or i >= n:
                raise IndexError("order holds an index out of range")
            x = X[i]
            x_norm = l2_norm_range_nb(x, 0, d)
            for k in range(n_outputs):
                b_k = th[k, d] if fit_intercept else 0.0
                z[k] = _dot(x, th[k, :d]) + b_k
                if not abs(z[k]) < math.inf:
                    z[k] = _dense_margin_rescaled(X, i, th[k, :d], b_k)
            g_norm = _multiclass_derivatives(z, y[i], code, softmax, param, g)
            c = _clip_factor(g_norm, x_norm, clip_norm, fit_intercept)
            for k in range(n_outputs):
                gk = c * g[k]
                if gk == 0.0:
                    continue
                for j in range(d):
                    coef_sum[k, j] += gk * x[j]
                intercept_sum[k] += gk
        _multiclass_noisy_prox_step(theta, th, coef_sum, intercept_sum, step, noise[t],
                                    fit_intercept, learning_rate, alpha, l1_ratio,
                                    constraint, radius, lower, upper, noise_spacing)
    return start


@njit(cache=True)
def csr_multiclass_cyclic_sgd_steps(indptr, indices, data, n_cols, y, theta, n_outputs, order,
                                    start, code, softmax, param, clip_norm, batch_size,
                                    learning_rate, noise, alpha, l1_ratio, constraint, radius,
                                    lower, upper, fit_intercept, noise_spacing=0.0):
    """CSR version of :func:`dense_multiclass_cyclic_sgd_steps` (canonical CSR parts
    and ``n_cols``); the update of Θ is dense (the noise is).

    Returns
    -------
    int
        The position in ``order`` where the next block starts.
    """
    n = indptr.shape[0] - 1
    d = n_cols
    _check_multiclass_args(theta, n_outputs, d, y, n, order, batch_size, start, noise,
                           fit_intercept, constraint, lower, upper)
    if not softmax:
        check_loss(code, param)
    th = theta.reshape((n_outputs, d + 1))
    rows = np.empty(batch_size, dtype=np.int64)
    z = np.empty(n_outputs)
    g = np.empty(n_outputs)
    coef_sum = np.empty((n_outputs, d))
    intercept_sum = np.empty(n_outputs)
    step = learning_rate / batch_size
    for t in range(noise.shape[0]):
        start = _next_batch(order, start, rows)
        coef_sum[:] = 0.0
        intercept_sum[:] = 0.0
        for r_ in range(batch_size):
            i = rows[r_]
            if i < 0 or i >= n:
                raise IndexError("order holds an index out of range")
            lo, hi = np.uint64(indptr[i]), np.uint64(indptr[i + 1])
            x_norm = l2_norm_range_nb(data, lo, hi)
            for o in range(n_outputs):
                z[o] = _csr_margin(indptr, indices, data, i, th[o, :d],
                                   th[o, d] if fit_intercept else 0.0)
            g_norm = _multiclass_derivatives(z, y[i], code, softmax, param, g)
            c = _clip_factor(g_norm, x_norm, clip_norm, fit_intercept)
            for o in range(n_outputs):
                go = c * g[o]
                if go == 0.0:
                    continue
                for k in range(lo, hi):
                    coef_sum[o, np.uint64(indices[k])] += go * np.float64(data[k])
                intercept_sum[o] += go
        _multiclass_noisy_prox_step(theta, th, coef_sum, intercept_sum, step, noise[t],
                                    fit_intercept, learning_rate, alpha, l1_ratio,
                                    constraint, radius, lower, upper, noise_spacing)
    return start
