"""The heavy-tailed mean's decomposable statistics, and its distributed fit: the
interval stated (``bounds=``) or located privately (the default).

``DPHeavyTailedMean(method="private_clip")`` is a sequence of releases, each reading
only integer sums over rows:

1. the private median reads the rank counts #{i : x_ij < g_k} and
   #{i : x_ij ≤ g_k} on the public grid
   (``skdpsparse.mechanisms.quantile.rank_counts``): :func:`partial_rank_counts`;
2. the tail quantiles read the same counts on a grid that depends on released
   numbers only: the union U_j of the public grid and the grid shifted by the
   released median (``tails="union"`` or ``"counted"``,
   :func:`partial_column_counts`), the public grid shifted by the median
   (``"deviations"``), or the public grid again (``"values"``, no pass);
3. with ``tails="counted"``, the counts of four tail bins per column whose edges are
   functions of the released quantiles (:func:`partial_tail_bins`);
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
chunks per release that reads the data (two to four: persist ``X`` first if its
chunks are expensive to compute).
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..mechanisms.noise import add_noise_inplace
from ..mechanisms.quantile import rank_counts
from ._core import check_chunk

__all__ = ["ClippedSumPart", "clipped_frac_bits", "located_interval", "merge_clipped",
           "merge_rank_counts", "merge_sums", "partial_clipped_sums",
           "partial_column_counts", "partial_pooled_counts", "partial_rank_counts",
           "partial_tail_bins", "union_grids"]


def clipped_frac_bits(n):
    """F of ``box_clipped_mean``: every partial sum of n values in [0, 2^F] is below
    2^53."""
    return 52 - int(n).bit_length()


def merge_sums(a, b):
    """The sum of two partial results: arrays, or tuples/lists of them (nested)."""
    if isinstance(a, ClippedSumPart):
        return merge_clipped(a, b)
    if isinstance(a, (tuple, list)):
        return type(a)(merge_sums(x, y) for x, y in zip(a, b, strict=True))
    return a + b


# ---------------------------------------------------------------- rank counts
def partial_rank_counts(chunk, grid, n_features, row_offset=0, shift=None):
    """(strict, non-strict) rank counts of one chunk, int64 of shape (d, G) each
    (``shift``, a released median, subtracted from each column first)."""
    chunk = check_chunk(chunk, n_features, row_offset)
    return (rank_counts(chunk, grid, strict=True, shift=shift),
            rank_counts(chunk, grid, shift=shift))


def merge_rank_counts(a, b):
    return a[0] + b[0], a[1] + b[1]


def partial_pooled_counts(chunk, grid, n_features, row_offset=0):
    """(strict, non-strict) rank counts of the chunk's |x_ij| pooled over columns,
    int64 of shape (G,) each (the shared scale's statistic)."""
    chunk = check_chunk(chunk, n_features, row_offset)
    pooled = abs(chunk) if sp.issparse(chunk) else np.abs(chunk)
    return (rank_counts(pooled, grid, strict=True).sum(axis=0),
            rank_counts(pooled, grid).sum(axis=0))


def union_grids(grid, med):
    """U_j = grid ∪ (m_j + grid) of every column (finite points, sorted, unique): the
    grid of the union tail draws, a function of public numbers and the released
    median only."""
    out = []
    for m in np.asarray(med, dtype=np.float64):
        with np.errstate(over="ignore"):
            shifted = m + grid
        out.append(np.unique(np.concatenate([grid, shifted[np.isfinite(shifted)]])))
    return out


def partial_column_counts(chunk, grids, n_features, row_offset=0):
    """#{x < g} and #{x ≤ g} of every column j of one chunk on its own sorted grid
    ``grids[j]``, implicit zeros of a sparse chunk counted: a list of d pairs of int64
    arrays (summed over chunks, the counts the union tail draws read in memory)."""
    chunk = check_chunk(chunk, n_features, row_offset)
    rows = chunk.shape[0]
    Xc = chunk.tocsc() if sp.issparse(chunk) else chunk
    out = []
    for j, U in enumerate(grids):
        if sp.issparse(Xc):
            col = Xc.data[Xc.indptr[j]:Xc.indptr[j + 1]].astype(np.float64)
            zeros = rows - col.size
        else:
            col, zeros = np.asarray(Xc[:, j], dtype=np.float64), 0
        col = np.sort(col)
        below = np.searchsorted(col, U, side="left").astype(np.int64)
        at_most = np.searchsorted(col, U, side="right").astype(np.int64)
        if zeros:
            below += zeros * (U > 0)
            at_most += zeros * (U >= 0)
        out.append((below, at_most))
    return out


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


class _Rows:
    """Stands for X where a public function reads only its shape
    (``private_quantiles`` with ``counts=``): the driver holds counts, never rows."""

    def __init__(self, n, d):
        self.shape = (n, d)


def union_tail_draws(counts, grids, med, n, alpha, eps_q, rng):
    """The four tail draws of every column from the merged counts on U_j: the draws
    of ``heavy_tailed_clip._union_tail_draws`` (same scores, same priors, same order:
    for each column the lower inner, lower outer, upper inner, upper outer draw), which
    reads the rows in memory. Driver only.

    Privacy: as in memory: U_j and the priors are functions of the released median
    and anchors and public numbers; each count moves by at most one when a row is
    replaced, so each draw is the exponential mechanism with Δ_u = 1, ε_q-DP and
    ε_q-bounded range (McSherry and Talwar 2007, "Mechanism design via differential
    privacy"; Cesar and Rogers 2021, Lemma 3.2), as the plan charges."""
    from ..mechanisms.heavy_tailed_clip import TAIL_RATIO
    from ..mechanisms.quantile import prior_weight
    from ..mechanisms.sparse_exponential import exponential_mechanism

    d = len(grids)
    levels = (TAIL_RATIO * alpha, 1.0 - TAIL_RATIO * alpha)
    outer_levels = (alpha, 1.0 - alpha)
    inner = np.empty((2, d))
    outer = np.empty((2, d))
    steps = 8.0  # the public grid's points per octave
    w_a = prior_weight(eps_q)
    for j, U in enumerate(grids):
        below, at_most = counts[j]
        m = med[j]
        dev = np.abs(U - m)
        index = np.arange(U.size)
        k_m = int(np.searchsorted(U, m))
        for t, (q_in, q_out) in enumerate(zip(levels, outer_levels)):
            side = U < m if t == 0 else U > m
            r = int(np.rint(q_in * n))
            dist = np.maximum(below - r, 0) + np.maximum(r - at_most, 0)
            k = int(exponential_mechanism((dist + np.abs(index - k_m)).astype(np.float64),
                                          1.0, eps_q, rng))
            inner[t, j] = U[k]
            a = abs(U[k] - m)
            r = int(np.rint(q_out * n))
            dist = (np.maximum(below - r, 0) + np.maximum(r - at_most, 0)).astype(np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                beyond = steps * np.log2(dev / a) if a > 0 else np.where(dev > 0, np.inf, 0.0)
            prior = w_a * np.where(side, np.maximum(beyond, 0.0), 0.0)
            prior = np.where(np.isfinite(prior), prior, 1e12)
            k = int(exponential_mechanism(dist + prior, 1.0, eps_q, rng))
            outer[t, j] = U[k]
    return inner, outer


def noisy_bins(bins, plan, rng):
    """``heavy_tailed_clip.noisy_tail_bins`` from the merged exact bins (4, d): the
    plan's discrete noise for ℓ1 sensitivity 2d (ℓ2 √(2d)), 2d coordinates changed
    at most (the bins of a column are disjoint). Driver only."""
    import math

    d = bins.shape[1]
    sens = 2.0 * d if plan.count_kind == "laplace" else math.sqrt(2.0 * d)
    add_noise_inplace(bins.reshape(-1), rng, plan.count_kind, plan.count_scale,
                      sensitivity=sens, n_changed=2 * d)
    return bins


def shared_scale(counts, plan, rng):
    """The shared interval's C from the merged pooled counts: the two draws of
    ``heavy_tailed_clip.shared_scale_draws`` (Δ_u = d), then
    C = ``SHARED_STRETCH``·max(|up|, |med|). Driver only."""
    from ..mechanisms.heavy_tailed_clip import SHARED_STRETCH
    from ..mechanisms.quantile import prior_weight, quantile_scores, rank_error
    from ..mechanisms.sparse_exponential import exponential_mechanism

    below, at_most = counts
    n, d, grid, eps = plan.n_samples, plan.n_features, plan.grid, plan.quantile_epsilon
    total = n * d
    level = min(0.25, rank_error(grid.size, eps) / n)  # heavy_tailed_clip._shared_level
    med_scores = quantile_scores(below, at_most, int(np.rint(0.5 * total)), grid, float(d))
    med = int(exponential_mechanism(med_scores.astype(np.float64), float(d), eps, rng))
    up_scores = quantile_scores(below, at_most, int(np.rint((1.0 - level) * total)), grid,
                                float(d) * prior_weight(eps), 1, anchor=med)
    up = int(exponential_mechanism(up_scores.astype(np.float64), float(d), eps, rng))
    med, up = float(grid[med]), float(grid[max(up, med)])
    return SHARED_STRETCH * max(abs(up), abs(med)), np.array([med, up])


def located_interval(first_counts, run, plan, rng):
    """The clipping interval of ``heavy_tailed_clip._located_interval`` (or the shared
    one) from merged counts: every draw on the driver, in the in-memory order.

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
    lower, upper : ndarrays of shape (d,)
    quantiles : ndarray
        The draws (five rows per column, or the shared median and upper quantile).
    """
    from ..mechanisms.heavy_tailed_clip import TAIL_RATIO, extrapolated_interval
    from ..mechanisms.quantile import private_quantiles

    n, d = plan.n_samples, plan.n_features
    if plan.shared:
        c, quantiles = shared_scale(first_counts, plan, rng)
        return np.full(d, -c), np.full(d, c), quantiles
    grid, eps_q, alpha = plan.grid, plan.quantile_epsilon, plan.level
    rows = _Rows(n, d)
    counts = first_counts
    med = private_quantiles(rows, [0.5], epsilon_each=eps_q, rng=rng, grid=grid,
                            counts=counts)
    bins = None
    tails = getattr(plan, "tails", "union")
    if tails in ("union", "counted"):
        grids = union_grids(grid, med[0])
        col_counts = run(partial_column_counts, grids, d)
        inner, outer = union_tail_draws(col_counts, grids, med[0], n, alpha, eps_q, rng)
        quantiles = np.vstack([outer[:1], inner[:1], med, inner[1:], outer[1:]])
        if tails == "counted":
            bins = noisy_bins(run(partial_tail_bins, np.sort(quantiles, axis=0), d),
                              plan, rng)
    elif tails == "deviations":
        shift = med[0]
        counts = run(partial_rank_counts, grid, d, shift=shift)
        inner = private_quantiles(rows, [TAIL_RATIO * alpha, 1.0 - TAIL_RATIO * alpha],
                                  epsilon_each=eps_q, rng=rng, grid=grid, counts=counts)
        outer = private_quantiles(rows, [alpha, 1.0 - alpha], epsilon_each=eps_q, rng=rng,
                                  grid=grid, counts=counts, anchors=inner)
        quantiles = np.vstack([outer[:1], inner[:1], np.zeros((1, d)),
                               inner[1:], outer[1:]]) + shift
        quantiles[2] = shift
    elif tails == "values":
        inner = private_quantiles(rows, [TAIL_RATIO * alpha, 1.0 - TAIL_RATIO * alpha],
                                  epsilon_each=eps_q, rng=rng, grid=grid, counts=counts,
                                  anchors=np.vstack([med, med]))
        outer = private_quantiles(rows, [alpha, 1.0 - alpha], epsilon_each=eps_q, rng=rng,
                                  grid=grid, counts=counts, anchors=inner)
        quantiles = np.vstack([outer[:1], inner[:1], med, inner[1:], outer[1:]])
    else:  # a rule added in memory and not here: refuse before any further draw
        raise NotImplementedError(f"tails={tails!r} has no distributed fit.")
    extra = {} if bins is None else dict(tail_counts=bins, n_samples=n,
                                         count_sd=plan.count_sd)
    lower, upper = extrapolated_interval(quantiles, alpha, plan.noise_sd,
                                         max_stretch=plan.max_stretch,
                                         floor=tails != "values", **extra)
    return lower, upper, quantiles


def fit_heavy_tailed_distributed(estimator, X):
    """DPHeavyTailedMean.fit on a dask collection: ``method="private_clip"`` (the
    default ``"auto"`` resolves to it), the interval stated in ``bounds`` or located
    privately. The plan is the in-memory fit's (``plan_heavy_tailed_mean`` on the
    estimator's parameters and the collection's public n, d)."""
    import warnings

    import dask

    from ..base import release
    from ..mechanisms.heavy_tailed_clip import plan_clipped_mean
    from ..mechanisms.heavy_tailed_mean import plan_heavy_tailed_mean
    from ..utils import validate_params
    from ._core import data_digest, fit_random_source_from_digests
    from ._dask import chunk_kernel, row_chunks

    validate_params(estimator, estimator._parameter_constraints)
    method = estimator._resolved_method()
    if method != "private_clip":
        raise NotImplementedError(
            f"DPHeavyTailedMean(method={method!r}) has no distributed fit: cwme's groups "
            "(a secret permutation of the rows) and noise_smoothing are not distributed. "
            "Use method='private_clip' (the default), with or without bounds.")
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
    if plan.method == "clipped":
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
    if plan.method == "clipped":
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
