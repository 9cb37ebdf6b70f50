"""Noise on a grid: the one place where the library adds noise to a statistic.

Floating-point Laplace or Gaussian noise added to a float statistic leaves the
statistic in the low bits of the release (Mironov 2012, "On significance of the least
significant bits for differential privacy", CCS): one release identified the
neighbouring dataset with certainty in most trials. So the library never adds a float
draw to a float statistic. :func:`add_noise_inplace` instead

1. rounds the statistic to a grid γℤ, γ a power of two (exact: v/γ is a change of
   exponent), clipped to |v/γ| ≤ 2⁶⁰ (1-Lipschitz, so no sensitivity is added);
2. adds integer noise Y from the exact discrete Laplace, P(y) ∝ exp(−|y|/N), or the
   exact discrete Gaussian, P(y) ∝ exp(−y²/(2N²)) (Canonne, Kamath and Steinke 2020,
   Algorithms 2–3; :mod:`skdpsparse._kernels.exact_sampling`), whose bits come from
   the fit's :class:`~skdpsparse.utils.RandomSource`;
3. releases (k + Y)·γ in floating point, a post-processing of the integer k + Y.

Sensitivity on the grid. Rounding moves each coordinate by at most γ/2, so two
neighbouring statistics at ℓ2 distance Δ₂ (ℓ1 distance Δ₁) that differ in at most m
coordinates round to integer vectors at ℓ2 distance at most Δ₂/γ + √m (ℓ1 distance
at most Δ₁/γ + m). The grid scale is therefore

    N = ⌈ b/γ + b·⌈√m⌉/Δ₂ ⌉ (Gaussian),   N = ⌈ b/γ + b·m/Δ₁ ⌉ (Laplace),

with b the scale the caller calibrated for sensitivity Δ, so that (Δ/γ + √m)/N ≤ Δ/b:
the discrete mechanism has exactly the privacy the caller computed for the continuous
parameters — ρ = Δ₂²/(2b²)-zCDP for the discrete Gaussian (Canonne, Kamath and
Steinke 2020, Theorem 14), ε = Δ₁/b for the discrete Laplace. γ is the largest power
of two with b/γ ≥ 2²⁹ and γ·spread/Δ ≤ 2⁻²⁰, so the noise is larger than b by a
relative 2⁻²⁰ at most (unless that would need N > 2⁵⁰). The derivation is in
``doc/derivations/exact_sampling.rst``.

Gaussian scales must therefore come from
:func:`skdpsparse.accounting.discrete.discrete_gaussian_sigma` (or a zCDP ρ), never
from a continuous-Gaussian curve.
"""

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .._kernels.exact_sampling import MAX_GRID_VALUE
from .._kernels.grid_noise import from_grid, grid_factor, to_grid
from ..utils._random import as_random_source

__all__ = ["GridNoise", "add_noise_inplace", "grid_noise", "plan_grid_noise"]

_GRID_BITS = 29  # b/γ ≥ 2^29
_INFLATION_BITS = 20  # the grid adds at most 2^-20 of the noise (when N ≤ 2^50 allows)
_KINDS = ("laplace", "gaussian")


@dataclass(frozen=True)
class GridNoise:
    """The plan of one grid-noise release (public numbers only).

    **Privacy guarantee.** None needed: the plan holds public numbers only (the grid
    exponent and the integer scale N), computed from the noise scale, the sensitivity
    and the number of coordinates, never from the statistic.

    Attributes
    ----------
    kind : {"laplace", "gaussian"}
    exponent : int
        γ = 2**exponent, the grid spacing.
    grid_scale : int
        N, the scale of the integer noise.
    """

    kind: str
    exponent: int
    grid_scale: int

    @property
    def spacing(self):
        return math.ldexp(1.0, self.exponent)

    @property
    def effective_scale(self):
        """N·γ: the scale of the noise actually added."""
        return math.ldexp(float(self.grid_scale), self.exponent)


def _check_scale(scale, name):
    scale = float(scale)
    if not math.isfinite(scale) or scale < 0:
        raise ValueError(f"{name} must be non-negative and finite, got {scale}.")
    return scale


@functools.lru_cache(maxsize=4096)  # exact rationals: worth caching for per-step callers
def plan_grid_noise(kind, scale, sensitivity, n_changed, true_sensitivity=None):
    """The grid and integer scale that give noise ``kind`` of scale ``scale`` the
    privacy of its continuous calibration for ``sensitivity`` (module docstring).

    **Privacy guarantee.** None needed: public numbers in, public numbers out. What it
    guarantees to its caller: with this N the grid mechanism of
    :func:`add_noise_inplace` has the privacy of the continuous calibration for
    ``sensitivity``, ρ = Δ₂²/(2b²)-zCDP (Gaussian) or Δ₁/b-DP (Laplace), because
    rounding to γℤ adds at most ⌈√m⌉ (ℓ2) or m (ℓ1) grid units to the sensitivity
    (:ref:`derivation_exact_sampling`).

    Parameters
    ----------
    kind : {"laplace", "gaussian"}
    scale : float
        b > 0: the Laplace scale or the Gaussian σ the caller calibrated.
    sensitivity : float
        Δ₁ (Laplace) or Δ₂ (Gaussian) of the statistic, positive.
    n_changed : int
        The most coordinates in which two neighbouring statistics can differ.
    true_sensitivity : float, optional
        The sensitivity of the statistic as the code computes it, when it exceeds the
        ``sensitivity`` the caller calibrated ``scale`` for (floating-point error of a
        mean, say): N = ⌈(b/Δ)(Δ_true/γ + spread)⌉ keeps the privacy of b for Δ.

    Returns
    -------
    GridNoise
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be 'laplace' or 'gaussian', got {kind!r}.")
    scale = _check_scale(scale, "sigma" if kind == "gaussian" else "scale")
    sensitivity = float(sensitivity)
    if not (math.isfinite(sensitivity) and sensitivity > 0) or scale == 0:
        raise ValueError("sensitivity and scale must be positive and finite, got "
                         f"{sensitivity!r} and {scale!r}.")
    n_changed = int(n_changed)
    if n_changed < 1:
        raise ValueError(f"n_changed must be at least 1, got {n_changed}.")
    spread = n_changed if kind == "laplace" else math.isqrt(n_changed - 1) + 1  # ⌈√m⌉
    # γ at most b/2^29 (a one-word uniform) and at most 2^-20·Δ/spread (the noise grows
    # by at most 2^-20 relative), but N = b/γ + ... stays below the kernel's 2^50.
    log_scale = math.frexp(scale)[1] - 1  # 2^log_scale ≤ b
    exponent = min(log_scale - _GRID_BITS,
                   math.frexp(sensitivity / spread)[1] - 1 - _INFLATION_BITS)
    exponent = max(exponent, log_scale - 48)
    true = sensitivity if true_sensitivity is None else float(true_sensitivity)
    if not true >= sensitivity:
        raise ValueError("true_sensitivity must be at least sensitivity.")
    exact = (Fraction(scale) / Fraction(sensitivity)
             * (Fraction(true) / Fraction(2) ** exponent + spread))
    grid_scale = math.ceil(exact)
    if grid_scale > 1 << 50:
        raise ValueError("the grid noise would need a scale above 2^50: the statistic "
                         f"has {n_changed} coordinates and scale/sensitivity "
                         f"{scale / sensitivity:.3g}.")
    return GridNoise(kind, exponent, grid_scale)


def _to_grid(values, exponent):
    """round(clip(v/γ, ±2⁶⁰)) as int64, exactly (one compiled pass for a contiguous
    array and a normal 2^−e: :func:`~skdpsparse._kernels.grid_noise.to_grid`)."""
    factor = grid_factor(-exponent)
    if factor is not None and values.ndim == 1 and values.flags.c_contiguous:
        grid = np.empty(values.shape, np.int64)
        if not to_grid(values, factor, grid):
            raise ValueError("the statistic to release contains NaN or infinity.")
        return grid
    if not np.all(np.isfinite(values)):
        raise ValueError("the statistic to release contains NaN or infinity.")
    with np.errstate(over="ignore"):  # ±inf after scaling is clipped just below
        scaled = np.ldexp(values, -exponent)
    np.clip(scaled, -MAX_GRID_VALUE, MAX_GRID_VALUE, out=scaled)
    return np.rint(scaled).astype(np.int64)


def add_noise_inplace(values, rng, kind, scale, *, sensitivity, n_changed=None,
                      true_sensitivity=None):
    """Release ``values`` plus Laplace or Gaussian noise of scale ``scale``, exactly.

    **Privacy guarantee.** Protected: whatever one neighbour can change in ``values``,
    under the caller's neighbouring relation, provided ``sensitivity`` (and
    ``n_changed``) bound that change for every pair of neighbours. Gaussian: ρ =
    Δ₂²/(2b²)-zCDP (the discrete Gaussian, Canonne, Kamath and Steinke 2020, "The
    discrete Gaussian for differential privacy", Theorem 14); Laplace: (Δ₁/b)-DP (the
    discrete Laplace, or geometric, mechanism: Ghosh, Roughgarden and Sundararajan 2009,
    "Universally utility-maximizing privacy mechanisms"); rounding to the grid is
    charged in N (:func:`plan_grid_noise`; derivation:
    :ref:`derivation_exact_sampling`). Assumptions: the caller's sensitivity is a proven
    bound over all neighbours, including rows no honest user would supply; the
    floating-point error of computing ``values`` is within it or passed as
    ``true_sensitivity``; ``values`` are finite (NaN or infinity raise, so the caller
    bounds its statistic first); the noise bits come from a secret key
    (:class:`~skdpsparse.utils.RandomSource`). Not covered: a wrong sensitivity, and the
    noise when the key is known (a fixed ``random_state``).

    Parameters
    ----------
    values : ndarray of float64
        The statistic; replaced in place by the release.
    rng : RandomSource, numpy.random.Generator or None
        See :func:`skdpsparse.utils.as_random_source`.
    kind : {"laplace", "gaussian"}
    scale : float
        The Laplace scale b = Δ₁/ε or the Gaussian σ (from
        :func:`~skdpsparse.accounting.discrete.discrete_gaussian_sigma`); 0 releases
        ``values`` unchanged.
    sensitivity : float
        Δ₁ (Laplace) or Δ₂ (Gaussian) of ``values``.
    n_changed : int, optional
        The most coordinates in which neighbouring statistics can differ; default all.
    true_sensitivity : float, optional
        See :func:`plan_grid_noise`.

    Returns
    -------
    values : the same array.
    """
    values = np.asarray(values)
    if values.dtype != np.float64:
        raise TypeError("values must be a float64 array.")
    if not values.flags.writeable:  # refused before any draw (the release is in place)
        raise ValueError("values must be a writeable array: the release replaces it in "
                         "place.")
    if kind not in _KINDS:
        raise ValueError(f"kind must be 'laplace' or 'gaussian', got {kind!r}.")
    if _check_scale(scale, "sigma" if kind == "gaussian" else "scale") == 0 or values.size == 0:
        return values
    plan = plan_grid_noise(kind, scale, sensitivity,
                           values.size if n_changed is None else min(n_changed, values.size),
                           true_sensitivity)
    grid = _to_grid(values.reshape(-1), plan.exponent)
    as_random_source(rng).add_discrete_noise(grid, kind, plan.grid_scale)
    factor = grid_factor(plan.exponent)
    if factor is not None and values.flags.c_contiguous:
        from_grid(grid, factor, values.reshape(-1))  # a view: written in place
    else:
        values[...] = np.ldexp(grid.astype(np.float64), plan.exponent).reshape(values.shape)
    return values


def grid_noise(shape, rng, kind, scale, *, sensitivity):
    """Integer noise for statistics that a compiled loop rounds to the grid itself.

    For the SGD kernels: each row of the result is the integer noise Y_t of one step,
    and the kernel releases γ·(round(v_t/γ) + Y_t) for that step's statistic v_t
    (``noise_spacing`` of :mod:`skdpsparse._kernels.cyclic_sgd` and
    :mod:`skdpsparse._kernels.noisy_sgd`), so every step is the exact grid mechanism
    of the module docstring with m = the row length.

    **Privacy guarantee.** None by itself: it draws data-independent integer noise
    (exact discrete Gaussian or Laplace of integer scale N from
    :func:`plan_grid_noise`). The kernel that adds row t to the rounded statistic of
    step t makes each step the exact grid mechanism of :func:`add_noise_inplace`: ρ =
    Δ₂²/(2b²)-zCDP or (Δ₁/b)-DP for the step statistic's true sensitivity Δ, which the
    caller's b must be calibrated for (the ``sensitivity`` given here only prices the
    rounding, and a smaller value is the safe side). Not covered: a kernel that adds the
    noise to anything but the rounded statistic, and the noise when the key is known.

    Parameters
    ----------
    shape : tuple of int
        (n_steps, p).
    rng : RandomSource, numpy.random.Generator or None
    kind : {"laplace", "gaussian"}
    scale : float
        The noise scale b of one step's statistic.
    sensitivity : float
        A lower bound on the step statistic's sensitivity (a smaller value charges
        more for the rounding, so it is the safe side).

    Returns
    -------
    draws : ndarray of float64
        Integers (exactly representable), in grid units.
    spacing : float
        γ; 0.0 when ``scale`` is 0 (then ``draws`` are zeros).
    """
    if _check_scale(scale, "sigma" if kind == "gaussian" else "scale") == 0:
        return np.zeros(shape), 0.0
    plan = plan_grid_noise(kind, scale, sensitivity, shape[-1])
    draws = as_random_source(rng).discrete_noise(int(np.prod(shape)), kind, plan.grid_scale)
    return draws.astype(np.float64).reshape(shape), plan.spacing
