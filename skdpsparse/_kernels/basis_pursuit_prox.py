"""The fused elementwise pass of the basis-pursuit solver
(:mod:`skdpsparse._solvers.basis_pursuit`): soft-thresholding of a shifted adjoint
:math:`x = \\operatorname{soft}(c + \\eta\\, a \\odot D\\, t, \\theta)`, with the sums the
solver needs (ℓ1 and ℓ2 norms, the step length, the largest entry) computed in the same
pass, and the support collected for a sparse return.
"""

import math

import numpy as np
from numba import njit, prange

from ._common import use_threads as _parallel

__all__ = ["prox_l1_pass"]


@njit(cache=True)
def _prox_part(t, signs, coef, center, step, thr, out, lo, hi, stats_row, idx, vals,
               p):
    """Entries ``lo .. hi-1``; the support is also written to ``idx``/``vals`` from
    position ``p`` on, as far as they have room (pass empty arrays to skip)."""
    cap = min(idx.shape[0], vals.shape[0])
    l1 = 0.0
    x2 = 0.0
    dx2 = 0.0
    ainf = 0.0
    nnz = 0
    for i in range(lo, hi):
        a = coef * float(signs[i]) * t[i]
        aa = abs(a)
        if aa > ainf:
            ainf = aa
        xc = center[i]
        u = xc + step * a
        mag = abs(u) - thr
        xn = math.copysign(mag, u) if mag > 0.0 else 0.0
        out[i] = xn
        if xn != 0.0:
            if p < cap:
                idx[p] = i
                vals[p] = xn
            p += 1
            nnz += 1
            l1 += abs(xn)
            x2 += xn * xn
        dd = xn - xc
        dx2 += dd * dd
    stats_row[0] = l1
    stats_row[1] = x2
    stats_row[2] = dx2
    stats_row[3] = ainf
    stats_row[4] = nnz


@njit(cache=True, parallel=True)
def _prox_par(t, signs, coef, center, step, thr, out, stats):
    d = out.shape[0]
    nparts = stats.shape[0]
    no_idx = np.empty(0, dtype=np.int64)
    no_val = np.empty(0)
    for c in prange(nparts):
        _prox_part(t, signs, coef, center, step, thr, out, (d * c) // nparts,
                   (d * (c + 1)) // nparts, stats[c], no_idx, no_val, 0)


@njit(cache=True)
def _prox_ser(t, signs, coef, center, step, thr, out, stats, idx, vals):
    """Serial: the parts run in order, so the support is collected in the same pass."""
    d = out.shape[0]
    nparts = stats.shape[0]
    p = 0
    for c in range(nparts):
        _prox_part(t, signs, coef, center, step, thr, out, (d * c) // nparts,
                   (d * (c + 1)) // nparts, stats[c], idx, vals, p)
        p += int(stats[c, 4])


@njit(cache=True)
def _collect_part(x, lo, hi, p, idx, vals):
    for i in range(lo, hi):
        if x[i] != 0.0:
            idx[p] = i
            vals[p] = x[i]
            p += 1


@njit(cache=True, parallel=True)
def _collect_par(x, offsets, idx, vals):
    d = x.shape[0]
    nparts = offsets.shape[0] - 1
    for c in prange(nparts):
        _collect_part(x, (d * c) // nparts, (d * (c + 1)) // nparts, offsets[c], idx, vals)


def prox_l1_pass(t, signs, coef, center, step, thr, out, idx=None, vals=None, nparts=16):
    """One fused pass: ``out = soft(center + step * a, thr)`` with ``a = coef * signs * t``.

    ``a`` is :math:`A^T y` handed over in factored form (``t`` the unsigned transform
    of :meth:`~skdpsparse.mechanisms.sensing.SubsampledHadamardSensing.adjoint_transform`);
    only the first ``d = len(out)`` entries of ``t`` and ``signs`` are read.

    Parameters
    ----------
    t : ndarray of shape (>= d,), float64
    signs : ndarray of shape (>= d,), ±1
    coef, step, thr : float
    center : ndarray of shape (d,), float64
    out : ndarray of shape (d,), float64
        Receives the result; must not alias ``center``.
    idx, vals : ndarrays of int64 / float64, or None
        If given and large enough, receive the support of ``out`` (increasing) and
        its values.
    nparts : int
        Fixed split for the parallel partial sums (results do not depend on threads).

    Returns
    -------
    stats : dict
        ``l1`` = ‖out‖₁, ``x2`` = ‖out‖², ``dx2`` = ‖out − center‖²,
        ``a_inf`` = ‖a‖∞ (over the d entries), ``nnz``, ``collected``.
    """
    d = out.shape[0]
    if len(t) < d or len(signs) < d or center.shape != out.shape:
        raise ValueError("t and signs need at least len(out) entries, center len(out).")
    nparts = int(max(1, min(nparts, d)))
    stats = np.zeros((nparts, 5))
    want = idx is not None and vals is not None
    if not want:
        idx = np.empty(0, dtype=np.int64)
        vals = np.empty(0)
    par = _parallel(d)
    if par:
        _prox_par(t, signs, float(coef), center, float(step), float(thr), out, stats)
    else:
        _prox_ser(t, signs, float(coef), center, float(step), float(thr), out, stats,
                  idx, vals)
    counts = stats[:, 4].astype(np.int64)
    nnz = int(counts.sum())
    collected = want and nnz <= min(len(idx), len(vals))
    if collected and par:
        offsets = np.zeros(nparts + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        _collect_par(out, offsets, idx, vals)
    return {
        "l1": float(stats[:, 0].sum()),
        "x2": float(stats[:, 1].sum()),
        "dx2": float(stats[:, 2].sum()),
        "a_inf": float(stats[:, 3].max()),
        "nnz": nnz,
        "collected": collected,
    }
