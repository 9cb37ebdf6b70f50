"""Noise calibration: from a target budget to a noise scale.

Closed forms where one exists (Laplace, classic and zCDP Gaussian), a monotone root find
otherwise (analytic Gaussian, any RDP curve family).

References
----------
.. [DR14] C. Dwork, A. Roth. The algorithmic foundations of differential privacy. 2014.
.. [BW18] B. Balle, Y.-X. Wang. Improving the Gaussian mechanism for differential
   privacy: analytical calibration and optimal denoising. ICML 2018. arXiv:1805.06530.
.. [BS16] M. Bun, T. Steinke. Concentrated differential privacy. TCC 2016.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import integrate, optimize

from .budget import _delta, _nonnegative, _positive, _real
from .rdp import RdpCurve

__all__ = [
    "analytic_gaussian_sigma",
    "calibrate_noise_multiplier",
    "gaussian_delta",
    "gaussian_sigma",
    "gaussian_sigma_classic",
    "laplace_scale",
    "zcdp_gaussian_sigma",
]

# The bracket searched by the root finders, in units of the sensitivity.
_SIGMA_MIN, _SIGMA_MAX = 1e-10, 1e10
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_QUAD_RTOL = 1e-13
# analytic_gaussian_sigma aims at δ·(1 − margin), a margin well above the evaluation
# error of δ(σ), so the exact δ of the returned σ is at most the requested one.
_SAFETY_MARGIN = 1e-11


def laplace_scale(sensitivity, epsilon):
    """Laplace scale b = Δ₁/ε for ε-DP ([DR14]_ Thm 3.6).

    Parameters
    ----------
    sensitivity : float
        ℓ1 sensitivity Δ₁, positive.
    epsilon : float
        Positive.

    Returns
    -------
    float
    """
    return _positive(sensitivity, "sensitivity") / _positive(epsilon, "epsilon")


def gaussian_sigma_classic(sensitivity, epsilon, delta):
    """Classic Gaussian calibration σ = Δ₂ √(2 ln(1.25/δ)) / ε ([DR14]_ Thm A.1).

    Valid for ε < 1 only; :func:`analytic_gaussian_sigma` is smaller and valid for all ε.

    Parameters
    ----------
    sensitivity : float
        ℓ2 sensitivity Δ₂, positive.
    epsilon : float
        In (0, 1).
    delta : float
        In (0, 1).

    Returns
    -------
    float
    """
    sensitivity = _positive(sensitivity, "sensitivity")
    epsilon = _positive(epsilon, "epsilon")
    delta = _delta(delta, allow_zero=False)
    if epsilon >= 1:
        raise ValueError(
            f"epsilon must be < 1 for the classic Gaussian mechanism (Dwork & Roth 2014, "
            f"Thm A.1), got {epsilon!r}; use analytic_gaussian_sigma for any epsilon"
        )
    return sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / epsilon


def _log_gaussian_delta(sigma, sensitivity, epsilon):
    """log δ(σ) of [BW18]_ Thm 8, δ = Φ(a) − e^ε Φ(a − Δ/σ) with a = Δ/(2σ) − εσ/Δ.

    That difference loses about |a|σ/Δ ulps to cancellation (3e-8 relative in far
    tails), so it is evaluated in its privacy-loss form: δ = E[(1 − e^{ε−L})₊] with
    L ∼ N(η, 2η), η = Δ²/(2σ²) ([BW18] Lemma 3). With L = ε + (Δ/σ)w this is
    δ = ∫₀^∞ (1 − e^{−(Δ/σ)w}) φ(w − a) dw, a positive integrand, integrated by adaptive
    Gauss–Kronrod to ~1e-13 relative; for a ≤ 0, φ(w − a) = φ(a)·e^{aw − w²/2} keeps
    log δ finite even where δ underflows.
    """
    s = sensitivity / sigma
    a = 0.5 * s - epsilon / s
    if a > 0:
        log_scale, upper, points = -_LOG_SQRT_2PI, a + 40.0, [a]

        def integrand(w):
            return -math.expm1(-s * w) * math.exp(-0.5 * (w - a) ** 2)
    else:  # mass within w ≲ 1/|a|; e^{aw − w²/2} < e^{−80} beyond `upper`
        log_scale, upper, points = -0.5 * a * a - _LOG_SQRT_2PI, 80.0 / max(2.0, -a), None

        def integrand(w):
            return -math.expm1(-s * w) * math.exp(a * w - 0.5 * w * w)
    value, _ = integrate.quad(integrand, 0.0, upper, points=points, epsabs=0.0,
                              epsrel=_QUAD_RTOL, limit=200)
    return log_scale + math.log(value) if value > 0 else -math.inf


def gaussian_delta(sigma, sensitivity, epsilon):
    """Exact δ of the Gaussian mechanism N(0, σ²) at ε ([BW18]_ Thm 8).

    Parameters
    ----------
    sigma : float
        Noise standard deviation, positive.
    sensitivity : float
        ℓ2 sensitivity, positive.
    epsilon : float
        Non-negative.

    Returns
    -------
    float
        δ in [0, 1]: the mechanism is (ε, δ)-DP for this δ and no smaller one.
    """
    sigma = _positive(sigma, "sigma")
    sensitivity = _positive(sensitivity, "sensitivity")
    epsilon = _nonnegative(epsilon, "epsilon")
    return min(1.0, math.exp(_log_gaussian_delta(sigma, sensitivity, epsilon)))


def analytic_gaussian_sigma(sensitivity, epsilon, delta):
    """Smallest σ for which the Gaussian mechanism is (ε, δ)-DP ([BW18]_ Thm 8).

    δ(σ) of :func:`gaussian_delta` decreases in σ; log δ(σ) = log(δ(1 − 1e-11)) is
    bracketed and solved by Brent's method in log σ, then σ is nudged up by ulps until
    it holds. The 1e-11 margin exceeds the ~1e-13 evaluation error of δ(σ), so the
    returned σ is on the safe side while meeting the equation to ~1e-11.

    Parameters
    ----------
    sensitivity : float
        ℓ2 sensitivity, positive.
    epsilon : float
        Positive (any value, unlike the classic calibration).
    delta : float
        In (0, 1).

    Returns
    -------
    float

    Examples
    --------
    >>> round(analytic_gaussian_sigma(1.0, 1.0, 1e-5), 4)
    3.7306
    """
    return _analytic_gaussian_sigma(_positive(sensitivity, "sensitivity"),
                                    _positive(epsilon, "epsilon"),
                                    _delta(delta, allow_zero=False))


# A pure function of three floats, and a root find: cached, because the bias-reduced
# SGD (Ghazi et al. 2024 Algorithm 5) calibrates a mean of each batch size at every step.
@functools.lru_cache(maxsize=4096)
def _analytic_gaussian_sigma(sensitivity, epsilon, delta):
    target = math.log(delta) + math.log1p(-_SAFETY_MARGIN)

    def excess(log_sigma):
        return _log_gaussian_delta(math.exp(log_sigma), sensitivity, epsilon) - target

    # Start at the classic formula's scale and double / halve until δ(σ) brackets δ.
    lo = hi = math.log(sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / epsilon)
    while excess(lo) <= 0:
        lo -= math.log(2)
    while excess(hi) > 0:
        hi += math.log(2)
    x = optimize.brentq(excess, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps)
    sigma = math.exp(x)
    while excess(math.log(sigma)) > 0:  # brentq may stop on either side of the root
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def gaussian_sigma(sensitivity, epsilon, delta, calibration="analytic"):
    """σ of an (ε, δ)-DP Gaussian mechanism for ℓ2 sensitivity Δ₂, by ``calibration``.

    ``"analytic"``: :func:`analytic_gaussian_sigma` (Balle and Wang 2018; valid for
    every ε, tighter). ``"classic"``: :func:`gaussian_sigma_classic`, the formula the
    seeds state (Dwork and Roth 2014, Thm A.1; ε < 1).
    """
    if calibration == "analytic":
        return analytic_gaussian_sigma(sensitivity, epsilon, delta)
    if calibration == "classic":
        return gaussian_sigma_classic(sensitivity, epsilon, delta)
    raise ValueError(f"calibration must be 'analytic' or 'classic', got {calibration!r}.")


def zcdp_gaussian_sigma(sensitivity, rho):
    """σ = Δ₂/√(2ρ): the Gaussian mechanism is ρ-zCDP ([BS16]_ Prop. 1.6).

    Parameters
    ----------
    sensitivity : float
        ℓ2 sensitivity, positive.
    rho : float
        Positive.

    Returns
    -------
    float
    """
    return _positive(sensitivity, "sensitivity") / math.sqrt(2 * _positive(rho, "rho"))


def calibrate_noise_multiplier(curve_of_sigma, epsilon, delta, *, rtol=1e-6):
    """Smallest noise multiplier whose RDP curve converts to at most ε at δ.

    Parameters
    ----------
    curve_of_sigma : callable
        σ ↦ :class:`~skdpsparse.accounting.RdpCurve`, e.g.
        ``lambda s: steps * poisson_subsampled_gaussian_rdp(q, s)``; its ε must not
        increase with σ.
    epsilon : float
        Target ε, positive.
    delta : float
        Target δ in (0, 1).
    rtol : float, default=1e-6
        Relative precision of σ.

    Returns
    -------
    float
        σ* with ``curve_of_sigma(σ*).to_epsilon(delta)[0] <= epsilon`` and no σ below
        σ*/(1 + rtol) meeting it (for a monotone curve family).

    Raises
    ------
    ValueError
        If no σ up to 1e10 meets the target, or every σ down to 1e-10 does (the curve
        then hardly depends on σ).

    Examples
    --------
    >>> from skdpsparse.accounting import poisson_subsampled_gaussian_rdp
    >>> sigma = calibrate_noise_multiplier(
    ...     lambda s: 1000 * poisson_subsampled_gaussian_rdp(0.01, s), 1.0, 1e-5)
    >>> round(sigma, 4)
    1.5131

    Notes
    -----
    Bracket expansion by factors of 2 from σ = 1, then bisection in log σ keeping
    ε(lo) > target ≥ ε(hi); ``hi`` is returned, so the target is always met.
    """
    epsilon = _positive(epsilon, "epsilon")
    delta = _delta(delta, allow_zero=False)
    rtol = _real(rtol, "rtol")
    if not 0 < rtol < 1:
        raise ValueError(f"rtol must be in (0, 1), got {rtol!r}")

    def meets(sigma):
        curve = curve_of_sigma(sigma)
        if not isinstance(curve, RdpCurve):
            raise TypeError(f"curve_of_sigma must return an RdpCurve, got {type(curve).__name__}")
        return curve.to_epsilon(delta)[0] <= epsilon

    lo = hi = 1.0
    if meets(1.0):
        while meets(lo):
            if lo < _SIGMA_MIN:
                raise ValueError(
                    f"every noise multiplier down to {_SIGMA_MIN:g} meets epsilon={epsilon!r} "
                    f"at delta={delta!r}: the curve hardly depends on sigma"
                )
            hi, lo = lo, lo / 2
    else:
        while not meets(hi):
            if hi > _SIGMA_MAX:
                raise ValueError(
                    f"no noise multiplier up to {_SIGMA_MAX:g} meets epsilon={epsilon!r} at "
                    f"delta={delta!r}"
                )
            lo, hi = hi, hi * 2
    while hi / lo - 1 > rtol:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if meets(mid) else (mid, hi)
    return hi
