"""Per-example losses of linear models and their gradients, for dense and CSR data.

The margin of example :math:`i` is :math:`z_i = \\langle w, x_i\\rangle + b`.
Classification losses are functions of the signed margin :math:`t = y z` with
labels :math:`y \\in \\{-1, +1\\}` (not checked); regression losses of the residual
:math:`r = z - y`. Losses are selected by integer codes (numba-friendly), with one
float parameter ``param`` used by two of them:

* ``SQUARED``: :math:`\\tfrac12 r^2`.
* ``LOGISTIC``: :math:`\\log(1 + e^{-t})`, evaluated without overflow.
* ``HINGE``: :math:`\\max(0, 1 - t)`; its derivative at the kink :math:`t = 1` is
  taken as 0.
* ``SMOOTHED_HINGE`` with width :math:`h` = ``param`` > 0: 0 for :math:`t \\ge 1`,
  :math:`(1-t)^2/(2h)` for :math:`1-h < t < 1`, :math:`1 - t - h/2` for
  :math:`t \\le 1-h` (continuously differentiable, :math:`1/h`-smooth).
* ``HUBER`` with threshold :math:`\\delta` = ``param`` > 0: :math:`\\tfrac12 r^2` for
  :math:`|r| \\le \\delta`, else :math:`\\delta(|r| - \\delta/2)`.
* ``SIGMOID``: :math:`1/(1 + e^{t})`, smooth, bounded and nonconvex.

Margins of finite rows are never NaN: a sum that overflows is taken again in units
of the row's largest entry, giving the true margin or ±inf when it is beyond float64
(every loss above has a finite or signed-infinite value and derivative there).
Clipped gradients (:func:`dense_clipped_gradient_sum`) are finite for every finite
row, of norm at most the clip norm, also when ``|ℓ'|·‖x‖`` overflows.

Derivatives are taken in :math:`z`, so the gradient of example :math:`i` is
:math:`\\ell'(z_i, y_i)\\,(x_i, 1)` in :math:`(w, b)`. The batch kernels never form
per-example gradient vectors: they scatter :math:`\\ell'_i x_i` along each row's
nonzeros. Functions taking ``rows`` use only those example indices (repeats
allowed, e.g. sampling with replacement), so mini-batches are not copied.

Everything here is an ``@njit`` dispatcher callable from Python and compiled code.
Inputs may be float32 or float64 (labels any numeric dtype); accumulation and
outputs are float64.
"""

import math

import numpy as np
from numba import njit

from ._common import l2_norm_range_nb, overflow_bounding_scale_nb

__all__ = [
    "SQUARED",
    "LOGISTIC",
    "HINGE",
    "SMOOTHED_HINGE",
    "HUBER",
    "SIGMOID",
    "LOSS_CODES",
    "check_loss",
    "loss_value",
    "loss_derivative",
    "loss_value_and_derivative",
    "per_example_losses",
    "per_example_derivatives",
    "dense_margins",
    "csr_margins",
    "dense_loss_gradient",
    "csr_loss_gradient",
    "dense_clipped_gradient_sum",
    "csr_clipped_gradient_sum",
    "loss_curvature",
    "csr_fixed_loss_gradient",
    "dense_fixed_loss_gradient",
    "csr_fixed_hessian_product",
    "dense_fixed_hessian_product",
]

SQUARED = 0
LOGISTIC = 1
HINGE = 2
SMOOTHED_HINGE = 3
HUBER = 4
SIGMOID = 5

#: Loss names (as estimators spell them) to codes.
LOSS_CODES = {
    "squared": SQUARED,
    "logistic": LOGISTIC,
    "hinge": HINGE,
    "smoothed_hinge": SMOOTHED_HINGE,
    "huber": HUBER,
    "sigmoid": SIGMOID,
}


@njit(cache=True)
def check_loss(code, param):
    """Raise ``ValueError`` unless ``code`` is a loss code and ``param`` fits it.

    SMOOTHED_HINGE needs a width ``param > 0`` and HUBER a threshold ``param > 0``;
    the other losses ignore ``param``. The scalar functions do not check ``param``
    (they run per example); the batch kernels call this once.
    """
    if code < SQUARED or code > SIGMOID:
        raise ValueError("unknown loss code")
    if (code == SMOOTHED_HINGE or code == HUBER) and not (0.0 < param < math.inf):
        raise ValueError("SMOOTHED_HINGE and HUBER need a finite param > 0")


@njit(cache=True, inline="always")
def loss_value_and_derivative(code, z, y, param):
    """Loss and its derivative in the margin ``z``, for one example.

    Parameters
    ----------
    code : int
        One of the loss codes of this module.
    z : float
        Margin :math:`\\langle w, x\\rangle + b`.
    y : float
        Label (:math:`\\pm 1` for classification) or target.
    param : float
        Smoothed-hinge width or Huber threshold; ignored by the other losses.

    Returns
    -------
    value, derivative : float
    """
    z = np.float64(z)
    y = np.float64(y)
    if code == SQUARED:
        r = z - y
        return 0.5 * r * r, r
    elif code == LOGISTIC:
        # log(1 + e^-t) and its t-derivative -1/(1 + e^t), evaluated with an
        # exponent <= 0 so that nothing overflows.
        t = y * z
        if t > 0.0:
            e = math.exp(-t)
            return math.log1p(e), -y * e / (1.0 + e)
        e = math.exp(t)
        return math.log1p(e) - t, -y / (1.0 + e)
    elif code == HINGE:
        t = y * z
        if t < 1.0:
            return 1.0 - t, -y
        return 0.0, 0.0
    elif code == SMOOTHED_HINGE:
        t = y * z
        if t >= 1.0:
            return 0.0, 0.0
        if t > 1.0 - param:
            u = 1.0 - t
            return u * u / (2.0 * param), -y * u / param
        return 1.0 - t - 0.5 * param, -y
    elif code == HUBER:
        r = z - y
        if abs(r) <= param:
            return 0.5 * r * r, r
        return param * (abs(r) - 0.5 * param), math.copysign(param, r)
    elif code == SIGMOID:
        # l = 1 / (1 + e^t) and 1 - l, each without cancellation or overflow;
        # dl/dt = -l (1 - l).
        t = y * z
        if t >= 0.0:
            e = math.exp(-t)
            val = e / (1.0 + e)
            comp = 1.0 / (1.0 + e)
        else:
            e = math.exp(t)
            val = 1.0 / (1.0 + e)
            comp = e / (1.0 + e)
        return val, -y * val * comp
    raise ValueError("unknown loss code")


@njit(cache=True)
def loss_value(code, z, y, param):
    """Loss of one example with margin ``z`` and label/target ``y`` (see module doc)."""
    return loss_value_and_derivative(code, z, y, param)[0]


@njit(cache=True)
def loss_derivative(code, z, y, param):
    """Derivative in ``z`` of the loss of one example (see module doc)."""
    return loss_value_and_derivative(code, z, y, param)[1]


@njit(cache=True)
def per_example_losses(margins, y, code, param):
    """Losses :math:`\\ell(z_i, y_i)` for arrays of margins and labels (float64)."""
    check_loss(code, param)
    if y.shape[0] != margins.shape[0]:
        raise ValueError("margins and y must have the same length")
    out = np.empty(margins.shape[0], dtype=np.float64)
    for i in range(margins.shape[0]):
        out[i] = loss_value_and_derivative(code, margins[i], y[i], param)[0]
    return out


@njit(cache=True)
def per_example_derivatives(margins, y, code, param):
    """Derivatives :math:`\\ell'(z_i, y_i)` in the margin (float64).

    The gradient of example :math:`i` in :math:`w` is ``derivatives[i] * x_i``
    (and ``derivatives[i]`` in :math:`b`), so callers can combine this with CSR
    rows and keep their sparsity.
    """
    check_loss(code, param)
    if y.shape[0] != margins.shape[0]:
        raise ValueError("margins and y must have the same length")
    out = np.empty(margins.shape[0], dtype=np.float64)
    for i in range(margins.shape[0]):
        out[i] = loss_value_and_derivative(code, margins[i], y[i], param)[1]
    return out


# ------------------------------------------------------------------------- margins


# A margin ⟨w, x⟩ + b of a finite row can overflow although the true value is finite
# (1e308 + 1e308 − 1e308) or turn into NaN (a product +inf plus one −inf). The plain
# sum runs first; only when it is not finite is it taken again in units of the row's
# largest entry m: m·Σ (x_j/m)·w_j + b, whose inner sum is at most √d‖w‖ (finite), so
# the result is the true margin to rounding, or ±inf when that is beyond float64 (a
# signed infinity every loss handles). Non-finite input keeps its NaN/inf.


@njit(cache=True)
def _csr_margin_rescaled(indptr, indices, data, i, w, b, s=1.0):
    # The weights are s·w_j, formed as that product where read (the scaled release of
    # cyclic SGD holds w = s·u); s·w_j = w_j bit for bit at s = 1.
    amax = 0.0
    for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
        amax = max(amax, abs(np.float64(data[k])))
    if not (0.0 < amax < math.inf):
        return np.nan
    acc = 0.0
    for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
        acc += (np.float64(data[k]) / amax) * (s * np.float64(w[np.uint64(indices[k])]))
    return amax * acc + b


@njit(cache=True)
def _dense_margin_rescaled(X, i, w, b):
    amax = 0.0
    for j in range(X.shape[1]):
        amax = max(amax, abs(np.float64(X[i, j])))
    if not (0.0 < amax < math.inf):
        return np.nan
    acc = 0.0
    for j in range(X.shape[1]):
        acc += (np.float64(X[i, j]) / amax) * np.float64(w[j])
    return amax * acc + b


@njit(cache=True, inline="always")
def _csr_margin(indptr, indices, data, i, w, b):
    z = b
    for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
        z += np.float64(data[k]) * np.float64(w[np.uint64(indices[k])])
    if abs(z) < math.inf:
        return z
    return _csr_margin_rescaled(indptr, indices, data, i, w, b)


@njit(cache=True, inline="always")
def _dense_margin(X, i, w, b):
    z = b
    for j in range(X.shape[1]):
        z += np.float64(X[i, j]) * np.float64(w[j])
    if abs(z) < math.inf:
        return z
    return _dense_margin_rescaled(X, i, w, b)


@njit(cache=True)
def dense_margins(X, w, b):
    """Margins ``X @ w + b`` of a dense 2-D array, accumulated in float64.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_cols)
    w : ndarray of shape (n_cols,)
    b : float

    Returns
    -------
    ndarray of shape (n_rows,), float64
    """
    if w.shape[0] != X.shape[1]:
        raise ValueError("w must have one entry per column of X")
    out = np.empty(X.shape[0], dtype=np.float64)
    for i in range(X.shape[0]):
        out[i] = _dense_margin(X, i, w, np.float64(b))
    return out


@njit(cache=True)
def csr_margins(indptr, indices, data, w, b):
    """Margins ``X @ w + b`` of a CSR matrix (``n_cols == len(w)``), in float64.

    Parameters
    ----------
    indptr, indices, data : CSR parts
    w : ndarray of shape (n_cols,)
    b : float

    Returns
    -------
    ndarray of shape (n_rows,), float64
    """
    n = indptr.shape[0] - 1
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        out[i] = _csr_margin(indptr, indices, data, i, w, np.float64(b))
    return out


# ------------------------------------------------------------- mean loss gradients


@njit(cache=True, inline="always")
def _check_rows(rows, n):
    for t in range(rows.shape[0]):
        if rows[t] < 0 or rows[t] >= n:
            raise IndexError("rows holds an index out of range")


@njit(cache=True)
def _dense_loss_gradient(X, y, w, b, code, param, rows):
    check_loss(code, param)
    _check_rows(rows, X.shape[0])
    if rows.shape[0] == 0:
        raise ValueError("the mean loss of no examples is undefined")
    d = X.shape[1]
    grad = np.zeros(d, dtype=np.float64)
    loss = 0.0
    grad_b = 0.0
    for t in range(rows.shape[0]):
        i = rows[t]
        val, der = loss_value_and_derivative(code, _dense_margin(X, i, w, b), y[i], param)
        loss += val
        grad_b += der
        if der != 0.0:
            for j in range(d):
                grad[j] += der * np.float64(X[i, j])
    m = rows.shape[0]
    return loss / m, grad / m, grad_b / m


@njit(cache=True)
def dense_loss_gradient(X, y, w, b, code, param, rows=None):
    """Mean loss and its gradient over (a subset of) the rows of a dense array.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_cols)
    y : ndarray of shape (n_rows,)
    w : ndarray of shape (n_cols,)
    b : float
    code : int
        Loss code.
    param : float
        Loss parameter (see :func:`check_loss`).
    rows : ndarray of int, optional
        Example indices to average over (repeats count twice); default all rows.

    Returns
    -------
    loss : float
        Mean loss.
    grad_w : ndarray of shape (n_cols,), float64
        Gradient of the mean loss in ``w``.
    grad_b : float
        Derivative of the mean loss in ``b``.
    """
    if w.shape[0] != X.shape[1] or y.shape[0] != X.shape[0]:
        raise ValueError("X, y and w have inconsistent shapes")
    if rows is None:
        return _dense_loss_gradient(X, y, w, np.float64(b), code, param, np.arange(X.shape[0]))
    return _dense_loss_gradient(X, y, w, np.float64(b), code, param, rows)


@njit(cache=True)
def _csr_loss_gradient(indptr, indices, data, y, w, b, code, param, rows):
    check_loss(code, param)
    _check_rows(rows, indptr.shape[0] - 1)
    if rows.shape[0] == 0:
        raise ValueError("the mean loss of no examples is undefined")
    grad = np.zeros(w.shape[0], dtype=np.float64)
    loss = 0.0
    grad_b = 0.0
    for t in range(rows.shape[0]):
        i = rows[t]
        z = _csr_margin(indptr, indices, data, i, w, b)
        val, der = loss_value_and_derivative(code, z, y[i], param)
        loss += val
        grad_b += der
        if der != 0.0:
            for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
                grad[np.uint64(indices[k])] += der * np.float64(data[k])
    m = rows.shape[0]
    return loss / m, grad / m, grad_b / m


@njit(cache=True)
def csr_loss_gradient(indptr, indices, data, y, w, b, code, param, rows=None):
    """Mean loss and its gradient over (a subset of) the rows of a CSR matrix.

    Same as :func:`dense_loss_gradient` with the CSR parts of ``X`` (``n_cols ==
    len(w)``); the gradient is accumulated along each row's nonzeros.

    Returns
    -------
    loss : float
    grad_w : ndarray of shape (n_cols,), float64
    grad_b : float
    """
    if y.shape[0] != indptr.shape[0] - 1:
        raise ValueError("y must have one entry per row")
    if rows is None:
        return _csr_loss_gradient(
            indptr, indices, data, y, w, np.float64(b), code, param, np.arange(y.shape[0])
        )
    return _csr_loss_gradient(indptr, indices, data, y, w, np.float64(b), code, param, rows)


# ---------------------------------------------------- clipped per-example gradients


@njit(cache=True, inline="always")
def _clipped_derivative(der, x, start, stop, clip_norm, fit_intercept):
    # c with c·(x, 1) (or c·x) the gradient der·(x, 1) clipped to norm ≤ clip_norm:
    # c = der·min(1, C/(|der|·‖x̄‖)). When |der|·‖x̄‖ is not finite (a huge row whose
    # norm overflows, or der = ±inf from a margin beyond float64), the clipped gradient
    # is sign(der)·C·x̄/‖x̄‖, i.e. c = ±C/‖x̄‖, with C/‖x‖ taken in units of the row's
    # largest entry (for ‖x‖ > 2⁵³ the intercept's 1 does not change ‖x̄‖ in float64).
    x_norm = l2_norm_range_nb(x, start, stop)
    g_norm = abs(der) * (math.hypot(x_norm, 1.0) if fit_intercept else x_norm)
    if g_norm <= clip_norm:
        return der
    if g_norm < math.inf:
        return der * (clip_norm / g_norm)
    if x_norm == 0.0:  # der = ±inf on a zero row: only the intercept's part
        return math.copysign(clip_norm, der) if fit_intercept else 0.0
    if x_norm < math.inf:
        mag = clip_norm / (math.hypot(x_norm, 1.0) if fit_intercept else x_norm)
    else:
        mag = overflow_bounding_scale_nb(x, start, stop, clip_norm, math.inf)
    return math.copysign(mag, der)


@njit(cache=True)
def _dense_clipped_gradient_sum(X, y, w, b, code, param, clip_norm, rows, fit_intercept):
    check_loss(code, param)
    _check_rows(rows, X.shape[0])
    d = X.shape[1]
    coef = np.zeros(d, dtype=np.float64)
    intercept = 0.0
    for t in range(rows.shape[0]):
        i = rows[t]
        der = loss_value_and_derivative(code, _dense_margin(X, i, w, b), y[i], param)[1]
        if der == 0.0:
            continue
        c = _clipped_derivative(der, X[i], 0, d, clip_norm, fit_intercept)
        for j in range(d):
            coef[j] += c * np.float64(X[i, j])
        if fit_intercept:
            intercept += c
    return coef, intercept


@njit(cache=True)
def dense_clipped_gradient_sum(X, y, w, b, code, param, clip_norm, rows=None, fit_intercept=True):
    """Sum of per-example gradients, each clipped to l2 norm ``<= clip_norm``.

    DP-SGD's clipped sum: example :math:`i` contributes
    :math:`g_i \\min(1, C/\\|g_i\\|_2)` with :math:`g_i = \\ell'(z_i, y_i)(x_i, 1)`.
    With ``fit_intercept`` the intercept is a constant feature 1, so it shares the
    clipping: :math:`\\|g_i\\|_2 = |\\ell'_i|\\sqrt{\\|x_i\\|_2^2 + 1}`; without it
    :math:`g_i = \\ell'_i x_i` and the intercept part returned is 0 (``b`` still
    enters the margins). Sensitivity of the sum under replacement of one example
    is therefore ``2 * clip_norm`` (``clip_norm`` under addition/removal).

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_cols)
    y : ndarray of shape (n_rows,)
    w : ndarray of shape (n_cols,)
    b : float
    code : int
    param : float
    clip_norm : float
        ``C >= 0``; ``np.inf`` disables clipping.
    rows : ndarray of int, optional
        Example indices (repeats allowed); default all rows.
    fit_intercept : bool, default=True

    Returns
    -------
    coef_sum : ndarray of shape (n_cols,), float64
    intercept_sum : float
    """
    if w.shape[0] != X.shape[1] or y.shape[0] != X.shape[0]:
        raise ValueError("X, y and w have inconsistent shapes")
    if not clip_norm >= 0.0:
        raise ValueError("clip_norm must be >= 0")
    if rows is None:
        return _dense_clipped_gradient_sum(
            X, y, w, np.float64(b), code, param, clip_norm, np.arange(X.shape[0]), fit_intercept
        )
    return _dense_clipped_gradient_sum(
        X, y, w, np.float64(b), code, param, clip_norm, rows, fit_intercept
    )


@njit(cache=True)
def _csr_clipped_gradient_sum(
    indptr, indices, data, y, w, b, code, param, clip_norm, rows, fit_intercept
):
    check_loss(code, param)
    _check_rows(rows, indptr.shape[0] - 1)
    coef = np.zeros(w.shape[0], dtype=np.float64)
    intercept = 0.0
    for t in range(rows.shape[0]):
        i = rows[t]
        z = _csr_margin(indptr, indices, data, i, w, b)
        der = loss_value_and_derivative(code, z, y[i], param)[1]
        if der == 0.0:
            continue
        c = _clipped_derivative(der, data, indptr[i], indptr[i + 1], clip_norm,
                                fit_intercept)
        start = indptr[i]
        stop = indptr[i + 1]
        for k in range(np.uint64(start), np.uint64(stop)):
            coef[np.uint64(indices[k])] += c * np.float64(data[k])
        if fit_intercept:
            intercept += c
    return coef, intercept


@njit(cache=True)
def csr_clipped_gradient_sum(
    indptr, indices, data, y, w, b, code, param, clip_norm, n_cols, rows=None,
    fit_intercept=True,
):
    """CSR version of :func:`dense_clipped_gradient_sum`.

    ``n_cols`` must equal ``len(w)`` (it is checked; the CSR parts do not carry the
    number of columns). Each example's gradient is scattered along its row's
    nonzeros; no per-example gradient vector is formed.

    Returns
    -------
    coef_sum : ndarray of shape (n_cols,), float64
    intercept_sum : float
    """
    if n_cols != w.shape[0] or y.shape[0] != indptr.shape[0] - 1:
        raise ValueError("n_cols, w and y have inconsistent shapes")
    if not clip_norm >= 0.0:
        raise ValueError("clip_norm must be >= 0")
    if rows is None:
        return _csr_clipped_gradient_sum(
            indptr, indices, data, y, w, np.float64(b), code, param, clip_norm,
            np.arange(y.shape[0]), fit_intercept,
        )
    return _csr_clipped_gradient_sum(
        indptr, indices, data, y, w, np.float64(b), code, param, clip_norm, rows, fit_intercept
    )


# ------------------------------------------------- exact (fixed-point) sums over rows
#
# The certified solver (_solvers.erm) and its distributed passes sum per-row terms as
# int64 after rounding each to a power-of-two grid: integer addition is associative,
# so the sums are the same for every chunking, merge order and number of workers,
# bit for bit, and the only error is the per-term rounding, at most half a grid step
# each, which the solver's certificate adds to the residual. The caller picks the
# grid (``scale`` = 2^F, a power of two, so v·scale is exact) from a bound on every
# term and ``limit``; a term beyond ``limit`` (or not finite) sets the returned flag
# and the caller retries on a coarser grid, so the int64 sums never wrap.


@njit(cache=True, inline="always")
def loss_curvature(code, z, y, param):
    """ℓ''(z, y) in the margin (labels ±1 for classification): squared 1; logistic
    σ(t)σ(−t) with t = yz; smoothed hinge 1/h for 1 − h < t < 1, else 0; Huber 1 for
    |z − y| ≤ κ, else 0 (one-sided values at the kinks); 0 otherwise."""
    z = np.float64(z)
    y = np.float64(y)
    if code == SQUARED:
        return 1.0
    if code == LOGISTIC:
        e = math.exp(-abs(y * z))
        return e / ((1.0 + e) * (1.0 + e))
    if code == SMOOTHED_HINGE:
        t = y * z
        return 1.0 / param if 1.0 - param < t < 1.0 else 0.0
    if code == HUBER:
        return 1.0 if abs(z - y) <= param else 0.0
    return 0.0


@njit(cache=True, inline="always")
def _grid(v, scale, limit):
    """(round(v·scale), ok): v·scale is exact (scale a power of two)."""
    u = v * scale
    if not abs(u) <= limit:
        return np.int64(0), False
    return np.int64(np.rint(u)), True


# Rounding a term u to the nearest integer: (u + 1.5·2⁵²) − 1.5·2⁵² is exactly rint(u)
# (ties to even) for |u| < 2⁵¹ (the sum lies in [2⁵², 2⁵³), where the spacing is 1, and
# 1.5·2⁵² is even, so its ties go where rint's do); two additions instead of llvm.rint,
# which measured 1.7× slower per entry. A row whose terms are all below 2⁵¹ and the
# limit (checked once from its largest entry) takes this path; any other row is
# rounded term by term with the checks of _grid, so the integers are the same.
#
# Why |u·amax|·scale bounds every term: fl(u·x)·2^F = fl(u·2^F·x) exactly (a power of
# two; where the product is subnormal the term is below 2^-62 and rounds to 0 both
# ways), and fl is monotone. The scatter loops are written out in each kernel: a call
# per row (even one numba inlines) costs reference-count updates of its array
# arguments, which measured 2.5× the whole scatter.
_MAGIC = 6755399436140544.0  # 1.5 * 2^52
_DENSE_BLOCK = 64  # rows per block of the dense kernels (64 rows of 256 floats: 128 KiB)
_MAGIC_RANGE = 2.0 ** 51


@njit(cache=True, inline="always")
def _nan_max(m, a):
    """max(m, a) that becomes NaN when ``a`` is NaN (so the row takes the checked path)."""
    return a if not (a <= m) else m


# Row scales (``row_scales``): the fixed-point kernels can read contribution-bounded
# rows without a bounded copy of X. Given the factor cᵢ of row i
# (:func:`~skdpsparse._kernels.erm_passes.csr_bounding_stats`), every entry is used as
# the float64 product fl(cᵢ·xᵢⱼ), computed where it is read: the value a copy scaled by
# the same factors would hold (``sparse_rows.csr_scale_rows`` computes the same
# product), so margins, terms and integer sums are those of the copy, bit for bit.
# Without row scales the factor is 1.0, and fl(1.0·x) = x.


@njit(cache=True, inline="always")
def _row_factor(scales, i):
    """cᵢ, or 1.0 when ``scales`` is empty (no row scales)."""
    if scales.shape[0] == 0:
        return 1.0
    return np.float64(scales[i])


@njit(cache=True)
def _csr_margin_rescaled_c(indptr, indices, data, i, c, w, b):
    """:func:`_csr_margin_rescaled` of the row fl(c·xᵢ)."""
    amax = 0.0
    for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
        amax = max(amax, abs(c * np.float64(data[k])))
    if not (0.0 < amax < math.inf):
        return np.nan
    acc = 0.0
    for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
        acc += ((c * np.float64(data[k])) / amax) * np.float64(w[np.uint64(indices[k])])
    return amax * acc + b


@njit(cache=True)
def _dense_margin_rescaled_c(X, i, c, w, b):
    """:func:`_dense_margin_rescaled` of the row fl(c·xᵢ)."""
    amax = 0.0
    for j in range(X.shape[1]):
        amax = max(amax, abs(c * np.float64(X[i, j])))
    if not (0.0 < amax < math.inf):
        return np.nan
    acc = 0.0
    for j in range(X.shape[1]):
        acc += ((c * np.float64(X[i, j])) / amax) * np.float64(w[j])
    return amax * acc + b


@njit(cache=True)
def _csr_scatter_checked(indptr, indices, data, i, c, u, scale, limit, out):
    for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
        q, ok = _grid(u * (c * np.float64(data[k])), scale, limit)
        if not ok:
            return False
        out[np.uint64(indices[k])] += q
    return True


@njit(cache=True)
def _csr_margins_and_max(indptr, indices, data, scales, w, b, z, amax):
    """z[i] = ⟨w, x_i⟩ + b (as :func:`_csr_margin`, same order of operations) and
    amax[i] = max_j |x_ij| (NaN if the row has a NaN), in one pass; x_i the row
    scaled by its factor."""
    for i in range(indptr.shape[0] - 1):
        c = _row_factor(scales, i)
        acc = b
        m = 0.0
        for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
            x = c * np.float64(data[k])
            acc += x * np.float64(w[np.uint64(indices[k])])
            m = _nan_max(m, abs(x))
        if not abs(acc) < math.inf:
            acc = _csr_margin_rescaled_c(indptr, indices, data, i, c, w, b)
        z[i] = acc
        amax[i] = m


@njit(cache=True, inline="always")
def _margins_are_b(w, b, entry_max):
    """Whether every margin is exactly b without reading the rows: w = 0 (the first
    iterate of a fit), every scaled entry finite (``entry_max`` a finite bound), so
    each product (cᵢxᵢⱼ)·wⱼ is ±0, and b not −0 (b + ±0 = b for b ≠ 0, +0 + ±0 = +0;
    only −0 + +0 would differ)."""
    if not (0.0 <= entry_max < math.inf):
        return False
    if b == 0.0 and math.copysign(1.0, b) < 0.0:
        return False
    for j in range(w.shape[0]):
        if w[j] != 0.0:
            return False
    return True


@njit(cache=True)
def _csr_margins_bounded(indptr, indices, data, scales, w, b, z, amax, entry_max):
    """z as :func:`_csr_margins_and_max`; amax[i] = ``entry_max`` when it is a valid
    bound (≥ 0: the caller read it off these entries), else each row's own maximum."""
    if not entry_max >= 0.0:
        _csr_margins_and_max(indptr, indices, data, scales, w, b, z, amax)
        return
    if _margins_are_b(w, b, entry_max):
        z[:] = b
        amax[:] = entry_max
        return
    for i in range(indptr.shape[0] - 1):
        c = _row_factor(scales, i)
        acc = b
        if c == 1.0:  # fl(1·x) = x: the same floats without the product
            for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
                acc += np.float64(data[k]) * np.float64(w[np.uint64(indices[k])])
        else:
            for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
                acc += (c * np.float64(data[k])) * np.float64(w[np.uint64(indices[k])])
        if not abs(acc) < math.inf:
            acc = _csr_margin_rescaled_c(indptr, indices, data, i, c, w, b)
        z[i] = acc
        amax[i] = entry_max


@njit(cache=True, inline="always")
def _grid_rounded(v, scale, limit):
    """:func:`_grid` with the rounding of the scatter loops, (u + 1.5·2⁵²) − 1.5·2⁵²,
    for |u| < 2⁵¹ (exactly rint(u) there, see above): the same integers."""
    u = v * scale
    if not abs(u) <= limit:
        return np.int64(0), False
    if abs(u) < _MAGIC_RANGE:
        return np.int64((u + _MAGIC) - _MAGIC), True
    return np.int64(np.rint(u)), True


@njit(cache=True, inline="always")
def fixed_loss_terms(code, z, y, param):
    """(ℓ, ℓ') at margin z as :func:`_losses_fixed` computes them: the floats of
    :func:`loss_value_and_derivative` (the logistic one without its branch)."""
    if code == LOGISTIC:
        yi = np.float64(y)
        t = yi * np.float64(z)
        pos = t > 0.0
        e = math.exp(-abs(t))
        return math.log1p(e) + (0.0 if pos else -t), (-yi * (e if pos else 1.0)) / (1.0 + e)
    return loss_value_and_derivative(code, z, y, param)


@njit(cache=True)
def _losses_fixed(z, y, code, param, loss_scale, grad_scale, limit):
    """Σ round(ℓᵢ·2^Fₗ), Σ round(ℓ'ᵢ·2^F_g) and ok; z[i] is replaced by ℓ'ᵢ."""
    loss = np.int64(0)
    grad_b = np.int64(0)
    if code == LOGISTIC:
        # loss_value_and_derivative's logistic branches without the branch on the sign
        # of t = yz (random at the start of a fit: mispredicted half the time), the same
        # floats: e = exp(−|t|) is exp(−t) for t > 0 and exp(t) for t ≤ 0 (±0 give 1);
        # log1p(e) + 0.0 = log1p(e) (never −0) and log1p(e) + (−t) = log1p(e) − t;
        # (−y·1.0)/(1 + e) = −y/(1 + e). A NaN margin gives NaN terms both ways.
        for i in range(z.shape[0]):
            yi = np.float64(y[i])
            t = yi * np.float64(z[i])
            pos = t > 0.0
            e = math.exp(-abs(t))
            val = math.log1p(e) + (0.0 if pos else -t)
            der = (-yi * (e if pos else 1.0)) / (1.0 + e)
            q, ok = _grid_rounded(val, loss_scale, limit)
            if not ok:
                return loss, grad_b, False
            loss += q
            q, ok = _grid_rounded(der, grad_scale, limit)
            if not ok:
                return loss, grad_b, False
            grad_b += q
            z[i] = der
        return loss, grad_b, True
    for i in range(z.shape[0]):
        val, der = loss_value_and_derivative(code, z[i], y[i], param)
        q, ok = _grid(val, loss_scale, limit)
        if not ok:
            return loss, grad_b, False
        loss += q
        q, ok = _grid(der, grad_scale, limit)
        if not ok:
            return loss, grad_b, False
        grad_b += q
        z[i] = der
    return loss, grad_b, True


@njit(cache=True, inline="always")
def _no_scales(row_scales):
    """``row_scales`` as the kernels' array: empty for None (every factor 1)."""
    if row_scales is None:
        return np.empty(0)
    return row_scales


@njit(cache=True, inline="always")
def _check_scales(scales, n):
    if scales.shape[0] != 0 and scales.shape[0] != n:
        raise ValueError("row_scales must have one entry per row")


@njit(cache=True)
def _csr_fixed_loss_gradient(indptr, indices, data, y, w, b, code, param, loss_scale,
                             grad_scale, limit, entry_max, scales):
    check_loss(code, param)
    n = indptr.shape[0] - 1
    _check_scales(scales, n)
    grad = np.zeros(w.shape[0], dtype=np.int64)
    z = np.empty(n)
    amax = np.empty(n)
    _csr_margins_bounded(indptr, indices, data, scales, w, np.float64(b), z, amax,
                         entry_max)
    loss, grad_b, ok = _losses_fixed(z, y, code, param, loss_scale, grad_scale, limit)
    if not ok:
        return loss, grad, grad_b, False
    for i in range(n):
        der = z[i]
        if der == 0.0:
            continue
        c = _row_factor(scales, i)
        bound = abs(der * amax[i]) * grad_scale
        if bound < _MAGIC_RANGE and bound <= limit:
            ds = der * grad_scale
            if c == 1.0:
                for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
                    grad[np.uint64(indices[k])] += np.int64(
                        (ds * np.float64(data[k]) + _MAGIC) - _MAGIC)
            else:
                for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
                    grad[np.uint64(indices[k])] += np.int64(
                        (ds * (c * np.float64(data[k])) + _MAGIC) - _MAGIC)
        elif not _csr_scatter_checked(indptr, indices, data, i, c, der, grad_scale, limit,
                                      grad):
            return loss, grad, grad_b, False
    return loss, grad, grad_b, True


@njit(cache=True)
def csr_fixed_loss_gradient(indptr, indices, data, y, w, b, code, param, loss_scale,
                            grad_scale, limit, entry_max=-1.0, row_scales=None):
    """Exact sums Σᵢ round(ℓᵢ·2^Fₗ), Σᵢ round(ℓ'ᵢxᵢⱼ·2^F_g) per column and
    Σᵢ round(ℓ'ᵢ·2^F_g) over the rows of a CSR matrix.

    Three passes (margins, losses, scatter): the per-row exp/log1p no longer waits
    for the row's gather, and the scatter's bound is checked once per row; the
    integers are those of the term-by-term definition (tests/kernels compare with a
    row-by-row Python reference). ``entry_max`` ≥ max |x_ij|, when the caller has
    read it off these entries once (an in-memory fit evaluates many times), replaces
    each row's maximum in that check; any bound that holds gives the same integers,
    and a negative or NaN value (the default) means "compute it per row".
    ``row_scales`` (float64 of shape (n,), optional): read row i as fl(cᵢ·xᵢ), the
    sums of the matrix with its rows scaled (the bounded rows without their copy);
    ``entry_max`` then bounds the scaled entries.

    Returns
    -------
    loss : int64
    grad_w : ndarray of int64, shape (len(w),)
    grad_b : int64
    ok : bool
        False when a term exceeded ``limit`` (the sums are then meaningless).
    """
    return _csr_fixed_loss_gradient(indptr, indices, data, y, w, b, code, param,
                                    loss_scale, grad_scale, limit, entry_max,
                                    _no_scales(row_scales))


@njit(cache=True)
def _dense_margins_and_max(X, scales, w, b, z, amax):
    for i in range(X.shape[0]):
        c = _row_factor(scales, i)
        acc = b
        m = 0.0
        for j in range(X.shape[1]):
            x = c * np.float64(X[i, j])
            acc += x * np.float64(w[j])
            m = _nan_max(m, abs(x))
        if not abs(acc) < math.inf:
            acc = _dense_margin_rescaled_c(X, i, c, w, b)
        z[i] = acc
        amax[i] = m


@njit(cache=True)
def _dense_margins_bounded(X, scales, w, b, z, amax, entry_max):
    """:func:`_csr_margins_bounded` for a dense array."""
    if not entry_max >= 0.0:
        _dense_margins_and_max(X, scales, w, b, z, amax)
        return
    if _margins_are_b(w, b, entry_max):
        z[:] = b
        amax[:] = entry_max
        return
    # Four rows per loop: four independent left-to-right sums (each row's sum is the
    # same floats as alone), so the additions' latency overlaps.
    n, d = X.shape
    n4 = n - n % 4
    for i in range(0, n4, 4):
        c0 = _row_factor(scales, i)
        c1 = _row_factor(scales, i + 1)
        c2 = _row_factor(scales, i + 2)
        c3 = _row_factor(scales, i + 3)
        a0 = b
        a1 = b
        a2 = b
        a3 = b
        if c0 == 1.0 and c1 == 1.0 and c2 == 1.0 and c3 == 1.0:  # fl(1·x) = x
            for j in range(d):
                wj = np.float64(w[j])
                a0 += np.float64(X[i, j]) * wj
                a1 += np.float64(X[i + 1, j]) * wj
                a2 += np.float64(X[i + 2, j]) * wj
                a3 += np.float64(X[i + 3, j]) * wj
        else:
            for j in range(d):
                wj = np.float64(w[j])
                a0 += (c0 * np.float64(X[i, j])) * wj
                a1 += (c1 * np.float64(X[i + 1, j])) * wj
                a2 += (c2 * np.float64(X[i + 2, j])) * wj
                a3 += (c3 * np.float64(X[i + 3, j])) * wj
        z[i] = a0
        z[i + 1] = a1
        z[i + 2] = a2
        z[i + 3] = a3
    for i in range(n4, n):
        c = _row_factor(scales, i)
        acc = b
        for j in range(d):
            acc += (c * np.float64(X[i, j])) * np.float64(w[j])
        z[i] = acc
    for i in range(n):
        amax[i] = entry_max
        if not abs(z[i]) < math.inf:
            z[i] = _dense_margin_rescaled_c(X, i, _row_factor(scales, i), w, b)


@njit(cache=True)
def _dense_scatter_checked(X, i, c, u, scale, limit, out):
    for j in range(X.shape[1]):
        x = c * np.float64(X[i, j])
        if x != 0.0:
            q, ok = _grid(u * x, scale, limit)
            if not ok:
                return False
            out[j] += q
    return True


@njit(cache=True, inline="always")
def _fast_row(der, amax, scale, limit):
    """Whether every term der·x·scale of the row is below 2⁵¹ and ``limit`` (the
    magic-number rounding applies, see above)."""
    bound = abs(der * amax) * scale
    return bound < _MAGIC_RANGE and bound <= limit


@njit(cache=True)
def _dense_fixed_loss_gradient(X, y, w, b, code, param, loss_scale, grad_scale, limit,
                               entry_max, scales):
    check_loss(code, param)
    n = X.shape[0]
    _check_scales(scales, n)
    grad = np.zeros(X.shape[1], dtype=np.int64)
    z = np.empty(n)
    amax = np.empty(n)
    loss = np.int64(0)
    grad_b = np.int64(0)
    # Blocks of rows that stay in cache between the margins and the scatter, so X is
    # read once from memory (integer sums: the blocking changes no result).
    for lo in range(0, n, _DENSE_BLOCK):
        hi = min(n, lo + _DENSE_BLOCK)
        block_scales = scales[lo:hi] if scales.shape[0] != 0 else scales
        _dense_margins_bounded(X[lo:hi], block_scales, w, np.float64(b), z[lo:hi],
                               amax[lo:hi], entry_max)
        part, part_b, ok = _losses_fixed(z[lo:hi], y[lo:hi], code, param, loss_scale,
                                         grad_scale, limit)
        loss += part
        grad_b += part_b
        if not ok:
            return loss, grad, grad_b, False
        i = lo
        while i < hi:
            # Four rows at once when all four take the fast path: each entry's term
            # is the same integer, and adding four before the store changes no sum
            # (integers), but loads and stores grad once per four rows.
            if i + 4 <= hi and _fast_row(z[i], amax[i], grad_scale, limit) \
                    and _fast_row(z[i + 1], amax[i + 1], grad_scale, limit) \
                    and _fast_row(z[i + 2], amax[i + 2], grad_scale, limit) \
                    and _fast_row(z[i + 3], amax[i + 3], grad_scale, limit):
                c0 = _row_factor(scales, i)
                c1 = _row_factor(scales, i + 1)
                c2 = _row_factor(scales, i + 2)
                c3 = _row_factor(scales, i + 3)
                d0 = z[i] * grad_scale
                d1 = z[i + 1] * grad_scale
                d2 = z[i + 2] * grad_scale
                d3 = z[i + 3] * grad_scale
                if c0 == 1.0 and c1 == 1.0 and c2 == 1.0 and c3 == 1.0:
                    for j in range(X.shape[1]):  # a zero entry (or der) adds round(0) = 0
                        grad[j] += (
                            np.int64((d0 * np.float64(X[i, j]) + _MAGIC) - _MAGIC)
                            + np.int64((d1 * np.float64(X[i + 1, j]) + _MAGIC) - _MAGIC)
                            + np.int64((d2 * np.float64(X[i + 2, j]) + _MAGIC) - _MAGIC)
                            + np.int64((d3 * np.float64(X[i + 3, j]) + _MAGIC) - _MAGIC))
                else:
                    for j in range(X.shape[1]):
                        grad[j] += (
                            np.int64((d0 * (c0 * np.float64(X[i, j])) + _MAGIC) - _MAGIC)
                            + np.int64((d1 * (c1 * np.float64(X[i + 1, j])) + _MAGIC)
                                       - _MAGIC)
                            + np.int64((d2 * (c2 * np.float64(X[i + 2, j])) + _MAGIC)
                                       - _MAGIC)
                            + np.int64((d3 * (c3 * np.float64(X[i + 3, j])) + _MAGIC)
                                       - _MAGIC))
                i += 4
                continue
            der = z[i]
            if der != 0.0:
                c = _row_factor(scales, i)
                if _fast_row(der, amax[i], grad_scale, limit):
                    ds = der * grad_scale
                    for j in range(X.shape[1]):
                        grad[j] += np.int64((ds * (c * np.float64(X[i, j])) + _MAGIC)
                                            - _MAGIC)
                elif not _dense_scatter_checked(X, i, c, der, grad_scale, limit, grad):
                    return loss, grad, grad_b, False
            i += 1
    return loss, grad, grad_b, True


@njit(cache=True)
def dense_fixed_loss_gradient(X, y, w, b, code, param, loss_scale, grad_scale, limit,
                              entry_max=-1.0, row_scales=None):
    """:func:`csr_fixed_loss_gradient` for a dense array (zeros add nothing)."""
    return _dense_fixed_loss_gradient(X, y, w, b, code, param, loss_scale, grad_scale,
                                      limit, entry_max, _no_scales(row_scales))


@njit(cache=True)
def _csr_fixed_hessian_product(indptr, indices, data, y, w, b, v_w, v_b, code, param,
                               scale, limit, entry_max, scales):
    check_loss(code, param)
    n = indptr.shape[0] - 1
    _check_scales(scales, n)
    out = np.zeros(w.shape[0], dtype=np.int64)
    out_b = np.int64(0)
    z = np.empty(n)
    amax = np.empty(n)
    _csr_margins_bounded(indptr, indices, data, scales, w, np.float64(b), z, amax,
                         entry_max)
    for i in range(n):
        curv = loss_curvature(code, z[i], y[i], param)
        if curv == 0.0:
            continue
        c = _row_factor(scales, i)
        m = np.float64(v_b)  # _csr_margin written out (see the scatter's comment)
        for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
            m += (c * np.float64(data[k])) * np.float64(v_w[np.uint64(indices[k])])
        if not abs(m) < math.inf:
            m = _csr_margin_rescaled_c(indptr, indices, data, i, c, v_w, np.float64(v_b))
        u = curv * m
        q, ok = _grid(u, scale, limit)
        if not ok:
            return out, out_b, False
        out_b += q
        bound = abs(u * amax[i]) * scale
        if bound < _MAGIC_RANGE and bound <= limit:
            us = u * scale
            for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
                out[np.uint64(indices[k])] += np.int64(
                    (us * (c * np.float64(data[k])) + _MAGIC) - _MAGIC)
        elif not _csr_scatter_checked(indptr, indices, data, i, c, u, scale, limit, out):
            return out, out_b, False
    return out, out_b, True


@njit(cache=True)
def csr_fixed_hessian_product(indptr, indices, data, y, w, b, v_w, v_b, code, param,
                              scale, limit, entry_max=-1.0, row_scales=None):
    """Exact sums Σᵢ round(uᵢxᵢⱼ·2^F) per column and Σᵢ round(uᵢ·2^F), with
    uᵢ = ℓ''(zᵢ, yᵢ)·(⟨v_w, xᵢ⟩ + v_b): the data part of a Hessian-vector product.
    ``entry_max`` and ``row_scales`` as in :func:`csr_fixed_loss_gradient`.

    Returns
    -------
    h_w : ndarray of int64, shape (len(w),)
    h_b : int64
    ok : bool
    """
    return _csr_fixed_hessian_product(indptr, indices, data, y, w, b, v_w, v_b, code,
                                      param, scale, limit, entry_max,
                                      _no_scales(row_scales))


@njit(cache=True)
def _dense_fixed_hessian_product(X, y, w, b, v_w, v_b, code, param, scale, limit,
                                 entry_max, scales):
    check_loss(code, param)
    n = X.shape[0]
    _check_scales(scales, n)
    out = np.zeros(X.shape[1], dtype=np.int64)
    out_b = np.int64(0)
    z = np.empty(n)
    amax = np.empty(n)
    _dense_margins_bounded(X, scales, w, np.float64(b), z, amax, entry_max)
    for i in range(n):
        curv = loss_curvature(code, z[i], y[i], param)
        if curv == 0.0:
            continue
        c = _row_factor(scales, i)
        m = np.float64(v_b)
        for j in range(X.shape[1]):
            m += (c * np.float64(X[i, j])) * np.float64(v_w[j])
        if not abs(m) < math.inf:
            m = _dense_margin_rescaled_c(X, i, c, v_w, np.float64(v_b))
        u = curv * m
        q, ok = _grid(u, scale, limit)
        if not ok:
            return out, out_b, False
        out_b += q
        bound = abs(u * amax[i]) * scale
        if bound < _MAGIC_RANGE and bound <= limit:
            us = u * scale
            for j in range(X.shape[1]):
                out[j] += np.int64((us * (c * np.float64(X[i, j])) + _MAGIC) - _MAGIC)
        elif not _dense_scatter_checked(X, i, c, u, scale, limit, out):
            return out, out_b, False
    return out, out_b, True


@njit(cache=True)
def dense_fixed_hessian_product(X, y, w, b, v_w, v_b, code, param, scale, limit,
                                entry_max=-1.0, row_scales=None):
    """:func:`csr_fixed_hessian_product` for a dense array."""
    return _dense_fixed_hessian_product(X, y, w, b, v_w, v_b, code, param, scale, limit,
                                        entry_max, _no_scales(row_scales))
