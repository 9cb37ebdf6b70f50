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

Why the other units' totals cannot move. That argument needs B(t_u) to be a function
of unit u's rows *alone*, for every unit: then a neighbour changes exactly one term of
the sum. So nothing in t_u may depend on the data beyond u's rows:

* The grid. Each row is first scaled into the same bounds and rounded to 2^-F₁
  (this changes nothing for rows already within them; a row outside them would be
  scaled down by B anyway if it were a unit alone). F₁ = :func:`unit_row_frac_bits`
  depends on L only. It must not depend on n, the total row count: a replaced unit
  can bring any number of rows, and a grid of n would re-round every other unit.
* Overflow. With F₁ fixed, no public number bounds a unit's row count, so an int64
  sum could wrap. Each coordinate of t_u is therefore kept as two sums, of its
  positive and of its negative rounded entries, each **saturating** at
  2^62 quanta: a saturating sum of non-negative integers is min(2^62, exact sum),
  the same for every order, chunking and merge tree, and a function of u's rows only.
  t_u = P_u − N_u (|P − N| ≤ 2^62: no overflow) is exact unless a part saturated,
  which needs more than 2^(62−F₁) > 2^20·L of one sign in one coordinate (F₁'s
  headroom; 2^22 for L = 1); then
  t_u is still a bounded function of u's rows, and only u's own accuracy suffers.

t_u·2^-F₁ is rounded once to float64, scaled by B and summed in fixed point with the F
of U rows, exactly as the row-level kernel does, so the computed sensitivity of
``bounded_mean_sensitivity(U, ...)`` holds.
"""

import numpy as np
import scipy.sparse as sp
from numba import njit

from .._kernels import _cache_safety
from .._kernels._common import bounding_scale_nb
from .._kernels.fixed_point import bounded_fixed_sum
from ..mechanisms.projection import mean_fixed_point_bits
from ._core import BoundedSumPart, check_chunk

__all__ = ["add_unit_totals", "bound_unit_totals", "row_grid_values", "unit_row_frac_bits",
           "unit_totals"]

ROWS_BEFORE_SATURATION = 2**20  # the headroom that fixes F₁ (see unit_row_frac_bits)
SATURATION = np.int64(2**62)  # quanta; P − N of two saturated parts still fits int64


def unit_row_frac_bits(l2_bound):
    """F₁, the grid 2^-F₁ the rows of a user-level fit are rounded to: a function of
    the bound L only (public), never of the data or its size.

    It is the F of 2^20 rows: 2^20·(L·2^F₁ + 1) < 2^62, so a part of a unit's total
    (the positive or negative entries of one coordinate) saturates at 2^62 quanta,
    i.e. at 2^(62−F₁) > 2^20·L. For L = 1, F₁ = 40 (rows rounded to within 2^-41,
    saturation at 2^22).
    """
    return int(mean_fixed_point_bits(ROWS_BEFORE_SATURATION, float(l2_bound)))


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


@njit(cache=True, nogil=True)
def _saturating_segment_sums(starts, values, cap, out):
    # values ≥ 0 and ≤ cap, so acc + v is computed only when it cannot pass cap (and
    # never overflows): each segment's result is min(cap, exact sum), in any order.
    for g in range(starts.shape[0] - 1):
        acc = np.int64(0)
        for k in range(starts[g], starts[g + 1]):
            v = values[k]
            acc = cap if v > cap - acc else acc + v
        out[g] = acc
    return out


def _saturating_sum(rows, cols, values, shape, cap=None):
    """CSR of shape ``shape``: the entries (rows, cols, values ≥ 0) with the duplicates
    added with saturation at ``cap`` (default :data:`SATURATION`; min(cap, exact sum)
    per position)."""
    cap = SATURATION if cap is None else cap
    if shape[0] * shape[1] < 2**62:
        # one int64 key, row-major: the same (row, col) order as the lexsort below at
        # a fraction of its cost (9 s of a 15 s user-level fit at 5·10⁵ rows, d = 2²⁰,
        # 16 nonzeros); equal pairs may come in another order, which a saturating sum
        # of non-negative values does not see (min(cap, exact sum) in any order).
        order = np.argsort(rows.astype(np.int64) * np.int64(shape[1])
                           + cols.astype(np.int64))
    else:
        order = np.lexsort((cols, rows))
    rows, cols, values = rows[order], cols[order], values[order]
    new = np.ones(len(rows), dtype=bool)
    new[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
    starts = np.append(np.flatnonzero(new), len(rows)).astype(np.int64)
    sums = _saturating_segment_sums(starts, values.astype(np.int64), np.int64(cap),
                                    np.empty(len(starts) - 1, dtype=np.int64))
    rows, cols = rows[starts[:-1]], cols[starts[:-1]]
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=shape[0]), out=indptr[1:])
    return sp.csr_matrix((sums, cols.astype(np.int64), indptr), shape=shape)


def unit_totals(X, units, l2_bound, l1_bound):
    """(ids, totals): each unit's sums of its scaled rows rounded to 2^-F₁.

    **Privacy guarantee.** None by itself (no noise): each unit's totals are a
    function of that unit's rows only (grid of L alone, saturating sums), which is
    what :func:`bound_unit_totals` and the row-level release need for user-level
    privacy.

    ``ids`` sorted ascending; ``totals`` a CSR of shape (len(ids), 2d) with int64
    entries in [0, 2^62]: column j holds the saturating sum P of the positive rounded
    entries of coordinate j, column d + j the saturating sum N of the magnitudes of
    the negative ones (the unit's total is P − N, :func:`bound_unit_totals`).
    F₁ = :func:`unit_row_frac_bits` (``l2_bound``). Partial totals of one unit from
    several chunks add to the same result in any order (:func:`add_unit_totals`).
    """
    units = np.asarray(units)
    if units.ndim != 1 or units.shape[0] != X.shape[0]:
        raise ValueError(f"privacy_unit must have one id per row ({X.shape[0]}), got "
                         f"shape {units.shape}.")
    if units.dtype.kind not in "iu":
        raise ValueError(f"privacy_unit must hold integer ids, got dtype {units.dtype}.")
    d = X.shape[1]
    grid = row_grid_values(X, l2_bound, l1_bound, unit_row_frac_bits(l2_bound)).tocoo()
    ids, inverse = np.unique(units, return_inverse=True)
    keep = grid.data != 0
    values = grid.data[keep]  # |value| ≤ L·2^F₁ + ½ < 2^42: abs cannot overflow
    cols = grid.col[keep].astype(np.int64) + np.where(values < 0, d, 0)
    totals = _saturating_sum(inverse.ravel()[grid.row[keep]].astype(np.int64), cols,
                             np.abs(values), (len(ids), 2 * d))
    return ids, totals


def add_unit_totals(pieces):
    """Merge (ids, totals) pieces of possibly overlapping units (saturating, so the
    same result for every grouping and order of the pieces)."""
    pieces = [p for p in pieces if len(p[0])]
    if not pieces:
        return np.zeros(0, dtype=np.int64), None
    all_ids = np.concatenate([p[0] for p in pieces])
    stacked = sp.vstack([p[1] for p in pieces], format="coo")
    ids, inverse = np.unique(all_ids, return_inverse=True)
    totals = _saturating_sum(inverse.ravel()[stacked.row].astype(np.int64),
                             stacked.col.astype(np.int64), stacked.data,
                             (len(ids), stacked.shape[1]))
    return ids, totals


def bound_unit_totals(totals, plan):
    """The :class:`~skdpsparse.distributed._core.BoundedSumPart` of unit totals: each
    total (P − N)·2^-F₁ (exact in int64, then one float64 rounding) scaled into the
    plan's bounds and summed in the plan's fixed point (``plan.n_rows`` = U, the number
    of units). The digest is left empty: the key of a user-level fit hashes the raw
    rows and ids instead.

    **Privacy guarantee.** None by itself (no noise): replacing one unit's rows
    changes one scaled total, of norm ≤ L, so the sum has the row-level sensitivity
    with n = U, which the release's noise is calibrated to.
    """
    if totals is None:
        return BoundedSumPart(np.zeros(plan.n_features, dtype=np.int64), 0, None)
    d = plan.n_features
    if totals.shape[1] != 2 * d:
        raise ValueError(f"unit totals have {totals.shape[1]} columns, expected 2·{d}.")
    signed = (totals[:, :d] - totals[:, d:]).tocsr()  # each in [0, 2^62]: no overflow
    signed.sum_duplicates()
    signed.eliminate_zeros()
    values = np.ldexp(signed.data.astype(np.float64), -unit_row_frac_bits(plan.l2_bound))
    sums = bounded_fixed_sum((signed.indptr, signed.indices, values), d,
                             plan.l2_bound, plan.l1_bound, plan.frac_bits)
    return BoundedSumPart(np.asarray(sums, dtype=np.int64), totals.shape[0], None)


def unit_bucket(ids, n_buckets):
    """The bucket of each unit id for the shuffle: a fixed public function of the id
    (no key, nothing random; the result does not depend on it, only the load does)."""
    return (np.asarray(ids).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
            >> np.uint64(40)) % np.uint64(n_buckets)


# The compiled loops above are cached beside this file: their saves go through the
# package's unique-name save, safe when workers compile at once (_kernels/_cache_safety).
_cache_safety.install(_cache_safety.kernel_cache_path(_scaled_grid_csr))
