"""Projections onto norm balls and boxes, and the l-infinity-nearest point of an
l2 ball.

Each public function is a thin wrapper (input coercion, ``out=None``, argument
checks) around an ``@njit`` core of the same name with suffix ``_nb`` that can be
called from other compiled code. Vectors are 1-D float32 or float64; scalars and
accumulations are float64; outputs keep the input's dtype unless ``out`` is given.
"""

import math

import numpy as np
from numba import njit

from ._common import as_float_vector, check_nonnegative, l2_norm_nb, prepare_out
from .prox import soft_threshold_nb

__all__ = [
    "l1_ball_threshold",
    "project_l1_ball",
    "project_l2_ball",
    "project_box",
    "linf_distance_to_l2_ball",
    "linf_nearest_in_l2_ball",
    "l1_ball_threshold_nb",
    "project_l2_ball_nb",
    "project_l1_then_l2_nb",
    "project_box_nb",
    "linf_distance_to_l2_ball_nb",
    "project_blocks_simplex_nb",
]


# --------------------------------------------------------------------------- l1 ball


# Entries read between two compactions of the candidate buffer, at least.
_MIN_BATCH = 4096


@njit(cache=True)
def _compact_above(buf, size, t):
    # Keep buf[k] >= t, in place and without branches (the comparisons against a
    # threshold are unpredictable); return the new size, the kept entries' sum and
    # their minimum.
    w = 0
    total = 0.0
    smallest = math.inf
    for k in range(size):
        y = buf[k]
        keep = y >= t
        buf[w] = y
        w += keep
        total += y if keep else 0.0
        smallest = min(smallest, y if keep else math.inf)
    return w, total, smallest


@njit(cache=True)
def l1_ball_threshold_nb(v, radius, work=None):
    """Compiled core of :func:`l1_ball_threshold` (``radius >= 0`` not checked).

    ``work``, if given, is a float64 array of length ``>= len(v)`` not sharing
    memory with ``v``, used (and overwritten) instead of allocating a buffer: the
    projection passes its output array, so its pages are touched only once.
    """
    n = v.shape[0]
    if n == 0 or radius == math.inf:
        return 0.0
    # Pass 1 (vectorizable): the l1 norm decides feasibility.
    l1 = 0.0
    amax = 0.0
    for i in range(n):
        y = abs(np.float64(v[i]))
        l1 += y
        amax = max(amax, y)
    if l1 <= radius:
        return 0.0
    if radius == 0.0:
        return amax

    # The filtering idea of Condat (2016) and Michelot (1986): for any set A of
    # entries, tau_A = (sum_A |v_i| - r) / |A| is a lower bound on tau, because
    # sum_A (|v_i| - tau_A) = r <= sum_i (|v_i| - tau_A)_+; entries at or below a
    # lower bound are never active. Pass 2 streams |v| into a candidate buffer,
    # keeping entries >= t for a lower bound t that starts at tau of all entries
    # and rises to tau of the candidates kept so far each time the buffer has
    # doubled (so the compactions cost linear time in total).
    # Condat's own pass updates its bound after every kept entry, which makes the
    # loop branchy; where many entries are active (large radius) that was ~2x
    # slower than this branch-free form. Unkept entries are never written, so for
    # small radii most pages of the buffer are never touched.
    # (Rounding can push a computed bound up to the largest entry; capping it there
    # and keeping entries >= t keeps the candidate set nonempty.)
    t = min((l1 - radius) / n, amax)
    if work is None:
        buf = np.empty(n, dtype=np.float64)
    else:
        buf = work
    size = 0
    total = 0.0
    trigger = min(n, _MIN_BATCH)
    i = 0
    while i < n:
        # Read at most trigger - size entries, so the size cannot pass the trigger
        # unnoticed.
        stop = min(n, i + trigger - size)
        for j in range(i, stop):
            y = abs(np.float64(v[j]))
            keep = y >= t
            buf[size] = y
            size += keep
            total += y if keep else 0.0
        i = stop
        if size >= trigger and i < n:
            tau = (total - radius) / size
            if tau > t:
                t = tau
                size, total, _ = _compact_above(buf, size, t)
            trigger = min(n, max(2 * size, size + _MIN_BATCH))

    # Michelot's passes on the candidates: tau of the current set is a lower bound;
    # drop what is below it until nothing drops. The candidates hold every active
    # entry, so the fixed point is tau itself. (When the smallest survivor already
    # exceeds the survivors' tau, the next pass would drop nothing: stop.) Sums are
    # exact in every pass, so no rounding drift builds up.
    tau = (total - radius) / size
    while True:
        new_size, new_total, smallest = _compact_above(buf, size, np.nextafter(tau, math.inf))
        if new_size == size or new_size == 0:
            break
        size = new_size
        tau = (new_total - radius) / size
        if smallest > tau:
            break
    return max(tau, 0.0)


def l1_ball_threshold(v, radius):
    """Soft-threshold level of the Euclidean projection onto an l1 ball.

    Returns :math:`\\tau \\ge 0` such that ``soft_threshold(v, tau)`` is the
    projection of ``v`` onto :math:`\\{x : \\|x\\|_1 \\le r\\}`: :math:`\\tau = 0` if
    :math:`\\|v\\|_1 \\le r`, else the unique :math:`\\tau` with
    :math:`\\sum_i (|v_i| - \\tau)_+ = r`. ``radius = 0`` gives
    :math:`\\tau = \\max_i |v_i|`.

    Filters candidates in one streaming pass with a rising lower bound on
    :math:`\\tau`, as in Condat (Math. Program. 158, 2016), then runs Michelot-type
    passes on the survivors: observed linear time (like Condat's and Michelot's
    algorithms, quadratic only on contrived inputs), and one float64 work array of
    size ``len(v)`` whose pages are touched only for the candidates it keeps (few
    when the radius is small).

    Parameters
    ----------
    v : array-like of shape (n,)
    radius : float
        ``radius >= 0``; ``inf`` means no constraint.

    Returns
    -------
    float
    """
    return l1_ball_threshold_nb(as_float_vector(v), check_nonnegative(radius, "radius"))


def project_l1_ball(v, radius, out=None):
    """Euclidean projection onto :math:`\\{x : \\|x\\|_1 \\le r\\}`.

    Parameters
    ----------
    v : array-like of shape (n,)
    radius : float
        ``radius >= 0``.
    out : ndarray of shape (n,), optional
        Where to write the result; may be ``v`` itself.

    Returns
    -------
    ndarray of shape (n,)
    """
    v = as_float_vector(v)
    radius = check_nonnegative(radius, "radius")
    out = prepare_out(out, v)
    if out.dtype == np.float64 and not np.may_share_memory(out, v):
        # The output doubles as the threshold's work buffer (one allocation, and
        # its pages are touched once).
        tau = l1_ball_threshold_nb(v, radius, out)
    else:
        tau = l1_ball_threshold_nb(v, radius)
    if tau == 0.0:
        out[...] = v
        return out
    return soft_threshold_nb(v, tau, out)


# --------------------------------------------------------------------------- l2 ball


@njit(cache=True)
def project_l2_ball_nb(v, radius, out):
    """Compiled core of :func:`project_l2_ball`; writes into ``out`` and returns it."""
    norm = l2_norm_nb(v)
    scale = radius / norm if norm > radius else 1.0
    for i in range(v.shape[0]):
        out[i] = np.float64(v[i]) * scale
    return out


def project_l2_ball(v, radius, out=None):
    """Euclidean projection onto :math:`\\{x : \\|x\\|_2 \\le r\\}`: ``v`` rescaled.

    Parameters
    ----------
    v : array-like of shape (n,)
    radius : float
        ``radius >= 0``.
    out : ndarray of shape (n,), optional
        Where to write the result; may be ``v`` itself.

    Returns
    -------
    ndarray of shape (n,)
    """
    v = as_float_vector(v)
    radius = check_nonnegative(radius, "radius")
    return project_l2_ball_nb(v, radius, prepare_out(out, v))


# --------------------------------------------------------------------------- box


@njit(cache=True, nogil=True)
def project_l1_then_l2_nb(v, l1_radius, l2_radius):
    """In place: v ← Π_{‖·‖₂ ≤ l2}(Π_{‖·‖₁ ≤ l1}(v)); returns v.

    The projection mechanism's post-processing (Ghazi et al. 2024 Algorithm 1, then its ℓ2 cap),
    with the cores of :func:`project_l1_ball` and :func:`project_l2_ball` and without
    the GIL, so that the four means of a bias-reduced SGD step can run in threads.
    """
    tau = l1_ball_threshold_nb(v, l1_radius)
    if tau > 0.0:
        soft_threshold_nb(v, tau, v)
    project_l2_ball_nb(v, l2_radius, v)
    return v


# ------------------------------------------------------------------ block simplices


@njit(cache=True, nogil=True)
def project_blocks_simplex_nb(v, offsets, total):
    """In place: each block v[offsets[b]:offsets[b + 1]] ← its Euclidean projection
    onto the simplex {w ≥ 0, Σ_j w_j = total}; returns v.

    The exact projection by sorting (Duchi, Shalev-Shwartz, Singer and Chandra 2008,
    "Efficient projections onto the ℓ1-ball for learning in high dimensions",
    Figure 1): with u the block sorted in decreasing order, ρ the largest k such that
    u_k − (Σ_{i≤k} u_i − total)/k > 0, and θ = (Σ_{i≤ρ} u_i − total)/ρ, the projection
    is max(w − θ, 0). O(k log k) per block of k entries. ``offsets`` is increasing,
    starts at 0 and ends at v.size; ``total > 0`` (neither is checked here).
    """
    for b in range(offsets.size - 1):
        lo = offsets[b]
        hi = offsets[b + 1]
        u = np.sort(v[lo:hi])  # increasing: read from the end
        k = hi - lo
        cumsum = 0.0
        theta = 0.0
        for i in range(k):
            cumsum += u[k - 1 - i]
            t = (cumsum - total) / (i + 1)
            if u[k - 1 - i] - t > 0.0:
                theta = t
        for j in range(lo, hi):
            w = v[j] - theta
            v[j] = w if w > 0.0 else 0.0
    return v


@njit(cache=True)
def project_box_nb(v, lower, upper, out):
    """Compiled core of :func:`project_box`.

    ``lower`` and ``upper`` are 1-D float64 arrays of length 1 (a scalar bound) or
    ``len(v)``.
    """
    lo_step = 1 if lower.shape[0] > 1 else 0
    hi_step = 1 if upper.shape[0] > 1 else 0
    for i in range(v.shape[0]):
        out[i] = min(max(np.float64(v[i]), lower[i * lo_step]), upper[i * hi_step])
    return out


def project_box(v, lower, upper, out=None):
    """Euclidean projection onto the box :math:`\\{x : l \\le x \\le u\\}` (clipping).

    Parameters
    ----------
    v : array-like of shape (n,)
    lower, upper : float or array-like of shape (n,)
        Bounds with ``lower <= upper``; ``-inf``/``inf`` leave a side open.
    out : ndarray of shape (n,), optional
        Where to write the result; may be ``v`` itself.

    Returns
    -------
    ndarray of shape (n,)
    """
    v = as_float_vector(v)
    bounds = []
    for name, b in (("lower", lower), ("upper", upper)):
        b = np.asarray(b, dtype=np.float64)
        if b.ndim == 0:
            b = b.reshape(1)
        elif b.shape != v.shape:
            raise ValueError(f"{name} must be a scalar or have shape {v.shape}.")
        if np.isnan(b).any():
            raise ValueError(f"{name} contains NaN.")
        bounds.append(b)
    lower, upper = bounds
    if np.any(lower > upper):
        raise ValueError("lower must be <= upper.")
    return project_box_nb(v, lower, upper, prepare_out(out, v))


# ------------------------------------------------ l-infinity-nearest point of an l2 ball


@njit(cache=True)
def _xorshift(state):
    # Marsaglia's xorshift64: a cheap deterministic pivot sequence.
    state ^= state << np.uint64(13)
    state ^= state >> np.uint64(7)
    state ^= state << np.uint64(17)
    return state


@njit(cache=True)
def linf_distance_to_l2_ball_nb(v, radius):
    """Compiled core of :func:`linf_distance_to_l2_ball` (``radius >= 0`` not checked)."""
    n = v.shape[0]
    amax = 0.0
    for i in range(n):
        amax = max(amax, abs(np.float64(v[i])))
    if amax == 0.0:
        return 0.0
    # Work at unit scale (multiplying by a power of two is exact) so that the
    # squares below neither overflow nor underflow. (The clamp keeps the factor
    # finite for subnormal inputs.)
    scale = math.ldexp(1.0, min(max(-math.frexp(amax)[1], -1000), 1000))
    dist = radius * scale
    d2 = dist * dist
    buf = np.empty(n, dtype=np.float64)
    m = 0
    sumsq = 0.0
    for i in range(n):
        a = abs(np.float64(v[i])) * scale
        buf[m] = a
        m += a > 0.0
        sumsq += a * a
    if math.sqrt(sumsq) <= dist:
        return 0.0
    if radius == 0.0:
        return amax

    # Find the root of g(r) = sum_i (|v_i| - r)_+^2 = D^2 by a pivoting search over
    # the breakpoints |v_i| (expected linear time, like quickselect). Invariant:
    # r* lies between every discarded value below it and every value accumulated in
    # the "active" set above it. On the final active set A,
    #   g(r) = |A| (r - mean_A)^2 + M2_A,
    # (M2_A = sum of squared deviations), so r* = mean_A - sqrt((D^2 - M2_A) / |A|).
    # Keeping (count, mean, M2) instead of raw power sums avoids cancellation when
    # the |v_i| are large and close together.
    k = 0  # statistics of the entries known to be active
    mean = 0.0
    m2 = 0.0
    state = np.uint64(0x9E3779B97F4A7C15)  # fixed seed: pivots only, not privacy
    while m > 0:
        # Median of three pseudo-random entries as pivot.
        state = _xorshift(state)
        p0 = buf[state % np.uint64(m)]
        state = _xorshift(state)
        p1 = buf[state % np.uint64(m)]
        state = _xorshift(state)
        p2 = buf[state % np.uint64(m)]
        p = max(min(p0, p1), min(max(p0, p1), p2))
        # Statistics of {a >= p}, shifted by p; they also give g(p). The loops are
        # branch-free: the comparisons against a random pivot are unpredictable.
        c = 0
        s1 = 0.0
        s2 = 0.0
        for i in range(m):
            a = buf[i]
            d = max(a - p, 0.0)
            c += a >= p
            s1 += d
            s2 += d * d
        if k > 0:
            g = s2 + k * (mean - p) * (mean - p) + m2
        else:
            g = s2
        w = 0
        if g > d2:
            # r* > p: every entry <= p is inactive; keep the rest.
            for i in range(m):
                a = buf[i]
                buf[w] = a
                w += a > p
        else:
            # r* <= p: every entry >= p is active; merge its statistics (Chan et
            # al.'s pairwise update) and keep the rest.
            c_mean = p + s1 / c
            c_m2 = max(s2 - s1 * s1 / c, 0.0)
            tot = k + c
            delta = c_mean - mean
            m2 = m2 + c_m2 + delta * delta * k * c / tot
            mean = mean + delta * c / tot
            k = tot
            for i in range(m):
                a = buf[i]
                buf[w] = a
                w += a < p
        m = w
    return max(mean - math.sqrt(max(d2 - m2, 0.0) / k), 0.0) / scale


def linf_distance_to_l2_ball(v, radius):
    """l-infinity distance from ``v`` to the l2 ball of radius ``D`` at the origin.

    This is the level :math:`r^*` of :func:`linf_nearest_in_l2_ball`: 0 if
    :math:`\\|v\\|_2 \\le D`, otherwise the unique :math:`r > 0` with
    :math:`\\|(|v| - r)_+\\|_2 = D` (``max|v|`` when ``D = 0``). The left side is a
    decreasing piecewise quadratic in :math:`r` with breakpoints at the
    :math:`|v_i|`; the piece holding the root is found by a pivoting search
    (expected linear time, one float64 work array) and solved in closed form.

    Parameters
    ----------
    v : array-like of shape (n,)
    radius : float
        ``radius >= 0``.

    Returns
    -------
    float
    """
    return linf_distance_to_l2_ball_nb(
        as_float_vector(v), check_nonnegative(radius, "radius")
    )


def linf_nearest_in_l2_ball(v, radius):
    """A point of the l2 ball :math:`\\{\\|x\\|_2 \\le D\\}` nearest to ``v`` in l-infinity.

    Solves :math:`\\min_{\\|x\\|_2 \\le D} \\|x - v\\|_\\infty`, the projection step
    of output perturbation (Ghazi et al., "Differentially Private Optimization with
    Sparse Gradients", Algorithm 3, with :math:`\\mathcal X` an l2 ball).

    Derivation. If :math:`\\|v\\|_2 \\le D` the answer is ``v``. Otherwise, some
    point within l-infinity distance :math:`r` of ``v`` lies in the ball iff the box
    :math:`[v - r, v + r]` meets the ball, iff the box's point nearest the origin
    does; that point is :math:`\\operatorname{sign}(v)(|v| - r)_+`. So the optimal
    value is the smallest :math:`r \\ge 0` with :math:`\\|(|v| - r)_+\\|_2 \\le D`
    (see :func:`linf_distance_to_l2_ball`), and
    :math:`x = \\operatorname{sign}(v)(|v| - r^*)_+` -- soft-thresholding at
    :math:`r^*` -- attains it. The minimizer need not be unique (coordinates with
    :math:`|v_i| < r^*` have slack); this one is the minimizer of least l2 norm
    among those of the form soft-threshold and has the sparsity of ``v`` or more.

    Parameters
    ----------
    v : array-like of shape (n,)
    radius : float
        ``D >= 0``.

    Returns
    -------
    ndarray of shape (n,)
        Same dtype as ``v``. Its norm is ``D`` up to rounding when ``v`` is outside
        the ball.
    """
    v = as_float_vector(v)
    r = linf_distance_to_l2_ball_nb(v, check_nonnegative(radius, "radius"))
    if r == 0.0:
        return v.copy()
    return soft_threshold_nb(v, r, np.empty_like(v))
