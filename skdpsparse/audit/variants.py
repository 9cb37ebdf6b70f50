"""Broken variants: the mechanisms with one privacy step deliberately wrong, which an
audit with teeth must refute.

A variant is a value passed to a case's mechanism (``mechanism(data, rng, variant)``),
never a patch: nothing here rebinds a name in a loaded module. A case applies it in one
of three explicit ways, whichever the layer it audits offers:

* **a replaced random source** (:meth:`Variant.source`): mechanisms take ``rng``, and a
  :class:`ScaledNoiseSource` passed there draws every discrete Laplace or Gaussian
  variable of :mod:`skdpsparse.mechanisms.noise` at ``noise`` times its integer scale,
  while the mechanism still computes, and reports, the budget of the full noise;
* **a replaced plan**: the public numbers a mechanism or an estimator plans from, with
  the bounds multiplied by ``bound`` and the privacy parameter re-solved so that the
  noise scale is ``noise`` times the shipped one (:func:`matching_epsilon`); the case
  keeps the claim of the shipped plan. For ε-DP Laplace or exponential mechanisms
  this is :meth:`Variant.pure_epsilon` (scale ∝ Δ/ε), for ρ-zCDP :meth:`Variant.rho`;
* **a replaced callable** (:attr:`Variant.replaces`): a function a case calls instead
  of the library's, e.g. :func:`raw_margin_noisy_sgd`, the noisy-SGD step in the order
  the library used before issue 17, or :func:`float_noise`, the floating-point noise it
  drew before its exact samplers.
"""

import math
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
from scipy import optimize

from ..utils import RandomSource, as_random_source

__all__ = [
    "CORRECT", "HALF_NOISE", "RAW_MARGIN", "VARIANTS", "WIDE_BOUNDS", "ScaledNoiseSource",
    "Variant", "float_noise", "inflated_bounds", "matching_epsilon", "raw_margin_noisy_sgd",
    "replanned_epsilon", "scaled_noise",
]


class ScaledNoiseSource(RandomSource):
    """A :class:`~skdpsparse.utils.RandomSource` whose discrete Laplace and Gaussian
    draws have ``factor`` times the integer scale N the mechanism asks for (rounded, at
    least 1; N ≥ 2²⁹ for every plan of :func:`~skdpsparse.mechanisms.noise.plan_grid_noise`,
    so the rounding is below 2⁻²⁹ relative). Every other draw (permutations, indices,
    coins) is the parent class's, and children spawned from it are scaled too."""

    def __init__(self, key, factor):
        super().__init__(key)
        if not 0 < factor < math.inf:
            raise ValueError(f"factor must be positive and finite, got {factor!r}.")
        self.factor = float(factor)

    def _scaled(self, scale):
        return max(1, round(int(scale) * self.factor))

    def add_discrete_noise(self, grid_values, kind, scale):
        return super().add_discrete_noise(grid_values, kind, self._scaled(scale))

    def discrete_noise(self, size, kind, scale):
        return super().discrete_noise(size, kind, self._scaled(scale))

    def spawn(self, n_children, label="child"):
        # The children's keys are derived exactly as the parent class derives them.
        return [ScaledNoiseSource(child._key, self.factor)
                for child in super().spawn(n_children, label)]


@dataclass(frozen=True)
class Variant:
    """One way of running a mechanism: as shipped, or with a privacy step broken.

    Attributes
    ----------
    name : str
    noise : float
        Factor on every noise scale (0.5: noise halved).
    bound : float
        Factor on every contribution bound (rows, labels, clipping scales) while the
        noise stays calibrated for the true bound.
    replaces : mapping of str to callable
        Callables a case uses instead of the library's (by a name the case documents).
    """

    name: str
    noise: float = 1.0
    bound: float = 1.0
    replaces: MappingProxyType = field(default_factory=lambda: MappingProxyType({}),
                                       compare=False)

    @property
    def is_correct(self):
        return self.noise == 1.0 and self.bound == 1.0 and not self.replaces

    def source(self, rng):
        """The random source to pass as a mechanism's ``rng`` (keyed by 32 bytes of the
        ``numpy.random.Generator`` ``rng``, as the mechanisms key their own)."""
        if self.noise == 1.0:
            return as_random_source(rng)
        return ScaledNoiseSource(rng.bytes(32), self.noise)

    def pure_epsilon(self, epsilon):
        """ε of an ε-DP mechanism whose noise scale is Δ/ε (Laplace b = Δ₁/ε, the
        exponential mechanism's temperature 2Δ_u/ε), such that with the bounds
        multiplied by ``bound`` its noise is ``noise`` times that of ``epsilon``."""
        return epsilon * self.bound / self.noise

    def rho(self, rho):
        """ρ of a ρ-zCDP Gaussian mechanism (σ = Δ₂/√(2ρ)), as :meth:`pure_epsilon`."""
        return rho * (self.bound / self.noise) ** 2

    def replaced(self, name, default):
        """The callable replacing ``name`` in this variant, or ``default``."""
        return self.replaces.get(name, default)


def matching_epsilon(noise_at, target, epsilon):
    """The ε at which ``noise_at(ε)`` (a noise scale, decreasing in ε) equals
    ``target``: Brent's method on log ε, bracketed around ``epsilon``.

    The broken variants of an estimator are its shipped code run from replaced public
    numbers: bounds multiplied by the variant's factor, and this ε, so that the noise is
    the variant's multiple of the shipped one.
    """
    def gap(log_eps):
        return math.log(noise_at(math.exp(log_eps))) - math.log(target)

    lo, hi = math.log(epsilon), math.log(epsilon)
    while gap(lo) < 0:
        lo -= 1.0
    while gap(hi) > 0:
        hi += 1.0
    return math.exp(optimize.brentq(gap, lo, hi, xtol=1e-12, rtol=1e-12))


def replanned_epsilon(variant, noise_at, epsilon, *, with_noise=True):
    """The privacy parameter that realises ``variant`` as a replaced plan.

    ``noise_at(ε, bound_factor)`` is the noise scale the shipped code plans at ε with
    every bound multiplied by ``bound_factor``. Returns the ε at which, with the
    variant's bounds, the noise is the variant's multiple of the shipped noise at
    ``epsilon`` (``with_noise=False``: the shipped noise itself, when the case scales
    the noise through :meth:`Variant.source` instead).
    """
    factor = variant.noise if with_noise else 1.0
    if variant.bound == 1.0 and factor == 1.0:
        return epsilon
    return matching_epsilon(lambda e: noise_at(e, variant.bound),
                            factor * noise_at(epsilon, 1.0), epsilon)


def scaled_noise(factor=0.5):
    """The variant with every noise scale multiplied by ``factor`` (0.5: halved), the
    budget still reported for the full noise."""
    return Variant(f"noise x{factor:g}" if factor != 0.5 else "noise/2", noise=factor)


def inflated_bounds(factor=10.0):
    """The variant with every contribution bound multiplied by ``factor`` ("clipping
    skipped" for rows below the inflated bound), the noise calibrated for the true
    bound."""
    return Variant(f"bound x{factor:g}", bound=factor)


# --------------------------------------------------------------- replaced callables
def float_noise(values, scale, rng, kind="laplace"):
    """The release as the library drew it before its exact samplers: NumPy's
    floating-point Laplace (or Gaussian) draw of scale ``scale`` added to the float
    statistic ``values``. Mironov's attack
    (:func:`~skdpsparse.audit.cases.randomness.mironov_distinguisher`) tells
    neighbouring inputs apart with certainty from one such release.

    Parameters
    ----------
    values : array-like of float
    scale : float
    rng : numpy.random.Generator
    kind : {"laplace", "gaussian"}

    Returns
    -------
    ndarray of float64
    """
    values = np.asarray(values, dtype=np.float64)
    if kind == "laplace":
        return values + rng.laplace(0.0, scale, size=values.shape)
    return values + scale * rng.standard_normal(values.shape)


def raw_margin_noisy_sgd(X, y, *, loss_derivative, noise_std, step_size, radius,
                         norm_bound, rng):
    """Arora, Marinov and Ullah (2020) Algorithm 1 on dense rows, without intercept, in
    the order the library's kernel used before issue 17: the margin ⟨x, θ⟩ and the
    gradient ℓ'·x are formed on the **raw** row and scaled by s = min(1, R/‖x‖)
    afterwards. On a finite row of norm near the largest float, ⟨x, θ⟩ or ℓ'·x
    overflows to ±inf and inf·s or inf − inf gives NaN in the release.

    Float Gaussian noise (the step's privacy is not what this variant breaks);
    steps with replacement until ⌈n/2⌉ distinct rows were used; release: the average of
    the iterates at the fresh steps, each step projected onto the ℓ2 ball of radius
    ``radius``, as :func:`~skdpsparse.mechanisms.noisy_sgd.noisy_projected_sgd`.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    y : ndarray of shape (n,)
    loss_derivative : callable
        ``loss_derivative(margin, y) -> float``, ℓ' at the margin.
    noise_std, step_size, radius, norm_bound : float
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (d,)
    """
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    target = (n + 1) // 2
    theta, fresh_sum = np.zeros(d), np.zeros(d)
    seen = np.zeros(n, dtype=bool)
    with np.errstate(over="ignore", invalid="ignore"):
        while seen.sum() < target:
            i = int(rng.integers(n))
            noise = noise_std * rng.standard_normal(d)
            if seen[i]:
                theta -= step_size * noise
            else:
                seen[i] = True
                fresh_sum += theta
                norm = np.linalg.norm(X[i])
                s = 1.0 if norm <= norm_bound else norm_bound / norm
                margin = float(X[i] @ theta) * s           # raw row first
                theta -= step_size * ((loss_derivative(margin, y[i]) * X[i]) * s + noise)
            size = np.linalg.norm(theta)
            if size > radius:
                theta *= radius / size
    return fresh_sum / target


#: The variants of the catalogue: the mechanism as shipped and the broken ones.
CORRECT = Variant("correct")
HALF_NOISE = scaled_noise(0.5)
WIDE_BOUNDS = inflated_bounds(10.0)
RAW_MARGIN = Variant("raw margin",
                     replaces=MappingProxyType({"noisy_sgd": raw_margin_noisy_sgd}))
VARIANTS = {v.name: v for v in (CORRECT, HALF_NOISE, WIDE_BOUNDS, RAW_MARGIN)}
