"""User-level contribution bounding: each privacy unit's rows summed, the unit's total
bounded.

Privacy unit: one unit (a user, all of its rows), replacement neighbours, the number
of units U public. The statistic is (1/U) Σ_u B(t_u), t_u = Σ_{rows i of u} x̃_i and B
the scaling into {‖v‖₂ ≤ L, ‖v‖₁ ≤ L√s} (s the declared sparsity of a unit's total).
Replacing one unit changes one bounded total, so the mean moves by at most 2L/U (ℓ2)
and 2L√s/U (ℓ1): the sensitivities of the row-level mean with n = U, and the release
is the row-level one (:func:`~skdpsparse.distributed._core.release_sparse_mean`).
A unit spread over many rows and partitions is still one total: no partitioning
lets it contribute twice, because its rows meet in one place before B is applied.

Exactness. Each row is first scaled into the same bounds and rounded to 2^-F₁
(F₁ = the fixed-point bits of n rows, so no int64 sum of rows can overflow); the
unit's total t_u is then an exact int64 sum, the same for every partitioning and
order. (This pre-scaling changes nothing for rows already within the bounds; a row
outside them would be scaled down by B anyway if it were a unit alone.) t_u·2^-F₁ is
rounded once to float64, scaled by B and summed in fixed point with the F of U rows,
exactly as the row-level kernel does, so the computed sensitivity of
``bounded_mean_sensitivity(U, ...)`` holds.
"""

import numpy as np
import scipy.sparse as sp
from numba import njit

from .._kernels._common import bounding_scale_nb
from .._kernels.fixed_point import bounded_fixed_sum
from ._core import BoundedSumPart, check_chunk

__all__ = ["bound_unit_totals", "row_grid_values", "unit_totals"]


@njit(cache=True, nogil=True)
def _scaled_grid_csr(indptr, data, l2_bound, l1_bound, scale, out):
    for i in range(indptr.shape[0] - 1):
        c = bounding_scale_nb(data, indptr[i], indptr[i + 1], l2_bound, l1_bound) * scale
        for k in range(indptr[i], indptr[i + 1]):
            out[k] = np.int64(np.rint(c * np.float64(data[k])))
    return out


def row_grid_values(X, l2_bound, l1_bound, frac_bits):
    """CSR (int64 data) of the rows of ``X`` scaled into the bounds and rounded to
    2^-F (the entries the fixed-point kernel sums, kept row by row)."""
    X = check_chunk(X, X.shape[1])
    X = sp.csr_matrix(X)
    out = np.empty(X.data.shape[0], dtype=np.int64)
    _scaled_grid_csr(X.indptr, X.data, float(l2_bound), float(l1_bound),
                     float(np.ldexp(1.0, int(frac_bits))), out)
    return sp.csr_matrix((out, X.indices.copy(), X.indptr.copy()), shape=X.shape)


def unit_totals(X, units, l2_bound, l1_bound, row_frac_bits):
    """(ids, totals): each unit's exact int64 sum of its scaled, rounded rows.

    ``ids`` sorted ascending; ``totals`` a CSR of shape (len(ids), d), int64 entries
    on the grid 2^-F₁. Partial totals of one unit from several chunks add exactly
    (:func:`add_unit_totals`).
    """
    units = np.asarray(units)
    if units.ndim != 1 or units.shape[0] != X.shape[0]:
        raise ValueError(f"privacy_unit must have one id per row ({X.shape[0]}), got "
                         f"shape {units.shape}.")
    if units.dtype.kind not in "iu":
        raise ValueError(f"privacy_unit must hold integer ids, got dtype {units.dtype}.")
    grid = row_grid_values(X, l2_bound, l1_bound, row_frac_bits)
    ids, inverse = np.unique(units, return_inverse=True)
    member = sp.csr_matrix((np.ones(len(units), dtype=np.int64),
                            (inverse, np.arange(len(units)))), shape=(len(ids), len(units)))
    totals = (member @ grid).tocsr()  # int64 products of 0/1 and grid values: exact
    totals.sum_duplicates()
    return ids, totals


def add_unit_totals(pieces):
    """Merge (ids, totals) pieces of possibly overlapping units (exact)."""
    pieces = [p for p in pieces if len(p[0])]
    if not pieces:
        return np.zeros(0, dtype=np.int64), None
    all_ids = np.concatenate([p[0] for p in pieces])
    stacked = sp.vstack([p[1] for p in pieces], format="csr")
    ids, inverse = np.unique(all_ids, return_inverse=True)
    member = sp.csr_matrix((np.ones(len(all_ids), dtype=np.int64),
                            (inverse, np.arange(len(all_ids)))),
                           shape=(len(ids), len(all_ids)))
    totals = (member @ stacked).tocsr()
    totals.sum_duplicates()
    return ids, totals


def bound_unit_totals(totals, row_frac_bits, plan):
    """The :class:`~skdpsparse.distributed._core.BoundedSumPart` of unit totals: each
    total t·2^-F₁ (one float64 rounding) scaled into the plan's bounds and summed in
    the plan's fixed point (``plan.n_rows`` = U, the number of units). The digest is
    left empty: the key of a user-level fit hashes the raw rows and ids instead."""
    if totals is None:
        return BoundedSumPart(np.zeros(plan.n_features, dtype=np.int64), 0, None)
    values = np.ldexp(totals.data.astype(np.float64), -int(row_frac_bits))
    sums = bounded_fixed_sum((totals.indptr, totals.indices, values), plan.n_features,
                             plan.l2_bound, plan.l1_bound, plan.frac_bits)
    return BoundedSumPart(np.asarray(sums, dtype=np.int64), totals.shape[0], None)


def unit_bucket(ids, n_buckets):
    """The bucket of each unit id for the shuffle: a fixed public function of the id
    (no key, nothing random; the result does not depend on it, only the load does)."""
    return (np.asarray(ids).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
            >> np.uint64(40)) % np.uint64(n_buckets)
