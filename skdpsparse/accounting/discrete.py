"""Calibration of the discrete noise the library draws (no data enters this module).

Every Gaussian noise vector of the library is a **discrete** Gaussian on a grid (see
:mod:`skdpsparse.mechanisms.noise`), so its guarantee is the discrete Gaussian's own,
not the continuous one's: adding independent discrete Gaussians N_ℤ(0, σ²) to an
integer-valued query of ℓ2 sensitivity Δ is (Δ²/(2σ²))-zCDP (Canonne, Kamath and
Steinke 2020, "The Discrete Gaussian for Differential Privacy", NeurIPS, Theorem 14,
the multivariate case), and ρ-zCDP implies (ε, δ)-DP by their tight conversion
(Corollary 13; :func:`~skdpsparse.accounting.zcdp_to_delta`). For the same (ε, δ)
this needs 6–9 % more σ than the analytic calibration of a *continuous* Gaussian
(Balle and Wang 2018), which no finite computer can sample.
"""

import functools
import math

from .budget import approx_dp_to_zcdp
from .calibrate import gaussian_sigma_classic

__all__ = ["discrete_gaussian_sigma"]


@functools.lru_cache(maxsize=4096)  # a root find per call; the bias-reduced SGD calls it per step
def discrete_gaussian_sigma(sensitivity, epsilon, delta, calibration="analytic"):
    """σ of an (ε, δ)-DP discrete Gaussian mechanism for ℓ2 sensitivity Δ.

    Parameters
    ----------
    sensitivity : float
        Δ > 0.
    epsilon : float
        Positive.
    delta : float
        In (0, 1).
    calibration : {"analytic", "classic"}, default="analytic"
        ``"analytic"``: the smallest σ whose ρ = Δ²/(2σ²) converts to (ε, δ) by the
        tight conversion. ``"classic"``: the formula Δ√(2 ln(1.25/δ))/ε that the
        papers state (Dwork and Roth 2014, Theorem A.1), or the analytic σ where that
        formula is too small for the discrete Gaussian (it is proved for the
        continuous one only).

    Returns
    -------
    float

    Examples
    --------
    >>> from skdpsparse.accounting.discrete import discrete_gaussian_sigma
    >>> round(discrete_gaussian_sigma(1.0, 1.0, 1e-6), 3)
    4.531
    """
    if calibration not in ("analytic", "classic"):
        raise ValueError(f"calibration must be 'analytic' or 'classic', got {calibration!r}.")
    rho = approx_dp_to_zcdp(epsilon, delta)  # ε, δ validated there
    sensitivity = float(sensitivity)
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"sensitivity must be positive and finite, got {sensitivity!r}.")
    sigma = sensitivity / math.sqrt(2.0 * rho)
    while sensitivity**2 / (2.0 * sigma**2) > rho:  # round σ up, never down
        sigma = math.nextafter(sigma, math.inf)
    if calibration == "classic":
        sigma = max(sigma, gaussian_sigma_classic(sensitivity, epsilon, delta))
    return sigma
