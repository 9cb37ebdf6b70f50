"""Private quantiles of every column by the exponential mechanism over a public grid.

The mechanism
-------------
For a column x_1, ..., x_n, a level q in [0, 1] and a public sorted grid
g_1 < ... < g_G (chosen before seeing the data), the score of a grid point is

    u(g_k) = dist(r, [#{i : x_i < g_k}, #{i : x_i <= g_k}]) + w |k - k_0|,

r = round(q n) (an integer, public), the distance from r to the interval of ranks
that g_k can take (0 when g_k is an atom of the data holding rank r: a column of
counts with 40 % zeros has its 10 % quantile at 0), plus a prior: w = 1 unit per
grid step away from the grid's 0 (index k_0), or, for a tail quantile drawn after
an *anchor* a_j (a grid point already released for that column, e.g. a less extreme
quantile of the same tail), w_a = max(1, 2·PRIOR_NATS/ε) units per step beyond the
anchor, outwards only: w_a·max(0, k − k_a) for an upper quantile, w_a·max(0, k_a − k)
for a lower one. Neither depends on the data except through earlier releases
(adaptive composition), so neither adds sensitivity. The prior is what keeps the draw
near the data where ranks cannot tell grid points apart: below the minimum or above
the maximum every point has the same rank, and without it the draw for a tail
quantile was uniform over those points, up to 2^40 (a column of doctor visits got the
interval [−3·10⁸, 23]). Where ranks move by more than one per grid step (the bulk of
the data) the prior shifts the draw by little. The anchored prior is for the small ε
of the outermost draws: there one unit per step is 0.01 nat (ε = 0.02), and a bounded
price column whose top the grid cannot resolve had its upper quantile drawn up to 13
octaves above its maximum; with PRIOR_NATS = 1/4 every step beyond the anchor costs a
quarter of a nat whatever ε. It is anchored at an earlier draw, not at 0, because a
tilt over the whole grid outweighs the ranks: a prior of 1/ε per step from 0 pulled
every interval of generated Pareto columns to 0 at n = 10⁴, and a one-sided one from
0 pulled a positive column's upper quantile to −2^40 (the 160 steps from 2^-20 to 1
are worth more than all n ranks). Beyond the anchor the score's minimum does not move
where the ranks fall by more than w_a per step (a Pareto(3) tail at the level
:func:`~skdpsparse.mechanisms.heavy_tailed_clip.auto_clip_level` chooses: about 4.6/ε
ranks per 9 % step). The mechanism draws k with
probability proportional to exp(-ε u(g_k)/2)
(McSherry and Talwar 2007, "Mechanism design via differential privacy"; Dwork and
Roth 2014, "The algorithmic foundations of differential privacy", Theorem 3.10).
Replacing one row changes every count #{x_i <= g_k} and #{x_i < g_k} by at most
one, so the distance (and the data-independent prior) moves by at most Δ_u = 1: one
draw is ε-DP. The draw is exact
(:func:`~skdpsparse.mechanisms.sparse_exponential.exponential_mechanism`: integer
exponents and exact coins, no probability that is zero on one dataset and positive on
its neighbour).

Privacy (theorem used)
----------------------
* Pure DP: one draw is ε-DP; the 2·d draws of a lower and an upper quantile per
  column compose to 2dε-DP (basic composition, Dwork and Roth 2014, Theorem 3.16).
* zCDP: a draw is ε-bounded-range (every log-ratio of output probabilities between
  neighbours lies in an interval of length ε: the rounded scores of the exact sampler
  move by at most half of ε each way, the normaliser cancels; Durfee and Rogers 2019,
  "Practical differentially private top-k selection with pay-what-you-get
  composition", Lemma 4.2), and an ε-bounded-range mechanism is ε²/8-zCDP (Cesar and
  Rogers 2021, "Bounding, concentrating, and truncating: unifying privacy loss
  composition for data analytics", Lemma 3.2). The k draws compose to kε²/8-zCDP
  (Bun and Steinke 2016, Lemma 2.3). :func:`quantile_epsilon` inverts this for a
  share ρ_q of a zCDP budget: ε = √(8ρ_q/k).

Accuracy (theorem used)
-----------------------
With probability at least 1 - β the released grid point g has
u(g) <= min_k u(g_k) + 2(ln G + ln(1/β))/ε (Dwork and Roth 2014, Theorem 3.11 with
Δ_u = 1): its rank is within :func:`rank_error` of the best rank the grid offers.
The best rank depends on the grid's resolution around the quantile (data-dependent);
the returned point is never finer than the grid.

The public grid
---------------
:func:`geometric_grid` is 0 and ±2^(k/m) for k from m·``min_exponent`` to
m·``max_exponent`` (m = ``steps_per_octave``): scale-free, relative resolution
2^(1/m) - 1 (9 % for m = 8) over 60 binary orders of magnitude by default. Values
beyond the grid count at the grid's ends (ranks are counts, so nothing is rejected or
clipped for being large). Its weakness: a column whose spread is small next to its
offset (values 1000 ± 1) is located to the grid's relative resolution (±90), not to
its spread. Counting deviations from a released centre (:func:`rank_counts` with
``shift``, as the tail draws of
:func:`~skdpsparse.mechanisms.heavy_tailed_clip.plan_quantile_clipped_mean` do from the
median) puts the grid's resolution on the spread instead; the shift is a release, so
each count still moves by at most one.
"""

import math

import numpy as np
import scipy.sparse as sp

from ..utils._data import as_canonical_csr
from .sparse_exponential import exponential_mechanism

__all__ = ["geometric_grid", "rank_counts", "quantile_scores", "rank_error",
           "quantile_epsilon", "private_quantiles"]


def geometric_grid(min_exponent=-20, max_exponent=40, steps_per_octave=8):
    """The public grid 0, ±2^(k/m), m·min_exponent <= k <= m·max_exponent, sorted.

    **Privacy guarantee.** None needed: a function of public numbers only (it reads
    no data), so it can be called freely; neighbouring datasets do not enter.
    Assumptions: its arguments are public. Not covered: nothing to cover.

    Parameters
    ----------
    min_exponent, max_exponent : int
        The smallest and largest nonzero magnitudes are 2**min_exponent and
        2**max_exponent.
    steps_per_octave : int
        m, the number of grid points per factor 2.

    Returns
    -------
    ndarray of float64, strictly increasing, of length 2(m(max - min) + 1) + 1
    """
    m = int(steps_per_octave)
    lo, hi = int(min_exponent), int(max_exponent)
    if m < 1 or lo >= hi:
        raise ValueError("need steps_per_octave >= 1 and min_exponent < max_exponent, got "
                         f"{steps_per_octave!r}, {min_exponent!r}, {max_exponent!r}.")
    positive = np.exp2(np.arange(m * lo, m * hi + 1) / m)
    return np.concatenate([-positive[::-1], [0.0], positive])


def _check_grid(grid):
    grid = np.asarray(grid, dtype=np.float64).reshape(-1)
    if grid.size < 1 or not np.all(np.isfinite(grid)) or np.any(np.diff(grid) <= 0):
        raise ValueError("grid must be a non-empty, finite, strictly increasing array.")
    return grid


def rank_counts(X, grid, *, strict=False, shift=None):
    """counts[j, k] = #{i : X[i, j] <= grid[k]} (``strict``: < grid[k]), exactly
    (implicit zeros of a sparse ``X`` included); with ``shift`` (one value per column,
    public or released earlier), the counts of the deviations:
    #{i : X[i, j] − shift_j <= grid[k]}, the difference rounded in float64 (a function
    of the entry alone, so a row still moves each count by at most one).

    **Privacy guarantee.** None by itself: a deterministic statistic of the data
    with no noise, so releasing its output is not private. What it provides is the
    sensitivity under replacement of one row (neighbouring datasets differ in one
    row, n public) that the private release adding noise to it relies on; each count
    moves by at most one. Not covered: everything, unless released through
    :func:`private_quantiles`.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, d)
        Finite values (a NaN or infinity raises ValueError).
    grid : ndarray of shape (G,), strictly increasing
    strict : bool, default=False
    shift : ndarray of shape (d,), optional
        Subtracted from column j before counting (e.g. a released median).

    Returns
    -------
    counts : ndarray of int64 of shape (d, G), nondecreasing along axis 1
    """
    grid = _check_grid(grid)
    G = grid.size
    n, d = X.shape
    # searchsorted(grid, x, "left") = the first k with grid[k] >= x: x counts towards
    # every "<=" count from k on; "right" = the first k with grid[k] > x, for "<".
    side = "right" if strict else "left"
    if shift is None:
        shift = np.zeros(d)
    else:
        shift = np.broadcast_to(np.asarray(shift, dtype=np.float64), (d,))
        if not np.all(np.isfinite(shift)):
            raise ValueError("shift must be finite.")
    hist = np.zeros((d, G + 1), dtype=np.int64)  # hist[j, b]: values with bin index b
    if sp.issparse(X):
        X = as_canonical_csr(X)
        values, cols = X.data, X.indices
        if not np.all(np.isfinite(values)):
            raise ValueError("X contains NaN or infinite values.")
        with np.errstate(over="ignore"):  # ±1.7e308 − shift may round to ±inf: a far end
            bins = np.searchsorted(grid, values - shift[cols], side=side)
        np.add.at(hist, (cols, bins), 1)
        zeros = n - np.bincount(cols, minlength=d)
        hist[np.arange(d), np.searchsorted(grid, 0.0 - shift, side=side)] += zeros
    else:
        X = np.asarray(X)
        for j in range(d):
            col = X[:, j]
            if not np.all(np.isfinite(col)):
                raise ValueError("X contains NaN or infinite values.")
            with np.errstate(over="ignore"):
                dev = col - shift[j] if shift[j] != 0 else col
            hist[j] = np.bincount(np.searchsorted(grid, dev, side=side), minlength=G + 1)
    return np.cumsum(hist[:, :G], axis=1)


def quantile_scores(below, at_most, target, grid, prior_weight=1.0, direction=0,
                    anchor=None):
    """u(g_k) of the module notes for one column: the distance from ``target`` to
    [below[k], at_most[k]] plus a prior that does not depend on the data (no
    sensitivity added): w·|k − k_0| with k_0 the grid point nearest 0 (no ``anchor``),
    or, with ``anchor`` = k_a (a grid index), w·max(0, k − k_a) (``direction=1``, an
    upper quantile) or w·max(0, k_a − k) (``direction=-1``, a lower one);
    w = ``prior_weight``.

    **Privacy guarantee.** None by itself: a deterministic statistic of the data
    with no noise, so releasing its output is not private. What it provides is the
    sensitivity under replacement of one row (neighbouring datasets differ in one
    row, n public) that the private release adding noise to it relies on; the score
    moves by at most 1 (the prior does not depend on the data, or only through an
    earlier release). Not covered: everything, unless released through
    :func:`private_quantiles`.
    """
    dist = np.maximum(below - target, 0) + np.maximum(target - at_most, 0)
    k = np.arange(grid.size)
    if anchor is None:
        return dist + prior_weight * np.abs(k - int(np.argmin(np.abs(grid))))
    if direction not in (1, -1):
        raise ValueError(f"direction must be 1 or -1 with an anchor, got {direction!r}.")
    return dist + prior_weight * np.maximum(0, direction * (k - int(anchor)))


def rank_error(grid_size, epsilon, beta=0.05):
    """2(ln G + ln(1/β))/ε: with probability ≥ 1 - β the released point's rank is
    within this of the best grid point's (Dwork and Roth 2014, Theorem 3.11).

    **Privacy guarantee.** None needed: a function of public numbers only (it reads
    no data), so it can be called freely; neighbouring datasets do not enter.
    Assumptions: its arguments are public. Not covered: nothing to cover.
    """
    return 2.0 * (math.log(grid_size) + math.log(1.0 / beta)) / float(epsilon)


def quantile_epsilon(n_draws, *, epsilon=None, rho=None):
    """ε of each of ``n_draws`` exponential-mechanism draws so that all of them
    together spend ``epsilon`` (pure DP, basic composition: ε/k) or ``rho`` (zCDP, an
    ε-draw is ε²/8-zCDP: √(8ρ/k)). Exactly one of ``epsilon`` and ``rho``.

    **Privacy guarantee.** None needed: a function of public numbers only (it reads
    no data), so it can be called freely; neighbouring datasets do not enter.
    Assumptions: its arguments are public. Not covered: nothing to cover.
    """
    k = int(n_draws)
    if k < 1 or (epsilon is None) == (rho is None):
        raise ValueError("need n_draws >= 1 and exactly one of epsilon and rho.")
    if epsilon is not None:
        return float(epsilon) / k
    return math.sqrt(8.0 * float(rho) / k)


#: The anchored prior's cost of one grid step, in nats of the draw's probability.
PRIOR_NATS = 0.25


def prior_weight(epsilon_each):
    """w_a of the anchored prior, in rank units per grid step: max(1, 2·PRIOR_NATS/ε),
    so that each step beyond the anchor costs at least ``PRIOR_NATS`` nats of
    probability whatever ε (public numbers only)."""
    return max(1.0, 2.0 * PRIOR_NATS / float(epsilon_each))


def private_quantiles(X, levels, *, epsilon_each, rng, grid=None, counts=None,
                      anchors=None):
    """For every column j and level q, a grid point drawn by the exponential mechanism
    with the score u of the module notes: ``len(levels) * d`` draws, each
    ε-DP with ε = ``epsilon_each`` (and ε²/8-zCDP).

    **Privacy guarantee.** Protected: one row of ``X`` (neighbouring datasets differ
    by replacing one row; n public). Each draw is ε-DP with ε = ``epsilon_each``
    (exponential mechanism with a score of sensitivity 1, McSherry and Talwar 2007,
    "Mechanism design via differential privacy"; Dwork and Roth 2014, Theorem 3.10;
    the draw is exact) and ε-bounded range, hence ε²/8-zCDP (Cesar and Rogers 2021,
    Lemma 3.2); k draws compose to kε-DP or kε²/8-zCDP, adaptively (the anchors may
    be earlier draws). The caller charges the composition. Assumptions: the grid,
    the levels and the anchors are public or earlier releases; a secret random
    source. Not covered: add/remove neighbours; user-level privacy; timing side
    channels.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, d)
    levels : sequence of float in [0, 1]
    epsilon_each : float
        ε of one draw, above 2^-39.
    rng : RandomSource or numpy.random.Generator
    grid : ndarray, optional
        Public, strictly increasing; :func:`geometric_grid` by default.
    counts : pair of ndarrays of shape (d, G), optional
        ``rank_counts(X, grid, strict=True)`` and ``rank_counts(X, grid)``, when the
        caller already has them.
    anchors : ndarray of shape (len(levels), d), optional
        Grid points released earlier (e.g. a less extreme quantile of the same tail):
        each draw of a level q ≠ 1/2 then has the anchored one-sided prior of the
        module notes (outwards from its anchor, w_a = :func:`prior_weight`). ``None``:
        one unit per step from 0.

    Returns
    -------
    quantiles : ndarray of shape (len(levels), d)
        Grid points.
    """
    grid = geometric_grid() if grid is None else _check_grid(grid)
    levels = np.asarray(levels, dtype=np.float64).reshape(-1)
    if levels.size == 0 or np.any(~(levels >= 0) | ~(levels <= 1)):
        raise ValueError(f"levels must be in [0, 1], got {levels!r}.")
    if rng is None:
        raise TypeError("rng must be a RandomSource or a numpy.random.Generator.")
    n = X.shape[0]
    if counts is None:
        counts = (rank_counts(X, grid, strict=True), rank_counts(X, grid))
    below, at_most = counts
    d = at_most.shape[0]
    if anchors is not None:
        anchors = np.asarray(anchors, dtype=np.float64).reshape(levels.size, d)
        anchor_index = np.clip(np.searchsorted(grid, anchors), 0, grid.size - 1)
    out = np.empty((levels.size, d))
    for a, q in enumerate(levels):
        target = int(np.rint(q * n))
        anchored = anchors is not None and q != 0.5
        weight = prior_weight(epsilon_each) if anchored else 1.0
        direction = 1 if q > 0.5 else -1
        for j in range(d):
            scores = quantile_scores(
                below[j], at_most[j], target, grid, weight, direction,
                anchor_index[a, j] if anchored else None).astype(np.float64)
            out[a, j] = grid[exponential_mechanism(scores, 1.0, epsilon_each, rng)]
    return out
