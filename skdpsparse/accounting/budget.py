"""Privacy budgets and the conversions between them.

Three immutable value objects -- :class:`PureDP`, :class:`ApproxDP` and :class:`ZCDP` --
with basic composition (``+``, ``* k``), a partial order ("at most as much privacy
loss") and the conversions

* ε-DP → ε²/2-zCDP (Bun & Steinke 2016, Prop. 1.4) and → (ε, 0)-DP;
* ρ-zCDP → (ε, δ)-DP, either the simple bound of Bun & Steinke 2016 (Prop. 1.3) or
  the tight one of Canonne, Kamath & Steinke 2020 (Cor. 13).

A budget may carry the privacy event that produced it (``event``; not compared: two
budgets with the same values are equal), which an event-aware accountant composes
more tightly than the values (:mod:`skdpsparse.accounting.events`).

No data enters this module, only numbers.

References
----------
.. [BS16] M. Bun, T. Steinke. Concentrated differential privacy: simplifications,
   extensions, and lower bounds. TCC 2016. arXiv:1605.02065.
.. [CKS20] C. Canonne, G. Kamath, T. Steinke. The discrete Gaussian for differential
   privacy. NeurIPS 2020. arXiv:2004.00010 (v4 numbering).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize

from ..exceptions import InvalidParameterError

__all__ = [
    "ApproxDP",
    "PrivacyEvent",
    "PureDP",
    "ZCDP",
    "approx_dp_to_zcdp",
    "zcdp_to_delta",
    "zcdp_to_epsilon",
]

# Smallest ε a conversion reports: budgets require ε > 0, while a conversion may prove
# (0, δ)-DP; reporting the tiniest positive float keeps the guarantee true.
_TINY_EPSILON = float(np.finfo(float).tiny)


# --------------------------------------------------------------------------- validation
def _real(value, name):
    """Return ``value`` as a Python float; reject bools and non-numbers (TypeError)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise InvalidParameterError(
            f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    return float(value)


def _positive(value, name):
    v = _real(value, name)
    if not (v > 0 and math.isfinite(v)):
        raise InvalidParameterError(f"{name} must be positive and finite, got {value!r}")
    return v


def _nonnegative(value, name):
    v = _real(value, name)
    if not (v >= 0 and math.isfinite(v)):
        raise InvalidParameterError(f"{name} must be non-negative and finite, got {value!r}")
    return v


def _delta(value, name="delta", *, allow_zero=True):
    v = _real(value, name)
    if allow_zero and not 0 <= v < 1:
        raise InvalidParameterError(f"{name} must be in [0, 1), got {value!r}")
    if not allow_zero and not 0 < v < 1:
        raise InvalidParameterError(f"{name} must be in (0, 1), got {value!r}")
    return v


def _count(k):
    """A composition count: a positive Python or NumPy integer, not a bool."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral):
        raise TypeError(f"a budget can only be multiplied by a positive int, got {k!r}")
    if k < 1:
        raise ValueError(f"a budget can only be multiplied by a positive int, got {k!r}")
    return int(k)


def _g(x):
    return f"{x:g}"


# ----------------------------------------------------------------------- the events' type
class PrivacyEvent:
    """Base class of the privacy events (immutable records of a mechanism run).

    Subclasses are frozen dataclasses. Elementary events override the guarantee
    properties (``gdp_mu2``, ``zcdp_rho``, ``pure_epsilon``, ``approx``) and
    :meth:`rdp`; composite events override :meth:`leaves`.
    """

    __slots__ = ()

    gdp_mu2 = None
    zcdp_rho = None
    pure_epsilon = None
    approx = None

    def rdp(self, orders=None):  # noqa: ARG002 - overridden
        """RDP bounds at ``orders`` (the events' default: ``accounting.DEFAULT_ORDERS``),
        or None if the event has none."""
        return None

    def leaves(self):
        """The elementary events, as ``(event, multiplicity)`` pairs."""
        return [(self, 1)]

    def to_dict(self):
        """A JSON-serialisable description; :func:`~skdpsparse.accounting.event_from_dict`
        inverts it."""
        out = {"type": type(self).__name__}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, PrivacyEvent):
                value = value.to_dict()
            elif isinstance(value, tuple):
                value = [v.to_dict() for v in value]
            out[f.name] = value
        return out


def _check_event(event):
    """``event`` is None or a privacy event (see :mod:`skdpsparse.accounting.events`)."""
    if event is not None and not isinstance(event, PrivacyEvent):
        raise TypeError(f"event must be a PrivacyEvent or None, got {event!r}")


# ------------------------------------------------------------------------------ budgets
class _Budget:
    """Shared arithmetic and ordering of the budget types (not public)."""

    __slots__ = ()

    def _values(self):  # the parameters, in the order they are compared
        raise NotImplementedError

    def _same_type(self, other, what):
        """True for the same type, False for a non-budget; TypeError for a mixed pair."""
        if not isinstance(other, _Budget):
            return False
        if type(other) is not type(self):
            raise TypeError(
                f"cannot {what} {type(self).__name__} and {type(other).__name__}; "
                "convert one of them first (e.g. .to_zcdp() or .to_approx_dp())"
            )
        return True

    def __add__(self, other):
        if not self._same_type(other, "compose"):
            return NotImplemented
        return type(self)(*(a + b for a, b in zip(self._values(), other._values())))

    def __radd__(self, other):
        # Lets ``sum(budgets)`` start from 0.
        if isinstance(other, numbers.Integral) and not isinstance(other, bool) and other == 0:
            return self
        return NotImplemented

    def __mul__(self, k):
        k = _count(k)  # k-fold basic composition
        return type(self)(*(k * a for a in self._values()))

    __rmul__ = __mul__

    def __le__(self, other):
        if not self._same_type(other, "compare"):
            return NotImplemented
        return all(a <= b for a, b in zip(self._values(), other._values()))

    def __ge__(self, other):
        if not self._same_type(other, "compare"):
            return NotImplemented
        return all(a >= b for a, b in zip(self._values(), other._values()))

    def __lt__(self, other):
        le = self.__le__(other)
        return le if le is NotImplemented else (le and self != other)

    def __gt__(self, other):
        ge = self.__ge__(other)
        return ge if ge is NotImplemented else (ge and self != other)


@dataclass(frozen=True, slots=True)
class PureDP(_Budget):
    """Pure ε-differential privacy.

    Parameters
    ----------
    epsilon : float
        Privacy loss bound, positive and finite.
    event : PrivacyEvent, optional (keyword only)
        The mechanism that produced this budget (see
        :mod:`skdpsparse.accounting.events`; set it with
        :func:`~skdpsparse.accounting.with_event`, which checks it). Not part of ``==``,
        ``hash`` or ``repr``.

    Notes
    -----
    ``+`` is basic composition (ε adds), ``b * k`` the k-fold one; ``<=`` means "at most
    as much privacy loss". Arithmetic drops ``event`` (the sum is a valid bound on its
    own).

    Examples
    --------
    >>> PureDP(0.5) + PureDP(0.25)
    PureDP(epsilon=0.75)
    >>> print(PureDP(1.0).to_zcdp())
    0.5-zCDP
    """

    epsilon: float
    event: object = field(default=None, compare=False, repr=False, kw_only=True)

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _positive(self.epsilon, "epsilon"))
        _check_event(self.event)

    def _values(self):
        return (self.epsilon,)

    def __str__(self):
        return f"{_g(self.epsilon)}-DP"

    def to_zcdp(self):
        """ε-DP implies ε²/2-zCDP ([BS16]_, Prop. 1.4).

        Returns
        -------
        ZCDP
        """
        return ZCDP(self.epsilon**2 / 2)

    def to_approx_dp(self):
        """ε-DP is (ε, 0)-DP.

        Returns
        -------
        ApproxDP
        """
        return ApproxDP(self.epsilon, 0.0)


@dataclass(frozen=True, slots=True)
class ApproxDP(_Budget):
    """Approximate (ε, δ)-differential privacy.

    Parameters
    ----------
    epsilon : float
        Positive and finite.
    delta : float
        In [0, 1).
    event : PrivacyEvent, optional (keyword only)
        The mechanism that produced this budget (as for :class:`PureDP`).

    Notes
    -----
    ``+`` is basic composition (ε and δ add); the order is componentwise.

    Examples
    --------
    >>> ApproxDP(1.0, 1e-6)
    ApproxDP(epsilon=1.0, delta=1e-06)
    >>> print(ApproxDP(1.0, 1e-6) * 2)
    (2, 2e-06)-DP
    """

    epsilon: float
    delta: float
    event: object = field(default=None, compare=False, repr=False, kw_only=True)

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _positive(self.epsilon, "epsilon"))
        object.__setattr__(self, "delta", _delta(self.delta))
        _check_event(self.event)

    def _values(self):
        return (self.epsilon, self.delta)

    def __str__(self):
        return f"({_g(self.epsilon)}, {_g(self.delta)})-DP"


@dataclass(frozen=True, slots=True)
class ZCDP(_Budget):
    """ρ-zero-concentrated differential privacy ([BS16]_, Def. 1.1).

    Parameters
    ----------
    rho : float
        Positive and finite.
    event : PrivacyEvent, optional (keyword only)
        The mechanism that produced this budget (as for :class:`PureDP`).

    Examples
    --------
    >>> ZCDP(0.5) + ZCDP(0.5)
    ZCDP(rho=1.0)
    >>> round(ZCDP(0.5).to_approx_dp(1e-6).epsilon, 4)
    5.2215
    """

    rho: float
    event: object = field(default=None, compare=False, repr=False, kw_only=True)

    def __post_init__(self):
        object.__setattr__(self, "rho", _positive(self.rho, "rho"))
        _check_event(self.event)

    def _values(self):
        return (self.rho,)

    def __str__(self):
        return f"{_g(self.rho)}-zCDP"

    def to_approx_dp(self, delta, method="tight"):
        """The (ε, δ)-DP guarantee implied by ρ-zCDP at a given δ > 0.

        Parameters
        ----------
        delta : float
            In (0, 1); zCDP implies no guarantee with δ = 0.
        method : {"tight", "simple"}
            See :func:`zcdp_to_epsilon`.

        Returns
        -------
        ApproxDP
        """
        if _real(delta, "delta") == 0:
            raise ValueError("delta must be positive: zCDP implies no (epsilon, 0)-DP guarantee")
        eps = zcdp_to_epsilon(self.rho, delta, method=method)
        return ApproxDP(max(eps, _TINY_EPSILON), delta)


# --------------------------------------------------------------- zCDP <-> (ε, δ)-DP
def _eps_at_order(alpha, rdp, log_delta):
    """ε of (α, rdp)-RDP at δ: [CKS20]_ Prop. 12 solved for ε (also Balle et al. 2020,
    Thm 21): ε = rdp + log((α−1)/α) − (log δ + log α)/(α−1), for α > 1."""
    return rdp + np.log1p(-1.0 / alpha) - (log_delta + np.log(alpha)) / (alpha - 1.0)


def _minimise_over_order(fun, center):
    """Minimise ``fun(α)`` over α > 1, parametrised as α = 1 + exp(u).

    A grid of u over ±12 around ``center`` (the log of α − 1 where the minimum is
    expected; re-centred while the minimum sits on an edge) locates the basin, bounded
    Brent refines it; the smaller of the two values is returned, with its α. ``fun``
    must accept arrays.
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for _ in range(8):
            u = center + np.linspace(-12.0, 12.0, 481)
            values = np.nan_to_num(fun(1.0 + np.exp(u)), nan=np.inf)
            i = int(np.argmin(values))
            if 0 < i < u.size - 1 or not -30 < u[i] < 700:  # α − 1 < 1e-13: α → 1
                break
            center = u[i]
        best_u, best = u[i], float(values[i])
        res = optimize.minimize_scalar(
            lambda x: float(np.nan_to_num(fun(1.0 + np.exp(x)), nan=np.inf)),
            bounds=(u[max(i - 1, 0)], u[min(i + 1, u.size - 1)]),
            method="bounded",
            options={"xatol": 1e-12},
        )
    if res.fun < best:
        best_u, best = float(res.x), float(res.fun)
    return best, 1.0 + math.exp(best_u)


def zcdp_to_epsilon(rho, delta, method="tight"):
    """Smallest ε for which a conversion certifies that ρ-zCDP implies (ε, δ)-DP.

    Parameters
    ----------
    rho : float
        Non-negative and finite.
    delta : float
        In (0, 1).
    method : {"tight", "simple"}
        ``"simple"``: ε = ρ + 2√(ρ log(1/δ)) ([BS16]_, Prop. 1.3). ``"tight"``:
        ε = inf_{α>1} αρ + log(1 − 1/α) − (log δ + log α)/(α − 1), the inverse in ε of
        δ = inf_α exp((α−1)(αρ−ε))/(α−1) · (1−1/α)^α ([CKS20]_, Cor. 13), never above
        the simple bound.

    Returns
    -------
    float
        ε ≥ 0.
    """
    rho = _nonnegative(rho, "rho")
    delta = _delta(delta, allow_zero=False)
    if method not in ("tight", "simple"):
        raise ValueError(f"method must be 'tight' or 'simple', got {method!r}")
    if rho == 0:
        return 0.0
    if method == "simple":
        return rho + 2.0 * math.sqrt(rho * -math.log(delta))
    return _tight_zcdp_epsilon(rho, delta)


# The conversions are searches over the Rényi order (about 0.4 ms each) on public
# floats, repeated with the same arguments by every fit of one configuration: memoised
# (a float key is the exact value; the result is the same float).
@functools.lru_cache(maxsize=4096)
def _tight_zcdp_epsilon(rho, delta):
    log_inv_delta = -math.log(delta)
    simple = rho + 2.0 * math.sqrt(rho * log_inv_delta)
    # Centre the search at the optimal order of the simple bound, α−1 = √(log(1/δ)/ρ).
    tight, _ = _minimise_over_order(
        lambda a: _eps_at_order(a, a * rho, -log_inv_delta),
        0.5 * math.log(log_inv_delta / rho),
    )
    return max(0.0, min(tight, simple))


def zcdp_to_delta(rho, epsilon):
    """Smallest δ for which [CKS20]_ Cor. 13 certifies that ρ-zCDP implies (ε, δ)-DP.

    δ = inf_{α>1} exp((α−1)(αρ−ε) + α log(1−1/α) − log(α−1)), minimised in log space.

    Parameters
    ----------
    rho : float
        Non-negative and finite.
    epsilon : float
        Non-negative and finite.

    Returns
    -------
    float
        δ in [0, 1].
    """
    rho = _nonnegative(rho, "rho")
    epsilon = _nonnegative(epsilon, "epsilon")
    if rho == 0:
        return 0.0

    def log_delta(a):
        return (a - 1.0) * (a * rho - epsilon) + a * np.log1p(-1.0 / a) - np.log(a - 1.0)

    # (α−1)(αρ−ε) is smallest at α − 1 = (ε − ρ)/(2ρ).
    center = math.log(max((epsilon - rho) / (2.0 * rho), 1e-3))
    best, _ = _minimise_over_order(log_delta, center)
    return min(1.0, math.exp(best))


def approx_dp_to_zcdp(epsilon, delta):
    """Largest ρ whose tight zCDP → DP conversion stays within (ε, δ).

    This is a *budget split*, not an implication: (ε, δ)-DP does not imply any zCDP.
    It answers "how much ρ may a zCDP mechanism spend to be reported as (ε, δ)-DP".
    Since ρ ≤ (ε − c(α))/α at any single order α (with c the order terms of
    :func:`zcdp_to_epsilon`), the answer is ρ = sup_{α>1} (ε − c(α))/α; it is then
    lowered by ulps until ``zcdp_to_epsilon(ρ, δ) <= epsilon`` holds.

    Parameters
    ----------
    epsilon : float
        Positive and finite.
    delta : float
        In (0, 1); no ρ > 0 meets δ = 0.

    Returns
    -------
    float
        ρ > 0.
    """
    return _largest_rho(_positive(epsilon, "epsilon"), _delta(delta, allow_zero=False))


@functools.lru_cache(maxsize=4096)
def _largest_rho(epsilon, delta):
    log_delta = math.log(delta)

    def neg_rho(a):
        c = _eps_at_order(a, 0.0, log_delta)
        return -(epsilon - c) / a

    # Centre: the simple bound's inverse ρ₀ = (√(L+ε) − √L)², L = log(1/δ), and its order.
    L = -log_delta
    rho0 = (math.sqrt(L + epsilon) - math.sqrt(L)) ** 2
    best, _ = _minimise_over_order(neg_rho, 0.5 * math.log(L / rho0))
    rho = max(-best, rho0)
    while zcdp_to_epsilon(rho, delta) > epsilon:  # conservative side, a few ulps at most
        rho = math.nextafter(rho, 0.0) * (1 - 1e-15)
    return rho
