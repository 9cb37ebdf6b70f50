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
def _release(statistic, rng, kind, scale, sens):
    z = np.array(statistic, dtype=np.float64, copy=True)
    add_noise_inplace(z, rng, kind, scale,
                      sensitivity=sens.l1 if kind == "laplace" else sens.l2)
    return z


def private_cwme_zcdp(X, *, tau, n_groups, rho, rng, center=None, scale=None,
                      groups=None):
    """CDPCWME: trimmed median of means plus N(0, σ²I), ρ-zCDP (Theorem 4.1).

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
    statistic = trimmed_median_of_means(X, tau=tau, n_groups=n_groups, center=center,
                                        scale=scale, groups=groups)
    n, d = X.shape
    sens = cwme_sensitivity(n, d, tau, n_groups)
    sigma = zcdp_gaussian_sigma(sens.l2, rho)
    m = effective_n_groups(n, n_groups)
    info = {"method": "cdpcwme", "noise": "gaussian", "scale": sigma, "sensitivity": sens,
            "n_groups": m, "min_group_size": n // m, "tau": float(tau), "rho": rho}
    return _release(statistic, rng, "gaussian", sigma, sens), ZCDP(rho), info


def private_cwme(X, *, tau, n_groups, epsilon, delta, rng, center=None, scale=None,
                 groups=None):
    """Private coordinate-wise trimmed median of means (Kamath, Liu and Zhang 2022, Theorem 4.1).

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
    if delta > 0:
        rho = approx_dp_to_zcdp(epsilon, delta)
        estimate, budget, info = private_cwme_zcdp(
            X, tau=tau, n_groups=n_groups, rho=rho, rng=rng, center=center, scale=scale,
            groups=groups)
        info.update(epsilon=epsilon, delta=delta, approx_dp=budget.to_approx_dp(delta))
        return estimate, budget, info
    rng = _check_rng(rng)
    X = _as_data(X)
    statistic = trimmed_median_of_means(X, tau=tau, n_groups=n_groups, center=center,
                                        scale=scale, groups=groups)
    n, d = X.shape
    sens = cwme_sensitivity(n, d, tau, n_groups)
    b = laplace_scale(sens.l1, epsilon)
    m = effective_n_groups(n, n_groups)
    info = {"method": "dpcwme", "noise": "laplace", "scale": b, "sensitivity": sens,
            "n_groups": m, "min_group_size": n // m, "tau": float(tau),
            "epsilon": epsilon, "delta": 0.0}
    return _release(statistic, rng, "laplace", b, sens), PureDP(epsilon), info


def private_noise_smoothing_mean_zcdp(X, *, tau, rho, rng, smoothing_variance=1.0,
                                      scale=None):
    """CDPNSME (Kamath, Liu and Zhang 2022, Algorithm 4) with the corrected sensitivity: ρ-zCDP.

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
    statistic = noise_smoothing_mean(X, tau=tau, smoothing_variance=smoothing_variance,
                                     scale=scale)
    n, d = X.shape
    sens = noise_smoothing_sensitivity(n, d, tau, smoothing_variance)
    sigma = zcdp_gaussian_sigma(sens.l2, rho)
    info = {"method": "cdpnsme", "noise": "gaussian", "scale": sigma, "sensitivity": sens,
            "tau": float(tau), "smoothing_variance": float(smoothing_variance), "rho": rho}
    return _release(statistic, rng, "gaussian", sigma, sens), ZCDP(rho), info


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
    rho = approx_dp_to_zcdp(epsilon, delta)
    estimate, budget, info = private_noise_smoothing_mean_zcdp(
        X, tau=tau, rho=rho, rng=rng, smoothing_variance=smoothing_variance, scale=scale)
    info.update(epsilon=epsilon, delta=delta, approx_dp=budget.to_approx_dp(delta))
    return estimate, budget, info


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


def private_clipped_mean(X, lower, upper, *, rng, rho=None, epsilon=None):
    """Mean of every column clipped into the public [lower_j, upper_j], plus noise.

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
    lower = np.broadcast_to(np.asarray(lower, dtype=np.float64), (d,)).copy()
    upper = np.broadcast_to(np.asarray(upper, dtype=np.float64), (d,)).copy()
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
        raise ValueError("the clipping bounds must be finite.")
    lower, upper = np.minimum(lower, upper), np.maximum(lower, upper)
    width = upper - lower
    if not np.all(np.isfinite(width)):
        raise ValueError("the clipping interval is too wide for float64.")
    unit, frac_bits = box_clipped_mean(X, lower, upper)
    active = int(np.count_nonzero(width > 0))
    kind = "laplace" if rho is None else "gaussian"
    info = {"kind": kind, "scale": 0.0, "sensitivity": 0.0, "n_active": active}
    if active:
        claimed, computed = clipped_mean_sensitivity(n, active, frac_bits, kind)
        scale = (laplace_scale(claimed, _positive_finite(epsilon, "epsilon"))
                 if kind == "laplace"
                 else zcdp_gaussian_sigma(claimed, _positive_finite(rho, "rho")))
        z = unit[width > 0].copy()
        add_noise_inplace(z, _check_rng(rng), kind, scale, sensitivity=claimed,
                          true_sensitivity=computed)
        unit[width > 0] = z
        info.update(scale=scale, sensitivity=claimed)
    return lower + width * unit, info


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


def private_quantile_clipped_mean(X, *, epsilon, delta, rng, scale_fraction=SCALE_FRACTION,
                                  level="auto", grid=None, noise="auto"):
    """A private mean that needs no bound: private quantiles locate each column's
    clipping interval, then :func:`private_clipped_mean` (two mechanisms, composed).

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
    from ..accounting import (ApproxDP, ComposedEvent, PureDPEvent, SelfComposedEvent,
                              ZCDPEvent, with_event)
    from .quantile import geometric_grid, private_quantiles, quantile_epsilon, rank_counts

    epsilon = _positive_finite(epsilon, "epsilon")
    delta = _check_delta(delta)
    f = _real(scale_fraction, "scale_fraction")
    if not 0 < f < 1:
        raise ValueError(f"scale_fraction must be in (0, 1), got {scale_fraction!r}.")
    rng = _check_rng(rng)
    X = _as_data(X)
    n, d = X.shape
    grid = geometric_grid() if grid is None else np.asarray(grid, dtype=np.float64)
    if noise not in ("auto", "gaussian", "laplace"):
        raise ValueError(f"noise must be 'auto', 'gaussian' or 'laplace', got {noise!r}.")
    if delta == 0 and noise == "gaussian":
        raise ValueError("noise='gaussian' needs delta > 0.")
    # The mean's noise: Laplace (pure ε_m-DP) or Gaussian ((1 − f)ρ-zCDP).
    laplace = noise == "laplace" or (noise == "auto" and laplace_is_better(d, epsilon, delta, f))
    n_draws = N_DRAWS * d
    if delta > 0:
        rho = approx_dp_to_zcdp(epsilon, delta)
        eps_q = quantile_epsilon(n_draws, rho=f * rho)  # draws under zCDP
    else:
        eps_q = quantile_epsilon(n_draws, epsilon=f * epsilon)
    # Too few rows for 5d draws (α at its cap, public numbers only): one scale shared
    # by all columns instead, from SHARED_DRAWS draws on the pooled |x_ij|.
    shared = level == "auto" and auto_clip_level(
        n, d, quantile_epsilon=eps_q, grid_size=grid.size) >= SHARED_BELOW_LEVEL and d > 1
    if shared:
        n_draws = SHARED_DRAWS
        eps_q = (quantile_epsilon(n_draws, rho=f * rho) if delta > 0
                 else quantile_epsilon(n_draws, epsilon=f * epsilon))
    draws = SelfComposedEvent(ZCDPEvent(eps_q**2 / 8.0) if delta > 0 else PureDPEvent(eps_q),
                              n_draws)
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
        return _shared_scale_clipped_mean(
            X, epsilon=epsilon, delta=delta, rng=rng, grid=grid, eps_q=eps_q,
            draws=draws, laplace=laplace, eps_m=eps_m if laplace else None,
            rho_m=None if laplace else rho_m)
    if level == "auto":
        alpha = auto_clip_level(n, d, quantile_epsilon=eps_q, grid_size=grid.size)
    else:
        alpha = _real(level, "level")
        if not 0 < alpha < 1.0 / 8.0:
            raise ValueError(f"level must be in (0, 1/8), got {level!r}.")
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
    # The noise per unit of width of the mean that follows (public numbers only).
    if laplace:
        noise_sd = math.sqrt(2.0) * d / n / eps_m
    else:
        noise_sd = math.sqrt(d) / n / math.sqrt(2.0 * rho_m)
    # At the cap of α the draws are too noisy to extrapolate from: no stretch.
    capped = level == "auto" and alpha >= 1.0 / 16.0
    lower, upper = extrapolated_interval(quantiles, alpha, noise_sd,
                                         max_stretch=1.0 if capped else None)
    if laplace:
        estimate, info = private_clipped_mean(X, lower, upper, rng=rng, epsilon=eps_m)
        event = ComposedEvent((draws, PureDPEvent(eps_m)))
        if delta > 0:  # zCDP draws and a pure release, composed by Rényi accounting
            budget = with_event(ApproxDP(epsilon, delta), event)
        else:
            budget = with_event(PureDP(n_draws * eps_q + eps_m), event)
    else:
        estimate, info = private_clipped_mean(X, lower, upper, rng=rng, rho=rho_m)
        event = ComposedEvent((draws, ZCDPEvent(rho_m)))
        budget = with_event(ZCDP(n_draws * eps_q**2 / 8.0 + rho_m), event)
    info = {"method": "private_clip", "noise": info["kind"], "scale": info["scale"],
            "lower": np.minimum(lower, upper), "upper": np.maximum(lower, upper),
            "quantiles": quantiles,
            "level": alpha, "quantile_epsilon": eps_q, "epsilon": epsilon,
            "delta": delta}
    info["approx_dp"] = budget.to_approx_dp(delta) if isinstance(budget, ZCDP) else budget
    return estimate, budget, info


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
    from .quantile import prior_weight, quantile_scores, rank_counts, rank_error
    from .sparse_exponential import exponential_mechanism

    n, d = X.shape
    A = abs(X) if sp.issparse(X) else np.abs(X)
    below = rank_counts(A, grid, strict=True).sum(axis=0)
    at_most = rank_counts(A, grid).sum(axis=0)
    total = n * d
    level = min(0.25, rank_error(grid.size, epsilon_each) / n)
    med_scores = quantile_scores(below, at_most, int(np.rint(0.5 * total)), grid, float(d))
    med = int(exponential_mechanism(med_scores.astype(np.float64), float(d), epsilon_each,
                                    rng))
    up_scores = quantile_scores(below, at_most, int(np.rint((1.0 - level) * total)), grid,
                                float(d) * prior_weight(epsilon_each), 1, anchor=med)
    up = int(exponential_mechanism(up_scores.astype(np.float64), float(d), epsilon_each,
                                   rng))
    return float(grid[med]), float(grid[max(up, med)]), level


def _shared_scale_clipped_mean(X, *, epsilon, delta, rng, grid, eps_q, draws, laplace,
                               eps_m, rho_m):
    """private_clip's fallback when n·ε is too small for 5d draws: one interval
    [−C, C] for every column, C = SHARED_STRETCH × the pooled upper quantile of
    :func:`shared_scale_draws`, then :func:`private_clipped_mean` (composed as the
    per-column path: ``draws`` then the mean)."""
    from ..accounting import ApproxDP, ComposedEvent, PureDPEvent, ZCDPEvent, with_event

    n, d = X.shape
    med, up, level = shared_scale_draws(X, epsilon_each=eps_q, rng=rng, grid=grid)
    c = SHARED_STRETCH * max(abs(up), abs(med))
    lower, upper = np.full(d, -c), np.full(d, c)
    if laplace:
        estimate, info = private_clipped_mean(X, lower, upper, rng=rng, epsilon=eps_m)
        event = ComposedEvent((draws, PureDPEvent(eps_m)))
        budget = with_event(ApproxDP(epsilon, delta) if delta > 0
                            else PureDP(SHARED_DRAWS * eps_q + eps_m), event)
    else:
        estimate, info = private_clipped_mean(X, lower, upper, rng=rng, rho=rho_m)
        event = ComposedEvent((draws, ZCDPEvent(rho_m)))
        budget = with_event(ZCDP(SHARED_DRAWS * eps_q**2 / 8.0 + rho_m), event)
    info = {"method": "private_clip", "noise": info["kind"], "scale": info["scale"],
            "lower": lower, "upper": upper, "quantiles": np.array([med, up]),
            "level": level, "shared": True,
            "quantile_epsilon": eps_q, "epsilon": epsilon, "delta": delta}
    info["approx_dp"] = budget.to_approx_dp(delta) if isinstance(budget, ZCDP) else budget
    return estimate, budget, info
