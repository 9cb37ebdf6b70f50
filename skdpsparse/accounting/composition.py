"""Composing privacy events: the tightest valid bound this library can certify.

:func:`compose_events` turns a sequence of privacy events
(:mod:`skdpsparse.accounting.events`) into one (ε, δ)-DP (or pure ε-DP) guarantee,
taking the smallest ε among the composition theorems that apply:

* **continuous Gaussians: exact.** k Gaussian mechanisms with noise multipliers z_i
  compose to exactly μ-Gaussian DP with μ = √(Σ 1/z_i²) ([DRS19]_ Cor. 3.3), whose
  (ε, δ) curve is δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) ([DRS19]_ Cor. 2.13, the
  curve of [BW18]_ Thm 8): :func:`gaussian_dp_epsilon` inverts it. No accountant can
  certify less, and the privacy-loss-distribution accountants approach it from above;
* **zCDP**: ρ adds ([BS16]_ Lemma 2.3; Gaussians, discrete Gaussians ([CKS20]_),
  zCDP releases, and pure ε-DP releases as ε²/2-zCDP) and converts with the tight
  conversion of [CKS20]_ Cor. 13;
* **Rényi DP**: curves add at every order ([M17]_ Prop. 1; Laplace, randomized
  response for pure releases, subsampled Gaussians) and convert with
  :func:`~skdpsparse.accounting.rdp_to_epsilon`;
* **basic composition**: pure ε's add; opaque (ε, δ) releases (an (ε, δ) budget
  with no event) add in ε and δ and are composed with the rest this way only.

Mixtures combine these by basic composition of the parts: the opaque releases take
their δs off the target, and the continuous Gaussians may be composed exactly on
their own with a share of the remaining δ while the rest uses RDP or zCDP with the
other share (several shares are tried; each is a valid bound, so the smallest is).

Adaptivity. Every rule above is a composition theorem for mechanisms chosen one
after the other (each may depend on the earlier outputs). When the *privacy
parameters* themselves are chosen adaptively and a limit stops the sequence (a
privacy filter), the rules proven to stay valid are basic composition (Rogers, Roth,
Ullman and Vadhan 2016, "Privacy odometers and filters"), the ρ sum of zCDP (Feldman
and Zrnic 2021, "Individual privacy accounting via a Rényi filter", at every order)
and the μ² sum of Gaussian DP (Smith and Thakurta 2022, "Fully adaptive composition
for Gaussian differential privacy"); the RDP bound optimised over orders after the
fact and the δ-share combinations are not covered by those theorems.

References
----------
.. [BS16] M. Bun, T. Steinke. Concentrated differential privacy. TCC 2016.
.. [BW18] B. Balle, Y.-X. Wang. Improving the Gaussian mechanism for differential
   privacy: analytical calibration and optimal denoising. ICML 2018.
.. [CKS20] C. Canonne, G. Kamath, T. Steinke. The discrete Gaussian for differential
   privacy. NeurIPS 2020.
.. [DRS19] J. Dong, A. Roth, W. Su. Gaussian differential privacy. arXiv:1905.02383,
   2019.
.. [M17] I. Mironov. Rényi differential privacy. CSF 2017.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import optimize

from .budget import (
    _TINY_EPSILON,
    ZCDP,
    ApproxDP,
    PrivacyEvent,
    PureDP,
    _delta,
    _nonnegative,
    zcdp_to_epsilon,
)
from .calibrate import _log_gaussian_delta
from .rdp import DEFAULT_ORDERS, rdp_to_epsilon

__all__ = [
    "compose_events",
    "events_pure_epsilon",
    "events_zcdp_rho",
    "gaussian_dp_delta",
    "gaussian_dp_epsilon",
    "implied_by",
    "with_event",
]

# gaussian_dp_epsilon aims at δ·(1 − margin): the margin exceeds the ~1e-13 relative
# error of evaluating δ(ε), so the returned ε certifies the requested δ.
_SAFETY_MARGIN = 1e-11
# Shares of the δ left for the continuous Gaussians when they are composed exactly
# beside other events (the rest gets 1 − share).
_GAUSSIAN_SHARES = (0.5, 0.8, 0.9, 0.97, 0.99, 0.999)


# ------------------------------------------------------------------ exact Gaussian DP
def gaussian_dp_delta(mu, epsilon):
    """δ(ε) of μ-Gaussian DP: Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2).

    Dong, Roth and Su 2019 ("Gaussian differential privacy", Cor. 2.13); the same curve
    as a Gaussian mechanism with Δ/σ = μ (Balle and Wang 2018, "Improving the Gaussian
    mechanism for differential privacy", Thm 8), evaluated
    without cancellation by :func:`~skdpsparse.accounting.gaussian_delta`'s route.

    Parameters
    ----------
    mu : float
        Non-negative; μ = 0 gives 0.
    epsilon : float
        Non-negative.

    Returns
    -------
    float
        δ in [0, 1].
    """
    mu = _nonnegative(mu, "mu")
    epsilon = _nonnegative(epsilon, "epsilon")
    if mu == 0:
        return 0.0
    return min(1.0, math.exp(_log_gaussian_delta(1.0, mu, epsilon)))


def gaussian_dp_epsilon(mu, delta):
    """Smallest ε with (ε, δ)-DP for μ-Gaussian DP: the exact inverse of its curve.

    Solves log δ(ε) = log(δ(1 − 1e-11)) by Brent's method on [0, ε_zCDP], where
    ε_zCDP = ρ + 2√(ρ log(1/δ)) with ρ = μ²/2 (μ-GDP implies μ²/2-zCDP, and that is
    Bun and Steinke 2016, Prop. 1.3), then nudges ε up by ulps until δ(ε) is at most the target.

    Parameters
    ----------
    mu : float
        Non-negative.
    delta : float
        In (0, 1).

    Returns
    -------
    float
        ε ≥ 0.

    Examples
    --------
    Ten Gaussian mechanisms with noise multiplier 4.2247 (each (1, 1e-6)-DP):

    >>> round(gaussian_dp_epsilon(math.sqrt(10) / 4.224678889328888, 1e-5), 4)
    3.1398
    """
    mu = _nonnegative(mu, "mu")
    delta = _delta(delta, allow_zero=False)
    target = math.log(delta) + math.log1p(-_SAFETY_MARGIN)

    def excess(eps):
        return _log_gaussian_delta(1.0, mu, eps) - target

    if mu == 0 or excess(0.0) <= 0:
        return 0.0
    rho = mu * mu / 2
    hi = rho + 2.0 * math.sqrt(rho * -math.log(delta))
    while excess(hi) > 0:  # only by rounding: the zCDP bound is valid
        hi = 2.0 * hi + 1e-12
        if hi > 1e12:
            return math.inf
    eps = optimize.brentq(excess, 0.0, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps)
    while excess(eps) > 0:  # brentq may stop on either side of the root
        eps = math.nextafter(eps, math.inf)
    return eps


# ------------------------------------------------------------------------- partitions
def _leaves(events):
    """Elementary events with multiplicities, equal events merged."""
    counts = {}
    for event in events:
        if not isinstance(event, PrivacyEvent):
            raise TypeError(f"not a privacy event: {event!r}")
        for leaf, k in event.leaves():
            counts[leaf] = counts.get(leaf, 0) + k
    return list(counts.items())


def _sum_or_none(values):
    """Σ of the values, or None if one of them is None."""
    total = 0.0
    for v in values:
        if v is None:
            return None
        total += v
    return total


def events_pure_epsilon(events):
    """Σ ε when every event is pure ε-DP (basic composition), else None."""
    return _sum_or_none(None if leaf.pure_epsilon is None else k * leaf.pure_epsilon
                        for leaf, k in _leaves(events))


def events_zcdp_rho(events):
    """Σ ρ when every event is ρ-zCDP (Bun and Steinke 2016, Lemma 2.3), else None."""
    return _sum_or_none(None if leaf.zcdp_rho is None else k * leaf.zcdp_rho
                        for leaf, k in _leaves(events))


# -------------------------------------------------------------- bounds for the parts
def _rdp_epsilon(leaves, delta):
    """ε from the sum of the RDP curves, or inf if one event has none."""
    total = np.zeros(DEFAULT_ORDERS.size)
    for leaf, k in leaves:
        curve = leaf.rdp(DEFAULT_ORDERS)  # every default order is > 1
        if curve is None:
            return math.inf
        total += k * np.asarray(curve)
    return rdp_to_epsilon(DEFAULT_ORDERS, total, delta)[0]


def _zcdp_epsilon(leaves, delta):
    """ε from the sum of ρ (tight conversion), or inf if one event is not zCDP."""
    rho = _sum_or_none(None if leaf.zcdp_rho is None else k * leaf.zcdp_rho
                       for leaf, k in leaves)
    return math.inf if rho is None else zcdp_to_epsilon(rho, delta)


def _split_pure(leaves):
    pure = [(leaf, k) for leaf, k in leaves if leaf.pure_epsilon is not None]
    other = [(leaf, k) for leaf, k in leaves if leaf.pure_epsilon is None]
    return sum(k * leaf.pure_epsilon for leaf, k in pure), other


def _non_gaussian_epsilon(leaves, delta):
    """Smallest ε of the RDP, zCDP and "pure by basic composition" routes, at δ ≥ 0."""
    pure_sum, other = _split_pure(leaves)
    if not other:
        if delta == 0:
            return pure_sum
        return min(pure_sum, _rdp_epsilon(leaves, delta), _zcdp_epsilon(leaves, delta))
    if delta == 0:
        return math.inf
    candidates = [_rdp_epsilon(leaves, delta), _zcdp_epsilon(leaves, delta)]
    if pure_sum > 0:  # pure releases by basic composition, the rest as RDP / zCDP
        candidates += [pure_sum + _rdp_epsilon(other, delta),
                       pure_sum + _zcdp_epsilon(other, delta)]
    return min(candidates)


def _rest_epsilon(leaves, delta):
    """ε of the non-opaque events at δ ≥ 0 (the smallest of the valid bounds)."""
    gauss = [(leaf, k) for leaf, k in leaves if leaf.gdp_mu2 is not None]
    rest = [(leaf, k) for leaf, k in leaves if leaf.gdp_mu2 is None]
    best = _non_gaussian_epsilon(leaves, delta)
    if not gauss or delta == 0:
        return best
    mu = math.sqrt(sum(k * leaf.gdp_mu2 for leaf, k in gauss))
    if not rest:
        return min(best, gaussian_dp_epsilon(mu, delta))
    if _non_gaussian_epsilon(rest, 0.0) < math.inf:  # the rest is pure: all δ to μ
        best = min(best, gaussian_dp_epsilon(mu, delta) + _non_gaussian_epsilon(rest, 0.0))
    for share in _GAUSSIAN_SHARES:
        best = min(best, gaussian_dp_epsilon(mu, share * delta)
                   + _non_gaussian_epsilon(rest, (1.0 - share) * delta))
    return best


# ------------------------------------------------------------------------ the total
def compose_events(events, delta=None):
    """The composed guarantee of a sequence of privacy events (see the module notes).

    Parameters
    ----------
    events : iterable of PrivacyEvent
    delta : float, optional
        Target δ in [0, 1). Without it (or with 0), every event must be pure.

    Returns
    -------
    PureDP or ApproxDP or None
        ``PureDP(Σ ε)`` when ``delta`` is None and every event is pure; otherwise
        ``ApproxDP(ε, delta)`` with the smallest ε certified; None for no events.

    Raises
    ------
    ValueError
        If ``delta`` is missing for non-pure events, or does not exceed the opaque
        (ε, δ) events' total δ when other non-pure events need a share of it.

    Examples
    --------
    >>> from skdpsparse.accounting import GaussianEvent
    >>> print(compose_events([GaussianEvent(4.224678889328888)] * 10, 1e-5))
    (3.13976, 1e-05)-DP
    """
    leaves = _leaves(events)
    if not leaves:
        return None
    pure = events_pure_epsilon([leaf for leaf, _ in leaves]) is not None
    if delta is None:
        if not pure:
            raise ValueError("the total of non-pure events needs a target delta.")
        return PureDP(sum(k * leaf.pure_epsilon for leaf, k in leaves))
    delta = _delta(delta)
    opaque = [(leaf, k) for leaf, k in leaves if leaf.approx is not None]
    rest = [(leaf, k) for leaf, k in leaves if leaf.approx is None]
    eps_opaque = sum(k * leaf.approx[0] for leaf, k in opaque)
    delta_left = delta - sum(k * leaf.approx[1] for leaf, k in opaque)
    if delta_left < 0 or (delta_left == 0 and _rest_epsilon(rest, 0.0) == math.inf):
        raise ValueError(
            f"delta={delta} leaves nothing for the events that need a share of it "
            f"after the (epsilon, delta) events' total delta {delta - delta_left:g}.")
    eps_rest = _rest_epsilon(rest, delta_left) if rest else 0.0
    return ApproxDP(max(eps_opaque + eps_rest, _TINY_EPSILON), delta)


# Relative slack when checking that an event implies its budget: the budget and the
# event's guarantee come from different numerical routes (root finds to ~1e-12).
_IMPLIES_RTOL = 1e-9


def implied_by(event, budget):
    """True if ``event``'s guarantee implies ``budget`` (up to 1e-9 relative).

    ``PureDP(ε)`` needs a pure ε' ≤ ε; ``ZCDP(ρ)`` a zCDP ρ' ≤ ρ; ``ApproxDP(ε, δ)``
    that the event, composed on its own by :func:`compose_events` at δ, gives at most ε.
    """
    slack = 1.0 + _IMPLIES_RTOL
    if isinstance(budget, PureDP) or (isinstance(budget, ApproxDP) and budget.delta == 0):
        eps = events_pure_epsilon([event])
        return eps is not None and eps <= budget.epsilon * slack
    if isinstance(budget, ZCDP):
        rho = events_zcdp_rho([event])
        return rho is not None and rho <= budget.rho * slack
    try:
        total = compose_events([event], budget.delta)
    except ValueError:
        return False
    return total.epsilon <= budget.epsilon * slack


def with_event(budget, event):
    """``budget`` carrying ``event``, the mechanism that produced it.

    The budget's value, ``==``, ``repr`` and ``str`` are unchanged; an accountant that
    understands events (the privacy ledger) composes the event instead of the budget.

    Parameters
    ----------
    budget : PureDP, ApproxDP or ZCDP
        What the release reports.
    event : PrivacyEvent
        What it ran; its guarantee must imply ``budget``.

    Returns
    -------
    PureDP, ApproxDP or ZCDP
        A copy of ``budget`` with ``.event`` set.

    Raises
    ------
    ValueError
        If the event does not imply the budget (a mis-described mechanism: composing
        its event would understate the privacy loss).

    Examples
    --------
    >>> from skdpsparse.accounting import ApproxDP, GaussianEvent, analytic_gaussian_sigma
    >>> z = analytic_gaussian_sigma(1.0, 1.0, 1e-6)
    >>> b = with_event(ApproxDP(1.0, 1e-6), GaussianEvent(z))
    >>> b == ApproxDP(1.0, 1e-6), type(b.event).__name__
    (True, 'GaussianEvent')
    """
    if not isinstance(event, PrivacyEvent):
        raise TypeError(f"event must be a PrivacyEvent, got {event!r}")
    if not isinstance(budget, (PureDP, ApproxDP, ZCDP)):
        raise TypeError(f"not a privacy budget: {budget!r}")
    if not implied_by(event, budget):
        raise ValueError(f"{event!r} does not imply {budget}: the event must describe "
                         "the mechanism that produced the budget.")
    return dataclasses.replace(budget, event=event)
