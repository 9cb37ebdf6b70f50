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

Every mechanism is a plan and a run (issue 22): ``plan_cwme``,
``plan_noise_smoothing``, ``plan_clipped_mean`` and ``plan_quantile_clipped_mean``
compute the noise scales, sensitivities and budget from public numbers into a frozen
plan (:class:`CWMEPlan`, ...), and ``cwme``, ``nsme``, ``clipped_mean`` and
``quantile_clipped_mean`` run one on the data; the ``private_*`` functions are both
steps in one call.

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
    cwme_csr,
    cwme_dense,
    effective_n_groups,
    noise_smoothing_mean_csr,
    noise_smoothing_mean_dense,
    smoothed_phi_sup,
)
from .._kernels.heavy_tailed_scaled import (
    cwme_scaled_csr,
    cwme_scaled_dense,
    noise_smoothing_scaled_csr,
    noise_smoothing_scaled_dense,
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
        return "gaussian", approx_dp_to_zcdp(epsilon, delta), epsilon, delta
    return "laplace", None, epsilon, 0.0


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


def _release(statistic, rng, plan):
    z = np.array(statistic, dtype=np.float64, copy=True)
    sens = plan.sensitivity
    add_noise_inplace(z, rng, plan.kind, plan.noise_scale,
                      sensitivity=sens.l1 if plan.kind == "laplace" else sens.l2)
    return z


def cwme(X, plan, rng, *, scale=None, groups=None):
    """Run a :class:`CWMEPlan`: the trimmed median of means of ``X`` plus the planned
    noise.

    **Privacy guarantee.** ``plan.budget`` for one row of ``X`` replaced (n and d
    public), for a plan from :func:`plan_cwme` (:class:`CWMEPlan`); ``scale`` and a
    data-independent ``groups`` assignment leave the sensitivity unchanged (the bound
    holds for every assignment and every per-row factor). Assumptions: a secret
    random source. Not covered: add/remove neighbours; timing side channels.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix of shape (plan.n_samples, plan.n_features)
    plan : CWMEPlan
    rng : RandomSource or numpy.random.Generator
    scale, groups : array-like of shape (n,), optional
        As in :func:`trimmed_median_of_means`.

    Returns
    -------
    ndarray of shape (d,), float64
    """
    rng = _check_rng(rng)
    X = _as_data(X)
    _check_shape(X, plan)
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


# ------------------------------------------------ clipped mean with a private scale
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


def extrapolated_interval(quantiles, level, noise_sd, max_stretch=None):
    """The clipping interval of each column from its five private quantiles
    (post-processing: no privacy cost).

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

    Returns
    -------
    lower, upper : ndarrays of shape (d,)
    """
    q = np.sort(np.asarray(quantiles, dtype=np.float64), axis=0)  # monotone, post-processing
    med = q[2]
    sides = []
    stretch = MAX_STRETCH if max_stretch is None else float(max_stretch)
    for t_in, t_out in ((q[3] - med, q[4] - med), (med - q[1], med - q[0])):
        sides.append(_tail_candidates(t_in, t_out, TAIL_RATIO * level, stretch))
    (c_up, b_up), (c_lo, b_lo) = sides
    # err[j, u, l] for every pair of candidates of column j. A modelled bias of up to
    # 1e300 squares to inf: such a candidate is simply never the argmin (no warning).
    with np.errstate(over="ignore", invalid="ignore"):
        err = ((b_up[:, :, None] - b_lo[:, None, :]) ** 2
               + BIAS_DOUBT * (b_up[:, :, None] ** 2 + b_lo[:, None, :] ** 2)
               + (noise_sd * (c_up[:, :, None] + c_lo[:, None, :])) ** 2)
    err = np.where(np.isnan(err), np.inf, err)  # inf − inf: both sides unusable
    flat = err.reshape(err.shape[0], -1).argmin(axis=1)
    iu, il = np.unravel_index(flat, err.shape[1:])
    rows = np.arange(err.shape[0])
    return med - c_lo[rows, il], med + c_up[rows, iu]


def _tail_candidates(t_in, t_out, inner_mass, stretch):
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
    return C, bias


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


def laplace_is_better(n_features, epsilon, delta, scale_fraction=0.0):
    """Whether, at a target (ε, δ) with δ > 0, the clipped mean of d columns gets
    less noise as an ε_m-DP Laplace release than as a (1 − f)ρ-zCDP Gaussian one
    (public numbers only; f = ``scale_fraction`` is what the quantiles take, as fρ).
    Standard deviations per coordinate, in units of width/n: √2·d/ε_m against
    √d/√(2(1 − f)ρ), ε_m from :func:`laplace_epsilon_after`. Laplace wins for few
    columns (d = 1 at ε = 1, δ = 1e-6: about 1.5 against 4.8)."""
    from ..accounting import ZCDPEvent

    if delta == 0:
        return True
    rho = approx_dp_to_zcdp(epsilon, delta)
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
    parts for δ > 0, :func:`laplace_epsilon_after`). The interval and the mean's
    noise scale are computed in the run from the draws' releases (post-processing);
    the mean's budget is fixed here.

    Attributes
    ----------
    n_samples, n_features : int
    epsilon, delta : float
        The target.
    scale_fraction : float
        f: the draws' share.
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
        Passed to :func:`extrapolated_interval` (1.0 at the cap of α).
    noise_sd : float
        The mean's noise per unit of width with every column active (for the
        extrapolation).
    mean_rho, mean_epsilon : float or None
        What the clipped mean spends (one of them).
    draws : SelfComposedEvent
    budget : ZCDP, PureDP or ApproxDP, with its event
    approx_dp : ApproxDP or PureDP
        The (ε, δ) ``budget`` implies at ``delta``.
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
    # The mean's noise: Laplace (pure ε_m-DP) or Gaussian ((1 − f)ρ-zCDP).
    laplace = noise == "laplace" or (noise == "auto" and laplace_is_better(d, epsilon, delta, f))
    rho = approx_dp_to_zcdp(epsilon, delta) if delta > 0 else None

    def each(k):  # ε of each of k draws sharing fρ (zCDP) or fε (pure)
        return (quantile_epsilon(k, rho=f * rho) if delta > 0
                else quantile_epsilon(k, epsilon=f * epsilon))

    n_draws = N_DRAWS * d
    eps_q = each(n_draws)
    # Too few rows for 5d draws (α at its cap, public numbers only): one scale shared
    # by all columns instead, from SHARED_DRAWS draws on the pooled |x_ij|.
    shared = level == "auto" and auto_clip_level(
        n, d, quantile_epsilon=eps_q, grid_size=grid.size) >= SHARED_BELOW_LEVEL and d > 1
    if shared:
        n_draws = SHARED_DRAWS
        eps_q = each(n_draws)
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
    # At the cap of α the draws are too noisy to extrapolate from: no stretch.
    capped = level == "auto" and alpha >= 1.0 / 16.0
    return QuantileClipPlan(
        n, d, epsilon, delta, f, grid, "laplace" if laplace else "gaussian", bool(shared),
        n_draws, eps_q, alpha, 1.0 if capped else None, noise_sd, rho_m, eps_m, draws,
        budget, budget.to_approx_dp(delta) if isinstance(budget, ZCDP) else budget)


def _located_interval(X, plan, rng):
    """The per-column draws and the interval extrapolated from them."""
    from .quantile import private_quantiles, rank_counts

    grid, eps_q, alpha = plan.grid, plan.quantile_epsilon, plan.level
    # The median first, then the inner quantiles with the prior anchored at it, then
    # the outer ones anchored at their tail's inner one (each anchor a release:
    # adaptive composition): a draw the ranks cannot place (beyond the data, or
    # between two grid points the data lie between) stays near the data instead of
    # wandering octaves beyond it.
    counts = (rank_counts(X, grid, strict=True), rank_counts(X, grid))
    med = private_quantiles(X, [0.5], epsilon_each=eps_q, rng=rng, grid=grid,
                            counts=counts)
    inner = private_quantiles(X, [TAIL_RATIO * alpha, 1.0 - TAIL_RATIO * alpha],
                              epsilon_each=eps_q, rng=rng, grid=grid, counts=counts,
                              anchors=np.vstack([med, med]))
    outer = private_quantiles(X, [alpha, 1.0 - alpha], epsilon_each=eps_q, rng=rng,
                              grid=grid, counts=counts, anchors=inner)
    quantiles = np.vstack([outer[:1], inner[:1], med, inner[1:], outer[1:]])
    lower, upper = extrapolated_interval(quantiles, alpha, plan.noise_sd,
                                         max_stretch=plan.max_stretch)
    return lower, upper, quantiles


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
        med, up, _ = shared_scale_draws(X, epsilon_each=plan.quantile_epsilon, rng=rng,
                                        grid=plan.grid)
        c = SHARED_STRETCH * max(abs(up), abs(med))
        d = plan.n_features
        lower, upper, quantiles = np.full(d, -c), np.full(d, c), np.array([med, up])
        info["shared"] = True
    else:
        lower, upper, quantiles = _located_interval(X, plan, rng)
    mean_plan = plan_clipped_mean(plan.n_samples, lower, upper, rho=plan.mean_rho,
                                  epsilon=plan.mean_epsilon)
    estimate = clipped_mean(X, mean_plan, rng)
    info.update(noise=mean_plan.kind, scale=mean_plan.noise_scale, lower=mean_plan.lower,
                upper=mean_plan.upper, quantiles=quantiles)
    return estimate, info


def private_quantile_clipped_mean(X, *, epsilon, delta, rng, scale_fraction=SCALE_FRACTION,
                                  level="auto", grid=None, noise="auto"):
    """A private mean that needs no bound: private quantiles locate each column's
    clipping interval, then :func:`private_clipped_mean` (two mechanisms, composed):
    :func:`plan_quantile_clipped_mean` then :func:`quantile_clipped_mean`.

    **Privacy guarantee.** Protected: one row of ``X`` (neighbouring datasets differ
    by replacing one row; n and d public). The returned budget, as
    :class:`QuantileClipPlan` states (below). Assumptions: every parameter chosen
    without the data; a secret random source. Not covered: add/remove neighbours;
    timing side channels.

    1. For every column j, five private quantiles q_α, q_{4α}, q_{1/2}, q_{1−4α},
       q_{1−α} by the exponential mechanism
       (:func:`~skdpsparse.mechanisms.quantile.private_quantiles`, 5d draws on the
       public :func:`~skdpsparse.mechanisms.quantile.geometric_grid`), α from
       :func:`auto_clip_level`.
    2. The interval [lo_j, hi_j] from them by :func:`extrapolated_interval`
       (post-processing: each tail's Pareto fit says how far to clip).
    3. The mean of column j clipped into [lo_j, hi_j] plus noise proportional to
       hi_j − lo_j (:func:`private_clipped_mean`).

    Budget (``scale_fraction`` = f):

    * zCDP path (``delta > 0``, Gaussian): ρ = ``approx_dp_to_zcdp(epsilon, delta)``;
      the draws get fρ (each ε_q = √(8fρ/(5d)), ε_q²/8-zCDP as bounded-range
      mechanisms), the mean (1 − f)ρ with discrete Gaussian noise; in all ρ-zCDP
      (Bun and Steinke 2016, Lemma 2.3, adaptive composition: the mean's interval is
      the draws' output).
    * pure path (``delta == 0``, or Laplace chosen for δ > 0): the draws get fε (each
      fε/(5d)), the mean (1 − f)ε with discrete Laplace noise; in all ε-DP (basic
      composition), which implies (ε, δ)-DP for every δ.

    The budget returned carries a :class:`~skdpsparse.accounting.ComposedEvent` of the
    two parts, which is what a privacy ledger composes.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, d)
    epsilon : float
    delta : float in [0, 1)
    rng : RandomSource or numpy.random.Generator
    scale_fraction : float in (0, 1)
    level : "auto" or float in (0, 1/16]
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

#: The shared interval is [−C, C] with C this multiple of the pooled upper quantile.
SHARED_STRETCH = 2.0


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
    from .quantile import prior_weight, quantile_scores, rank_counts
    from .sparse_exponential import exponential_mechanism

    n, d = X.shape
    A = abs(X) if sp.issparse(X) else np.abs(X)
    below = rank_counts(A, grid, strict=True).sum(axis=0)
    at_most = rank_counts(A, grid).sum(axis=0)
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
