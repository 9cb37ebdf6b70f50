"""Private means of heavy-tailed vectors (Kamath, Liu and Zhang 2022, *Improved
rates for differentially private stochastic convex optimization with heavy-tailed
data*, Section 4 and Appendix B.3-B.5).

Two estimators, each a non-private statistic of bounded sensitivity plus noise:

* **CWME**, the coordinate-wise trimmed median of means (Algorithm 3): clip every
  coordinate into ``[center_j - 3 tau, center_j + 3 tau]``, split the n rows into m
  consecutive groups (sizes differ by at most one), take the coordinate-wise median of
  the m group means. Gaussian noise gives ρ-zCDP (CDPCWME, Theorem 4.1), Laplace noise
  ε-DP (DPCWME).
* **NSME**, the noise-smoothing mean of Holland (2019) and Wang, Xiang, Dou and Xu
  (2020) (Algorithm 4): ``(tau/n) sum_i psi_c(x_ij / tau)`` with
  ``psi_c(a) = E phi(a (1 + N))``, ``N ~ N(0, c)``, plus Gaussian noise (CDPNSME,
  ρ-zCDP).

Every mechanism is a plan and a run (issue 22): ``plan_cwme`` and
``plan_noise_smoothing`` compute the noise scales, sensitivities and budget from
public numbers into a frozen plan (:class:`CWMEPlan`, :class:`NoiseSmoothingPlan`),
and ``cwme`` and ``nsme`` run one on the data; the ``private_*`` functions are both
steps in one call. The clipped mean and its privately located interval (the default
``private_clip``: ``plan_clipped_mean``, ``plan_quantile_clipped_mean``, ...) live in
:mod:`skdpsparse.mechanisms.heavy_tailed_clip`, which imports this module's checks
(never the reverse: the import graph has no cycle).

Privacy model: neighbouring datasets differ by *replacing* one row; n and d are
public. Every row is used: out-of-range values are clipped (CWME) or soft-truncated
(NSME), never rejected. All parameters (``tau``, ``n_groups``, ``center``,
``smoothing_variance``) must be chosen without looking at the data.

Sensitivity of CWME (proof)
---------------------------
Fix a coordinate j and let the replaced row lie in group g (it lies in exactly one
group; group membership depends only on the row index). Its clipped value lies in an
interval of length 6τ, so it moves by at most 6τ and the mean of group g moves by at
most ``η = 6τ / n_g <= 6τ / n_min`` with ``n_min = floor(n / m)`` the smallest group
size; the other m - 1 group means do not move. The interval has length at most 6τ in
floating point too: its float ends are rounded inwards, never to nearest
(:mod:`skdpsparse._kernels.heavy_tailed`; to nearest, ``center = 1e16`` and
``τ = 0.4`` gave the ends ``center ∓ 2``, length 4 > 2.4). Now the median:

* Every order statistic of m numbers is nondecreasing and 1-Lipschitz in each input
  (if u_g alone moves by η, the k-th smallest moves by at most η in the same
  direction: at least k of the inputs are ≤ u_(k) + η afterwards, and conversely).
  For odd m the median is one order statistic, so it moves by at most η.
* For even m the median is the average of the order statistics k = m/2 and m/2 + 1.
  All m order statistics move in the direction of u_g and their sum (= the sum of the
  inputs) moves by exactly η, so the two middle ones move by at most η *together*,
  and their average by at most η/2.

Hence every output coordinate moves by at most

    Δ∞ = 6τ / n_min (m odd),    Δ∞ = 3τ / n_min (m even),

and Δ₂ ≤ √d Δ∞, Δ₁ ≤ d Δ∞. Both are attained (the tests construct the neighbours: a
row going from below center - 3τ to above center + 3τ in every coordinate, in a
smallest group whose mean is the median, or straddles the middle for even m).

Comparison with the seed. The proof of Theorem 4.1 bounds the per-coordinate change by
12τm/n (a group mean moving by "12τm/n" in its case 1, and a triangle inequality over
two groups in its case 2), hence Δ₂ = 12τm√d/n and, with m = 4 log(2d/β), the Gaussian
variance 1152 τ² d log²(2d/β)/(ρn²) ⇔ Δ₂ = 48τ√d log(2d/β)/n (Lemma 2.5:
σ² = Δ₂²/(2ρ)) and the Laplace scale 48τd log(2d/β)/(εn). The argument above gives
6τm/n when m divides n: one group mean moves by at most 6τ/(n/m), and the median's
Lipschitz property makes the two-case split unnecessary. For odd m our Δ₂ is therefore
24τ√d log(2d/β)/n, half the seed's (Gaussian variance 288 τ² d log²(2d/β)/(ρn²), a
quarter; Laplace scale 24τd log(2d/β)/(εn), half); for even m it is a quarter of the
seed's. The seed's constants are valid, only loose; ours are used here.

Sensitivity of NSME (proof, and a correction of the seed)
---------------------------------------------------------
Each coordinate is ``(τ/n) Σ_i ψ_c(x_ij/τ)``. ψ_c is odd and nondecreasing
(ψ_c'(a) = E[W φ'(aW)] ≥ 0 for W = 1 + N, since φ' ≥ 0 is even and the N(1, c) density
is larger at w than at -w for w > 0), so its range is ``(-S_c, S_c)`` with
``S_c = lim_{a→∞} ψ_c(a) = (2√2/3)(2Φ(1/√c) - 1) = (2√2/3) erf(1/√(2c))``
(:func:`skdpsparse._kernels.heavy_tailed.smoothed_phi_sup`). Replacing one row changes
one term per coordinate by at most ``2 S_c``, so

    Δ∞ = 2 S_c τ/n,   Δ₂ = 2 S_c τ√d/n ≤ (4√2/3) τ√d/n,   Δ₁ = 2 S_c τd/n,

tight (approached by a row going from -∞ to +∞ in every coordinate). For c → 0 this is
the worst case ``(4√2/3)τ√d/n`` of |φ| ≤ 2√2/3.

Kamath, Liu and Zhang (2022)'s Algorithm 4 adds N(0, τ²d/(ρn²)), i.e. (σ² = Δ₂²/(2ρ)) Δ₂ = √2·τ√d/n,
justified by "|φ| ≤ 1, so Δ₂ ≤ √d" (in units of τ/n). Under replacement one term goes
from one value to another, so |φ| ≤ 1 gives 2τ√d/n, not √d·τ/n (that would be the
add/remove bound). With the exact range, √2·τ√d/n suffices iff 2 S_c ≤ √2, i.e.
Φ(1/√c) ≤ 7/8, c ≥ 0.756: the seed's noise happens to be enough for c = 1 (2 S_1 =
1.287 < 1.414) but not for small c (c → 0: 1.886), and its argument does not show
either. Here the noise is calibrated to 2 S_c τ√d/n for the c in use.

Truncation (Corollary 4.2) and the assumptions of Theorem 4.1
-------------------------------------------------------------
:func:`truncation_for` gives τ = (√ρ n/√d)^{1/k} (CDPCWME) or (εn/d)^{1/k} (DPCWME),
the choice of Corollary 4.2 for distributions with k-th (central) moment at most 1,
multiplied by M^{1/k} for a k-th moment bound M (standardisation: the estimators are
positively homogeneous, so running them on X with τ = M^{1/k}τ₀ equals M^{1/k} times
running them on X/M^{1/k}, whose k-th moment is ≤ 1, with τ₀; the noise scales the
same way since Δ ∝ τ). Theorem 4.1 further assumes τ ≥ 10 and a mean with
‖μ‖₂ ≤ R ≤ 10 (more precisely |μ_j - center_j| ≤ 3τ, Lemma B.1); neither is enforced
here (privacy never depends on them, only the accuracy guarantee does).
"""

import functools
import math
import numbers
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .._kernels.heavy_tailed import (
    _median_of_group_means,
    cwme_csr,
    cwme_dense,
    effective_n_groups,
    noise_smoothing_mean_csr,
    noise_smoothing_mean_dense,
    smoothed_phi_sup,
)
from .._kernels.chacha import key_words
from .._kernels.heavy_tailed_scaled import (
    cwme_scaled_csr,
    cwme_scaled_dense,
    noise_smoothing_scaled_csr,
    noise_smoothing_scaled_dense,
    random_groups,
)
from ..accounting import (
    ZCDP,
    PureDP,
    approx_dp_to_zcdp,
    laplace_scale,
    zcdp_gaussian_sigma,
)
from ..utils._random import as_random_source
from .noise import add_noise_inplace

__all__ = [
    "Sensitivity",
    "n_groups_for",
    "truncation_for",
    "cwme_sensitivity",
    "noise_smoothing_sensitivity",
    "trimmed_median_of_means",
    "noise_smoothing_mean",
    "private_cwme",
    "private_cwme_zcdp",
    "private_noise_smoothing_mean",
    "private_noise_smoothing_mean_zcdp",
]

TRUNCATION_METHODS = ("cdpcwme", "dpcwme", "cdpnsme")


class Sensitivity(tuple):
    """``(linf, l1, l2)``: the largest change of a statistic between neighbours in the
    ℓ∞, ℓ1 and ℓ2 norms (attributes of the same names).

    **Privacy guarantee.** None needed: a container of public numbers (it reads no
    data), so it can be called freely; neighbouring datasets do not enter.
    Assumptions: its arguments are public. Not covered: nothing to cover.
    """

    __slots__ = ()

    def __new__(cls, linf, l1, l2):
        return super().__new__(cls, (float(linf), float(l1), float(l2)))

    linf = property(lambda self: self[0])
    l1 = property(lambda self: self[1])
    l2 = property(lambda self: self[2])

    def __repr__(self):
        return f"Sensitivity(linf={self[0]!r}, l1={self[1]!r}, l2={self[2]!r})"


# ----------------------------------------------------------------------- validation
def _real(value, name):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}.")
    return float(value)


def _positive_finite(value, name):
    v = _real(value, name)
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"{name} must be positive and finite, got {value!r}.")
    return v


def _count(value, name, minimum=1):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}.")
    return int(value)


def _check_rng(rng):
    if rng is None:  # a missing rng would silently mean fresh entropy: refuse it
        raise TypeError("rng must be a RandomSource or a numpy.random.Generator "
                        "(see skdpsparse.utils.fit_random_source), got NoneType.")
    return as_random_source(rng)


def _check_delta(delta):
    delta = _real(delta, "delta")
    if not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1), got {delta!r}.")
    return delta


def _as_data(X):
    """Dense float32/float64 2-D array, or canonical CSR (duplicates summed)."""
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        if X.dtype != np.float32 and X.dtype != np.float64:
            X = X.astype(np.float64)
        if not X.has_canonical_format:
            # Clipping is not additive: duplicates must be summed before clipping.
            X = X.copy()
            X.sum_duplicates()
    else:
        X = np.asarray(X)
        if X.dtype != np.float32 and X.dtype != np.float64:
            X = X.astype(np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}.")
    n, d = X.shape
    if n < 1 or d < 1:
        raise ValueError(f"X must have at least one row and one column, got {X.shape}.")
    return X


def _finite_statistic(value):
    # The kernels return NaN in a column holding a non-finite entry.
    if not np.all(np.isfinite(value)):
        raise ValueError("X contains NaN or infinite values.")
    return value


# --------------------------------------------------------------- public parameters
def n_groups_for(d, failure_prob, n_samples=None, *, even=False):
    """Number of groups of Algorithm 3 (line 2): ``ceil(4 log(2d/β))``, capped at n.

    **Privacy guarantee.** None needed: a function of public numbers only (it reads
    no data), so it can be called freely; neighbouring datasets do not enter.
    Assumptions: its arguments are public. Not covered: nothing to cover.

    With m ≥ 4 log(2d/β) groups, the medians of all d coordinates are within the
    per-group deviation bound except with probability d·exp(-m/4) ≤ β/2 (proof of
    Theorem 4.1, natural logarithm; the Hoeffding step is the same for the average of
    the two middle values when m is even). ``even=True`` rounds up to an even number:
    an even m halves the sensitivity (:func:`cwme_sensitivity`) at the cost of at most
    one more group.

    Parameters
    ----------
    d : int
        Dimension, at least 1.
    failure_prob : float
        β in (0, 1).
    n_samples : int, optional
        n; the result is at most n (a group needs a row).

    Returns
    -------
    int, at least 1
    """
    d = _count(d, "d")
    beta = _real(failure_prob, "failure_prob")
    if not 0 < beta < 1:
        raise ValueError(f"failure_prob must be in (0, 1), got {failure_prob!r}.")
    m = max(1, math.ceil(4.0 * math.log(2.0 * d / beta)))
    if even and m % 2 == 1:
        m += 1
    if n_samples is not None:
        m = min(m, _count(n_samples, "n_samples"))
    return m


def truncation_for(method, n, d, moment, epsilon=None, rho=None, moment_bound=1.0):
    """Truncation parameter τ of Corollary 4.2 (and its analogue for NSME).

    **Privacy guarantee.** None needed: a function of public numbers only (it reads
    no data), so it can be called freely; neighbouring datasets do not enter.
    Assumptions: its arguments are public. Not covered: nothing to cover. The τ
    returned depends on (n, d, ε or ρ, k, M) only, which is why cwme's noise may be
    calibrated to it.

    * ``"cdpcwme"`` (needs ``rho``): τ = (√ρ n/√d)^{1/k} · M^{1/k};
    * ``"dpcwme"`` (needs ``epsilon``): τ = (εn/d)^{1/k} · M^{1/k};
    * ``"cdpnsme"`` (needs ``rho``): τ = (√ρ n/√d)^{1/2} · M^{1/k}.

    Here k = ``moment`` and M = ``moment_bound`` bounds the k-th absolute moment of
    every coordinate: central (E|x_j - μ_j|^k ≤ M) for CWME, whose clipping is centred
    near the mean; about 0 (E|x_j|^k ≤ M) for NSME, whose soft truncation shrinks
    towards 0. Corollary 4.2 is stated for M = 1; the factor M^{1/k} standardises (see
    the module notes). For NSME the balance uses k = 2 whatever the moment given:
    its bias is O(√d·M₂/τ) (Lemma B.4 with the scale made explicit) against noise
    of norm ≍ τd/(√ρ n), equal at τ² = M₂√ρ n/√d; a k-th moment bound with k ≥ 2
    gives M₂ ≤ M^{2/k} (Lyapunov), hence the factor M^{1/k}; k < 2 is refused (the
    second moment may be infinite).

    Theorem 4.1 assumes τ ≥ 10 and ‖μ‖₂ ≤ R ≤ 10; the returned τ is not raised to 10
    (privacy does not need it; small n·ρ give τ < 10, outside the theorem).

    Parameters
    ----------
    method : {"cdpcwme", "dpcwme", "cdpnsme"}
    n, d : int
        Sample size and dimension.
    moment : float
        k > 1 (k ≥ 2 for ``"cdpnsme"``).
    epsilon, rho : float, optional
        The budget of one call of the mechanism (for an iterative method, the
        per-step share).
    moment_bound : float, default=1.0
        M > 0.

    Returns
    -------
    float
    """
    if method not in TRUNCATION_METHODS:
        raise ValueError(f"method must be one of {TRUNCATION_METHODS}, got {method!r}.")
    n = _count(n, "n")
    d = _count(d, "d")
    k = _real(moment, "moment")
    if not (k > 1 and math.isfinite(k)):
        raise ValueError(f"moment must be > 1 and finite, got {moment!r}.")
    if method == "cdpnsme" and k < 2:
        raise ValueError("cdpnsme needs a bound on a moment of order k >= 2.")
    M = _positive_finite(moment_bound, "moment_bound")
    if method == "dpcwme":
        if epsilon is None:
            raise ValueError("dpcwme needs epsilon.")
        base = _positive_finite(epsilon, "epsilon") * n / d
    else:
        if rho is None:
            raise ValueError(f"{method} needs rho.")
        base = math.sqrt(_positive_finite(rho, "rho")) * n / math.sqrt(d)
    power = 0.5 if method == "cdpnsme" else 1.0 / k
    return base ** power * M ** (1.0 / k)


def cwme_sensitivity(n_samples, n_features, tau, n_groups):
    """Sensitivity of the trimmed median of means under replacement of one row.

    **Privacy guarantee.** Not a release: the replacement-neighbour sensitivity (one
    row replaced, n and d public) of :func:`trimmed_median_of_means`, proved in the
    module notes (our derivation; a half (odd m) or a quarter (even m) of Kamath,
    Liu and Zhang 2022's Theorem 4.1 bound). Protected by the mechanisms that
    calibrate noise to it. Assumptions: τ and m chosen without the data. Not
    covered: add/remove neighbours.

    Δ∞ = 6τ/n_min for odd m and 3τ/n_min for even m, with n_min = floor(n/m) and
    m = min(n_groups, n) the number of groups used (proof in the module notes);
    Δ₁ = dΔ∞, Δ₂ = √d Δ∞. All three are attained.

    Returns
    -------
    Sensitivity
    """
    n = _count(n_samples, "n_samples")
    d = _count(n_features, "n_features")
    tau = _positive_finite(tau, "tau")
    m = effective_n_groups(n, _count(n_groups, "n_groups"))
    width = 6.0 * tau if m % 2 == 1 else 3.0 * tau
    linf = width / (n // m)
    return Sensitivity(linf, d * linf, math.sqrt(d) * linf)


def noise_smoothing_sensitivity(n_samples, n_features, tau, smoothing_variance=1.0):
    """Sensitivity of the noise-smoothing mean under replacement of one row.

    **Privacy guarantee.** Not a release: the replacement-neighbour sensitivity (one
    row replaced, n and d public) of :func:`noise_smoothing_mean`, 2S_c·τ/n per
    coordinate, proved in the module notes (our derivation, correcting Kamath, Liu
    and Zhang 2022's Algorithm 4 constant for c < 0.756). Assumptions: τ and c
    chosen without the data. Not covered: add/remove neighbours.

    Δ∞ = 2 S_c τ/n with S_c = (2√2/3) erf(1/√(2c)) = sup|ψ_c| (proof in the module
    notes); Δ₁ = dΔ∞, Δ₂ = √d Δ∞ ≤ (4√2/3)τ√d/n.

    Returns
    -------
    Sensitivity
    """
    n = _count(n_samples, "n_samples")
    d = _count(n_features, "n_features")
    tau = _positive_finite(tau, "tau")
    c = _real(smoothing_variance, "smoothing_variance")
    if not (c >= 0 and math.isfinite(c)):
        raise ValueError(f"smoothing_variance must be >= 0 and finite, got {c!r}.")
    linf = 2.0 * smoothed_phi_sup(c) * tau / n
    return Sensitivity(linf, d * linf, math.sqrt(d) * linf)


# -------------------------------------------------------------- non-private statistics
def trimmed_median_of_means(X, *, tau, n_groups, center=None, scale=None, groups=None):
    """Algorithm 3 without noise (NOT private): the coordinate-wise trimmed median of
    means of the rows of ``X`` (or of the rows ``scale[i] * X[i]``).

    **Privacy guarantee.** None by itself: a deterministic statistic of the data
    with no noise, so releasing its output is not private. What it provides is the
    sensitivity under replacement of one row (neighbouring datasets differ in one
    row, n public) that the private release adding noise to it relies on; see
    :func:`cwme_sensitivity`. Not covered: everything, unless noise is added
    (:func:`private_cwme`).

    Parameters
    ----------
    X : array-like or scipy.sparse matrix of shape (n, d)
    tau : float
        Positive and finite; entries are clipped into [center - 3τ, center + 3τ].
    n_groups : int
        m; min(m, n) consecutive groups are used.
    center : array-like of shape (d,) or float, optional
        Data-independent centre of the clipping intervals (0 by default).
    scale : array-like of shape (n,), optional
        Per-row factors: the statistic of ``scale[:, None] * X`` without forming it
        (per-example gradients of a linear model are scaled rows). Any values: the
        clipping bounds every row's contribution whatever its scale.
    groups : array-like of int of shape (n,), optional
        Group of each row, a permutation of the consecutive split
        (:func:`skdpsparse._kernels.heavy_tailed_scaled.check_groups`); consecutive
        groups when omitted. Drawn independently of the data, it leaves the
        sensitivity unchanged: the proof holds for every fixed assignment with these
        group sizes.

    Returns
    -------
    ndarray of shape (d,), float64
    """
    X = _as_data(X)
    tau = _positive_finite(tau, "tau")
    n_groups = _count(n_groups, "n_groups")
    if scale is not None or groups is not None:
        if sp.issparse(X):
            out = cwme_scaled_csr(X.indptr, X.indices, X.data, X.shape[0], X.shape[1],
                                  tau, n_groups, center, scale=scale, groups=groups)
        else:
            out = cwme_scaled_dense(X, tau, n_groups, center, scale=scale, groups=groups)
        return _finite_statistic(out)
    if sp.issparse(X):
        out = cwme_csr(X.indptr, X.indices, X.data, X.shape[0], X.shape[1], tau,
                       n_groups, center)
    else:
        out = cwme_dense(X, tau, n_groups, center)
    return _finite_statistic(out)


def noise_smoothing_mean(X, *, tau, smoothing_variance=1.0, scale=None):
    """Algorithm 4 without noise (NOT private): ``(τ/n) Σ_i ψ_c(x_i/τ)`` per coordinate
    (of the rows ``scale[i] * x_i`` when ``scale`` is given).

    **Privacy guarantee.** None by itself: a deterministic statistic of the data
    with no noise, so releasing its output is not private. What it provides is the
    sensitivity under replacement of one row (neighbouring datasets differ in one
    row, n public) that the private release adding noise to it relies on; see
    :func:`noise_smoothing_sensitivity`. Not covered: everything, unless noise is
    added (:func:`private_noise_smoothing_mean`).

    Returns
    -------
    ndarray of shape (d,), float64
    """
    X = _as_data(X)
    tau = _positive_finite(tau, "tau")
    c = _real(smoothing_variance, "smoothing_variance")
    if scale is not None:
        if sp.issparse(X):
            out = noise_smoothing_scaled_csr(X.indptr, X.indices, X.data, X.shape[0],
                                             X.shape[1], tau, c, scale=scale)
        else:
            out = noise_smoothing_scaled_dense(X, tau, c, scale=scale)
        return _finite_statistic(out)
    if sp.issparse(X):
        out = noise_smoothing_mean_csr(X.indptr, X.indices, X.data, X.shape[0],
                                       X.shape[1], tau, c)
    else:
        out = noise_smoothing_mean_dense(X, tau, c)
    return _finite_statistic(out)


# ------------------------------------------------------------------------ mechanisms
def _check_budget(rho, epsilon, delta):
    """(kind, ρ, ε, δ) from exactly one of ρ and (ε, δ): δ > 0 is the zCDP path at
    ρ = ``approx_dp_to_zcdp(ε, δ)``, δ = 0 the pure path."""
    if (rho is None) == (epsilon is None):
        raise ValueError("pass exactly one of rho and (epsilon, delta).")
    if rho is not None:
        return "gaussian", _positive_finite(rho, "rho"), None, None
    epsilon = _positive_finite(epsilon, "epsilon")
    delta = _check_delta(delta)
    if delta > 0:
        return "gaussian", _zcdp_of(epsilon, delta), epsilon, delta
    return "laplace", None, epsilon, 0.0


@functools.lru_cache(maxsize=64)
def _zcdp_of(epsilon, delta):
    # approx_dp_to_zcdp is a root find of about 1 ms, a tenth of a whole cwme fit at
    # n = 2e5, d = 100; a function of two public floats, so a repeated plan reuses it.
    return approx_dp_to_zcdp(epsilon, delta)


@dataclass(frozen=True)
class CWMEPlan:
    """The plan of one private trimmed median of means (public numbers only), built
    by :func:`plan_cwme` and run by :func:`cwme`.

    **Privacy guarantee.** A plan is public (no field depends on the data).
    ``budget`` is the guarantee of :func:`cwme` run with it, for one row of the n
    replaced (n and d public): ρ-zCDP with discrete Gaussian noise of σ = Δ₂/√(2ρ)
    (Canonne, Kamath and Steinke 2020, "The discrete Gaussian for differential
    privacy", Theorem 14), or ε-DP with discrete Laplace noise of scale Δ₁/ε, for
    the sensitivity of :func:`cwme_sensitivity` (our derivation; a half or a quarter
    of Kamath, Liu and Zhang 2022's Theorem 4.1 bound). A plan with a smaller
    ``noise_scale`` or a larger ``tau`` than :func:`plan_cwme` gives is not covered
    by its ``budget`` (the audit's broken variants are such plans).

    Attributes
    ----------
    n_samples, n_features : int
    tau : float
        τ: entries are clipped into [center − 3τ, center + 3τ].
    n_groups : int
        m as requested; :attr:`groups_used` = min(m, n) groups are used.
    center : None, float or ndarray of shape (d,)
    kind : {"gaussian", "laplace"}
    noise_scale : float
        σ (Gaussian) or b (Laplace) per coordinate.
    sensitivity : Sensitivity
    budget : ZCDP or PureDP
    rho : float or None
        ρ of the zCDP path.
    epsilon, delta : float or None
        The (ε, δ) target the plan was made for (None when planned from ρ).
    """

    n_samples: int
    n_features: int
    tau: float
    n_groups: int
    center: object = field(compare=False, repr=False)
    kind: str
    noise_scale: float
    sensitivity: Sensitivity
    budget: object
    rho: float | None
    epsilon: float | None
    delta: float | None

    @property
    def groups_used(self):
        return effective_n_groups(self.n_samples, self.n_groups)


def plan_cwme(n_samples, n_features, *, tau, n_groups, rho=None, epsilon=None,
              delta=None, center=None):
    """The noise and guarantee of the private trimmed median of means (Kamath, Liu
    and Zhang 2022, Algorithm 3, CDPCWME / DPCWME of Theorem 4.1), from public
    numbers.

    **Privacy guarantee.** Public numbers in, a public plan out; what the plan
    guarantees is its ``budget`` (:class:`CWMEPlan`). Given ``rho``: ρ-zCDP with
    σ = Δ₂/√(2ρ), Δ₂ = √d·Δ∞. Given (``epsilon``, ``delta``) with δ > 0: as ``rho`` =
    ``approx_dp_to_zcdp(epsilon, delta)``, which implies (ε, δ)-DP; with δ = 0:
    ε-DP with Laplace scale b = Δ₁/ε, Δ₁ = d·Δ∞. Δ∞ = 6τ/⌊n/m⌋ (odd m) or 3τ/⌊n/m⌋
    (even m), m = min(``n_groups``, n) (:func:`cwme_sensitivity`). Assumptions: τ, m
    and ``center`` chosen without the data.

    Returns
    -------
    CWMEPlan
    """
    n = _count(n_samples, "n_samples")
    d = _count(n_features, "n_features")
    tau = _positive_finite(tau, "tau")
    m = _count(n_groups, "n_groups")
    kind, rho, epsilon, delta = _check_budget(rho, epsilon, delta)
    sens = cwme_sensitivity(n, d, tau, m)
    if kind == "gaussian":
        scale, budget = zcdp_gaussian_sigma(sens.l2, rho), ZCDP(rho)
    else:
        scale, budget = laplace_scale(sens.l1, epsilon), PureDP(epsilon)
    return CWMEPlan(n, d, tau, m, center, kind, scale, sens, budget, rho, epsilon, delta)


def _check_shape(X, plan):
    if X.shape != (plan.n_samples, plan.n_features):
        raise ValueError(f"X has shape {X.shape}, but the plan is for "
                         f"({plan.n_samples}, {plan.n_features}).")


def median_of_group_means(sums, n_samples):
    """The median step of :func:`trimmed_median_of_means` (NOT private): the
    coordinate-wise median of the means of m consecutive groups from their per-column
    sums of clipped values, shape (m, d), group g holding ⌊n/m⌋ + 1 rows if g < n mod m
    and ⌊n/m⌋ otherwise (the compiled kernel's own step; a NaN sum raises)."""
    sums = np.ascontiguousarray(sums, dtype=np.float64)
    return _finite_statistic(_median_of_group_means(sums, int(n_samples)))


def release_statistic(statistic, plan, rng):
    """The draw step of :func:`cwme` and :func:`nsme`: the statistic (in memory, or
    merged from chunks) plus the plan's noise, one draw for the d coordinates. The
    guarantee is the plan's for a statistic of the plan's sensitivity."""
    return _release(_finite_statistic(statistic), _check_rng(rng), plan)


def _release(statistic, rng, plan):
    z = np.array(statistic, dtype=np.float64, copy=True)
    sens = plan.sensitivity
    add_noise_inplace(z, rng, plan.kind, plan.noise_scale,
                      sensitivity=sens.l1 if plan.kind == "laplace" else sens.l2)
    return z


def cwme(X, plan, rng, *, scale=None, groups=None, shuffle=False):
    """Run a :class:`CWMEPlan`: the trimmed median of means of ``X`` plus the planned
    noise.

    **Privacy guarantee.** ``plan.budget`` for one row of ``X`` replaced (n and d
    public), for a plan from :func:`plan_cwme` (:class:`CWMEPlan`); ``scale`` and a
    data-independent ``groups`` assignment (or the secret random one of ``shuffle``)
    leave the sensitivity unchanged (the bound holds for every assignment and every
    per-row factor). Assumptions: a secret random source. Not covered: add/remove
    neighbours; timing side channels.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix of shape (plan.n_samples, plan.n_features)
    plan : CWMEPlan
    rng : RandomSource or numpy.random.Generator
    scale, groups : array-like of shape (n,), optional
        As in :func:`trimmed_median_of_means`.
    shuffle : bool, default=False
        Assign the rows to groups at random instead of ``groups``: every assignment
        with the consecutive split's sizes equally likely, drawn from ``rng`` before
        the noise (:func:`~skdpsparse._kernels.heavy_tailed_scaled.random_groups`,
        keyed by a fresh secret of ``rng``; one byte per row for up to 256 groups).

    Returns
    -------
    ndarray of shape (d,), float64
    """
    rng = _check_rng(rng)
    X = _as_data(X)
    _check_shape(X, plan)
    if shuffle:
        if groups is not None:
            raise ValueError("pass groups or shuffle=True, not both.")
        key = key_words(rng.secret_int(256).to_bytes(32, "little"))
        groups = random_groups(plan.n_samples, plan.groups_used, key)
    statistic = trimmed_median_of_means(X, tau=plan.tau, n_groups=plan.n_groups,
                                        center=plan.center, scale=scale, groups=groups)
    return _release(statistic, rng, plan)


def _cwme_info(plan):
    m = plan.groups_used
    info = {"method": "cdpcwme" if plan.kind == "gaussian" else "dpcwme",
            "noise": plan.kind, "scale": plan.noise_scale, "sensitivity": plan.sensitivity,
            "n_groups": m, "min_group_size": plan.n_samples // m, "tau": plan.tau}
    if plan.kind == "gaussian":
        info["rho"] = plan.rho
    return info


def private_cwme_zcdp(X, *, tau, n_groups, rho, rng, center=None, scale=None,
                      groups=None):
    """CDPCWME: trimmed median of means plus N(0, σ²I), ρ-zCDP (Theorem 4.1):
    :func:`plan_cwme` then :func:`cwme`.

    **Privacy guarantee.** Protected: one row of ``X`` (neighbouring datasets differ
    by replacing one row; n and d public). ρ-zCDP: discrete Gaussian noise for the
    ℓ2 sensitivity √d·Δ∞ of :func:`cwme_sensitivity` (Canonne, Kamath and Steinke
    2020, "The discrete Gaussian for differential privacy", Theorem 14), the float
    rounding charged to the noise. Assumptions: τ, m, the center and the group
    assignment chosen without the data (a random assignment is covered: the bound
    holds for every assignment); a secret random source. Not covered: add/remove
    neighbours; user-level privacy; timing side channels.

    σ = Δ₂/√(2ρ) with Δ₂ = 6τ√d/floor(n/m) for odd m, half that for even m
    (:func:`cwme_sensitivity`). This is the gradient oracle of Algorithm 2, which
    spends ρ/T per step.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix of shape (n, d)
    tau : float
        Truncation parameter (see :func:`truncation_for`), data-independent.
    n_groups : int
        m (see :func:`n_groups_for`); min(m, n) groups are used.
    rho : float
        Positive and finite.
    rng : RandomSource or numpy.random.Generator
    center : array-like of shape (d,) or float, optional
        Data-independent centre of the clipping intervals (0 by default).
    scale, groups : array-like of shape (n,), optional
        As in :func:`trimmed_median_of_means`; the sensitivity does not depend on them.

    Returns
    -------
    estimate : ndarray of shape (d,), float64
    budget : ZCDP
    info : dict
        ``method``, ``noise`` ("gaussian"), ``scale`` (σ), ``sensitivity``
        (:class:`Sensitivity`), ``n_groups`` (used), ``min_group_size``, ``tau``, ``rho``.
    """
    rng = _check_rng(rng)
    rho = _positive_finite(rho, "rho")
    X = _as_data(X)
    plan = plan_cwme(*X.shape, tau=tau, n_groups=n_groups, rho=rho, center=center)
    return cwme(X, plan, rng, scale=scale, groups=groups), plan.budget, _cwme_info(plan)


def private_cwme(X, *, tau, n_groups, epsilon, delta, rng, center=None, scale=None,
                 groups=None):
    """Private coordinate-wise trimmed median of means (Kamath, Liu and Zhang 2022,
    Theorem 4.1): :func:`plan_cwme` then :func:`cwme`.

    **Privacy guarantee.** Protected: one row of ``X`` (neighbouring datasets differ
    by replacing one row; n and d public). δ > 0: as :func:`private_cwme_zcdp` at ρ
    = ``approx_dp_to_zcdp(epsilon, delta)``, which implies (ε, δ)-DP; δ = 0:
    discrete Laplace noise for the ℓ1 sensitivity d·Δ∞ (:func:`cwme_sensitivity`),
    ε-DP. Assumptions: τ, m, the center and the group assignment chosen without the
    data; a secret random source. Not covered: add/remove neighbours; user-level
    privacy; timing side channels.

    * ``delta > 0`` (CDPCWME): spends ρ = ``approx_dp_to_zcdp(epsilon, delta)``, the
      largest ρ whose tight conversion gives (ε, δ)-DP, with Gaussian noise
      σ = Δ₂/√(2ρ); the budget is ``ZCDP(ρ)`` and ``info["approx_dp"]`` the implied
      (ε, δ)-DP guarantee.
    * ``delta == 0`` (DPCWME): Laplace noise of scale Δ₁/ε on every coordinate, ε-DP.

    Sensitivities (module notes): Δ₂ = w√d/n_min, Δ₁ = wd/n_min, n_min = floor(n/m),
    w = 6τ for odd m and 3τ for even m.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix of shape (n, d)
        Rows should be in random order: groups are consecutive rows (privacy holds for
        any order, accuracy assumes exchangeable rows).
    tau : float
        Truncation parameter, data-independent (:func:`truncation_for`).
    n_groups : int
        m (:func:`n_groups_for`).
    epsilon : float
        Positive and finite.
    delta : float
        In [0, 1).
    rng : RandomSource or numpy.random.Generator
    center : array-like of shape (d,) or float, optional
        Data-independent centre of the clipping intervals (0 by default).
    scale, groups : array-like of shape (n,), optional
        As in :func:`trimmed_median_of_means`; the sensitivity does not depend on them.

    Returns
    -------
    estimate : ndarray of shape (d,), float64
    budget : ZCDP (delta > 0) or PureDP (delta == 0)
    info : dict
        As :func:`private_cwme_zcdp` (``noise`` "laplace" and ``scale`` b for pure DP),
        plus ``epsilon``, ``delta`` and, for delta > 0, ``approx_dp``.
    """
    epsilon = _positive_finite(epsilon, "epsilon")
    delta = _check_delta(delta)
    rng = _check_rng(rng)
    X = _as_data(X)
    plan = plan_cwme(*X.shape, tau=tau, n_groups=n_groups, epsilon=epsilon, delta=delta,
                     center=center)
    estimate = cwme(X, plan, rng, scale=scale, groups=groups)
    info = dict(_cwme_info(plan), epsilon=epsilon, delta=delta)
    if delta > 0:
        info["approx_dp"] = plan.budget.to_approx_dp(delta)
    return estimate, plan.budget, info


@dataclass(frozen=True)
class NoiseSmoothingPlan:
    """The plan of one private noise-smoothing mean (public numbers only), built by
    :func:`plan_noise_smoothing` and run by :func:`nsme`.

    **Privacy guarantee.** A plan is public (no field depends on the data).
    ``budget`` = ρ-zCDP is the guarantee of :func:`nsme` run with it, for one row of
    the n replaced (n and d public): discrete Gaussian noise of σ = Δ₂/√(2ρ)
    (Canonne, Kamath and Steinke 2020, Theorem 14) for Δ₂ = 2S_c·τ√d/n
    (:func:`noise_smoothing_sensitivity`, correcting Kamath, Liu and Zhang 2022's
    Algorithm 4 for c < 0.756). A plan with a smaller ``noise_scale`` or a larger
    ``tau`` is not covered by its ``budget``.

    Attributes
    ----------
    n_samples, n_features : int
    tau : float
    smoothing_variance : float
        c.
    noise_scale : float
        σ per coordinate.
    sensitivity : Sensitivity
    budget : ZCDP
    rho : float
    epsilon, delta : float or None
        The (ε, δ) target the plan was made for (None when planned from ρ).
    """

    n_samples: int
    n_features: int
    tau: float
    smoothing_variance: float
    noise_scale: float
    sensitivity: Sensitivity
    budget: object
    rho: float
    epsilon: float | None
    delta: float | None
    kind: str = "gaussian"


def plan_noise_smoothing(n_samples, n_features, *, tau, rho=None, epsilon=None,
                         delta=None, smoothing_variance=1.0):
    """The noise and guarantee of CDPNSME (Kamath, Liu and Zhang 2022, Algorithm 4,
    with the corrected sensitivity), from public numbers.

    **Privacy guarantee.** Public numbers in, a public plan out; what the plan
    guarantees is its ``budget`` (:class:`NoiseSmoothingPlan`): ρ-zCDP with
    σ = Δ₂/√(2ρ), Δ₂ = 2S_c·τ√d/n, S_c = (2√2/3) erf(1/√(2c)); given (``epsilon``,
    ``delta``), ρ = ``approx_dp_to_zcdp(epsilon, delta)`` (δ > 0 only: the mechanism
    is Gaussian), which implies (ε, δ)-DP. Assumptions: τ and c chosen without the
    data.

    Returns
    -------
    NoiseSmoothingPlan
    """
    n = _count(n_samples, "n_samples")
    d = _count(n_features, "n_features")
    tau = _positive_finite(tau, "tau")
    if rho is None and epsilon is not None and _check_delta(delta) == 0:
        raise ValueError("the noise-smoothing mean is a Gaussian (zCDP) mechanism: "
                         "delta must be positive.")
    _, rho, epsilon, delta = _check_budget(rho, epsilon, delta)
    c = _real(smoothing_variance, "smoothing_variance")
    sens = noise_smoothing_sensitivity(n, d, tau, c)
    return NoiseSmoothingPlan(n, d, tau, c, zcdp_gaussian_sigma(sens.l2, rho), sens,
                              ZCDP(rho), rho, epsilon, delta)


def nsme(X, plan, rng, *, scale=None):
    """Run a :class:`NoiseSmoothingPlan`: the noise-smoothing mean of ``X`` plus the
    planned noise.

    **Privacy guarantee.** ``plan.budget`` (ρ-zCDP) for one row of ``X`` replaced (n
    and d public), for a plan from :func:`plan_noise_smoothing`
    (:class:`NoiseSmoothingPlan`); the per-row factors ``scale`` leave the
    sensitivity unchanged (ψ_c is bounded whatever its argument). Assumptions: a
    secret random source. Not covered: add/remove neighbours; timing side channels.

    Returns
    -------
    ndarray of shape (d,), float64
    """
    rng = _check_rng(rng)
    X = _as_data(X)
    _check_shape(X, plan)
    statistic = noise_smoothing_mean(X, tau=plan.tau,
                                     smoothing_variance=plan.smoothing_variance, scale=scale)
    return _release(statistic, rng, plan)


def _nsme_info(plan):
    return {"method": "cdpnsme", "noise": "gaussian", "scale": plan.noise_scale,
            "sensitivity": plan.sensitivity, "tau": plan.tau,
            "smoothing_variance": plan.smoothing_variance, "rho": plan.rho}


def private_noise_smoothing_mean_zcdp(X, *, tau, rho, rng, smoothing_variance=1.0,
                                      scale=None):
    """CDPNSME (Kamath, Liu and Zhang 2022, Algorithm 4) with the corrected
    sensitivity, ρ-zCDP: :func:`plan_noise_smoothing` then :func:`nsme`.

    **Privacy guarantee.** Protected: one row of ``X`` (neighbouring datasets differ
    by replacing one row; n and d public). ρ-zCDP: discrete Gaussian noise for the
    ℓ2 sensitivity 2S_c·τ√d/n (:func:`noise_smoothing_sensitivity`; Canonne, Kamath
    and Steinke 2020, Theorem 14). Assumptions: τ and c chosen without the data; a
    secret random source. Not covered: add/remove neighbours; user-level privacy;
    timing side channels.

    Adds N(0, σ²I), σ = Δ₂/√(2ρ), Δ₂ = 2 S_c τ√d/n with S_c = (2√2/3) erf(1/√(2c))
    (:func:`noise_smoothing_sensitivity`; the seed's √2·τ√d/n is too small for
    c < 0.756, see the module notes).

    Parameters
    ----------
    X : array-like or scipy.sparse matrix of shape (n, d)
    tau : float
        Scale of the soft truncation, data-independent (:func:`truncation_for`).
    rho : float
        Positive and finite.
    rng : RandomSource or numpy.random.Generator
    smoothing_variance : float, default=1.0
        c, the variance of the multiplicative noise N (the seed's "constant c").
    scale : array-like of shape (n,), optional
        Per-row factors (:func:`noise_smoothing_mean`); the sensitivity does not
        depend on them (ψ_c is bounded whatever its argument).

    Returns
    -------
    estimate : ndarray of shape (d,), float64
    budget : ZCDP
    info : dict
        ``method``, ``noise``, ``scale`` (σ), ``sensitivity``, ``tau``,
        ``smoothing_variance``, ``rho``.
    """
    rng = _check_rng(rng)
    rho = _positive_finite(rho, "rho")
    X = _as_data(X)
    plan = plan_noise_smoothing(*X.shape, tau=tau, rho=rho,
                                smoothing_variance=smoothing_variance)
    return nsme(X, plan, rng, scale=scale), plan.budget, _nsme_info(plan)


def private_noise_smoothing_mean(X, *, tau, epsilon, delta, rng, smoothing_variance=1.0,
                                 scale=None):
    """CDPNSME at an (ε, δ) target: ρ = ``approx_dp_to_zcdp(epsilon, delta)``.

    **Privacy guarantee.** Protected: one row of ``X`` (neighbouring datasets differ
    by replacing one row; n and d public). As
    :func:`private_noise_smoothing_mean_zcdp` at ρ = ``approx_dp_to_zcdp(epsilon,
    delta)``, which implies (ε, δ)-DP (δ > 0 only). Assumptions: τ and c chosen
    without the data; a secret random source. Not covered: add/remove neighbours;
    user-level privacy; timing side channels.

    Only ``delta > 0`` (the mechanism is Gaussian). Returns ``(estimate, ZCDP(ρ),
    info)`` as :func:`private_noise_smoothing_mean_zcdp`, with ``epsilon``, ``delta``
    and the implied ``approx_dp`` added to ``info``.
    """
    epsilon = _positive_finite(epsilon, "epsilon")
    delta = _check_delta(delta)
    if delta == 0:
        raise ValueError("the noise-smoothing mean is a Gaussian (zCDP) mechanism: "
                         "delta must be positive.")
    rng = _check_rng(rng)
    X = _as_data(X)
    plan = plan_noise_smoothing(*X.shape, tau=tau, epsilon=epsilon, delta=delta,
                                smoothing_variance=smoothing_variance)
    estimate = nsme(X, plan, rng, scale=scale)
    info = dict(_nsme_info(plan), epsilon=epsilon, delta=delta,
                approx_dp=plan.budget.to_approx_dp(delta))
    return estimate, plan.budget, info
