"""DPSparseMeanEstimator past one machine: row-level and user-level fits.

The row-level fit is release(merge(partial(chunk) for every chunk)); the user-level fit
(``privacy_unit=``) is release(Σ_buckets bound(Σ_rows of each unit)), with one shuffle
of the units' partial totals by a public function of the unit id
(:mod:`skdpsparse.distributed._units`). Both release through
:func:`~skdpsparse.distributed._core.sparse_mean_attributes` (one noise draw, on the
driver) and :func:`skdpsparse.base.release` (charged first).
"""

import numpy as np
import scipy.sparse as sp

from ..utils import validate_params
from ..base import fit_input, release
from ._core import (
    BoundedSumPart, check_chunk, resolve_sparse_mean, sparse_mean_attributes,
    sparse_mean_plan,
)
from ..mechanisms.l1_recovery import (
    clipped_measurement_total, n_measurements, release_measurements, sensing_operator,
    uses_compressed_sensing,
)
from ._core import data_digest, fit_random_source_from_digests
from ..utils._digest import chunk_digest, final_digest, merge_digests
from ._units import add_unit_totals, bound_unit_totals, unit_bucket, unit_totals

__all__ = ["fit_sparse_mean_distributed", "fit_sparse_mean_units_in_memory"]

_MAX_BUCKETS = 64


def _refuse_l1_recovery(method):
    if method == "l1_recovery":
        raise NotImplementedError(
            "method='l1_recovery' is not distributed yet: its statistic is a sum of "
            "clipped measurements A·x_i, which needs the sensing operator on the "
            "workers. Use method='threshold' (or fit in memory).")


def fit_sparse_mean_distributed(estimator, X, *, privacy_unit=None):
    """DPSparseMeanEstimator.fit on a dask array or dataframe (see the package)."""
    from ._dask import chunk_kernel, compute_bounded_sum, row_chunks

    validate_params(estimator, estimator._parameter_constraints)
    chunks, (n, d), input_attrs = row_chunks(X)
    if privacy_unit is not None:
        return _fit_units_distributed(estimator, X, chunks, (n, d), input_attrs,
                                      privacy_unit)
    method, s, delta = resolve_sparse_mean(estimator, n, d)
    if method == "l1_recovery":
        m = n_measurements(n, d, s, float(estimator.epsilon), delta)
        if uses_compressed_sensing(d, m):
            return _fit_l1_recovery(estimator, X, chunks, (n, d), input_attrs, s, delta,
                                    m)
        # Below d ≥ m ln² m Algorithm 2 is the Gaussian mechanism on the bounded mean
        # (in memory too): the row-level path with method "gaussian".
        method = "gaussian"
    plan = sparse_mean_plan(n, d, float(estimator.norm_bound), s)
    part = compute_bounded_sum(chunks, plan)
    attrs = sparse_mean_attributes(estimator, part, plan, (n, d), input_attrs,
                                   kernel=chunk_kernel(X), method=method)
    return release(estimator, attrs)


# ------------------------------------------------------------ ℓ1-recovery on dask
def _chunk_measurements(chunk, operator, offset, n_features, norm_bound, sparsity):
    """One chunk's Σ clip(A(sᵢxᵢ)) on a worker (the operator is public)."""
    chunk = check_chunk(chunk, n_features, offset)
    return clipped_measurement_total(chunk, operator, norm_bound=norm_bound,
                                     sparsity=sparsity)


def _kernel(X):
    from ._dask import chunk_kernel

    return chunk_kernel(X)


def _fit_l1_recovery(estimator, X, chunks, shape, input_attrs, s, delta, m):
    """The compressed-sensing branch of Algorithm 2 on dask: a digest pass (the key,
    hence the operator, depends on it, as in memory), the operator drawn on the
    driver from the key's public stream and shipped to the workers, a measurement
    pass (each chunk's float64 total of clipped measurement vectors; the driver adds
    them), and the release on the driver.

    The total differs from the in-memory one by the order of its float additions
    only: both are within (n − 1)·2⁻⁵³·Σᵢ‖clip(A sᵢxᵢ)‖₁ of the exact sum in ℓ1
    (recursive summation, Higham 2002, "Accuracy and Stability of Numerical
    Algorithms", eq. (4.4)), i.e. at most 1.5·L·√m·(n − 1)·2⁻⁵³ per row on average.
    The privacy argument does not use the summation order: each row's clipped
    vector has norm ≤ 1.5L whatever the other rows, as in memory (where the float
    rounding of the sum is not accounted for either). The noise is keyed by the
    statistic it is added to, so the release is the in-memory one whenever the two
    totals round to the same grid values (the grid step is 2⁻²⁰ of σ, so a difference
    needs a coordinate within ~10⁻¹⁶ relative of a grid point), and otherwise an
    independent draw of the same distribution.
    """
    import dask

    from ._heavy_tailed import _digest_graph

    n, d = shape
    norm_bound = float(estimator.norm_bound)
    (digest_part,) = dask.compute(_digest_graph(chunks, n, d))
    digest = data_digest(digest_part, (n, d), _kernel(X))
    rng = fit_random_source_from_digests(estimator.random_state, estimator, [digest])
    operator = sensing_operator(d, m, rng)
    task = dask.delayed(_chunk_measurements, pure=True)
    add = dask.delayed(np.add, pure=True)
    level = [task(c, operator, off, d, norm_bound, s) for c, off, _ in chunks]
    while len(level) > 1:
        level = [add(level[i], level[i + 1]) if i + 1 < len(level) else level[i]
                 for i in range(0, len(level), 2)]
    (total,) = dask.compute(level[0])
    z, budget, info = release_measurements(
        total, n, operator, epsilon=float(estimator.epsilon), delta=delta,
        norm_bound=norm_bound, rng=rng, calibration=estimator.calibration,
        recovery=estimator.recovery, max_iter=estimator.solver_max_iter,
        tol=estimator.solver_tol)
    mean = sp.csr_array(z.reshape(1, -1)) if estimator.output == "sparse" else z
    attrs = dict(input_attrs, mean_=mean, method_="l1_recovery", sparsity_=s,
                 privacy_spent_=budget, n_iter_=int(info["solver"]["n_iter"]))
    return release(estimator, attrs)


# ---------------------------------------------------------------- user-level, in memory
def _ids_and_rows(X, ids):
    """The matrix [ids | X] whose digest keys a user-level fit (ids as float64)."""
    column = sp.csr_matrix(np.asarray(ids, dtype=np.float64).reshape(-1, 1))
    return sp.hstack([column, sp.csr_matrix(X)], format="csr")


def fit_sparse_mean_units_in_memory(estimator, X, privacy_unit):
    """DPSparseMeanEstimator fitted with one privacy unit per id of ``privacy_unit``
    (an integer per row of the in-memory ``X``); sets ``privacy_unit_`` too.

    **Privacy guarantee.** Protected: all the rows of one unit (user-level privacy),
    under replacement of one unit's rows by any other rows (the number of units U is
    public, as n is for rows). Each unit's total, summed exactly from its rows
    rounded to a grid of L alone with saturating positive and negative parts (a
    function of that unit's rows only), is scaled into {‖u‖₂ ≤ L, ‖u‖₁ ≤ L√s}: one
    unit is then one bounded "row" of the row-level mechanism, whose guarantee and
    theorems (:func:`~skdpsparse.distributed.fit_sparse_mean_in_memory`) apply with
    n = U. Not covered: the set of unit ids and U themselves (public here), and
    ℓ1-recovery (refused).
    """
    validate_params(estimator, estimator._parameter_constraints)
    X, input_attrs = fit_input(estimator, X)
    n, d = X.shape
    # row_plan: the bounds, d and n (for the digest); its F is not used, the rows'
    # grid is F₁ of L alone (_units.unit_row_frac_bits), never of n.
    row_plan = sparse_mean_plan(n, d, float(estimator.norm_bound),
                                _unit_sparsity(estimator, d))
    ids, totals = unit_totals(X, privacy_unit, row_plan.l2_bound, row_plan.l1_bound)
    digest = final_digest(chunk_digest(_ids_and_rows(X, privacy_unit), 0, n), (n, d + 1),
                          orientation="rows")
    return _release_units(estimator, totals, row_plan, len(ids), d, input_attrs, digest)


def _unit_sparsity(estimator, d):
    return d if estimator.sparsity is None else min(int(estimator.sparsity), d)


def _release_units(estimator, totals, row_plan, n_units, d, input_attrs, digest,
                   parts=None):
    method, s, _ = resolve_sparse_mean(estimator, n_units, d)
    _refuse_l1_recovery(method)
    plan = sparse_mean_plan(n_units, d, float(estimator.norm_bound), s)
    if parts is None:
        part = bound_unit_totals(totals, plan)
    else:  # the distributed buckets' parts, computed with this plan
        part = parts(plan)
    attrs = sparse_mean_attributes(estimator, part, plan, (n_units, d), input_attrs,
                                   digests=[digest])
    attrs["privacy_unit_"] = "privacy_unit"
    return release(estimator, attrs)


# -------------------------------------------------------------- user-level, on dask
def _unit_chunk(chunk, ids, row_plan, offset, rows, n_buckets):
    """Phase 1 on a worker: the chunk's digest part of [ids | X] and, per bucket, the
    exact partial totals of the units it holds rows of."""
    chunk = check_chunk(chunk, row_plan.n_features, offset)
    ids = np.asarray(ids)
    if chunk.shape[0] != rows or ids.shape[0] != rows:
        raise ValueError(f"the chunk at row {offset} has {chunk.shape[0]} rows and "
                         f"{ids.shape[0]} unit ids; its metadata said {rows}.")
    digest = chunk_digest(_ids_and_rows(chunk, ids), offset, row_plan.n_rows)
    uids, totals = unit_totals(chunk, ids, row_plan.l2_bound, row_plan.l1_bound)
    bucket = unit_bucket(uids, n_buckets)
    pieces = tuple((uids[bucket == p], totals[bucket == p]) for p in range(n_buckets))
    return digest, pieces


def _gather_bucket(p, *chunk_pieces):
    """Phase 2 on a worker: every unit of bucket p summed over all chunks (exact)."""
    return add_unit_totals([pieces[p] for pieces in chunk_pieces])


def _bucket_part(bucket, plan):
    return bound_unit_totals(bucket[1], plan)


def _add_parts(a, b):
    return BoundedSumPart(a.sums + b.sums, a.n_rows + b.n_rows, None)


def _fit_units_distributed(estimator, X, chunks, shape, input_attrs, privacy_unit):
    import dask

    n, d = shape
    if isinstance(privacy_unit, str) and hasattr(X, "columns"):
        raise NotImplementedError("privacy_unit as a column name: split it off X and "
                                  "pass it as a dask array aligned with X's rows.")
    units = privacy_unit
    if getattr(units, "ndim", None) != 1 or int(units.shape[0]) != n:
        raise ValueError(f"privacy_unit must be a 1-D dask array of {n} unit ids, one "
                         "per row of X.")
    units = units.rechunk((tuple(rows for _, _, rows in chunks),))
    unit_blocks = list(units.to_delayed())
    row_plan = sparse_mean_plan(n, d, float(estimator.norm_bound),
                                _unit_sparsity(estimator, d))
    n_buckets = max(1, min(len(chunks), _MAX_BUCKETS))
    phase1 = [dask.delayed(_unit_chunk, nout=2, pure=True)(c, u, row_plan, off, rows,
                                                           n_buckets)
              for (c, off, rows), u in zip(chunks, unit_blocks)]
    digest = phase1[0][0]
    for piece in phase1[1:]:
        digest = dask.delayed(merge_digests, pure=True)(digest, piece[0], n)
    buckets = [dask.delayed(_gather_bucket, pure=True)(p, *[piece[1] for piece in phase1])
               for p in range(n_buckets)]
    # U is needed before the bounded sums (it fixes F and the noise): keep the buckets
    # where they are (on the workers with a distributed client) and count first.
    digest, *buckets = dask.persist(digest, *buckets)
    counts = dask.compute(*[dask.delayed(lambda b: len(b[0]))(b) for b in buckets])
    n_units = int(sum(counts))
    (digest_part,) = dask.compute(digest)
    digest_bytes = final_digest(digest_part, (n, d + 1), orientation="rows")

    def parts(plan):
        level = [dask.delayed(_bucket_part, pure=True)(b, plan)
                 for b in buckets]
        while len(level) > 1:
            level = [dask.delayed(_add_parts, pure=True)(level[i], level[i + 1])
                     if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
        (part,) = dask.compute(level[0])
        return part

    return _release_units(estimator, None, row_plan, n_units, d, input_attrs,
                          digest_bytes, parts=parts)
