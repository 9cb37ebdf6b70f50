"""Helpers shared by the kernel modules: norms of array ranges, and the input
coercion of the thin Python wrappers.

Two numba facts shape the compiled helpers here and elsewhere in ``_kernels``:

* a call from one ``@njit`` function to another is usually not inlined by LLVM
  (numba links the callee as a separate object), and a call per row can cost as
  much as the row's arithmetic; small helpers on per-row paths are therefore
  ``inline="always"`` (inlined in numba's IR, which caching supports);
* indexing with a signed integer pays for negative-index wraparound; loops over
  ranges taken from ``indptr`` run over ``uint64`` so the index is known to be
  non-negative.
"""

import math
import os
import threading

import numba
import numpy as np
from numba import njit

# Smallest positive normal float64: a sum of squares below it has lost precision to
# underflow (or is exactly zero).
_DBL_MIN = 2.2250738585072014e-308


#: |x/γ| is clipped here before rounding to the noise grid (1-Lipschitz, so it adds no
#: sensitivity); the same bound as ``exact_sampling.MAX_GRID_VALUE``.
GRID_MAX = float(1 << 60)


@njit(cache=True, inline="always")
def on_grid_nb(x):
    """round(clip(x, ±2⁶⁰)): a value in units of the noise grid (mechanisms/noise.py)."""
    return np.rint(min(max(x, -GRID_MAX), GRID_MAX))


@njit(cache=True, inline="always")
def sumsq_range_nb(x, start, stop):
    """Sum of ``x[k] ** 2`` for ``start <= k < stop``, in float64 (may overflow)."""
    s = 0.0
    for k in range(np.uint64(start), np.uint64(stop)):
        a = np.float64(x[k])
        s += a * a
    return s


@njit(cache=True, inline="always")
def l1_norm_range_nb(x, start, stop):
    """Sum of ``|x[k]|`` for ``start <= k < stop``, in float64."""
    s = 0.0
    for k in range(np.uint64(start), np.uint64(stop)):
        s += abs(np.float64(x[k]))
    return s


@njit(cache=True)
def _l2_norm_rescaled(x, start, stop):
    # Cold path: divide by the largest magnitude first, as LAPACK's nrm2 does.
    amax = 0.0
    for k in range(np.uint64(start), np.uint64(stop)):
        amax = max(amax, abs(np.float64(x[k])))
    if amax == 0.0:
        return 0.0
    s = 0.0
    for k in range(np.uint64(start), np.uint64(stop)):
        a = np.float64(x[k]) / amax
        s += a * a
    return amax * math.sqrt(s)


@njit(cache=True, inline="always")
def l2_norm_range_nb(x, start, stop):
    """Euclidean norm of ``x[start:stop]``, in float64, without overflow.

    One pass in the common case. The sum of squares overflows for entries above
    about 1e154 and underflows below about 1e-154; only then (or for an all-zero
    range) a second, rescaled computation runs, so the norm is exact to rounding for
    every finite input.
    """
    s = sumsq_range_nb(x, start, stop)
    if _DBL_MIN <= s < math.inf:
        return math.sqrt(s)
    return _l2_norm_rescaled(x, start, stop)


# Two units in the last place of a subnormal float64 (2·2⁻¹⁰⁷⁴).
_TWO_SUBNORMAL_ULPS = 2.0 * 5e-324


@njit(cache=True)
def overflow_bounding_scale_nb(x, start, stop, l2_bound, l1_bound):
    """min(1, L2/‖x‖₂, L1/‖x‖₁) for a finite row whose ℓ2 or ℓ1 norm overflows float64.

    Cold path of :func:`bounding_scale_nb`. With m = max|x_k| (finite, > 0) and u = x/m,
    whose norms lie in [1, len(x)], L/‖x‖ = (L/m)/‖u‖: no overflow, and the factor is
    the true one instead of L/inf = 0 (which would drop the row). It is then below
    2⁻¹⁰²² (subnormal) and carries the two roundings of subnormal arithmetic, each at
    most half a subnormal unit in absolute value (the first is divided by ‖u‖ ≥ 1):
    taking two units off makes it at most the exact factor, so the scaled row stays
    within the bounds up to the rounding of the final products, as on the normal path.
    Its relative precision is about 2⁻¹⁰⁷⁴/factor: 1e-15 for L = 1 and entries near
    1.7e308, 1e-12 for L = 1e-3; only when L/‖x‖ < 2⁻¹⁰⁷⁴ (L below about 1e-15 with
    such entries) does it round to 0. A non-finite entry (m not finite) gives NaN:
    non-finite input is not bounded here.
    """
    amax = 0.0
    for k in range(np.uint64(start), np.uint64(stop)):
        amax = max(amax, abs(np.float64(x[k])))
    if not (0.0 < amax < math.inf):
        return np.nan
    s2 = 0.0
    s1 = 0.0
    for k in range(np.uint64(start), np.uint64(stop)):
        u = np.float64(x[k]) / amax
        s2 += u * u
        s1 += abs(u)
    scale = 1.0
    if l2_bound < math.inf:
        scale = min(scale, (l2_bound / amax) / math.sqrt(s2))
    if l1_bound < math.inf:
        scale = min(scale, (l1_bound / amax) / s1)
    if scale < _DBL_MIN:
        scale = max(scale - _TWO_SUBNORMAL_ULPS, 0.0)
    return scale


@njit(cache=True, inline="always")
def bounding_scale_nb(x, start, stop, l2_bound, l1_bound):
    """Contribution bounding of the row ``x[start:stop]``: the factor
    min(1, L2/‖x‖₂, L1/‖x‖₁) that scales it into {‖x‖₂ ≤ L2, ‖x‖₁ ≤ L1}.

    A zero row (or no bound, ``inf``) gives 1; a zero bound zeroes any nonzero row.
    Finite rows whose norms overflow float64 (entries near ±1.8e308) get their true
    factor (:func:`overflow_bounding_scale_nb`), so every finite row is scaled into the
    bounds, direction kept, never dropped. Callers multiply each entry by the factor
    *before* any other arithmetic on the row: a product with the raw row (a margin
    ⟨x, θ⟩, a gradient) can overflow where the bounded row cannot.
    """
    if l2_bound < math.inf and l1_bound < math.inf:
        # Both norms in one loop over the row.
        sumsq = 0.0
        l1 = 0.0
        for k in range(np.uint64(start), np.uint64(stop)):
            a = np.float64(x[k])
            sumsq += a * a
            l1 += abs(a)
        return bounding_scale_from_sums_nb(x, start, stop, sumsq, l1, l2_bound, l1_bound)
    elif l2_bound < math.inf:
        l2 = l2_norm_range_nb(x, start, stop)
        l1 = 0.0
    elif l1_bound < math.inf:
        l2 = 0.0
        l1 = l1_norm_range_nb(x, start, stop)
    else:
        return 1.0
    return _bounding_scale_from_norms(x, start, stop, l2, l1, l2_bound, l1_bound)


@njit(cache=True, inline="always")
def bounding_scale_from_sums_nb(x, start, stop, sumsq, l1, l2_bound, l1_bound):
    """The end of :func:`bounding_scale_nb` with both bounds finite, from the row's sum
    of squares and ℓ1 norm summed in its order (kernels that read the row for other
    reasons in the same loop finish here and get the same factor, bit for bit)."""
    if _DBL_MIN <= sumsq < math.inf:
        l2 = math.sqrt(sumsq)
    else:
        l2 = l2_norm_range_nb(x, start, stop)  # under/overflow: robust path
    return _bounding_scale_from_norms(x, start, stop, l2, l1, l2_bound, l1_bound)


@njit(cache=True, inline="always")
def _bounding_scale_from_norms(x, start, stop, l2, l1, l2_bound, l1_bound):
    if l2 == math.inf or l1 == math.inf:
        return overflow_bounding_scale_nb(x, start, stop, l2_bound, l1_bound)
    scale = 1.0
    if l2 > l2_bound:
        scale = l2_bound / l2
    if l1 * scale > l1_bound:
        scale = l1_bound / l1
    return scale


@njit(cache=True)
def l2_norm_nb(x):
    """Euclidean norm of a 1-D float32/float64 array (see :func:`l2_norm_range_nb`)."""
    return l2_norm_range_nb(x, 0, x.shape[0])


def as_float_vector(v, name="v"):
    """Return ``v`` as a 1-D float32 or float64 array (other dtypes become float64)."""
    v = np.asarray(v)
    if v.dtype != np.float32 and v.dtype != np.float64:
        v = v.astype(np.float64)
    if v.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {v.shape}.")
    return v


def prepare_out(out, like, name="out"):
    """Return ``out``, or a new array like ``like`` when ``out`` is None.

    A given ``out`` must be a writable float32 or float64 array of ``like``'s shape;
    it may be ``like`` itself (the kernels are elementwise, so aliasing is safe).
    """
    if out is None:
        return np.empty_like(like)
    shape = like.shape
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(out).__name__}.")
    if out.shape != shape:
        raise ValueError(f"{name} has shape {out.shape}, expected {shape}.")
    if out.dtype != np.float32 and out.dtype != np.float64:
        raise ValueError(f"{name} must be float32 or float64, got {out.dtype}.")
    if not out.flags.writeable:
        raise ValueError(f"{name} is read-only.")
    return out


def check_nonnegative(value, name, allow_inf=True):
    """Return ``value`` as a float after checking it is >= 0 (NaN never passes)."""
    value = float(value)
    if not (value >= 0.0 and (allow_inf or value < math.inf)):
        kind = ">= 0" if allow_inf else "finite and >= 0"
        raise ValueError(f"{name} must be {kind}, got {value}.")
    return value


#: Below this many elementary steps the kernels run their serial drivers.
PARALLEL_MIN_WORK = 1 << 20


def use_threads(work):
    """Use the threaded drivers only for work worth a thread launch (on a busy
    machine a parallel region can wait milliseconds for a descheduled worker), only
    from the main thread (numba's fallback "workqueue" threading layer aborts the
    process when two Python threads enter parallel regions at once), and never in a
    process forked from one whose numba threads run on OpenMP (see
    :func:`threads_are_fork_safe`)."""
    return (work >= PARALLEL_MIN_WORK and threads_are_fork_safe()
            and numba.get_num_threads() > 1
            and threading.current_thread() is threading.main_thread())


_FORKED_FROM_OPENMP = False


def _after_fork_in_child():
    # numba's "omp" layer on GNU libgomp (its choice on Linux without TBB) is not
    # fork-safe: numba terminates (SIGTERM) a child forked from the process that
    # started the threads as soon as the child enters a parallel region, and a
    # multiprocessing pool then waits forever for the dead worker's task.
    global _FORKED_FROM_OPENMP
    from numba.np.ufunc import parallel

    if parallel._is_initialized and parallel._threading_layer == "omp":
        _FORKED_FROM_OPENMP = True  # inherited by the child's own children


def threads_are_fork_safe():
    """False in a process forked (directly or not) from one whose numba threads
    run on OpenMP: the threaded drivers must not run there."""
    return not _FORKED_FROM_OPENMP


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
