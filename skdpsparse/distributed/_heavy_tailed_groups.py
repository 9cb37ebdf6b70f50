"""The heavy-tailed mean's other two methods on Dask: cwme (the trimmed median of
means, consecutive groups) and the noise-smoothing mean.

**cwme** (Kamath, Liu and Zhang 2022, "Improved rates for differentially private
stochastic convex optimization with heavy-tailed data", Algorithm 3). Its statistic
is the coordinate-wise median of m group means of clipped entries; the groups are the
consecutive split of the rows in the collection's order (``group_bounds``: a public
function of the row position). Each chunk returns, for every group it overlaps, the
per-column sums of its rows' clipped entries (and, for a sparse chunk, how many
entries were explicit): task results. The driver adds the pieces of each group, adds
the implicit zeros' clipped value, takes the median of the means and draws the noise
(``heavy_tailed.median_of_group_means``, ``heavy_tailed.release_statistic``: the
in-memory steps).

Privacy: the sensitivity of ``heavy_tailed.cwme_sensitivity`` is a worst case over
the group the replaced row lies in and holds for every assignment of the rows to
groups of the consecutive split's sizes (``skdpsparse.mechanisms.heavy_tailed``,
module notes): a public assignment by position is covered, so the plan's budget
holds. What the in-memory ``shuffle=True`` adds (a permutation drawn from the fit's
key) is accuracy on sorted data, not privacy; on Dask it would mean shipping n labels
drawn from the fit's random source to the workers (its outputs in the graph), so it
is refused there: ``shuffle=False``, with the collection in an order chosen without
looking at the data values.

**noise_smoothing** (Algorithm 4): (τ/n) Σ_i ψ_c(x_ij/τ), a sum of per-row terms
bounded by S_c. Each chunk returns the in-memory kernel's (τ/n_c) Σ_{i∈c} ψ_c times
n_c/n (n public), and the driver adds them and draws the noise.

Exactness. One chunk per group (cwme) and one chunk (noise smoothing) give the
in-memory statistic bit for bit: the same additions in the same order (a group's rows
summed one after another from 0 per column, as the compiled kernel does; the kernel
itself for noise smoothing). A group split across k chunks (or k chunks for noise
smoothing) adds k partial float sums instead: the statistic differs from the
in-memory one by at most (k − 1)·u·Σ|terms| plus the rescaling's rounding, a few ulps
of the largest partial sum. These are float sums, as in memory: the sensitivity is
exact in real arithmetic and holds to within that rounding (the pitfall "float sums"
of the user guide's "Larger than memory" page).
"""

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ._core import check_chunk

__all__ = ["GroupSumPart", "cwme_group_sums", "group_sums", "merge_groups",
           "partial_group_sums", "partial_smoothed_sums"]


@dataclass
class GroupSumPart:
    """Per group (by index in the consecutive split) the per-column sums of the
    clipped explicit entries, float64 (d,), and how many entries were explicit, int64
    (d,) (None for a dense chunk: every entry is)."""

    sums: dict = field(default_factory=dict)
    explicit: dict = field(default_factory=dict)


def _clip_interval(plan):
    from .._kernels.heavy_tailed import _check_center, _interval

    return _interval(_check_center(plan.center, plan.n_features), float(plan.tau))


def partial_group_sums(chunk, bounds, lo, hi, n_features, row_offset=0):
    """The :class:`GroupSumPart` of one chunk (a worker's task; public inputs):
    ``bounds`` the consecutive split's start offsets, ``[lo, hi]`` the clipping
    interval of every column (``_kernels.heavy_tailed._interval``)."""
    return group_sums(check_chunk(chunk, n_features, row_offset), bounds, lo, hi,
                      row_offset)


def group_sums(rows, bounds, lo, hi, row_offset=0, scale=None):
    """The :class:`GroupSumPart` of checked ``rows`` at positions row_offset, … of the
    split ``bounds``, of the rows ``scale[i]·x_i`` when ``scale`` is given (the
    in-memory scaled kernel's clip(s·x) + (x − x)·s, in its order)."""
    n_features = rows.shape[1]
    end = row_offset + rows.shape[0]
    part = GroupSumPart()
    first = int(np.searchsorted(bounds, row_offset, side="right")) - 1
    for g in range(first, len(bounds) - 1):
        a, b = max(bounds[g], row_offset), min(bounds[g + 1], end)
        if a >= b:
            break
        piece = rows[a - row_offset:b - row_offset]
        s = None if scale is None else scale[a - row_offset:b - row_offset]
        if sp.issparse(piece):
            # The kernel adds clip(v) + (v - v) entry by entry in row order into a
            # per-column accumulator starting at 0: np.bincount adds its weights in
            # input order into zeros, the same additions (+ 0.0 maps -0.0 to 0.0).
            values = piece.data.astype(np.float64)
            if s is not None:
                with np.errstate(over="ignore"):  # s·x beyond float64: ±inf, clipped
                    values = np.repeat(s, np.diff(piece.indptr)) * values
            values = np.clip(values, lo[piece.indices], hi[piece.indices]) + 0.0
            part.sums[g] = np.bincount(piece.indices, weights=values,
                                       minlength=n_features)
            part.explicit[g] = np.bincount(piece.indices, minlength=n_features)
        else:
            part.sums[g] = _sequential_column_sums(piece, lo, hi, s)
            part.explicit[g] = None
    return part


def _sequential_column_sums(piece, lo, hi, scale=None):
    """Σ_i clip(s_i·x_ij) per column, the rows added one after another from 0, as the
    kernel does: a cumulative sum (sequential by definition; np.sum may sum a column
    pairwise), in blocks of about 2^20 entries, each block's sums starting from the
    last block's."""
    d = piece.shape[1]
    acc = np.zeros((1, d))
    step = max(1, 2**20 // max(d, 1))
    for start in range(0, piece.shape[0], step):
        block = piece[start:start + step].astype(np.float64)
        if scale is not None:
            with np.errstate(over="ignore"):  # s·x beyond float64: ±inf, clipped
                block = scale[start:start + step, None] * block
        block = np.clip(block, lo, hi) + 0.0
        acc = np.cumsum(np.vstack([acc, block]), axis=0)[-1:]
    return acc[0]


def merge_groups(a, b):
    """Two parts in row order: a group both hold is added (a's sum first)."""
    out = GroupSumPart(dict(a.sums), dict(a.explicit))
    for g, s in b.sums.items():
        if g in out.sums:
            out.sums[g] = out.sums[g] + s
            e, f = out.explicit[g], b.explicit[g]
            out.explicit[g] = None if e is None and f is None else \
                (e if e is not None else 0) + (f if f is not None else 0)
        else:
            out.sums[g], out.explicit[g] = s, b.explicit[g]
    return out


def cwme_group_sums(part, bounds, lo, hi):
    """The (m, d) group sums of the in-memory kernel from the merged part: the
    implicit zeros' clipped value clip(0) added once per group at its end, as the CSR
    kernel does when some clip(0) is nonzero (a dense chunk has no implicit zero)."""
    m = len(bounds) - 1
    if sorted(part.sums) != list(range(m)):
        raise ValueError("the chunks did not cover every group of rows.")
    clip0 = np.clip(0.0, lo, hi) + 0.0
    sums = np.empty((m, lo.shape[0]))
    for g in range(m):
        sums[g] = part.sums[g]
        explicit = part.explicit[g]
        if explicit is not None and np.any(clip0 != 0.0):
            sums[g] += (bounds[g + 1] - bounds[g] - explicit) * clip0
    return sums


def partial_smoothed_sums(chunk, tau, c, n_samples, n_features, row_offset=0):
    """The chunk's share of the noise-smoothing mean: the in-memory kernel's
    (τ/n_c) Σ_{i∈c} ψ_c(x_ij/τ) times n_c/n (a worker's task; public inputs)."""
    from ..mechanisms.heavy_tailed import noise_smoothing_mean

    chunk = check_chunk(chunk, n_features, row_offset)
    value = noise_smoothing_mean(chunk, tau=tau, smoothing_variance=c)
    rows = chunk.shape[0]
    return value if rows == n_samples else value * (rows / n_samples)


def groups_pass(plan, n, d):
    """The one pass of a cwme or noise-smoothing ``HeavyTailedMeanPlan``:
    ``(partial, args)``, public numbers only."""
    from .._kernels.heavy_tailed import group_bounds

    mech = plan.mechanism
    if plan.method == "cwme":
        bounds = group_bounds(n, mech.groups_used)
        return partial_group_sums, (bounds, *_clip_interval(mech), d)
    return partial_smoothed_sums, (mech.tau, mech.smoothing_variance, n, d)


def release_groups(merged, plan, n, rng):
    """The release from the pass's merged result, on the driver: the in-memory
    median step (cwme) and the in-memory draw step (one draw)."""
    from .._kernels.heavy_tailed import group_bounds
    from ..mechanisms.heavy_tailed import median_of_group_means, release_statistic

    mech = plan.mechanism
    statistic = merged
    if plan.method == "cwme":
        bounds = group_bounds(n, mech.groups_used)
        lo, hi = _clip_interval(mech)
        statistic = median_of_group_means(cwme_group_sums(merged, bounds, lo, hi), n)
    return release_statistic(statistic, mech, rng)
