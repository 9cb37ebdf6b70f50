"""The heavy-tailed mean's decomposable statistics, and its distributed fit: the
interval stated (``bounds=``) or located privately (the default). (cwme with
consecutive groups and the noise-smoothing mean: :mod:`._heavy_tailed_groups`.)

``DPHeavyTailedMean(method="private_clip")`` is a sequence of releases, each reading
only integer sums over rows:

1. the private median reads the rank counts #{i : x_ij < g_k} and
   #{i : x_ij ≤ g_k} on the public grid
   (``skdpsparse.mechanisms.quantile.rank_counts``): :func:`partial_rank_counts`;
2. the tail quantiles read the same counts on a grid that depends on released
   numbers only: the union U_j of the public grid and the grid shifted by the
   released median (:func:`partial_column_counts`);
3. the counts of four tail bins per column whose edges are functions of the released
   quantiles (:func:`partial_tail_bins`);
4. the clipped mean reads the per-column sums of clip((x_ij − lo_j)/w_j, 0, 1)
   rounded to 2^-F, F = 52 − bit_length(n)
   (``skdpsparse.mechanisms.heavy_tailed_clip.box_clipped_mean``):
   :func:`partial_clipped_sums`, with implicit zeros counted per column so a sparse
   chunk is never densified.

(When n is too small for 5d draws the plan shares one scale between the columns: its
two draws read the rank counts of the pooled |x_ij|, :func:`partial_pooled_counts`.)

Each is exact, so the merged statistics equal the in-memory ones bit for bit; the
workers return them as task results, and every draw (exponential mechanism, noisy
bins, the mean's noise) is made on the driver, from the in-memory plan, in the
in-memory order, with the key derived from the merged data digest. The same seed
therefore gives the in-memory release bit for bit
(``tests/distributed/test_heavy_tailed_dask.py``). The cost is one pass over the
chunks per release that reads the data (four, or two for the shared scale: persist
``X`` first if its chunks are expensive to compute).
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..mechanisms.heavy_tailed_clip import pooled_abs_counts, union_column_counts
from ..mechanisms.noise import add_noise_inplace
from ..mechanisms.quantile import rank_counts
from ._core import check_chunk

__all__ = ["ClippedSumPart", "clipped_frac_bits", "located_interval", "merge_clipped",
           "merge_rank_counts", "merge_sums", "partial_clipped_sums",
           "partial_column_counts", "partial_pooled_counts", "partial_rank_counts",
           "partial_tail_bins"]


def clipped_frac_bits(n):
    """F of ``box_clipped_mean``: every partial sum of n values in [0, 2^F] is below
    2^53."""
    return 52 - int(n).bit_length()


def merge_sums(a, b):
    """The sum of two partial results: arrays, or tuples/lists of them (nested)."""
    from ._heavy_tailed_groups import GroupSumPart, merge_groups

    if isinstance(a, ClippedSumPart):
        return merge_clipped(a, b)
    if isinstance(a, GroupSumPart):
        return merge_groups(a, b)
    if isinstance(a, (tuple, list)):
        return type(a)(merge_sums(x, y) for x, y in zip(a, b, strict=True))
    return a + b


# ---------------------------------------------------------------- rank counts
def partial_rank_counts(chunk, grid, n_features, row_offset=0):
    """(strict, non-strict) rank counts of one chunk, int64 of shape (d, G) each."""
    chunk = check_chunk(chunk, n_features, row_offset)
    return rank_counts(chunk, grid, strict=True), rank_counts(chunk, grid)


def merge_rank_counts(a, b):
    return a[0] + b[0], a[1] + b[1]


def partial_pooled_counts(chunk, grid, n_features, row_offset=0):
    """(strict, non-strict) rank counts of the chunk's |x_ij| pooled over columns,
    int64 of shape (G,) each (the shared scale's statistic:
    ``heavy_tailed_clip.pooled_abs_counts``)."""
    return pooled_abs_counts(check_chunk(chunk, n_features, row_offset), grid)


def partial_column_counts(chunk, grids, n_features, row_offset=0):
    """#{x < g} and #{x ≤ g} of every column j of one chunk on its own sorted grid
    ``grids[j]``, implicit zeros of a sparse chunk counted: a list of d pairs of int64
    arrays (``heavy_tailed_clip.union_column_counts``; summed over chunks, the counts
    the union tail draws read in memory)."""
    return union_column_counts(check_chunk(chunk, n_features, row_offset), grids)


def partial_tail_bins(chunk, quantiles, n_features, row_offset=0):
    """The exact counts of the four tail bins of every column in one chunk, shape
    (4, d) (``heavy_tailed_clip.tail_bin_counts``; integers held exactly in
    float64)."""
    from ..mechanisms.heavy_tailed_clip import tail_bin_counts

    return tail_bin_counts(check_chunk(chunk, n_features, row_offset), quantiles)


# ---------------------------------------------------------------- clipped sums
@dataclass
class ClippedSumPart:
    """Exact sums of the clipped unit values of the explicit entries, and per column
    how many entries were explicit (the rest are zeros, added at the merge's end)."""

    sums: np.ndarray  # int64 (d,)
    explicit: np.ndarray  # int64 (d,)
    n_rows: int


def _unit_grid(values, cols, lower, width, frac_bits):
    """clip((v − lo)/w, 0, 1) rounded to 2^-F, as in ``box_clipped_mean``."""
    safe = np.where(width > 0, width, 1.0)
    with np.errstate(invalid="ignore", over="ignore"):
        u = (values - lower[cols]) / safe[cols]
    u = np.clip(u, 0.0, 1.0)
    u[..., width[cols] <= 0] = 0.0
    return np.rint(np.ldexp(u, frac_bits)).astype(np.int64)


def partial_clipped_sums(chunk, lower, upper, frac_bits, row_offset=0):
    """The :class:`ClippedSumPart` of one chunk (a worker's task; public inputs)."""
    lower = np.asarray(lower, dtype=np.float64)
    width = np.asarray(upper, dtype=np.float64) - lower
    d = lower.shape[0]
    chunk = check_chunk(chunk, d, row_offset)
    rows = chunk.shape[0]
    if sp.issparse(chunk):
        units = _unit_grid(chunk.data, chunk.indices, lower, width, frac_bits)
        sums = np.bincount(chunk.indices, weights=units, minlength=d)
        sums = np.rint(sums).astype(np.int64)  # integers below 2^53: exact
        explicit = np.bincount(chunk.indices, minlength=d).astype(np.int64)
    else:
        cols = np.arange(d)
        sums = np.zeros(d, dtype=np.int64)
        step = max(1, 2**22 // max(d, 1))
        for start in range(0, rows, step):
            sums += _unit_grid(chunk[start:start + step].astype(np.float64), cols, lower,
                               width, frac_bits).sum(axis=0)
        explicit = np.full(d, rows, dtype=np.int64)
    return ClippedSumPart(sums, explicit, rows)


def merge_clipped(a, b):
    return ClippedSumPart(a.sums + b.sums, a.explicit + b.explicit, a.n_rows + b.n_rows)


def clipped_unit_mean(part, lower, upper, frac_bits):
    """ū of ``box_clipped_mean`` from the merged part: the implicit zeros' units
    added, the exact sum rounded to float64 and divided by n."""
    lower = np.asarray(lower, dtype=np.float64)
    width = np.asarray(upper, dtype=np.float64) - lower
    d = lower.shape[0]
    zeros = part.n_rows - part.explicit
    sums = part.sums + zeros * _unit_grid(np.zeros(d), np.arange(d), lower, width,
                                          frac_bits)
    return np.ldexp(sums.astype(np.float64), -frac_bits) / part.n_rows


# ------------------------------------------------------------ release (driver only)
def release_clipped(part, plan, rng):
    """``heavy_tailed_clip.clipped_mean`` from the merged part, for its
    ``ClippedMeanPlan`` (public interval and noise): lo + w·(ū + Z), Z the planned
    noise on the columns of positive width, one draw."""
    width = plan.width
    unit = clipped_unit_mean(part, plan.lower, plan.upper, clipped_frac_bits(part.n_rows))
    if plan.n_active:
        z = unit[width > 0].copy()
        add_noise_inplace(z, rng, plan.kind, plan.noise_scale,
                          sensitivity=plan.sensitivity,
                          true_sensitivity=plan.true_sensitivity)
        unit[width > 0] = z
    return plan.lower + width * unit


def located_interval(first_counts, run, plan, rng):
    """The clipping interval of ``heavy_tailed_clip.located_interval`` (the in-memory
    fit's draws, in its order, on the driver) with each later count a pass over the
    chunks.

    Parameters
    ----------
    first_counts : pair of int64 arrays
        The first pass's merged counts: :func:`partial_rank_counts` on the plan's grid
        (or :func:`partial_pooled_counts` for the shared scale).
    run : callable
        ``run(partial, *args, **kwargs)`` runs ``partial(chunk, *args,
        row_offset=..., **kwargs)`` on every chunk and returns the merged
        (:func:`merge_sums`) result: one pass over the data, task results only.
    plan : QuantileClipPlan
    rng : RandomSource
        The fit's, on the driver.

    Returns
    -------
    lower, upper, quantiles : as ``heavy_tailed_clip.located_interval``.
    """
    from ..mechanisms import heavy_tailed_clip

    d = plan.n_features
    passes = {"rank": partial_rank_counts, "pooled": partial_pooled_counts,
              "columns": partial_column_counts, "bins": partial_tail_bins}

    def count(kind, arg):
        return run(passes[kind], arg, d)

    return heavy_tailed_clip.located_interval(count, plan, rng, first_counts=first_counts)


def fit_heavy_tailed_distributed(estimator, X):
    """DPHeavyTailedMean.fit on a dask collection: ``method="private_clip"`` (the
    default ``"auto"`` resolves to it), the interval stated in ``bounds`` or located
    privately; ``"cwme"`` with ``shuffle=False`` and ``"noise_smoothing"`` in one
    pass (:mod:`._heavy_tailed_groups`). The plan is the in-memory fit's
    (``plan_heavy_tailed_mean`` on the estimator's parameters and the collection's
    public n, d)."""
    import warnings

    import dask

    from ..base import release
    from ..mechanisms.heavy_tailed_clip import plan_clipped_mean
    from ..mechanisms.heavy_tailed_mean import plan_heavy_tailed_mean
    from ..utils import validate_params
    from ._core import data_digest, fit_random_source_from_digests
    from ._dask import chunk_kernel, row_chunks
    from ._heavy_tailed_groups import groups_pass, release_groups

    validate_params(estimator, estimator._parameter_constraints)
    method = estimator._resolved_method()
    if method == "cwme" and estimator.shuffle:
        raise NotImplementedError(
            "DPHeavyTailedMean(method='cwme', shuffle=True) has no distributed fit: its "
            "groups are a permutation drawn from the fit's random source, which the "
            "workers would have to receive (n labels in the task graph). The permutation "
            "is for accuracy on sorted data, not privacy (the sensitivity holds for every "
            "assignment): pass shuffle=False, and the groups are consecutive in the "
            "collection's order (order it without looking at the values).")
    chunks, (n, d), input_attrs = row_chunks(X)
    params = estimator.get_params()
    del params["random_state"], params["verbose"]
    plan = plan_heavy_tailed_mean(n, d, **params)  # public numbers only
    if plan.warning is not None:
        warnings.warn(plan.warning, UserWarning, stacklevel=3)
    mech = plan.mechanism

    def graph(partial, *args, **kwargs):
        task = dask.delayed(partial, pure=True)
        merge = dask.delayed(merge_sums, pure=True)
        level = [task(c, *args, row_offset=off, **kwargs) for c, off, _ in chunks]
        while len(level) > 1:
            level = [merge(level[i], level[i + 1]) if i + 1 < len(level) else level[i]
                     for i in range(0, len(level), 2)]
        return level[0]

    def run(partial, *args, **kwargs):
        (merged,) = dask.compute(graph(partial, *args, **kwargs))
        return merged

    # First pass: the digest (for the key) and the first statistic, each chunk read once.
    if plan.method in ("cwme", "noise_smoothing"):
        partial, args = groups_pass(plan, n, d)
        first = graph(partial, *args)
    elif plan.method == "clipped":
        frac_bits = clipped_frac_bits(n)
        first = graph(partial_clipped_sums, mech.lower, mech.upper, frac_bits)
    elif mech.shared:
        first = graph(partial_pooled_counts, mech.grid, d)
    else:
        first = graph(partial_rank_counts, mech.grid, d)
    first, digest_part = dask.compute(first, _digest_graph(chunks, n, d))
    rng = fit_random_source_from_digests(
        estimator.random_state, estimator,
        [data_digest(digest_part, (n, d), chunk_kernel(X))])
    if plan.method in ("cwme", "noise_smoothing"):
        mean = release_groups(first, plan, n, rng)
        attrs = dict(truncation_=plan.truncation, noise_scale_=float(mech.noise_scale))
        if plan.method == "cwme":
            attrs["n_groups_"] = int(mech.groups_used)
    elif plan.method == "clipped":
        if first.n_rows != n:
            raise ValueError(f"the chunks held {first.n_rows} rows, not n={n}.")
        mean = release_clipped(first, mech, rng)
        attrs = dict(clip_lower_=mech.lower, clip_upper_=mech.upper,
                     noise_scale_=mech.noise_scale * mech.width)
    else:
        lower, upper, _ = located_interval(first, run, mech, rng)
        mean_plan = plan_clipped_mean(n, lower, upper, rho=mech.mean_rho,
                                      epsilon=mech.mean_epsilon)
        part = run(partial_clipped_sums, mean_plan.lower, mean_plan.upper,
                   clipped_frac_bits(n))
        mean = release_clipped(part, mean_plan, rng)
        attrs = dict(clip_lower_=mean_plan.lower, clip_upper_=mean_plan.upper,
                     noise_scale_=mean_plan.noise_scale * mean_plan.width,
                     clip_level_=float(mech.level))
    attrs.update(input_attrs, mean_=mean, method_=plan.method,
                 privacy_spent_=plan.budget, approx_dp_spent_=plan.approx_dp)
    return release(estimator, attrs)


def _chunk_digest(chunk, offset, n_features, n_rows):
    from ..utils._digest import chunk_digest

    return chunk_digest(check_chunk(chunk, n_features, offset), offset, n_rows)


def _digest_graph(chunks, n, d):
    """A Delayed of the merged digest part of the chunks (one task per chunk)."""
    import dask

    from ..utils._digest import merge_digests

    task = dask.delayed(_chunk_digest, pure=True)
    merge = dask.delayed(merge_digests, pure=True)
    level = [task(c, off, d, n) for c, off, _ in chunks]
    while len(level) > 1:
        level = [merge(level[i], level[i + 1], n) if i + 1 < len(level) else level[i]
                 for i in range(0, len(level), 2)]
    return level[0]
