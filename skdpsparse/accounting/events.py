"""Privacy events: what a release *ran*, not only the (ε, δ) it reported.

A budget (:class:`~skdpsparse.accounting.PureDP`, ``ApproxDP``, ``ZCDP``) says what one
release is proven to satisfy. A *privacy event* says which mechanism produced it
(a Gaussian with noise multiplier z, run ``count`` times; a Laplace; a zCDP release;
...), and so lets an accountant compose many releases far more tightly than by adding
their budgets: ten Gaussian releases, each calibrated to (1, 1e-6)-DP, are
(3.14, 1e-5)-DP together, where basic composition says (10, 1e-5).
:func:`~skdpsparse.accounting.compose_events` is that accountant.

The event classes follow the shape of the events of Google's ``dp_accounting``
library (one immutable record per mechanism, plus composed and sampled wrappers).
Every noise parameter is *sensitivity-normalised*: ``noise_multiplier`` is the noise
scale divided by the sensitivity under the library's neighbouring relation
(replacement of one row), so an event carries no data-dependent number.

Each elementary event exposes the guarantees it has, in the forms the accountant
combines (``None`` where the event has no such guarantee):

* ``gdp_mu2`` -- μ² of μ-Gaussian DP (Dong, Roth and Su 2019): continuous Gaussians
  only, for which it is exact;
* ``zcdp_rho`` -- ρ of ρ-zCDP (Bun and Steinke 2016);
* ``pure_epsilon`` -- ε of pure ε-DP;
* ``rdp(orders)`` -- Rényi DP bounds at the given orders (Mironov 2017);
* ``approx`` -- an opaque (ε, δ) pair, composed by basic composition only.

A budget may carry the event that produced it (``budget.event``, set with
:func:`~skdpsparse.accounting.with_event`, which checks that the event implies
the budget); a bare budget
stands for the weakest event it allows (:func:`event_of`).

References
----------
.. [BS16] M. Bun, T. Steinke. Concentrated differential privacy: simplifications,
   extensions, and lower bounds. TCC 2016. arXiv:1605.02065.
.. [CKS20] C. Canonne, G. Kamath, T. Steinke. The discrete Gaussian for differential
   privacy. NeurIPS 2020. arXiv:2004.00010.
.. [DRS19] J. Dong, A. Roth, W. Su. Gaussian differential privacy. arXiv:1905.02383
   (2019); J. R. Stat. Soc. B 84(1), 2022.
.. [M17] I. Mironov. Rényi differential privacy. CSF 2017. arXiv:1702.07476.
.. [GRS09] A. Ghosh, T. Roughgarden, M. Sundararajan. Universally utility-maximizing
   privacy mechanisms. STOC 2009.
.. [KOV15] P. Kairouz, S. Oh, P. Viswanath. The composition theorem for differential
   privacy. ICML 2015.
.. [WBK19] Y.-X. Wang, B. Balle, S. Kasiviswanathan. Subsampled Rényi differential
   privacy and analytical moments accountant. AISTATS 2019. arXiv:1808.00087.
"""

from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass

import numpy as np

from .budget import ZCDP, ApproxDP, PrivacyEvent, PureDP, _delta, _positive
from .rdp import (
    DEFAULT_ORDERS,
    _log_expm1,
    _orders,
    laplace_rdp,
    subsampled_without_replacement_gaussian_rdp,
)
from .wor_discrete_gaussian import subsampled_without_replacement_discrete_gaussian_rdp

__all__ = [
    "ApproxDPEvent",
    "ComposedEvent",
    "DiscreteGaussianEvent",
    "DiscreteLaplaceEvent",
    "GaussianEvent",
    "LaplaceEvent",
    "PureDPEvent",
    "SampledWithoutReplacementEvent",
    "SelfComposedEvent",
    "ZCDPEvent",
    "event_from_dict",
    "event_of",
    "pure_dp_rdp",
]


def _count(value, name="count"):
    """A positive Python or NumPy integer, not a bool."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a positive int, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def pure_dp_rdp(epsilon, orders=DEFAULT_ORDERS):
    """Rényi DP of an arbitrary ε-DP mechanism: that of randomized response.

    Every pair of output distributions of an ε-DP mechanism is a post-processing of
    the pair of binary randomized response with parameter ε: the privacy region of
    ε-DP is randomized response's (Kairouz, Oh and Viswanath 2015, "The composition
    theorem for differential privacy", Thm 2.1), and a pair whose trade-off curve
    dominates another's is a post-processing of it (Dong, Roth and Su 2019, "Gaussian
    differential privacy", Thm 2.10, Blackwell's theorem). By the data-processing
    inequality its Rényi divergence is at most randomized response's:

        D_α = log(1 + expm1((α−1)ε) · expm1(αε) · e^{−(α−1)ε} / (1 + e^ε)) / (α − 1),

    the form of log[(e^{αε} + e^{(1−α)ε}) / (1 + e^ε)] / (α − 1) with every term
    positive (no cancellation for small ε). It is below min(ε, αε²/2) everywhere.

    Parameters
    ----------
    epsilon : float
        Positive.
    orders : array-like of float, default=DEFAULT_ORDERS
        All > 1.

    Returns
    -------
    numpy.ndarray
        The RDP bound at each order.
    """
    eps = _positive(epsilon, "epsilon")
    alpha = _orders(orders, allow_one=False)
    a = (alpha - 1.0) * eps
    log_excess = _log_expm1(a) + _log_expm1(alpha * eps) - a - np.logaddexp(0.0, eps)
    return np.logaddexp(0.0, log_excess) / (alpha - 1.0)


# ------------------------------------------------------------------------- the events
@dataclass(frozen=True, slots=True)
class GaussianEvent(PrivacyEvent):
    """``count`` releases of the Gaussian mechanism, each with noise multiplier z.

    Adding N(0, σ²) per coordinate to a query of ℓ2 sensitivity Δ is exactly
    (Δ/σ)-Gaussian DP (Dong, Roth and Su 2019, "Gaussian differential privacy",
    Thm 2.7), so ``count`` of them are exactly √count/z-GDP (ibid., Cor. 3.3),
    (α, count·α/(2z²))-RDP (Mironov 2017, "Rényi differential privacy", Prop. 7) and
    count/(2z²)-zCDP (Bun and Steinke 2016, "Concentrated differential privacy",
    Prop. 1.6).

    Parameters
    ----------
    noise_multiplier : float
        z = σ/Δ₂, positive.
    count : int, default=1
        Number of independent releases (e.g. full-batch gradient steps).
    """

    noise_multiplier: float
    count: int = 1

    def __post_init__(self):
        object.__setattr__(self, "noise_multiplier",
                           _positive(self.noise_multiplier, "noise_multiplier"))
        object.__setattr__(self, "count", _count(self.count))

    @property
    def gdp_mu2(self):
        return self.count / self.noise_multiplier**2

    @property
    def zcdp_rho(self):
        return self.count / (2.0 * self.noise_multiplier**2)

    def rdp(self, orders=DEFAULT_ORDERS):
        return _orders(orders) * self.zcdp_rho


@dataclass(frozen=True, slots=True)
class DiscreteGaussianEvent(PrivacyEvent):
    """``count`` releases of the discrete Gaussian mechanism on an integer query.

    Adding independent discrete Gaussian noise N_Z(0, σ²) to each coordinate of an
    integer-valued query of ℓ2 sensitivity Δ is ρ-zCDP with ρ = Δ²/(2σ²) (Canonne,
    Kamath and Steinke 2020, "The discrete Gaussian for differential privacy", Thm 4
    in one dimension; in d dimensions Rényi divergences of product distributions
    add over the coordinates, which gives Σ_j Δ_j²/(2σ²) ≤ Δ²/(2σ²), the multivariate
    theorem of that paper). It is *not* exactly Gaussian DP, so it never enters the
    exact Gaussian composition, only the zCDP / RDP ones. On a scaled lattice γZ^d,
    use σ/Δ with both measured in the same units.

    Parameters
    ----------
    noise_multiplier : float
        z = σ/Δ₂, positive.
    count : int, default=1
    """

    noise_multiplier: float
    count: int = 1

    def __post_init__(self):
        object.__setattr__(self, "noise_multiplier",
                           _positive(self.noise_multiplier, "noise_multiplier"))
        object.__setattr__(self, "count", _count(self.count))

    @property
    def zcdp_rho(self):
        return self.count / (2.0 * self.noise_multiplier**2)

    def rdp(self, orders=DEFAULT_ORDERS):
        return _orders(orders) * self.zcdp_rho


@dataclass(frozen=True, slots=True)
class LaplaceEvent(PrivacyEvent):
    """``count`` releases of the Laplace mechanism, scale b = noise_multiplier · Δ₁.

    Each release is (1/z)-DP for ℓ1 sensitivity Δ₁. Its RDP is the one-dimensional
    formula of Mironov 2017 ("Rényi differential privacy", Prop. 6) at ε₀ = 1/z, also
    in d dimensions: with shifts Δ_j (Σ|Δ_j| ≤ Δ₁) the divergence of the product is Σ_j h(|Δ_j|)/(α−1), where
    h(s) = log[α/(2α−1)·e^{(α−1)s/b} + (α−1)/(2α−1)·e^{−αs/b}] is a log-sum-exp of
    linear functions, hence convex, with h(0) = 0, hence superadditive and
    non-decreasing on s ≥ 0: Σ_j h(|Δ_j|) ≤ h(Δ₁).

    Parameters
    ----------
    noise_multiplier : float
        z = b/Δ₁, positive.
    count : int, default=1
    """

    noise_multiplier: float
    count: int = 1

    def __post_init__(self):
        object.__setattr__(self, "noise_multiplier",
                           _positive(self.noise_multiplier, "noise_multiplier"))
        object.__setattr__(self, "count", _count(self.count))

    @property
    def pure_epsilon(self):
        return self.count / self.noise_multiplier

    @property
    def zcdp_rho(self):  # each release is ε₀-DP, hence ε₀²/2-zCDP (Bun and Steinke 2016, Prop. 1.4)
        return self.count / (2.0 * self.noise_multiplier**2)

    def rdp(self, orders=DEFAULT_ORDERS):
        return self.count * laplace_rdp(self.noise_multiplier, _orders(orders)).epsilons


@dataclass(frozen=True, slots=True)
class DiscreteLaplaceEvent(PrivacyEvent):
    """``count`` releases of the discrete Laplace (geometric) mechanism.

    Noise with P(k) ∝ e^{−|k|/t} added to an integer query of ℓ1 sensitivity Δ₁ is
    (Δ₁/t)-DP (Ghosh, Roughgarden and Sundararajan 2009, "Universally
    utility-maximizing privacy mechanisms"; one coordinate, and coordinates compose by basic
    composition in |Δ_j|). Its RDP is bounded by randomized response's
    (:func:`pure_dp_rdp`).

    Parameters
    ----------
    noise_multiplier : float
        z = t/Δ₁, positive.
    count : int, default=1
    """

    noise_multiplier: float
    count: int = 1

    def __post_init__(self):
        object.__setattr__(self, "noise_multiplier",
                           _positive(self.noise_multiplier, "noise_multiplier"))
        object.__setattr__(self, "count", _count(self.count))

    @property
    def pure_epsilon(self):
        return self.count / self.noise_multiplier

    @property
    def zcdp_rho(self):
        return self.count / (2.0 * self.noise_multiplier**2)

    def rdp(self, orders=DEFAULT_ORDERS):
        return self.count * pure_dp_rdp(1.0 / self.noise_multiplier, orders)


@dataclass(frozen=True, slots=True)
class ZCDPEvent(PrivacyEvent):
    """A ρ-zCDP release of unspecified form: (α, αρ)-RDP at every order
    (Bun and Steinke 2016, "Concentrated differential privacy", Def. 1.1)."""

    rho: float

    def __post_init__(self):
        object.__setattr__(self, "rho", _positive(self.rho, "rho"))

    @property
    def zcdp_rho(self):
        return self.rho

    def rdp(self, orders=DEFAULT_ORDERS):
        return _orders(orders) * self.rho


@dataclass(frozen=True, slots=True)
class PureDPEvent(PrivacyEvent):
    """An ε-DP release of unspecified form (RDP: :func:`pure_dp_rdp`)."""

    epsilon: float

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _positive(self.epsilon, "epsilon"))

    @property
    def pure_epsilon(self):
        return self.epsilon

    @property
    def zcdp_rho(self):
        return self.epsilon**2 / 2

    def rdp(self, orders=DEFAULT_ORDERS):
        return pure_dp_rdp(self.epsilon, orders)


@dataclass(frozen=True, slots=True)
class ApproxDPEvent(PrivacyEvent):
    """An (ε, δ)-DP release of unspecified form: composed by basic composition only.

    (ε, δ)-DP with δ > 0 implies no RDP or zCDP bound, so nothing better applies;
    with δ = 0 the event is the pure ε-DP one.
    """

    epsilon: float
    delta: float

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _positive(self.epsilon, "epsilon"))
        object.__setattr__(self, "delta", _delta(self.delta))

    @property
    def approx(self):
        return (self.epsilon, self.delta) if self.delta > 0 else None

    @property
    def pure_epsilon(self):
        return self.epsilon if self.delta == 0 else None

    @property
    def zcdp_rho(self):
        return self.epsilon**2 / 2 if self.delta == 0 else None

    def rdp(self, orders=DEFAULT_ORDERS):
        return pure_dp_rdp(self.epsilon, orders) if self.delta == 0 else None


@functools.lru_cache(maxsize=256)
def _wor_rdp(sample_size, population_size, noise_multiplier, orders_bytes, discrete=False):
    orders = np.frombuffer(orders_bytes)
    if discrete:
        curve = subsampled_without_replacement_discrete_gaussian_rdp(
            sample_size, population_size, noise_multiplier, orders)
    else:
        curve = subsampled_without_replacement_gaussian_rdp(
            sample_size, population_size, noise_multiplier, orders)
    return curve.epsilons


@dataclass(frozen=True, slots=True)
class SampledWithoutReplacementEvent(PrivacyEvent):
    """A Gaussian or discrete Gaussian release on a uniformly random subset of fixed
    size, replace-one neighbours (the library's).

    A continuous :class:`GaussianEvent` is accounted as
    :func:`~skdpsparse.accounting.subsampled_without_replacement_gaussian_rdp` computes
    it (Wang, Balle and Kasiviswanathan 2019, "Subsampled Rényi differential privacy
    and analytical moments accountant", Thm 9 with the strengthening of their Thm 27,
    which uses the continuous Gaussian's central moments). A
    :class:`DiscreteGaussianEvent` (noise N_Z(0, N²)^d on an integer-valued query) is
    accounted by
    :func:`~skdpsparse.accounting.subsampled_without_replacement_discrete_gaussian_rdp`,
    whose bound uses only integer-order mixed moments of the three Gaussians of a
    replace-one triple, which for integer shifts are the continuous Gaussian's
    (derivation: ``doc/derivations/dp_sgd.rst``). Only RDP applies; repeat it with
    :class:`SelfComposedEvent`.

    Parameters
    ----------
    sample_size : int
        m, with 0 ≤ m ≤ n.
    population_size : int
        n ≥ 1, public.
    event : GaussianEvent or DiscreteGaussianEvent
        The release on the sample, with ``count=1``; ``noise_multiplier`` is the
        noise scale over the replace-one ℓ2 sensitivity of the batch query.
    """

    sample_size: int
    population_size: int
    event: GaussianEvent | DiscreteGaussianEvent

    def __post_init__(self):
        if (not isinstance(self.event, (GaussianEvent, DiscreteGaussianEvent))
                or self.event.count != 1):
            raise TypeError("SampledWithoutReplacementEvent wraps a GaussianEvent or a "
                            f"DiscreteGaussianEvent with count=1, got {self.event!r}")
        subsampled_without_replacement_gaussian_rdp(  # validates m and n
            self.sample_size, self.population_size, 1.0, [2.0])

    def rdp(self, orders=DEFAULT_ORDERS):
        orders = _orders(orders, allow_one=False)
        return _wor_rdp(int(self.sample_size), int(self.population_size),
                        self.event.noise_multiplier, orders.tobytes(),
                        isinstance(self.event, DiscreteGaussianEvent))


@dataclass(frozen=True, slots=True)
class SelfComposedEvent(PrivacyEvent):
    """``event`` run ``count`` times (adaptively composed)."""

    event: PrivacyEvent
    count: int

    def __post_init__(self):
        if not isinstance(self.event, PrivacyEvent):
            raise TypeError(f"event must be a PrivacyEvent, got {self.event!r}")
        object.__setattr__(self, "count", _count(self.count))

    def leaves(self):
        return [(leaf, k * self.count) for leaf, k in self.event.leaves()]


@dataclass(frozen=True, slots=True)
class ComposedEvent(PrivacyEvent):
    """The events run one after the other (adaptively composed)."""

    events: tuple

    def __post_init__(self):
        events = tuple(self.events)
        for e in events:
            if not isinstance(e, PrivacyEvent):
                raise TypeError(f"events must be PrivacyEvents, got {e!r}")
        object.__setattr__(self, "events", events)

    def leaves(self):
        return [pair for e in self.events for pair in e.leaves()]


_EVENT_TYPES = {cls.__name__: cls for cls in (
    GaussianEvent, DiscreteGaussianEvent, LaplaceEvent, DiscreteLaplaceEvent, ZCDPEvent,
    PureDPEvent, ApproxDPEvent, SampledWithoutReplacementEvent, SelfComposedEvent,
    ComposedEvent)}


def event_from_dict(obj):
    """The event described by ``obj`` (the output of ``event.to_dict()``)."""
    obj = dict(obj)
    cls = _EVENT_TYPES[obj.pop("type")]
    if "event" in obj:
        obj["event"] = event_from_dict(obj["event"])
    if "events" in obj:
        obj["events"] = tuple(event_from_dict(e) for e in obj["events"])
    return cls(**obj)


# ------------------------------------------------------------------ budgets and events
def event_of(budget):
    """The event a budget records: its ``event``, else the weakest one it allows.

    A bare ``PureDP(ε)`` stands for :class:`PureDPEvent`, ``ZCDP(ρ)`` for
    :class:`ZCDPEvent` and ``ApproxDP(ε, δ)`` for the opaque :class:`ApproxDPEvent`
    (composed by basic composition only).

    Parameters
    ----------
    budget : PureDP, ApproxDP or ZCDP

    Returns
    -------
    PrivacyEvent

    Examples
    --------
    >>> from skdpsparse.accounting import ApproxDP, PureDP
    >>> event_of(PureDP(0.5))
    PureDPEvent(epsilon=0.5)
    >>> event_of(ApproxDP(1.0, 1e-6))
    ApproxDPEvent(epsilon=1.0, delta=1e-06)
    """
    event = getattr(budget, "event", None)
    if event is not None:
        return event
    if isinstance(budget, PureDP):
        return PureDPEvent(budget.epsilon)
    if isinstance(budget, ZCDP):
        return ZCDPEvent(budget.rho)
    if isinstance(budget, ApproxDP):
        return ApproxDPEvent(budget.epsilon, budget.delta)
    raise TypeError(f"not a privacy budget: {budget!r}")
