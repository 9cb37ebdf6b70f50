"""The heavy-tailed mean's decomposable statistics, and its distributed fit with
stated bounds.

``DPHeavyTailedMean(method="private_clip")`` is two releases, each of a sum:

1. the private quantiles read only the rank counts #{i : x_ij < g_k} and
   #{i : x_ij ≤ g_k} on a public grid (``skdpsparse.mechanisms.quantile.rank_counts``):
   integer sums over rows, :func:`partial_rank_counts`;
2. the clipped mean reads only the per-column sums of clip((x_ij − lo_j)/w_j, 0, 1)
   rounded to 2^-F, F = 52 − bit_length(n)
   (``skdpsparse.mechanisms.heavy_tailed_clip.box_clipped_mean``): integer sums again,
   :func:`partial_clipped_sums`, with implicit zeros counted per column so a sparse
   chunk is never densified.

Both are exact, so the merged statistics equal the in-memory ones bit for bit
(``tests/distributed/test_heavy_tailed_dask.py``). With ``bounds=`` stated, the fit
is one pass and :func:`fit_heavy_tailed_distributed` releases it here. The located
interval (no ``bounds``) needs the in-memory ``private_quantile_clipped_mean`` to
accept precomputed counts and sums (it reads ``X`` itself); until then it is refused.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..accounting import (
    ZCDP, ApproxDP, PureDP, PureDPEvent, ZCDPEvent, approx_dp_to_zcdp, laplace_scale,
    with_event, zcdp_gaussian_sigma,
)
from ..mechanisms.heavy_tailed_clip import (
    clipped_mean_sensitivity, laplace_epsilon_after, laplace_is_better,
)
from ..mechanisms.noise import add_noise_inplace
from ..mechanisms.quantile import rank_counts
from ._core import check_chunk

__all__ = ["ClippedSumPart", "clipped_frac_bits", "partial_clipped_sums",
           "partial_rank_counts", "merge_clipped", "merge_rank_counts"]


def clipped_frac_bits(n):
    """F of ``box_clipped_mean``: every partial sum of n values in [0, 2^F] is below
    2^53."""
    return 52 - int(n).bit_length()


# ---------------------------------------------------------------- rank counts
def partial_rank_counts(chunk, grid, n_features, row_offset=0):
    """(strict, non-strict) rank counts of one chunk, int64 of shape (d, G) each."""
    chunk = check_chunk(chunk, n_features, row_offset)
    return rank_counts(chunk, grid, strict=True), rank_counts(chunk, grid)


def merge_rank_counts(a, b):
    return a[0] + b[0], a[1] + b[1]


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
def release_clipped_mean(part, lower, upper, frac_bits, *, rng, rho=None, epsilon=None):
    """``private_clipped_mean``'s release from the merged part: noise for the
    sensitivity of ``clipped_mean_sensitivity`` (√m/n or m/n in unit coordinates, m
    the columns of positive width), one draw, mapped back by lo + w·(ū + Z)."""
    n = part.n_rows
    width = upper - lower
    unit = clipped_unit_mean(part, lower, upper, frac_bits)
    active = int(np.count_nonzero(width > 0))
    kind = "laplace" if rho is None else "gaussian"
    info = {"kind": kind, "scale": 0.0, "sensitivity": 0.0, "n_active": active}
    if active:
        claimed, computed = clipped_mean_sensitivity(n, active, frac_bits, kind)
        scale = (laplace_scale(claimed, epsilon) if kind == "laplace"
                 else zcdp_gaussian_sigma(claimed, rho))
        z = unit[width > 0].copy()
        add_noise_inplace(z, rng, kind, scale, sensitivity=claimed,
                          true_sensitivity=computed)
        unit[width > 0] = z
        info.update(scale=scale, sensitivity=claimed)
    return lower + width * unit, info


def fit_heavy_tailed_distributed(estimator, X):
    """DPHeavyTailedMean.fit on a dask collection, for ``bounds=`` stated (the whole
    budget to the clipped mean, as in memory)."""
    import dask

    from ..mechanisms.heavy_tailed_mean import check_bounds
    from ..utils import validate_params
    from ..base import release
    from ._core import fit_random_source_from_digests
    from ._dask import chunk_kernel, row_chunks
    from ..utils._digest import final_digest

    validate_params(estimator, estimator._parameter_constraints)
    method = estimator.method
    if hasattr(estimator, "_resolved_method"):  # method="auto" (issue 19)
        method = estimator._resolved_method()
    if method != "private_clip" or estimator.bounds is None:
        raise NotImplementedError(
            "DPHeavyTailedMean fits a dask collection with method='private_clip' and "
            "bounds=(lower, upper) stated. The located interval (bounds=None) is two "
            "passes of exact sums (rank counts, then clipped sums; both in "
            "skdpsparse.distributed._heavy_tailed) but its release still reads X in "
            "memory; cwme's groups and noise_smoothing are not distributed.")
    chunks, (n, d), input_attrs = row_chunks(X)
    lower, upper = check_bounds(estimator.bounds, d)
    lower, upper = np.minimum(lower, upper), np.maximum(lower, upper)
    if not np.all(np.isfinite(upper - lower)):
        raise ValueError("the clipping interval is too wide for float64.")
    delta = 0.0 if estimator.delta is None else float(estimator.delta)
    eps = float(estimator.epsilon)
    if delta == 0 and estimator.noise == "gaussian":
        raise ValueError("noise='gaussian' needs delta > 0.")
    frac_bits = clipped_frac_bits(n)
    task = dask.delayed(partial_clipped_sums, pure=True)
    merge = dask.delayed(merge_clipped, pure=True)
    level = [task(c, lower, upper, frac_bits, off) for c, off, _ in chunks]
    while len(level) > 1:
        level = [merge(level[i], level[i + 1]) if i + 1 < len(level) else level[i]
                 for i in range(0, len(level), 2)]
    # The digest is computed in the same graph: each chunk is read once.
    part, digest_part = dask.compute(level[0], _digest_graph(chunks, n, d))
    if part.n_rows != n:
        raise ValueError(f"the chunks held {part.n_rows} rows, not n={n}.")
    rng = fit_random_source_from_digests(
        estimator.random_state, estimator,
        [final_digest(digest_part, (n, d), chunk_kernel(X), orientation="rows")])
    laplace = estimator.noise == "laplace" or (estimator.noise == "auto"
                                               and laplace_is_better(d, eps, delta))
    if not laplace:
        rho = approx_dp_to_zcdp(eps, delta)
        mean, info = release_clipped_mean(part, lower, upper, frac_bits, rng=rng, rho=rho)
        budget = with_event(ZCDP(rho), ZCDPEvent(rho))
    elif delta > 0:
        eps_m = laplace_epsilon_after([], eps, delta)
        mean, info = release_clipped_mean(part, lower, upper, frac_bits, rng=rng,
                                          epsilon=eps_m)
        budget = with_event(ApproxDP(eps, delta), PureDPEvent(eps_m))
    else:
        mean, info = release_clipped_mean(part, lower, upper, frac_bits, rng=rng,
                                          epsilon=eps)
        budget = PureDP(eps)
    approx = budget.to_approx_dp(delta) if isinstance(budget, ZCDP) else budget
    attrs = dict(input_attrs, method_="clipped", clip_lower_=lower, clip_upper_=upper,
                 mean_=mean, noise_scale_=float(info["scale"]) * (upper - lower),
                 privacy_spent_=budget, approx_dp_spent_=approx)
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
