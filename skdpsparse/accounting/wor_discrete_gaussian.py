"""RDP of a (discrete) Gaussian on a batch sampled without replacement, replace-one
neighbours, from the exact ternary moments of the Gaussian.

The bound (derivation: ``doc/derivations/dp_sgd.rst``, "Accounting", (ii)): for an
integer order α ≥ 2, batch fraction γ = m/n and s = 1/z (z the noise multiplier for the
replace-one ℓ2 sensitivity),

    A_α ≤ 1 + Σ_{j=2}^{α} C(α, j) γ^j M_j(s),

where M_j(s) bounds E_r[abs(p/r − q/r)^j] over every triple p, q, r of Gaussians of unit
variance whose means are pairwise at most s apart. The expansion and the reduction to
such triples (joint convexity of (x, y, w) ↦ abs(x − y)^j w^{1−j}) are the method of Wang,
Balle and Kasiviswanathan (2019), whose ternary-abs(χ)^j divergence this is; what is new
here is M_j, the supremum itself for even j:

    sup = max{F_eq(j), B(j)},
    F_eq(j) = E[(e^X − e^Y)^j], (X, Y) the log-ratios of an equilateral triple (side s),
    B(j)    = E_q[(p/q − 1)^j] at distance s (r = q),

and, for odd j, the Cauchy–Schwarz bound √(M_{j−1} M_{j+1}); every j also has the
generic 2 e^{j(j−1)s²/2} (the Rényi moments of p and q against r). For even j ≥ 4 both
quantities are replaced by closed-form upper bounds from sinh(x)/x ≤ e^{x²/6} (tight
when j·s² is small; above j·s² = 12 only the generic bound is used).

Only integer-order mixed moments E_r[(p/r)^i (q/r)^k] of the three Gaussians enter,
and for discrete Gaussians N_Z(μ, N²)^d with integer means these equal the continuous
Gaussian's (the shifted lattice sum equals the normaliser), so the bound holds for
the discrete Gaussian of the library's samplers as for the continuous one.

References
----------
.. [WBK19] Y.-X. Wang, B. Balle, S. Kasiviswanathan. Subsampled Rényi differential
   privacy and analytical moments accountant. AISTATS 2019. arXiv:1808.00087.
.. [CKS20] C. Canonne, G. Kamath, T. Steinke. The discrete Gaussian for differential
   privacy. NeurIPS 2020. arXiv:2004.00010.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

from .budget import _positive
from .rdp import (
    DEFAULT_ORDERS,
    RdpCurve,
    _check_sample_sizes,
    _interpolate_cgf,
    _log_comb,
    _log_expm1,
    _monotone_envelope,
    _orders,
    _ragged,
    _segment_logsumexp,
    gaussian_rdp,
)

__all__ = ["subsampled_without_replacement_discrete_gaussian_rdp", "ternary_moment_bounds"]

#: Above j·s² = 12 the sinh bounds diverge; only the generic bound is used there.
_SINH_LIMIT = 12.0


def _log_double_factorial_odd(j):
    """log (j − 1)!! = log E[Z^j] for even j ≥ 0 (Z standard normal)."""
    j = np.asarray(j, dtype=float)
    return gammaln(j + 1) - 0.5 * j * math.log(2.0) - gammaln(0.5 * j + 1)


def _log_equilateral_bound(j, s):
    """log of an upper bound on F_eq(j) (even j ≥ 2), ``inf`` where j·s² ≥ 12.

    F_eq(j) = e^{(3j² − 4j)s²/8} E[(2 sinh(sZ/2))^j] (Z standard normal) and
    2 sinh(x/2) ≤ x e^{x²/24}, so F_eq(j) ≤ e^{(3j² − 4j)s²/8} s^j (j − 1)!!
    (1 − js²/12)^{−(j+1)/2} (E[Z^j e^{cZ²}] = (j − 1)!! (1 − 2c)^{−(j+1)/2}).
    """
    j = np.asarray(j, dtype=float)
    lam = j * s * s / _SINH_LIMIT
    ok = lam < 1
    out = ((3 * j * j - 4 * j) * s * s / 8 + j * math.log(s)
           + _log_double_factorial_odd(j) - 0.5 * (j + 1) * np.log1p(-np.where(ok, lam, 0.0)))
    return np.where(ok, out, np.inf)


def _log_binary_bound(j, s):
    """log of an upper bound on B(j) = E[(e^Y − 1)^j], Y ~ N(−s²/2, s²) (even j),
    ``inf`` where j·s² ≥ 12.

    e^Y − 1 = 2 e^{Y/2} sinh(Y/2) ≤ abs(Y) e^{Y/2 + Y²/24} in absolute value, so
    B(j) ≤ E[e^{jY/2 + jY²/24} Y^j], a Gaussian integral: with λ = js²/12,
    s'² = s²/(1 − λ), μ' = (j − 1)s²/(2(1 − λ)), it is
    (s'/s) e^{μ'²/(2s'²) − s²/8} E[(μ' + s'Z)^j], and
    E[(μ' + s'Z)^j] = Σ_k C(j, 2k) μ'^{j−2k} s'^{2k} (2k − 1)!!, a sum of positive terms.
    """
    j = np.asarray(j, dtype=float).reshape(-1)
    lam = j * s * s / _SINH_LIMIT
    ok = lam < 1
    out = np.full(j.shape, np.inf)
    if not ok.any():
        return out
    jj, lam = j[ok][:, None], lam[ok][:, None]
    sp2 = s * s / (1 - lam)
    mup = (jj - 1) * s * s / (2 * (1 - lam))
    k = np.arange(0, int(jj.max()) // 2 + 1, dtype=float)[None, :]
    with np.errstate(invalid="ignore"):
        terms = (_log_comb(jj, 2 * k) + (jj - 2 * k) * np.log(mup) + k * np.log(sp2)
                 + _log_double_factorial_odd(2 * k))
    terms = np.where(2 * k <= jj, terms, -np.inf)
    top = terms.max(axis=1, keepdims=True)
    log_moment = top[:, 0] + np.log(np.exp(terms - top).sum(axis=1))
    out[ok] = (0.5 * np.log(sp2[:, 0] / (s * s)) + mup[:, 0] ** 2 / (2 * sp2[:, 0])
               - s * s / 8 + log_moment)
    return out


def ternary_moment_bounds(noise_multiplier, max_order):
    """log M_j for j = 0, …, ``max_order``: bounds on the ternary abs(χ)^j moments.

    M_j(s) ≥ E_r[abs(p/r − q/r)^j] for every triple of Gaussians (continuous, or
    discrete with integer means) of common scale σ whose means are pairwise at most
    s·σ apart, s = 1/``noise_multiplier`` (module docstring; proof in
    ``doc/derivations/dp_sgd.rst``). Entries 0 and 1 are unused (``nan``).

    **Privacy guarantee.** None needed: a function of public numbers only. What it
    guarantees: the returned values are upper bounds on the suprema above (j = 2:
    the exact supremum 2e^{s²} − 2e^{s²/2}); the subsampled bound of
    :func:`subsampled_without_replacement_discrete_gaussian_rdp` is valid with any
    upper bounds in their place. Not covered: means farther apart than s·σ.

    Parameters
    ----------
    noise_multiplier : float
        z = σ/Δ, positive; s = 1/z.
    max_order : int
        Largest j, ≥ 2.

    Returns
    -------
    numpy.ndarray of shape (max_order + 1,)
    """
    s = 1.0 / _positive(noise_multiplier, "noise_multiplier")
    jmax = int(max_order)
    if jmax < 2:
        raise ValueError(f"max_order must be at least 2, got {max_order!r}")
    j = np.arange(jmax + 2, dtype=float)  # one more even order for Cauchy–Schwarz
    generic = math.log(2.0) + j * (j - 1) * s * s / 2  # 2 e^{j(j−1)s²/2}
    out = np.full(jmax + 2, np.nan)
    out[2] = min(math.log(2.0) + s * s / 2 + float(_log_expm1(s * s / 2)), generic[2])
    even = np.arange(4, jmax + 2, 2)
    if even.size:
        sinh = np.maximum(_log_equilateral_bound(even.astype(float), s),
                          _log_binary_bound(even.astype(float), s))
        out[even] = np.minimum(sinh, generic[even])
    odd = np.arange(3, jmax + 1, 2)
    if odd.size:
        out[odd] = np.minimum(0.5 * (out[odd - 1] + out[odd + 1]), generic[odd])
    return out[:jmax + 1]


def _log_a_int(gamma, noise_multiplier, alphas):
    """Upper bounds on log A_α = (α − 1)·D_α at the integer orders ``alphas`` ≥ 2."""
    log_m = ternary_moment_bounds(noise_multiplier, int(alphas.max()))
    al, j, starts = _ragged(alphas, 2)
    terms = _log_comb(al, j) + j * math.log(gamma) + log_m[j.astype(np.int64)]
    return np.logaddexp(0.0, _segment_logsumexp(terms, starts))


def subsampled_without_replacement_discrete_gaussian_rdp(
    sample_size, population_size, noise_multiplier, orders=DEFAULT_ORDERS,
):
    """RDP of the (discrete) Gaussian mechanism on a uniformly random subset of fixed
    size, replace-one neighbours, from the exact ternary moments (module docstring).

    At an integer order α ≥ 2 the bound is
    A_α ≤ 1 + Σ_{j≥2} C(α, j) γ^j M_j (:func:`ternary_moment_bounds`), ε(α) =
    log(A_α)/(α − 1); the expansion is that of Wang, Balle and Kasiviswanathan (2019,
    "Subsampled Rényi differential privacy and analytical moments accountant"),
    with the supremum of their ternary-abs(χ)^j divergence computed for the Gaussian
    (``doc/derivations/dp_sgd.rst``). Its leading term γ²C(α, 2)(2e^{s²} − 2e^{s²/2})
    is about a quarter of their Theorem 9's γ²C(α, 2)·4(e^{s²} − 1), and for j ≥ 3 the
    terms vanish as the noise grows where Theorem 9's stay above 2γ^jC(α, j). Every
    term is at most Theorem 9's, so the curve is never above it. Fractional orders:
    the chord of the convex (α − 1)ε(α) between ⌊α⌋ and ⌈α⌉ (their Corollary 10);
    the curve is capped by the mechanism's own α/(2z²) and made non-decreasing.

    **Privacy guarantee.** None needed: public numbers in and out. What it
    guarantees: a mechanism that draws m of n rows uniformly without replacement,
    independently of the data, and releases a query of the batch plus Gaussian noise
    (continuous, or discrete N_Z(0, N²)^d on an integer-valued query) whose three
    values on batches differing in one row are pairwise at most σ/z apart in ℓ2 is
    (α, ε(α))-RDP at each returned order for replace-one neighbours. Assumptions:
    the batch and the noise are independent of the data; a discrete Gaussian's
    query is an integer vector (the identity of the integer moments needs integer
    shifts). Not covered: Poisson sampling, add/remove neighbours, sampling with
    replacement, queries whose value on the batch depends on the order of its rows
    beyond the stated distance.

    Parameters
    ----------
    sample_size : int
        m, with 0 ≤ m ≤ n; m = 0 gives zeros, m = n the mechanism's α/(2z²).
    population_size : int
        n ≥ 1, public.
    noise_multiplier : float
        z = σ/Δ, Δ the replace-one ℓ2 sensitivity of the batch query.
    orders : array-like of float, default=DEFAULT_ORDERS
        All > 1.

    Returns
    -------
    RdpCurve

    Examples
    --------
    Batches of 2000 of 12 456 rows, 125 steps, δ = 1e-6:

    >>> from skdpsparse.accounting import subsampled_without_replacement_gaussian_rdp
    >>> new = 125 * subsampled_without_replacement_discrete_gaussian_rdp(2000, 12456, 9.0)
    >>> old = 125 * subsampled_without_replacement_gaussian_rdp(2000, 12456, 9.0,
    ...                                                         moments_bound=False)
    >>> round(new.to_epsilon(1e-6)[0], 2), round(old.to_epsilon(1e-6)[0], 2)
    (0.99, 5.63)
    """
    _check_sample_sizes(sample_size, population_size)
    z = _positive(noise_multiplier, "noise_multiplier")
    alphas = _orders(orders, allow_one=False)
    if sample_size == 0:
        return RdpCurve(alphas, np.zeros_like(alphas))
    if sample_size == population_size:
        return gaussian_rdp(z, alphas)
    gamma = sample_size / population_size
    ints = np.union1d(np.floor(alphas), np.ceil(alphas))
    ints = ints[ints >= 2]
    rdp = _interpolate_cgf(alphas, ints, _log_a_int(gamma, z, ints))
    rdp = np.clip(rdp, 0.0, alphas / z / z / 2.0)
    return RdpCurve(alphas, _monotone_envelope(alphas, rdp))
