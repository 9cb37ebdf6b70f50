"""The located clipped mean of heavy-tailed columns (``private_clip``, the default of
:class:`~skdpsparse.mean.DPHeavyTailedMean`): a clipped mean with exact sums and
discrete noise (:func:`plan_clipped_mean`, :func:`clipped_mean`), and its clipping
interval located privately from the data by private quantiles
(:func:`plan_quantile_clipped_mean`, :func:`quantile_clipped_mean`).

Split out of :mod:`skdpsparse.mechanisms.heavy_tailed` (issue 22), which still
re-exports every public name below. The derivation (budget split, composition, the
tail model) is in ``doc/derivations/private_means.rst``.

Privacy model: neighbouring datasets differ by *replacing* one row; n and d are
public. Every row is used: values outside an interval are clipped, never rejected.
"""

import functools
import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..accounting import (
    ZCDP,
    PureDP,
    approx_dp_to_zcdp,
    laplace_scale,
    zcdp_gaussian_sigma,
)
from .heavy_tailed import (
    _as_data,
    _check_delta,
    _check_rng,
    _check_shape,
    _count,
    _positive_finite,
    _real,
)
from .noise import add_noise_inplace

__all__ = []  # public names, listed in doc/api.rst first (tests/test_package_surface.py)


#: Default share of the budget spent on locating the clipping interval.
SCALE_FRACTION = 0.1


def box_clipped_mean(X, lower, upper):
    """Mean of every column clipped into [lower_j, upper_j], in unit coordinates:
    ū_j = (1/n) Σ_i clip((x_ij − lower_j)/w_j, 0, 1), w_j = upper_j − lower_j (NOT
    private; a column with w_j = 0 gives 0).

    Each clipped value is rounded to the grid 2^-F (F = 52 − bit_length(n), so every
    partial sum of n of them is an integer below 2^53) and summed exactly; the sum is
    the same for every row order and container. Returns (ū, F).
    """
    X = _as_data(X)
    n, d = X.shape
    lower = np.asarray(lower, dtype=np.float64)
    width = np.asarray(upper, dtype=np.float64) - lower
    safe = np.where(width > 0, width, 1.0)
    frac_bits = 52 - int(n).bit_length()

    def unit(values, cols):
        with np.errstate(invalid="ignore", over="ignore"):
            u = (values - lower[cols]) / safe[cols]
        if not np.all(np.isfinite(values)):
            raise ValueError("X contains NaN or infinite values.")
        u = np.clip(u, 0.0, 1.0)
        u[..., width[cols] <= 0] = 0.0
        return np.rint(np.ldexp(u, frac_bits))

    if sp.issparse(X):
        X = X.tocsr()
        sums = np.bincount(X.indices, weights=unit(X.data, X.indices),
                           minlength=d).astype(np.float64)  # int64 when X has no entry
        zeros = n - np.bincount(X.indices, minlength=d)
        sums += zeros * unit(np.zeros(d), np.arange(d))  # below 2^53: exact
    else:
        sums = np.zeros(d, dtype=np.int64)
        cols = np.arange(d)
        step = max(1, 2**22 // d)
        for start in range(0, n, step):
            sums += unit(X[start:start + step].astype(np.float64), cols).astype(
                np.int64).sum(axis=0)
    return np.ldexp(np.asarray(sums, dtype=np.float64), -frac_bits) / n, frac_bits


def clipped_mean_sensitivity(n_samples, n_active, frac_bits, kind):
    """(claimed, computed) sensitivity of :func:`box_clipped_mean` in unit coordinates.

    Claimed: replacing one row moves each of the ``n_active`` coordinates of positive
    width by at most 1/n (a clipped unit value lies in [0, 1], and rounding to 2^-F
    keeps it there), so Δ₂ = √m/n and Δ₁ = m/n. Computed: the exact integer sum is
    converted to float and divided by n, two roundings of a value in [0, 1] on each
    dataset, at most 5·2^-53 per coordinate in all.
    """
    m = int(n_active)
    per_coord = 1.0 / n_samples
    spread = m if kind == "laplace" else math.sqrt(m)
    claimed = spread * per_coord
    computed = spread * (per_coord + 5.0 * 2.0**-53) * (1.0 + 2.0**-50)
    del frac_bits  # the rounding to 2^-F stays inside [0, 1]: no slack from it
    return claimed, computed


@dataclass(frozen=True)
class ClippedMeanPlan:
    """The plan of one clipped mean with noise (public numbers only: n, d and a
    public interval per column), built by :func:`plan_clipped_mean` and run by
    :func:`clipped_mean`.

    **Privacy guarantee.** A plan is public: the interval is stated by the user or
    released by earlier mechanisms, and every other field is computed from it and
    (n, d). ``budget`` is the guarantee of :func:`clipped_mean` run with it, for one
    row of the n replaced: in unit coordinates one row moves each of the
    ``n_active`` coordinates of positive width by at most 1/n, so Δ₂ = √m/n and
    Δ₁ = m/n; discrete Gaussian noise of σ = Δ₂/√(2ρ) is ρ-zCDP (Canonne, Kamath and
    Steinke 2020, "The discrete Gaussian for differential privacy", Theorem 14),
    discrete Laplace noise of scale Δ₁/ε is ε-DP; the float rounding of the sum and
    the division (``true_sensitivity``) is charged to the grid noise.

    Attributes
    ----------
    n_samples, n_features : int
    lower, upper : ndarray of shape (d,)
        The interval of each column (lower ≤ upper).
    kind : {"gaussian", "laplace"}
    rho, epsilon : float or None
        What the release spends (one of them).
    n_active : int
        Columns of positive width (the others are the constant ``lower`` and get no
        noise).
    noise_scale : float
        σ or b in unit coordinates (0 when no column is active).
    sensitivity, true_sensitivity : float
        Claimed and computed sensitivity in unit coordinates (0 when none is active).
    budget : ZCDP or PureDP
    """

    n_samples: int
    n_features: int
    lower: np.ndarray = field(compare=False, repr=False)
    upper: np.ndarray = field(compare=False, repr=False)
    kind: str
    rho: float | None
    epsilon: float | None
    n_active: int
    noise_scale: float
    sensitivity: float
    true_sensitivity: float
    budget: object

    @property
    def width(self):
        return self.upper - self.lower


def plan_clipped_mean(n_samples, lower, upper, *, rho=None, epsilon=None):
    """The noise of the mean of every column clipped into [lower_j, upper_j], from
    public numbers (the interval must not be chosen from the data unless it is a
    release).

    **Privacy guarantee.** Public numbers in, a public plan out; what the plan
    guarantees is its ``budget`` (:class:`ClippedMeanPlan`): ρ-zCDP (``rho``) or ε-DP
    (``epsilon``) for one row replaced.

    Parameters
    ----------
    n_samples : int
    lower, upper : array-like of shape (d,)
        Finite; swapped where lower > upper.
    rho, epsilon : float
        Exactly one.

    Returns
    -------
    ClippedMeanPlan
    """
    if (rho is None) == (epsilon is None):
        raise ValueError("pass exactly one of rho and epsilon.")
    n = _count(n_samples, "n_samples")
    lower = np.atleast_1d(np.asarray(lower, dtype=np.float64))
    upper = np.atleast_1d(np.asarray(upper, dtype=np.float64))
    d = max(lower.size, upper.size)
    lower = np.broadcast_to(lower, (d,)).copy()
    upper = np.broadcast_to(upper, (d,)).copy()
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
        raise ValueError("the clipping bounds must be finite.")
    lower, upper = np.minimum(lower, upper), np.maximum(lower, upper)
    if not np.all(np.isfinite(upper - lower)):
        raise ValueError("the clipping interval is too wide for float64.")
    active = int(np.count_nonzero(upper - lower > 0))
    kind = "laplace" if rho is None else "gaussian"
    scale = claimed = computed = 0.0
    if active:
        claimed, computed = clipped_mean_sensitivity(n, active, 52 - n.bit_length(), kind)
        if kind == "laplace":
            epsilon = _positive_finite(epsilon, "epsilon")
            scale = laplace_scale(claimed, epsilon)
        else:
            rho = _positive_finite(rho, "rho")
            scale = zcdp_gaussian_sigma(claimed, rho)
    budget = PureDP(epsilon) if kind == "laplace" else ZCDP(rho)
    return ClippedMeanPlan(n, d, lower, upper, kind, rho, epsilon, active, scale,
                           claimed, computed, budget)


def clipped_mean(X, plan, rng):
    """Run a :class:`ClippedMeanPlan`: lower_j + w_j·(ū_j + Z_j), ū the mean of the
    clipped unit values (:func:`box_clipped_mean`), Z the planned noise.

    **Privacy guarantee.** ``plan.budget`` for one row of ``X`` replaced (n and d
    public), for a plan from :func:`plan_clipped_mean` (:class:`ClippedMeanPlan`).
    Assumptions: the plan's interval is public or a release; a secret random source.
    Not covered: add/remove neighbours; timing side channels.

    Returns
    -------
    ndarray of shape (d,)
    """
    X = _as_data(X)
    _check_shape(X, plan)
    width = plan.width
    unit, _ = box_clipped_mean(X, plan.lower, plan.upper)
    if plan.n_active:
        z = unit[width > 0].copy()
        add_noise_inplace(z, _check_rng(rng), plan.kind, plan.noise_scale,
                          sensitivity=plan.sensitivity,
                          true_sensitivity=plan.true_sensitivity)
        unit[width > 0] = z
    return plan.lower + width * unit


def private_clipped_mean(X, lower, upper, *, rng, rho=None, epsilon=None):
    """Mean of every column clipped into the public [lower_j, upper_j], plus noise:
    :func:`plan_clipped_mean` then :func:`clipped_mean`.

    **Privacy guarantee.** Protected: one row of ``X`` (n and d public). ρ-zCDP
    (``rho``) or ε-DP (``epsilon``), as :class:`ClippedMeanPlan` states. Assumptions:
    the interval public (stated or released); a secret random source. Not covered:
    add/remove neighbours; timing side channels.

    Works in unit coordinates (:func:`box_clipped_mean`), where one row moves each
    coordinate by at most 1/n, and maps back: the release is
    lower_j + w_j·(ū_j + Z_j), so each column's noise is proportional to its width
    (the same total error as one σ for all columns, and small columns keep a small
    error). ``rho``: discrete Gaussian Z of σ = Δ₂/√(2ρ), Δ₂ = √m/n, ρ-zCDP (Canonne,
    Kamath and Steinke 2020, Theorem 14). ``epsilon``: discrete Laplace of scale
    b = Δ₁/ε, Δ₁ = m/n, ε-DP. m counts the columns of positive width (a column with
    lower_j = upper_j is the constant lower_j and gets no noise).

    Returns
    -------
    estimate : ndarray of shape (d,)
    info : dict with ``kind``, ``scale`` (σ or b, unit coordinates), ``sensitivity``.
    """
    if (rho is None) == (epsilon is None):
        raise ValueError("pass exactly one of rho and epsilon.")
    X = _as_data(X)
    n, d = X.shape
    lower = np.broadcast_to(np.asarray(lower, dtype=np.float64), (d,))
    upper = np.broadcast_to(np.asarray(upper, dtype=np.float64), (d,))
    plan = plan_clipped_mean(n, lower, upper, rho=rho, epsilon=epsilon)
    return clipped_mean(X, plan, rng), _clipped_info(plan)


def _clipped_info(plan):
    return {"kind": plan.kind, "scale": plan.noise_scale, "sensitivity": plan.sensitivity,
            "n_active": plan.n_active}


#: Private quantiles drawn per column: q_α, q_{4α}, the median, q_{1−4α}, q_{1−α}.
N_DRAWS = 5

#: The share of each tail's modelled bias not trusted to cancel with the other's.
BIAS_DOUBT = 0.25

#: The widest clipping distance considered, in units of the outer quantile's.
MAX_STRETCH = 8.0

#: The largest Pareto index a tail is modelled with.
TAIL_INDEX_MAX = 50.0

#: The inner quantile of each tail is at ``TAIL_RATIO`` times the outer one's level.
TAIL_RATIO = 4.0

#: A tail is read as ended at its outer quantile (no stretch) only when the sum of its
#: two bins is within 2√2 standard deviations of a bin of zero and each bin is within
#: ``ENDED_BIN_SDS`` of them (``_counted_tail``; the sum alone read a near bin of 110
#: rows, 3.4 standard deviations, as ended when both bins drew negative noise). A bin
#: more than 3 standard deviations above zero is rows, not noise: for a tail with no
#: rows beyond its outer quantile each bin is noise around zero, above 3σ with
#: probability 0.0013 (Gaussian) or about ½e^(−3√2) ≈ 0.007 (discrete Laplace of
#: σ = √2·b), so the condition almost never takes the ended reading from a tail that
#: did end.
ENDED_BIN_SDS = 3.0

#: The far bin of each tail starts at this multiple of the outer quantile's distance
#: from the median (one octave).
TAIL_COUNT_RATIO = 2.0

#: The four tail bins of a column cost as many draws as this.
COUNT_DRAWS = 2

#: A far bin's upper bound is its noisy count plus this many of its standard
#: deviations.
COUNT_DOUBT = 2.0


def auto_clip_level(n, n_features, *, quantile_epsilon, grid_size, beta=0.05):
    """The outer tail level α of the private quantiles (public numbers only).

    α·n must exceed the exponential mechanism's rank error
    (:func:`~skdpsparse.mechanisms.quantile.rank_error`): below it, the draw lands
    among the grid points beyond the data, which all have the worst score. α = that
    error over n, at most 1/16 (so that the inner level 4α stays at most 1/4).
    """
    from .quantile import rank_error
    del n_features
    return min(1.0 / 16.0, rank_error(grid_size, quantile_epsilon, beta) / n)


def extrapolated_interval(quantiles, level, noise_sd, max_stretch=None, floor=False,
                          tail_counts=None, n_samples=None, count_sd=None):
    """The clipping interval of each column from its five private quantiles
    (post-processing: no privacy cost), and with ``tail_counts`` from the noisy
    counts of rows beyond the outer quantiles (below).

    ``quantiles`` holds q_α, q_{4α}, q_{1/2}, q_{1−4α}, q_{1−α} per column (rows),
    α = ``level``. Each tail beyond its inner quantile is modelled as Pareto, from the
    median m: P(X − m > t) = 4α (t/t_in)^{−a} for t ≥ t_in = q_{1−4α} − m, with the
    index a = ln 4 / ln(t_out/t_in) fitted through the outer quantile (clamped to
    [1.05, 50]; a tail with t_out = t_in is treated as ending there). Clipping at
    m + C then loses B(C) = 4α t_in^a C^{1−a}/(a − 1) of the mean on that side. The
    interval [m − C_lo, m + C_up] minimises (B_up − B_lo)² + (noise_sd·(C_up + C_lo))²
    over C ∈ t_in·2^{k/4}, k = 0..80 (and C = t_out), at most ``max_stretch`` times
    t_out (``MAX_STRETCH`` by default): the squared bias left after
    the two tails' biases cancel, plus the noise of that width (``noise_sd`` is the
    noise's standard deviation per unit of width). Symmetric tails cancel and keep a
    tight interval; a heavy tail on one side widens that side only.

    ``floor=True`` (what :func:`located_interval` passes) removes the candidates inside
    the outer quantile, C < t_out. Why, from public numbers only: at the level of
    :func:`auto_clip_level`, α·n is the exponential mechanism's rank error 2(ln G + ln
    20)/ε_q, while the clip that balances bias and noise leaves out about n·s·√(a − 1)
    rows per side (s = ``noise_sd``; setting the derivative of B(C)² + (sC)² to zero
    with B(C) = C·P(X − m > C)/(a − 1)). With the split of the plan (ε_q from fρ over 5d
    draws, s from (1 − f)ρ), their ratio is 2(ln G + ln 20)·√(5(1 − f)/(4f))/√(a − 1),
    about 66/√(a − 1) at f = 0.1 and G = 963: the balance lies beyond the outer quantile
    for every index a the model allows below 4000, so clipping inside it only adds bias.
    Without the floor a noisy fit of a steep index (t_out close to t_in) clipped at
    t_in, 4αn rows (12 % of a Pareto column at n = 10⁴, ε = 4, d = 10).

    ``tail_counts`` (shape (4, d): per column the noisy numbers of rows in
    (m + t_out, m + λt_out], beyond m + λt_out, in [m − λt_out', m − t_out') and below
    m − λt_out', λ = ``TAIL_COUNT_RATIO``, each with noise of standard deviation
    ``count_sd``) replaces, beyond t_out, the model fitted through the two quantiles
    by one fitted through the counts: each noisy bin read as at least 0 (a count of
    rows; post-processing), N̂ = N̂_near + N̂_far rows beyond t_out, and
    the index a = ln(N̂/max(N̂_far, 1))/ln λ (clamped to [1.05, 50]), so that
    B(C) = (N̂/n)·t_out^a·C^{1−a}/(a − 1). Why: the outer quantile is drawn with a
    rank error of the order of α·n itself (that is how α is chosen), so its true
    level, hence the index through it, can be far off, while a count at the released
    point has an error of ``count_sd`` (about √2/ε_q against α·n ≈ 20/ε_q). A tail
    whose N̂ is at most 2√2·``count_sd`` and whose two bins are each within
    ``ENDED_BIN_SDS``·``count_sd`` of zero (the tail ended before t_out, e.g. a bounded
    or top-coded column whose outer draw landed above its maximum) is not stretched:
    C = t_out (the first condition alone read a near bin of 110 rows whose two bins
    both drew negative noise as ended, and the clip at t_out cost 30 times the
    oracle's error on a generated delay column, n = 3.3·10⁵, ε = 4). A side with
    t_out = 0, or without counts, keeps the quantiles' model.

    With ``tail_counts`` the pair is chosen by minimax regret (:func:`_end_regret`)
    rather than by the error under the fitted tail alone: a far bin empty to within
    ``COUNT_DOUBT`` standard deviations is also read as a tail that ends at its edge
    λ·t_out, and the interval is the one whose error relative to the best under
    either reading is smallest at worst. Why: at one column the far bin holds about
    9.9·2^(−a) of its standard deviations for a tail of index a, so for a > 2.3 the
    counts cannot tell a tail that goes on from one that ended, and the fitted
    reading alone stretched columns that end (top codes, capped delays) to the cap
    ``MAX_STRETCH``. Over generated families (``heavy_tail_study.py decide``) it has
    the smallest worst family ratio of the options measured
    (``doc/derivations/private_means.rst``, Part 1e).

    Returns
    -------
    lower, upper : ndarrays of shape (d,)
    """
    q = np.sort(np.asarray(quantiles, dtype=np.float64), axis=0)  # monotone, post-processing
    med = q[2]
    sides = []
    stretch = MAX_STRETCH if max_stretch is None else float(max_stretch)
    tails = ((q[3] - med, q[4] - med), (med - q[1], med - q[0]))
    ends = []
    for side, (t_in, t_out) in enumerate(tails):
        C, bias = _tail_candidates(t_in, t_out, TAIL_RATIO * level, stretch, floor)
        end = None
        if tail_counts is not None:
            near, far = np.asarray(tail_counts, dtype=np.float64)[2 * side:2 * side + 2]
            C, bias, end = _counted_tail(C, bias, t_in, t_out, near, far, n_samples,
                                         count_sd)
        sides.append((C, bias))
        ends.append(end)
    (c_up, _), (c_lo, _) = sides
    iu = np.empty(med.size, dtype=np.intp)
    il = np.empty(med.size, dtype=np.intp)
    # The pairs of candidates of a column are K² values (K = 82), held for a block of
    # columns at a time: the whole (d, K, K) at once took 54 MB per array at d = 1000,
    # and the regret holds about four.
    for start in range(0, med.size, PAIR_BLOCK):
        cols = slice(start, start + PAIR_BLOCK)
        block = [(c[cols], b[cols]) for c, b in sides]
        (cu, bu), (cl, bl) = block
        err = _pair_errors(bu, bl, cu, cl, noise_sd)
        if tail_counts is not None:  # the readings an empty far bin leaves open
            err = _end_regret(err, block, [None if e is None else (e[0][cols], e[1][cols])
                                           for e in ends], noise_sd)
        flat = err.reshape(err.shape[0], -1).argmin(axis=1)
        iu[cols], il[cols] = np.unravel_index(flat, err.shape[1:])
    rows = np.arange(med.size)
    return med - c_lo[rows, il], med + c_up[rows, iu]


#: Columns whose candidate pairs :func:`extrapolated_interval` scores at once.
PAIR_BLOCK = 64


def _pair_errors(b_up, b_lo, c_up, c_lo, noise_sd):
    """err[j, u, l]: the modelled squared error of every pair of candidates of column j.
    A modelled bias of up to 1e300 squares to inf: such a candidate is simply never the
    argmin (no warning)."""
    with np.errstate(over="ignore", invalid="ignore"):
        err = ((b_up[:, :, None] - b_lo[:, None, :]) ** 2
               + BIAS_DOUBT * (b_up[:, :, None] ** 2 + b_lo[:, None, :] ** 2)
               + (noise_sd * (c_up[:, :, None] + c_lo[:, None, :])) ** 2)
    return np.where(np.isnan(err), np.inf, err)  # inf − inf: both sides unusable


def _end_regret(err, sides, ends, noise_sd):
    """The minimax-regret criterion of :func:`extrapolated_interval` (post-processing).

    Each side whose far bin is empty to within ``COUNT_DOUBT`` standard deviations has
    two readings consistent with its counts: P, the fitted tail goes on beyond the far
    edge λ·t_out (the modelled bias of :func:`_counted_tail`), and E, the tail ends
    there (no bias for a clip at or beyond λ·t_out, the model's inside it). For every
    combination h of the readings (P on a side without an admissible E) the error of a
    pair of candidates relative to the best pair under h is err_h / min err_h; the
    criterion is the largest of these (Savage 1951, "The theory of statistical
    decision", minimax regret), so the chosen pair is never worse than the best under
    any admissible reading by more than the smallest factor possible. Where no side
    has an admissible E it is err / min err, whose argmin is that of err: the
    interval is unchanged.
    """
    (c_up, b_up), (c_lo, b_lo) = sides
    readings_up = [(b_up, True)] + ([(ends[0][0], ends[0][1])] if ends[0] is not None else [])
    readings_lo = [(b_lo, True)] + ([(ends[1][0], ends[1][1])] if ends[1] is not None else [])
    worst = np.zeros_like(err)
    for bu, ok_u in readings_up:
        for bl, ok_l in readings_lo:
            ok = np.broadcast_to(np.logical_and(ok_u, ok_l), (err.shape[0],))
            e = err if bu is b_up and bl is b_lo else _pair_errors(bu, bl, c_up, c_lo, noise_sd)
            best = e.reshape(e.shape[0], -1).min(axis=1)[:, None, None]
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                rel = np.where(best > 0, e / best, np.where(e > 0, np.inf, 1.0))
            worst = np.maximum(worst, np.where(ok[:, None, None], rel, 0.0))
    return np.where(np.isnan(worst), np.inf, worst)


def _tail_candidates(t_in, t_out, inner_mass, stretch, floor=False):
    """Candidate clipping distances C (d, K) and the modelled bias B(C) of one tail."""
    k = np.arange(81) / 4.0
    t_in = np.maximum(t_in, 0.0)
    t_out = np.maximum(t_out, t_in)
    base = np.where(t_in > 0, t_in, t_out)
    C = np.concatenate([base[:, None] * np.exp2(k)[None, :], t_out[:, None]], axis=1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        a = np.log(TAIL_RATIO) / np.log(t_out / t_in)
        a = np.clip(np.where(np.isfinite(a), a, TAIL_INDEX_MAX), 1.05, TAIL_INDEX_MAX)[:, None]
        bias = inner_mass * base[:, None] ** a * C ** (1.0 - a) / (a - 1.0)
    ended = (t_out <= t_in)[:, None] | (base[:, None] == 0)
    bias = np.where(ended, np.where(C >= t_out[:, None], 0.0, np.inf), bias)
    bias = np.where(np.isfinite(bias), bias, 1e300)
    # The fitted index is noisy: never extrapolate beyond MAX_STRETCH·t_out.
    C = np.minimum(C, stretch * np.maximum(t_out, base)[:, None])
    if floor:  # never clip inside the outer quantile (see extrapolated_interval)
        C = np.maximum(C, t_out[:, None])
    return C, bias


def _counted_tail(C, bias, t_in, t_out, near, far, n, count_sd):
    """The candidates of one tail checked against the noisy counts beyond t_out
    (:func:`extrapolated_interval`, ``tail_counts``); post-processing. Returns the
    candidates, their bias under the fitted reading, and the ended reading
    (its bias, and where it is admissible) for :func:`_end_regret`."""
    t_in = np.maximum(t_in, 0.0)
    t_out = np.maximum(t_out, t_in)
    # A bin counts rows: a negative noisy count is read as 0 before the total (a
    # function of the released bins alone, post-processing). Unclamped, a near bin of
    # 80 and a far one drawn at −50 gave a total of 30 and an index fitted through a
    # far bound below 0; a total below 0 made the modelled bias negative.
    near = np.maximum(near, 0.0)
    far = np.maximum(far, 0.0)
    total = near + far
    usable = t_out > 0
    # Ended: the total within 2√2 standard deviations of a bin of 0 and each bin within
    # ENDED_BIN_SDS of them (a near bin of 110 rows and a far one of 0, both drawn low,
    # passed the first test alone).
    ended = usable & (total <= 2.0 * math.sqrt(2.0) * count_sd)
    ended &= np.maximum(near, far) <= ENDED_BIN_SDS * count_sd
    log_ratio = math.log(TAIL_COUNT_RATIO)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        a_q = np.log(TAIL_RATIO) / np.log(t_out / t_in)
        a_q = np.clip(np.where(np.isfinite(a_q), a_q, TAIL_INDEX_MAX), 1.05, TAIL_INDEX_MAX)
        # The quantiles' model predicts total·λ^(−a_q) rows in the far bin; fewer by
        # more than two standard deviations of the bin: a lighter tail than fitted.
        far_hi = far + COUNT_DOUBT * count_sd  # an upper bound on the far bin
        lighter = usable & ~ended & (far_hi < total * np.exp(-a_q * log_ratio))
        a = np.log(total / np.maximum(far_hi, 1.0)) / log_ratio
        a = np.clip(np.where(np.isfinite(a), a, TAIL_INDEX_MAX), 1.05, TAIL_INDEX_MAX)
        ratio = C / np.where(usable, t_out, 1.0)[:, None]
        counted = (total / n)[:, None] * t_out[:, None] * ratio ** (1.0 - a[:, None]) / (
            a[:, None] - 1.0)
    counted = np.where(np.isfinite(counted), counted, 1e300)
    bias = np.where(lighter[:, None], counted, bias)
    # An ended tail: nothing beyond t_out to model, no stretch.
    bias = np.where(ended[:, None], 0.0, bias)
    C = np.where(ended[:, None], t_out[:, None], C)
    # The other reading of the counts (_end_regret): the tail ends at the far bin's
    # edge λ·t_out, admissible when the far count is within COUNT_DOUBT standard
    # deviations of 0 (the same doubt as the upper bound far_hi above).
    empty = usable & ~ended & (far <= COUNT_DOUBT * count_sd)
    end_bias = np.where(C >= TAIL_COUNT_RATIO * t_out[:, None], 0.0, bias)
    return C, bias, (end_bias, empty)


def laplace_epsilon_after(events, epsilon, delta):
    """The largest ε_m such that ``events`` followed by an ε_m-DP release compose to
    at most (ε, δ)-DP (:func:`~skdpsparse.accounting.compose_events`, Rényi
    accounting of both parts), by bisection to a relative 2^-30 (rounded down); 0 if
    even ε_m → 0 exceeds it."""
    return _laplace_epsilon_after(tuple(events), float(epsilon), float(delta))


@functools.lru_cache(maxsize=256)  # public numbers in, a number out
def _laplace_epsilon_after(events, epsilon, delta):
    from ..accounting import PureDPEvent, compose_events

    def total(eps_m):
        return compose_events(list(events) + [PureDPEvent(eps_m)], delta).epsilon

    lo, hi = 0.0, 4.0 * float(epsilon)  # Rényi accounting can give a pure part ε_m > ε
    if total(epsilon * 1e-9) > epsilon:
        return 0.0
    if total(hi) <= epsilon:
        return hi
    while hi - lo > lo * 2.0**-30 + 1e-300:
        mid = 0.5 * (lo + hi)
        if total(mid) <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo


def mixed_draws_rho(epsilon, delta, share):
    """The zCDP budget ρ_d of the draws of the mixed path (δ > 0, a Laplace mean): the
    largest ρ_d such that ρ_d-zCDP draws followed by an ε_m-DP mean with
    ε_m = (1 − ``share``)·ε compose to at most (ε, δ)-DP
    (:func:`laplace_epsilon_after`, Rényi accounting), by bisection to a relative
    2^-30, rounded down (public numbers only). So ``share`` is the fraction of the
    mean's ε that locating costs, as on the pure path (ε_m = (1 − share)·ε) and the
    zCDP path (ρ_m = (1 − share)·ρ)."""
    return _mixed_draws_rho(float(epsilon), float(delta), float(share))


@functools.lru_cache(maxsize=256)  # public numbers in, a number out
def _mixed_draws_rho(epsilon, delta, share):
    from ..accounting import PureDPEvent, ZCDPEvent, compose_events

    target = (1.0 - share) * epsilon

    def fits(rho_d):  # ρ_d-zCDP draws, then the target ε_m-DP mean, within (ε, δ)
        return compose_events([ZCDPEvent(rho_d), PureDPEvent(target)], delta).epsilon <= epsilon

    lo, hi = 0.0, approx_dp_to_zcdp(epsilon, delta)
    if fits(hi):
        return hi
    while hi - lo > lo * 2.0**-30 + 1e-300:
        mid = 0.5 * (lo + hi)
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def laplace_is_better(n_features, epsilon, delta, scale_fraction=0.0):
    """Whether, at a target (ε, δ) with δ > 0, the clipped mean of d columns gets
    less noise as an ε_m-DP Laplace release than as a (1 − f)ρ-zCDP Gaussian one
    (public numbers only; f = ``scale_fraction`` is the share of the mean's budget
    that locating takes). Standard deviations per coordinate, in units of width/n:
    √2·d/ε_m against √d/√(2(1 − f)ρ), with ε_m = (1 − f)ε (the draws of
    :func:`mixed_draws_rho`; for f = 0, ε_m from :func:`laplace_epsilon_after`, which
    may exceed ε). Laplace wins for few columns (d = 1 at ε = 1, δ = 1e-6: about 1.6
    against 4.9 at f = 0.14; at that f and δ up to d = 8 at ε = 1 and d = 10 at
    ε ≥ 4)."""
    from ..accounting import ZCDPEvent

    if delta == 0:
        return True
    rho = approx_dp_to_zcdp(epsilon, delta)
    if scale_fraction > 0:  # the draws of mixed_draws_rho
        eps_m = (1.0 - scale_fraction) * epsilon
    else:
        events = [ZCDPEvent(scale_fraction * rho)] if scale_fraction > 0 else []
        eps_m = laplace_epsilon_after(events, epsilon, delta)
    if eps_m <= 0:
        return False
    return (math.sqrt(2.0) * n_features / eps_m
            <= math.sqrt(n_features) / math.sqrt(2.0 * (1.0 - scale_fraction) * rho))


@dataclass(frozen=True)
class QuantileClipPlan:
    """The plan of private_clip (public numbers only): how many private quantiles
    locate the clipping intervals and at what ε each, and what the clipped mean that
    follows spends; built by :func:`plan_quantile_clipped_mean`, run by
    :func:`quantile_clipped_mean`.

    **Privacy guarantee.** A plan is public (n, d, ε, δ, the share f and the public
    grid; no field depends on the data). ``budget`` is the guarantee of
    :func:`quantile_clipped_mean` run with it, for one row of the n replaced: the
    ``n_draws`` exponential-mechanism draws (``draws``: each ε_q-DP, McSherry and
    Talwar 2007, "Mechanism design via differential privacy", and ε_q-bounded range,
    hence ε_q²/8-zCDP, Cesar and Rogers 2021, Lemma 3.2; score sensitivity 1 per
    column, d for the pooled draws of the shared scale) composed adaptively with the
    clipped mean at ``mean_rho`` (ρ-zCDP, Bun and Steinke 2016, Lemma 2.3) or
    ``mean_epsilon`` (ε-DP; basic composition for δ = 0, Rényi accounting of both
    parts for δ > 0, :func:`laplace_epsilon_after`, with the draws' ρ_d from
    :func:`mixed_draws_rho` so that ε_m ≥ (1 − 7f/5)ε, or (1 − f)ε without bins). The
    interval and the mean's noise scale are computed in the run from the draws'
    releases (post-processing);
    the mean's budget is fixed here. The grid of the tail draws depends on the data
    only through the released median; the noisy tail bins (:func:`noisy_tail_bins`:
    ℓ1 sensitivity 2d, ℓ2 √(2d); discrete Laplace b = 1/ε_q or discrete Gaussian
    σ = 2/ε_q) are exactly the charge of 2d more draws, which ``n_draws`` counts (7d
    in all).

    Attributes
    ----------
    n_samples, n_features : int
    epsilon, delta : float
        The target.
    scale_fraction : float
        f: the quantile draws' share (the bins take 2f/5 more).
    grid : ndarray
        The public grid of the quantiles.
    kind : {"gaussian", "laplace"}
        The mean's noise.
    shared : bool
        One interval [−C, C] for every column from ``SHARED_DRAWS`` pooled draws
        (:func:`shared_scale_draws`) instead of five draws per column.
    n_draws : int
    quantile_epsilon : float
        ε_q of each draw.
    level : float
        α: the outer tail level of the per-column draws, or the level of the pooled
        upper quantile (shared).
    max_stretch : float or None
        Passed to :func:`extrapolated_interval`: None (``MAX_STRETCH``).
    noise_sd : float
        The mean's noise per unit of width with every column active (for the
        extrapolation).
    mean_rho, mean_epsilon : float or None
        What the clipped mean spends (one of them).
    draws : SelfComposedEvent
    budget : ZCDP, PureDP or ApproxDP, with its event
    approx_dp : ApproxDP or PureDP
        The (ε, δ) ``budget`` implies at ``delta``.
    count_kind : {"laplace", "gaussian"} or None
        The noise of the tail bins (None for the shared scale, which has none):
        discrete Laplace when the draws are ε_q-DP (δ = 0), discrete Gaussian when
        they are ε_q²/8-zCDP.
    count_scale : float
        Its scale b = 1/ε_q (Laplace) or σ = 2/ε_q (Gaussian) per bin, for the ℓ1
        sensitivity 2d (ℓ2 √(2d)) of the 4d bins: 2dε_q-DP or dε_q²/4-zCDP, the
        charge of 2d draws.
    """

    n_samples: int
    n_features: int
    epsilon: float
    delta: float
    scale_fraction: float
    grid: np.ndarray = field(compare=False, repr=False)
    kind: str
    shared: bool
    n_draws: int
    quantile_epsilon: float
    level: float
    max_stretch: float | None
    noise_sd: float
    mean_rho: float | None
    mean_epsilon: float | None
    draws: object
    budget: object
    approx_dp: object
    count_kind: str | None = None
    count_scale: float = 0.0

    @property
    def count_sd(self):
        """The standard deviation of one noisy tail bin (0 without bins)."""
        if self.count_kind is None:
            return 0.0
        b = self.count_scale
        return math.sqrt(2.0) * b if self.count_kind == "laplace" else b


def _shared_level(n, grid_size, epsilon_each):
    """α_s of :func:`shared_scale_draws` (public numbers only)."""
    from .quantile import rank_error
    return min(0.25, rank_error(grid_size, epsilon_each) / n)


def plan_quantile_clipped_mean(n_samples, n_features, *, epsilon, delta,
                               scale_fraction=SCALE_FRACTION, level="auto", grid=None,
                               noise="auto"):
    """The budget split and the draws of private_clip, from public numbers
    (arguments as :func:`private_quantile_clipped_mean`).

    **Privacy guarantee.** Public numbers in, a public plan out; what the plan
    guarantees is its ``budget`` (:class:`QuantileClipPlan`): ρ-zCDP with ρ =
    ``approx_dp_to_zcdp(epsilon, delta)`` (Gaussian mean), ε-DP (δ = 0), or
    (ε, δ)-DP by Rényi accounting of zCDP draws and an ε_m-DP Laplace mean (δ > 0
    and Laplace chosen). The shared scale is chosen when α from
    :func:`auto_clip_level` reaches ``SHARED_BELOW_LEVEL`` (public numbers only).

    Returns
    -------
    QuantileClipPlan
    """
    from ..accounting import (ApproxDP, ComposedEvent, PureDPEvent, SelfComposedEvent,
                              ZCDPEvent, with_event)
    from .quantile import geometric_grid, quantile_epsilon

    n = _count(n_samples, "n_samples")
    d = _count(n_features, "n_features")
    epsilon = _positive_finite(epsilon, "epsilon")
    delta = _check_delta(delta)
    f = _real(scale_fraction, "scale_fraction")
    if not 0 < f < 1:
        raise ValueError(f"scale_fraction must be in (0, 1), got {scale_fraction!r}.")
    grid = geometric_grid() if grid is None else np.asarray(grid, dtype=np.float64)
    if noise not in ("auto", "gaussian", "laplace"):
        raise ValueError(f"noise must be 'auto', 'gaussian' or 'laplace', got {noise!r}.")
    if delta == 0 and noise == "gaussian":
        raise ValueError("noise='gaussian' needs delta > 0.")
    # The mean's noise: Laplace (pure ε_m-DP) or Gaussian ((1 − f)ρ-zCDP). The tail
    # bins are charged as COUNT_DRAWS·d more draws at the quantile draws' ε_q, so the
    # locating step spends f·(N_DRAWS + COUNT_DRAWS)/N_DRAWS.
    located = f * (N_DRAWS + COUNT_DRAWS) / N_DRAWS
    if not located < 1:
        raise ValueError(f"scale_fraction must be below {N_DRAWS / (N_DRAWS + COUNT_DRAWS)!r}"
                         f", got {scale_fraction!r}.")
    laplace = noise == "laplace" or (noise == "auto" and laplace_is_better(
        d, epsilon, delta, located))
    rho = approx_dp_to_zcdp(epsilon, delta) if delta > 0 else None

    def each(k, share):  # ε_q of each of k draws that together cost the mean `share`
        if delta == 0:
            return quantile_epsilon(k, epsilon=share * epsilon)
        if laplace:  # the mixed path: the draws cost the mean the share of its ε
            return quantile_epsilon(k, rho=mixed_draws_rho(epsilon, delta, share))
        return quantile_epsilon(k, rho=share * rho)

    n_draws = (N_DRAWS + COUNT_DRAWS) * d
    # f over the 5d quantile draws (the bins at the same ε_q).
    eps_q = each(n_draws, located)
    # Too few rows for 5d draws (α at its cap, public numbers only): one scale shared
    # by all columns instead, from SHARED_DRAWS draws on the pooled |x_ij|.
    shared = level == "auto" and auto_clip_level(
        n, d, quantile_epsilon=eps_q, grid_size=grid.size) >= SHARED_BELOW_LEVEL and d > 1
    if shared:
        n_draws = SHARED_DRAWS
        eps_q = each(n_draws, f)
    draws = SelfComposedEvent(ZCDPEvent(eps_q**2 / 8.0) if delta > 0 else PureDPEvent(eps_q),
                              n_draws)
    eps_m = rho_m = None
    if delta > 0 and laplace:
        eps_m = laplace_epsilon_after([draws], epsilon, delta)
        if eps_m <= 0:
            raise ValueError("noise='laplace' leaves no budget for the mean at this "
                             f"(epsilon, delta) = ({epsilon!r}, {delta!r}).")
    elif laplace:
        eps_m = epsilon - n_draws * eps_q
    else:
        rho_m = rho - n_draws * eps_q**2 / 8.0
    if shared:
        alpha = _shared_level(n, grid.size, eps_q)
    elif level == "auto":
        alpha = auto_clip_level(n, d, quantile_epsilon=eps_q, grid_size=grid.size)
    else:
        alpha = _real(level, "level")
        if not 0 < alpha < 1.0 / 8.0:
            raise ValueError(f"level must be in (0, 1/8), got {level!r}.")
    # The noise per unit of width of the mean that follows (public numbers only).
    if laplace:
        noise_sd = math.sqrt(2.0) * d / n / eps_m
        event = ComposedEvent((draws, PureDPEvent(eps_m)))
        if delta > 0:  # zCDP draws and a pure release, composed by Rényi accounting
            budget = with_event(ApproxDP(epsilon, delta), event)
        else:
            budget = with_event(PureDP(n_draws * eps_q + eps_m), event)
    else:
        noise_sd = math.sqrt(d) / n / math.sqrt(2.0 * rho_m)
        event = ComposedEvent((draws, ZCDPEvent(rho_m)))
        budget = with_event(ZCDP(n_draws * eps_q**2 / 8.0 + rho_m), event)
    # The tail bins (none for the shared scale): K·d ε_q-DP (b = 2/(K·ε_q) for ℓ1
    # sensitivity 2d) or K·d·ε_q²/8-zCDP (σ = √(8/K)/ε_q for ℓ2 sensitivity √(2d)): the
    # charge of K·d draws, K = COUNT_DRAWS (K = 2: b = 1/ε_q, σ = 2/ε_q, bit for bit).
    count_kind = None if shared else ("gaussian" if delta > 0 else "laplace")
    count_scale = 0.0 if shared else (
        math.sqrt(8.0 / COUNT_DRAWS) / eps_q if delta > 0 else 2.0 / (COUNT_DRAWS * eps_q))
    return QuantileClipPlan(
        n, d, epsilon, delta, f, grid, "laplace" if laplace else "gaussian", bool(shared),
        # max_stretch None (MAX_STRETCH) at the cap of α too: the floor keeps the
        # interval outside the outer quantiles, and pinning it there clipped
        # α·n = n/16 rows per side (see extrapolated_interval).
        n_draws, eps_q, alpha, None, noise_sd, rho_m, eps_m, draws,
        budget, budget.to_approx_dp(delta) if isinstance(budget, ZCDP) else budget,
        count_kind, count_scale)


class _Rows:
    """Stands for X where a function reads only its shape (``private_quantiles`` with
    ``counts=``): whoever makes the draws may hold counts, never rows."""

    def __init__(self, n, d):
        self.shape = (n, d)


def _located_interval(X, plan, rng):
    """The per-column draws (or the shared scale's) and the interval extrapolated
    from them: :func:`located_interval` with the counts taken from ``X`` in memory."""
    from .quantile import rank_counts

    def count(kind, arg):
        if kind == "rank":
            return rank_counts(X, arg, strict=True), rank_counts(X, arg)
        if kind == "pooled":
            return pooled_abs_counts(X, arg)
        if kind == "columns":
            return union_column_counts(X, arg)
        return tail_bin_counts(X, arg)  # "bins"

    return located_interval(count, plan, rng)


def located_interval(count, plan, rng, first_counts=None):
    """The draws of a :class:`QuantileClipPlan` and the interval extrapolated from
    them, reading the data only through exact counts: the draw step shared by the
    in-memory fit and the distributed one (which merges the counts of its chunks).

    Parameters
    ----------
    count : callable
        ``count(kind, arg)`` returns the exact (NOT private) counts of the whole
        data: ``"rank"`` the strict and non-strict rank counts on the grid ``arg``,
        ``"pooled"``
        :func:`pooled_abs_counts`, ``"columns"`` :func:`union_column_counts` on the
        grids ``arg``, ``"bins"`` :func:`tail_bin_counts` for the quantiles ``arg``.
        Its arguments are public numbers and earlier releases only.
    plan : QuantileClipPlan
    rng : RandomSource
    first_counts : pair of int64 arrays, optional
        The first statistic (``"pooled"`` for the shared scale, else ``"rank"`` on
        the plan's grid), when already counted.

    Returns
    -------
    lower, upper : ndarrays of shape (d,)
    quantiles : ndarray
        The draws (five rows per column, or the shared median and upper quantile).
    """
    from .quantile import private_quantiles

    n, d = plan.n_samples, plan.n_features
    grid, eps_q, alpha = plan.grid, plan.quantile_epsilon, plan.level
    if plan.shared:
        counts = count("pooled", grid) if first_counts is None else first_counts
        med, up, _ = shared_scale_from_counts(counts, n, d, epsilon_each=eps_q, rng=rng,
                                              grid=grid)
        c = SHARED_STRETCH * max(abs(up), abs(med))
        return np.full(d, -c), np.full(d, c), np.array([med, up])
    rows = _Rows(n, d)
    # The median first on the public grid, then the four tail draws on the union grid
    # U_j = grid ∪ (m_j + grid) (inner ones with the prior anchored at the median,
    # outer ones at their tail's inner draw; each anchor a release: adaptive
    # composition), each scoring the grid cell a point closes; then the noisy tail
    # bins beyond the outer quantiles.
    counts = count("rank", grid) if first_counts is None else first_counts
    med = private_quantiles(rows, [0.5], epsilon_each=eps_q, rng=rng, grid=grid,
                            counts=counts)
    grids = union_grids(grid, med[0])
    inner, outer = union_tail_draws(count("columns", grids), grids, med[0], n, alpha, eps_q,
                                    rng, cells=True)
    quantiles = np.vstack([outer[:1], inner[:1], med, inner[1:], outer[1:]])
    bins = draw_tail_bins(count("bins", np.sort(quantiles, axis=0)), plan, rng)
    lower, upper = extrapolated_interval(quantiles, alpha, plan.noise_sd,
                                         max_stretch=plan.max_stretch, floor=True,
                                         tail_counts=bins, n_samples=plan.n_samples,
                                         count_sd=plan.count_sd)
    return lower, upper, quantiles


def tail_bin_edges(quantiles):
    """The public edges of the four tail bins of every column
    from its released quantiles (sorted, rows q_α … q_{1−α}): with m the median,
    t = q_{1−α} − m and t' = m − q_α, the upper bins (m + t, m + λt] and
    (m + λt, ∞), the lower ones [m − λt', m − t') and (−∞, m − λt'),
    λ = ``TAIL_COUNT_RATIO``. Returns (hi, hi_far, lo, lo_far), each of shape (d,)."""
    q = np.asarray(quantiles, dtype=np.float64)
    med, hi, lo = q[2], q[4], q[0]
    with np.errstate(over="ignore"):
        hi_far = med + TAIL_COUNT_RATIO * (hi - med)
        lo_far = med - TAIL_COUNT_RATIO * (med - lo)
    return hi, hi_far, lo, lo_far


def tail_bin_counts(X, quantiles):
    """The exact counts of the four tail bins of every column (NOT private), shape
    (4, d): #{hi < x ≤ hi_far}, #{x > hi_far}, #{lo_far ≤ x < lo}, #{x < lo_far}
    for the edges of :func:`tail_bin_edges`. The bins of one column are disjoint
    (lo ≤ m ≤ hi), so one row is in at most one of them."""
    X = _as_data(X)
    hi, hi_far, lo, lo_far = tail_bin_edges(quantiles)
    n, d = X.shape
    out = np.zeros((4, d))
    Xc = sp.csc_matrix(X) if sp.issparse(X) else X
    for j in range(d):
        if sp.issparse(Xc):
            col = Xc.data[Xc.indptr[j]:Xc.indptr[j + 1]].astype(np.float64)
            col = np.concatenate([col, np.zeros(n - col.size)])
        else:
            col = np.asarray(Xc[:, j], dtype=np.float64)
        above_far = np.count_nonzero(col > hi_far[j])
        below_far = np.count_nonzero(col < lo_far[j])
        out[0, j] = np.count_nonzero(col > hi[j]) - above_far
        out[1, j] = above_far
        out[2, j] = np.count_nonzero(col < lo[j]) - below_far
        out[3, j] = below_far
    return out


def noisy_tail_bins(X, quantiles, plan, rng):
    """The four tail bins of every column plus the plan's noise.

    **Privacy guarantee.** The edges are functions of earlier releases (the
    quantiles) and public numbers, the same on neighbouring datasets (adaptive
    composition). The bins of a column are disjoint, so a replaced row leaves at most
    one bin and enters at most one per column: ℓ1 sensitivity 2d and ℓ2 √(2d) over
    the 4d bins. Discrete Laplace noise of scale b = 1/ε_q is then (2d/b) = 2dε_q-DP
    (Ghosh, Roughgarden and Sundararajan 2009), discrete Gaussian of σ = 2/ε_q is
    (2d/(2σ²)) = dε_q²/4-zCDP (Canonne, Kamath and Steinke 2020, Theorem 14): the
    charge of ``COUNT_DRAWS``·d = 2d draws of ε_q (or ε_q²/8) each, which the plan
    includes in ``n_draws``. The counts are integers, exact in float64.
    """
    return draw_tail_bins(tail_bin_counts(X, quantiles), plan, rng)


def draw_tail_bins(bins, plan, rng):
    """The draw step of :func:`noisy_tail_bins`: the plan's noise added in place to
    the exact bins (4, d) of :func:`tail_bin_counts`, wherever they were counted (in
    memory, or merged from chunks). Returns ``bins``."""
    d = bins.shape[1]
    sens = 2.0 * d if plan.count_kind == "laplace" else math.sqrt(2.0 * d)
    add_noise_inplace(bins.reshape(-1), _check_rng(rng), plan.count_kind, plan.count_scale,
                      sensitivity=sens, n_changed=2 * d)
    return bins


def _column_counts(col, grid, n_zeros=0):
    """#{x < g_k} and #{x <= g_k} of one column on a sorted grid: ``col`` its stored
    values, plus ``n_zeros`` implicit zeros (a sparse column)."""
    col = np.sort(col)
    below = np.searchsorted(col, grid, side="left").astype(np.int64)
    at_most = np.searchsorted(col, grid, side="right").astype(np.int64)
    if n_zeros:
        below += n_zeros * (grid > 0)
        at_most += n_zeros * (grid >= 0)
    return below, at_most


def _union_tail_draws(X, med, alpha, eps_q, rng, grid):
    """The four tail draws of every column (with the point score) on the union of the
    public grid and the grid shifted by the released median, U_j = grid ∪ (m_j + grid):
    the inner ones with the prior |k − k_m| (one unit per step of U_j from m_j), the
    outer ones with the anchored prior w_a·max(0, 8·log2(|g − m_j|/|a − m_j|)) on the
    tail's side, a the inner draw (steps of the deviation grid beyond it).

    The inner prior stays one unit per step: w_a per step (tried in issue 19's third
    round against an atom at a column's maximum, where every point above it scores
    the same and the inner draw wandered about 2/ε_q steps above the data) pulled
    the inner draws onto the median at ε_q = 0.02 (n = 10⁴, one column, ε = 1 pure):
    U_j has some 200 steps between m_j ± 2^-20 and the tail, worth more than the
    n/4 ranks that separate them.

    Privacy: U_j and both priors are functions of earlier releases (m_j, a) and public
    numbers, the same on neighbouring datasets (adaptive composition); each row adds
    one to #{x < g} or #{x ≤ g} for the points g above it, so a replaced row moves
    every count, hence every score, by at most one: each draw is the exponential
    mechanism with Δ_u = 1, ε_q-DP and ε_q-bounded range, as the plan charges."""
    n = X.shape[0]
    grids = union_grids(grid, med)
    counts = union_column_counts(X, grids)
    return union_tail_draws(counts, grids, med, n, alpha, eps_q, rng)


def union_grids(grid, med):
    """U_j = grid ∪ (m_j + grid) of every column (finite points, sorted, unique): the
    grid of the union tail draws, a function of the public grid and the released
    median only."""
    out = []
    for m in np.asarray(med, dtype=np.float64):
        with np.errstate(over="ignore"):
            shifted = m + grid
        out.append(np.unique(np.concatenate([grid, shifted[np.isfinite(shifted)]])))
    return out


def union_column_counts(X, grids):
    """The counts step of :func:`_union_tail_draws` (NOT private): #{x < g} and
    #{x ≤ g} of every column j of ``X`` on its own sorted grid ``grids[j]``, the
    implicit zeros of a sparse ``X`` counted. A list of d pairs of int64 arrays; exact,
    so sums over row blocks give the counts of the whole."""
    n = X.shape[0]
    Xc = sp.csc_matrix(X) if sp.issparse(X) else X  # canonical: duplicates summed
    out = []
    for j, U in enumerate(grids):
        if sp.issparse(Xc):  # the stored values and the count of implicit zeros
            col = Xc.data[Xc.indptr[j]:Xc.indptr[j + 1]].astype(np.float64)
            n_zeros = n - col.size
        else:
            col, n_zeros = np.asarray(Xc[:, j], dtype=np.float64), 0
        if not np.all(np.isfinite(col)):
            raise ValueError("X contains NaN or infinite values.")
        out.append(_column_counts(col, U, n_zeros))
    return out


def tail_cell_distance(below, at_most, r, n, upper):
    """The cell score of the tail draws (``cells=True`` of :func:`union_tail_draws`):
    the distance from the rank r to the ranks of the grid cell each point closes.

    Upper tail: U_k scores dist(r, [#{x ≤ U_{k−1}}, #{x ≤ U_k}]), 0 when the r-th
    smallest value lies in (U_{k−1}, U_k] (U_k is the quantile rounded up to the
    grid); lower tail: dist(r, [#{x < U_k}, #{x < U_{k+1}}]), 0 when it lies in
    [U_k, U_{k+1}) (rounded down), with #{x ≤ U_{−1}} = 0 and #{x < U_G} = n (public).

    Sensitivity: replacing one row moves each count by at most 1, and
    dist(r, [a, b]) = max(0, a − r, r − b) moves by at most max(|Δa|, |Δb|) ≤ 1, so
    Δ_u = 1, as for the point score dist(r, [#{x < U_k}, #{x ≤ U_k}]).
    """
    if upper:
        lo, hi = np.concatenate([[0], at_most[:-1]]), at_most
    else:
        lo, hi = below, np.concatenate([below[1:], [n]])
    return np.maximum(lo - r, 0) + np.maximum(r - hi, 0)


def union_tail_draws(counts, grids, med, n, alpha, eps_q, rng, cells=False):
    """The draw step of :func:`_union_tail_draws`: the four tail draws of every column
    from the exact counts on U_j (:func:`union_column_counts`, in memory or merged
    from chunks), in the order lower inner, lower outer, upper inner, upper outer of
    each column. Returns (inner, outer), each of shape (2, d).

    ``cells=True`` (what :func:`located_interval` passes): every draw scores a point by the cell it
    closes (:func:`tail_cell_distance`: the quantile rounded outwards to U_j) instead
    of by the point's own ranks; Δ_u = 1 either way. Why: a quantile inside an atom
    between two grid points (a top-coded maximum) has no point of score 0, and every
    point beyond the data scores only the atom's share of the level worse; a log-normal
    column capped at 2·10⁴ (n = 10⁵, ε = 2, 2.9 % of the rows at the cap, both tail
    levels inside it) drew its inner quantile up to 5·10⁵ in 4 of 6 seeds. The cell
    that holds the atom scores 0."""
    from .quantile import prior_weight
    from .sparse_exponential import exponential_mechanism

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
        k_m = int(np.searchsorted(U, m))  # m is a grid point, hence in U
        for t, (q_in, q_out) in enumerate(zip(levels, outer_levels)):
            side = U < m if t == 0 else U > m
            r = int(np.rint(q_in * n))
            dist = (tail_cell_distance(below, at_most, r, n, t == 1) if cells else
                    np.maximum(below - r, 0) + np.maximum(r - at_most, 0))
            k = int(exponential_mechanism((dist + np.abs(index - k_m)).astype(np.float64),
                                          1.0, eps_q, rng))
            inner[t, j] = U[k]
            a = abs(U[k] - m)
            r = int(np.rint(q_out * n))
            dist = (tail_cell_distance(below, at_most, r, n, t == 1) if cells else
                    np.maximum(below - r, 0) + np.maximum(r - at_most, 0)).astype(np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                beyond = steps * np.log2(dev / a) if a > 0 else np.where(dev > 0, np.inf, 0.0)
            prior = w_a * np.where(side, np.maximum(beyond, 0.0), 0.0)
            prior = np.where(np.isfinite(prior), prior, 1e12)
            k = int(exponential_mechanism(dist + prior, 1.0, eps_q, rng))
            outer[t, j] = U[k]
    return inner, outer


def quantile_clipped_mean(X, plan, rng):
    """Run a :class:`QuantileClipPlan`: the private quantiles, the interval
    extrapolated from them (post-processing), then the clipped mean at the plan's
    budget (:func:`plan_clipped_mean` on the released interval, :func:`clipped_mean`).

    **Privacy guarantee.** ``plan.budget`` for one row of ``X`` replaced (n and d
    public), for a plan from :func:`plan_quantile_clipped_mean`
    (:class:`QuantileClipPlan`). Assumptions: a secret random source. Not covered:
    add/remove neighbours; timing side channels.

    Returns
    -------
    estimate : ndarray of shape (d,)
    info : dict with ``noise``, ``scale`` (unit coordinates), ``lower``, ``upper``,
        ``quantiles`` and, for the shared scale, ``shared``.
    """
    rng = _check_rng(rng)
    X = _as_data(X)
    _check_shape(X, plan)
    info = {}
    if plan.shared:
        info["shared"] = True
    lower, upper, quantiles = _located_interval(X, plan, rng)
    mean_plan = plan_clipped_mean(plan.n_samples, lower, upper, rho=plan.mean_rho,
                                  epsilon=plan.mean_epsilon)
    estimate = clipped_mean(X, mean_plan, rng)
    info.update(noise=mean_plan.kind, scale=mean_plan.noise_scale, lower=mean_plan.lower,
                upper=mean_plan.upper, quantiles=quantiles)
    return estimate, info


def private_quantile_clipped_mean(X, *, epsilon, delta, rng, scale_fraction=SCALE_FRACTION,
                                  level="auto", grid=None, noise="auto"):
    """A private mean that needs no bound: private quantiles and noisy tail counts
    locate each column's clipping interval, then :func:`private_clipped_mean` (the
    parts composed): :func:`plan_quantile_clipped_mean` then
    :func:`quantile_clipped_mean`.

    **Privacy guarantee.** Protected: one row of ``X`` (neighbouring datasets differ
    by replacing one row; n and d public). The returned budget, as
    :class:`QuantileClipPlan` states (below). Assumptions: every parameter chosen
    without the data; a secret random source. Not covered: add/remove neighbours;
    timing side channels.

    1. For every column j, five private quantiles q_α, q_{4α}, q_{1/2}, q_{1−4α},
       q_{1−α} by the exponential mechanism, α from :func:`auto_clip_level`. The
       median m_j first, on the public
       :func:`~skdpsparse.mechanisms.quantile.geometric_grid` (prior one unit per
       step from 0, :func:`~skdpsparse.mechanisms.quantile.private_quantiles`). The
       four tail quantiles on U_j = grid ∪ (m_j + grid), public given the release
       m_j, so a tail is resolved both near 0 (a positive column piling up above 0)
       and at the scale of its distance from the median (a tail crossing 0)
       (:func:`union_tail_draws`): the inner draws with the prior one unit per step
       of U_j from m_j, the outer ones with the anchored prior w_a
       (:func:`~skdpsparse.mechanisms.quantile.prior_weight`) per step of the
       deviation grid beyond their inner draw. Each tail draw scores the grid cell a
       point closes, the quantile rounded outwards to U_j
       (:func:`tail_cell_distance`; Δ_u = 1), so that a level inside an atom between
       grid points (a top-coded maximum) is drawn at the atom.
    2. The numbers of rows in four bins per column beyond the outer quantiles,
       (m + t, m + 2t], beyond m + 2t, and their mirror images below (t the outer
       quantile's distance from the median; edges from releases only), plus discrete
       Laplace (b = 1/ε_q, δ = 0) or discrete Gaussian (σ = 2/ε_q) noise
       (:func:`noisy_tail_bins`). The bins of a column are disjoint, so a replaced
       row moves them by at most 2 in ℓ1 (√2 in ℓ2) per column: 2dε_q-DP or
       2d·ε_q²/8-zCDP, the charge of 2d draws.
    3. The interval [lo_j, hi_j] from them by :func:`extrapolated_interval`
       (post-processing: each tail's Pareto fit says how far to clip, checked
       against the bins; never inside the outer quantile).
    4. The mean of column j clipped into [lo_j, hi_j] plus noise proportional to
       hi_j − lo_j (:func:`private_clipped_mean`).

    Budget (``scale_fraction`` = f):

    * zCDP path (``delta > 0``, Gaussian): ρ = ``approx_dp_to_zcdp(epsilon, delta)``;
      the draws get fρ (each ε_q = √(8fρ/(5d)), ε_q²/8-zCDP as bounded-range
      mechanisms), the bins 2fρ/5, the mean the rest, (1 − 7f/5)ρ, with discrete
      Gaussian noise; in all ρ-zCDP (Bun and Steinke 2016, Lemma 2.3, adaptive
      composition: the mean's interval is the draws' and the bins' output).
    * pure path (``delta == 0``): the draws get fε (each fε/(5d)), the bins 2fε/5,
      the mean the rest with discrete Laplace noise; in all ε-DP (basic
      composition), which implies (ε, δ)-DP for every δ.
    * mixed path (``delta > 0``, Laplace chosen): the draws and bins are zCDP with
      the budget of :func:`mixed_draws_rho`, composed with the pure mean by Rényi
      accounting.

    When n is too small for 7d releases (α at ``SHARED_BELOW_LEVEL``), one interval
    [−C, C] is shared by all columns instead (:func:`shared_scale_draws`).

    The budget returned carries a :class:`~skdpsparse.accounting.ComposedEvent` of the
    parts, which is what a privacy ledger composes.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, d)
    epsilon : float
    delta : float in [0, 1)
    rng : RandomSource or numpy.random.Generator
    scale_fraction : float in (0, 5/7)
        f, the quantile draws' share (the bins take 2f/5 more).
    level : "auto" or float in (0, 1/8)
        α, the outer tail level; ``"auto"``: :func:`auto_clip_level`.
    noise : {"auto", "gaussian", "laplace"}
        For ``delta > 0``: the zCDP path (Gaussian) or the pure path (Laplace, whose
        ε-DP implies (ε, δ)-DP); ``"auto"``: :func:`laplace_is_better`.
    grid : ndarray, optional
        The public grid of the quantiles.

    Returns
    -------
    estimate : ndarray of shape (d,)
    budget : ZCDP or PureDP (with its event)
    info : dict with ``lower``, ``upper``, ``level``, ``quantile_epsilon``, ``scale``,
        ``noise``, ``approx_dp`` (δ > 0).
    """
    epsilon = _positive_finite(epsilon, "epsilon")
    rng = _check_rng(rng)
    X = _as_data(X)
    plan = plan_quantile_clipped_mean(*X.shape, epsilon=epsilon, delta=delta,
                                      scale_fraction=scale_fraction, level=level, grid=grid,
                                      noise=noise)
    estimate, run = quantile_clipped_mean(X, plan, rng)
    info = {"method": "private_clip", "noise": run["noise"], "scale": run["scale"],
            "lower": run["lower"], "upper": run["upper"], "quantiles": run["quantiles"],
            "level": plan.level}
    if plan.shared:
        info["shared"] = True
    info.update(quantile_epsilon=plan.quantile_epsilon, epsilon=plan.epsilon,
                delta=plan.delta, approx_dp=plan.approx_dp)
    return estimate, plan.budget, info


#: The per-column level α at and above which the shared scale is used instead.
SHARED_BELOW_LEVEL = 1.0 / 32.0

#: Draws of the shared scale: the median of the pooled |x_ij|, then its upper quantile.
SHARED_DRAWS = 2

#: The shared interval is [−C, C] with C this multiple of the pooled upper quantile
#: (post-processing; measured on generated sets, never the bench's: 2.0 before issue
#: 19's fourth round, when symmetric columns paid for a width twice the one they
#: needed at ε ≤ 2, see ``doc/derivations/private_means.rst``, Part 2b).
SHARED_STRETCH = 1.5


def shared_scale_draws(X, *, epsilon_each, rng, grid):
    """Two private quantiles of the pooled absolute values |x_ij| (all n·d of them):
    the median, then the (1 − α_s)-quantile with the prior anchored at the median
    (:func:`~skdpsparse.mechanisms.quantile.quantile_scores`), α_s = 2(ln G + ln 20)/(ε n)
    capped at 1/4 (the rank error of a draw of sensitivity d over n·d values, over
    n·d; public numbers only).

    Replacing one row changes at most d of the pooled values, so every count, hence
    every score, moves by at most d: each draw is the exponential mechanism with
    Δ_u = d, ε-DP with ε = ``epsilon_each`` (McSherry and Talwar 2007), and
    ε-bounded range (ε²/8-zCDP, Cesar and Rogers 2021, Lemma 3.2).

    Returns
    -------
    median, upper : float
        Grid points.
    level : float
        α_s.
    """
    n, d = X.shape
    counts = pooled_abs_counts(X, grid)
    return shared_scale_from_counts(counts, n, d, epsilon_each=epsilon_each, rng=rng,
                                    grid=grid)


def pooled_abs_counts(X, grid):
    """The counts step of :func:`shared_scale_draws` (NOT private): the strict and
    non-strict rank counts of the pooled |x_ij| on ``grid``, int64 of shape (G,)
    each; exact, so sums over row blocks give the counts of the whole."""
    from .quantile import rank_counts

    A = abs(X) if sp.issparse(X) else np.abs(X)
    return (rank_counts(A, grid, strict=True).sum(axis=0), rank_counts(A, grid).sum(axis=0))


def shared_scale_from_counts(counts, n, d, *, epsilon_each, rng, grid):
    """The draw step of :func:`shared_scale_draws` from the exact pooled counts
    (:func:`pooled_abs_counts`, in memory or merged from chunks) of an n × d matrix.
    Returns (median, upper, level) as :func:`shared_scale_draws`."""
    from .quantile import prior_weight, quantile_scores
    from .sparse_exponential import exponential_mechanism

    below, at_most = counts
    total = n * d
    level = _shared_level(n, grid.size, epsilon_each)
    med_scores = quantile_scores(below, at_most, int(np.rint(0.5 * total)), grid, float(d))
    med = int(exponential_mechanism(med_scores.astype(np.float64), float(d), epsilon_each,
                                    rng))
    up_scores = quantile_scores(below, at_most, int(np.rint((1.0 - level) * total)), grid,
                                float(d) * prior_weight(epsilon_each), 1, anchor=med)
    up = int(exponential_mechanism(up_scores.astype(np.float64), float(d), epsilon_each,
                                   rng))
    return float(grid[med]), float(grid[max(up, med)]), level
