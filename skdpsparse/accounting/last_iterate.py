"""Privacy of the last iterate of cyclic DP-SGD (Kong and Ribero 2024).

The mechanism (Algorithm 1 of [KR24]_; the formulas used, with what was
reconstructed, are in the documentation's derivation "Cyclic DP-SGD and the privacy
of the last iterate"): visit the
n examples in a fixed order in batches of b (wrapping at the end), average the
per-example gradients of f clipped to norm C, take a step of size λ, add Gaussian noise
to the displacement, apply prox_{λh}; after T steps release only x_T.

Noise convention. ``noise_multiplier`` z is the usual DP-SGD one: N(0, z²C²I) is added to
the *sum* of the clipped gradients, so the averaged gradient gets std zC/b and the
displacement gets std σ = λzC/b, the σ of the paper (kong_ribero.md §2, "Noise
convention"). Neighbours differ by replacing one example (the library's convention and
the paper's "swap model"), so one use of a record moves the displacement by at most
s = 2λC/b (Lemma 4.2(a)) and s/σ = 2/z.

Every bound has the form ε(α) = α s² B / (2σ²) = 2αB/z², i.e. it is the Rényi
divergence of two Gaussians (Kong and Ribero 2024, remark after Prop. 2.2), and is returned as
:func:`~skdpsparse.accounting.gaussian_rdp` at noise multiplier z/(2√B). Names of bounds:

``"composition"``
    RDP composition over the K steps that touch a record (no assumption on f).
``"thm4.5-safe"``
    Thm 4.5 (eq. (21)) with L = 1 + λ·max(m, M); valid with clipping (derivation, "Which
    Lipschitz constant").
``"thm4.5-eq12"``
    Thm 4.5 with the paper's L_λ of eq. (12); only if clipping never binds and
    λ ≤ 1/(M+m) (derivation, "Which Lipschitz constant").
``"thm4.4-bounded"``
    Thm 4.4 (eq. (20)) when dom h has finite diameter d.

References
----------
.. [KR24] W. Kong, M. Ribero. Privacy of the last iterate in cyclically-sampled DP-SGD on
   nonconvex composite losses. arXiv:2407.05237v1.
.. [FMTT18] V. Feldman, I. Mironov, K. Talwar, A. Thakurta. Privacy amplification by
   iteration. FOCS 2018. arXiv:1808.06651.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np

from .budget import _delta, _nonnegative, _positive
from .calibrate import calibrate_noise_multiplier
from .rdp import DEFAULT_ORDERS, RdpCurve, gaussian_rdp

__all__ = [
    "LAST_ITERATE_BOUNDS",
    "CyclicSchedule",
    "LastIterateEpsilon",
    "calibrate_last_iterate_noise",
    "cyclic_schedule",
    "displacement_noise_std",
    "last_iterate_epsilon",
    "last_iterate_rdp",
    "last_iterate_rdp_bounds",
]

#: Names of the bounds, in the order used to break ties (fewest assumptions first).
LAST_ITERATE_BOUNDS = ("composition", "thm4.5-safe", "thm4.5-eq12", "thm4.4-bounded")


def _positive_int(value, name):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


class CyclicSchedule(NamedTuple):
    """Step count and per-record use pattern of cyclic batching (kong_ribero.md §2)."""

    n_steps: int  #: T, the number of noisy steps
    max_uses: int  #: K = ⌈Tb/n⌉, the most steps any one record is used in
    min_gap: int  #: ⌊n/b⌋, the fewest steps between two uses of a record


def cyclic_schedule(n_samples, batch_size, epochs=None, *, n_steps=None):
    """Use pattern of a record when batches of b are cut cyclically from n examples.

    Record p (0-based) is in the batches holding stream positions p, p + n, p + 2n, …
    < Tb: at most K = ⌈Tb/n⌉ uses, consecutive uses ⌊n/b⌋ or ⌈n/b⌉ steps apart
    (kong_ribero.md §2, derived). b ≤ n keeps a record out of any batch twice.

    Parameters
    ----------
    n_samples, batch_size : int
        n ≥ 1 and 1 ≤ b ≤ n.
    epochs : int, optional
        E passes; T defaults to ⌈E·n/b⌉ (every example seen at least E times, the last
        batch wrapping into the next pass). Give exactly one of ``epochs``, ``n_steps``.
    n_steps : int, optional
        T, for an optimizer that counts its steps otherwise.

    Returns
    -------
    CyclicSchedule
    """
    n = _positive_int(n_samples, "n_samples")
    b = _positive_int(batch_size, "batch_size")
    if b > n:
        raise ValueError(f"batch_size must be <= n_samples={n}, got {batch_size!r}")
    if (epochs is None) == (n_steps is None):
        raise ValueError("give exactly one of epochs and n_steps")
    if n_steps is None:
        t = -(-_positive_int(epochs, "epochs") * n // b)
    else:
        t = _positive_int(n_steps, "n_steps")
    return CyclicSchedule(t, -(-t * b // n), n // b)


def displacement_noise_std(noise_multiplier, learning_rate, clip_norm, batch_size):
    """σ = λzC/b: the std of the noise on the displacement, the σ of [KR24]_ (derivation,
    "Algorithm 1")."""
    return (_positive(learning_rate, "learning_rate") * _positive(clip_norm, "clip_norm")
            * _positive(noise_multiplier, "noise_multiplier")
            / _positive_int(batch_size, "batch_size"))


def _log_lip_sq_safe(lr, m, big_m):
    """log L² for L = 1 + λ·max(m, M): clip_C is nonexpansive and ∇f_i is
    max(m, M)-Lipschitz under (A2), so x ↦ x − λ·mean clip_C(∇f_i(x)) is L-Lipschitz
    with or without active clipping (kong_ribero.md §1 (A2) remark, §3.5; derived)."""
    return 2.0 * math.log1p(lr * max(m, big_m))


def _log_lip_sq_eq12(lr, m, big_m):
    """log L_λ² for eq. (12) of [KR24]_ Prop. 3.4(b): L_λ² = 1 + 2λm(1 + m/(2(M+m))).

    Formula verbatim from third-party code (kong_ribero.md §0, §3.4); the condition
    λ ≤ 1/(M+m) is inferred. Not valid when clipping binds (derivation, "Which Lipschitz
    constant")."""
    if m == 0.0:  # also M + m = 0: f affine, L = 1
        return 0.0
    return math.log1p(2.0 * lr * m * (1.0 + m / (2.0 * (big_m + m))))


def _inv_s(log_lip_sq, k):
    """1/S_L(k) with S_L(k) = Σ_{j<k} L^{−2j} (eq. (6); derivation, "The bounds"), computed through
    expm1 so that it tends continuously to 1/k as L → 1 (the convex limit, eq. (22))."""
    if log_lip_sq == 0.0:
        return 1.0 / k
    return math.expm1(-log_lip_sq) / math.expm1(-k * log_lip_sq)


def _thm45_bracket(log_lip_sq, schedule):
    """B = 1 + (K − 1)/S_L(⌊n/b⌋): eq. (21) of [KR24]_ Thm 4.5 for general n, b, T.

    Windows close at each use of the record (Prop. 2.2(a) with the shift allocation
    (24)); the K − 1 full windows are ≥ ⌊n/b⌋ steps and the last one ≥ 1 step, and
    1/S_L(k) decreases in k (derivation, "The bounds"; derived).
    With b | n this is eq. (21) exactly."""
    return 1.0 + (schedule.max_uses - 1) * _inv_s(log_lip_sq, schedule.min_gap)


def last_iterate_rdp_bounds(*, n_samples, batch_size, noise_multiplier, learning_rate,
                            clip_norm, epochs=None, n_steps=None, weak_convexity=None,
                            smoothness=None, clipping_can_bind=True, domain_diameter=None,
                            orders=DEFAULT_ORDERS):
    """Every valid RDP bound on the last iterate of cyclic DP-SGD, by name.

    Parameters
    ----------
    n_samples, batch_size : int
        n and b, 1 ≤ b ≤ n.
    noise_multiplier : float
        z > 0: noise N(0, z²C²I) on the sum of clipped gradients (displacement std
        λzC/b). Under replace-one neighbours one use of a record costs 2α/z² (an
        add/remove accountant such as Opacus's would charge α/(2z²)).
    learning_rate, clip_norm : float
        λ > 0 and C > 0.
    epochs, n_steps : int, optional
        Exactly one; see :func:`cyclic_schedule`.
    weak_convexity, smoothness : float, optional
        m ≥ 0 and M ≥ 0 of (A2): −(m/2)‖u‖² ≤ f_i(x+u) − f_i(x) − ⟨∇f_i(x), u⟩ ≤ (M/2)‖u‖²
        for every possible record. Without ``smoothness`` only the composition bound is
        available; ``weak_convexity=None`` means m = M (every M-smooth f is
        M-weakly convex).
    clipping_can_bind : bool, default=True
        False asserts ‖∇f_i(x)‖ ≤ C for every possible record and every x in dom h, so
        clipping is the identity; only then is eq. (12) used.
    domain_diameter : float, optional
        d = diam(dom h) ≥ 0 (eq. (19)) when h confines the iterates to a bounded set.
    orders : array-like of float, default=DEFAULT_ORDERS

    Returns
    -------
    dict of str to RdpCurve
        The valid bounds among :data:`LAST_ITERATE_BOUNDS`, in that order.
    """
    sched = cyclic_schedule(n_samples, batch_size, epochs, n_steps=n_steps)
    b = int(batch_size)  # validated by cyclic_schedule
    z = _positive(noise_multiplier, "noise_multiplier")
    lr = _positive(learning_rate, "learning_rate")
    c = _positive(clip_norm, "clip_norm")
    if not isinstance(clipping_can_bind, (bool, np.bool_)):
        raise TypeError(f"clipping_can_bind must be a bool, got {clipping_can_bind!r}")
    if smoothness is None and weak_convexity is not None:
        raise ValueError("smoothness (M) is needed when weak_convexity is given")
    big_m = None if smoothness is None else _nonnegative(smoothness, "smoothness")
    m = big_m if weak_convexity is None else _nonnegative(weak_convexity, "weak_convexity")
    d = None if domain_diameter is None else _nonnegative(domain_diameter, "domain_diameter")

    # Composition (Mironov 2017, Prop. 1) of the K Gaussian steps that see the record, each with
    # s/σ = 2/z (Lemma 4.2(a)); steps without it cost nothing. Needs no assumption on f.
    bounds = {"composition": sched.max_uses * gaussian_rdp(z / 2.0, orders)}
    if big_m is None:
        return bounds
    # Thm 4.5, eq. (21): ε(α) = (2αλ²C²/(b²σ²))·B = 2αB/z² (derivation, "The bounds", noise form).
    lips = {"thm4.5-safe": _log_lip_sq_safe(lr, m, big_m)}
    if not clipping_can_bind and lr * (big_m + m) <= 1.0:
        lips["thm4.5-eq12"] = _log_lip_sq_eq12(lr, m, big_m)
    for name, log_l2 in lips.items():
        bounds[name] = gaussian_rdp(z / (2.0 * math.sqrt(_thm45_bracket(log_l2, sched))), orders)
    if d is not None:
        # Thm 4.4, eq. (20): α(L d + s)²/(2σ²), one step of (5) from W∞(X_{T−1}, X′_{T−1})
        # ≤ d (derivation, "The bounds": Theorem 4.4, the formula as published, the
        # derivation ours). Any valid L:
        # the smaller of the constants above (eq. (12) can exceed L_safe when m ≈ M).
        lip = math.exp(0.5 * min(lips.values()))
        sigma = displacement_noise_std(z, lr, c, b)
        bounds["thm4.4-bounded"] = gaussian_rdp(sigma / (lip * d + 2.0 * lr * c / b), orders)
    return bounds


def last_iterate_rdp(**params):
    """The pointwise minimum of :func:`last_iterate_rdp_bounds` (same parameters).

    Each bound holds at every order, so their minimum does (kong_ribero.md §4.4).

    Returns
    -------
    RdpCurve
    """
    curves = list(last_iterate_rdp_bounds(**params).values())
    return RdpCurve(curves[0].orders, np.min([cv.epsilons for cv in curves], axis=0))


class LastIterateEpsilon(NamedTuple):
    """Result of :func:`last_iterate_epsilon`."""

    epsilon: float  #: smallest ε over the valid bounds
    bound: str  #: the bound achieving it, one of LAST_ITERATE_BOUNDS
    order: float  #: the Rényi order achieving it


def last_iterate_epsilon(delta, **params):
    """(ε, δ)-DP of the last iterate: the best valid bound, converted at ``delta``.

    Parameters
    ----------
    delta : float
        In (0, 1).
    **params
        As for :func:`last_iterate_rdp_bounds`.

    Returns
    -------
    LastIterateEpsilon
        ``(epsilon, bound, order)``; ties go to the bound listed first in
        :data:`LAST_ITERATE_BOUNDS`.

    Examples
    --------
    The worked example of kong_ribero.md §6 (σ = 1 on the displacement, so z = 100):

    >>> res = last_iterate_epsilon(1e-5, n_samples=1000, batch_size=10, epochs=5,
    ...     noise_multiplier=100.0, learning_rate=0.1, clip_norm=1.0,
    ...     weak_convexity=0.1, smoothness=1.0, clipping_can_bind=False,
    ...     orders=range(2, 65))
    >>> round(res.epsilon, 5), res.bound, res.order
    (0.11498, 'thm4.5-eq12', 64.0)
    """
    delta = _delta(delta, allow_zero=False)
    best = None
    for name, curve in last_iterate_rdp_bounds(**params).items():
        eps, order = curve.to_epsilon(delta)
        if best is None or eps < best.epsilon:
            best = LastIterateEpsilon(eps, name, order)
    return best


def calibrate_last_iterate_noise(target_epsilon, delta, *, rtol=1e-10, **params):
    """Smallest noise multiplier z for which the last iterate is (ε, δ)-DP.

    Root find on :func:`last_iterate_rdp` by
    :func:`~skdpsparse.accounting.calibrate_noise_multiplier` (every bound decreases
    in z, so the envelope does).

    Parameters
    ----------
    target_epsilon : float
        Positive.
    delta : float
        In (0, 1).
    rtol : float, default=1e-10
        Relative precision of z.
    **params
        As for :func:`last_iterate_rdp_bounds`, without ``noise_multiplier``.

    Returns
    -------
    float
        z with ``last_iterate_epsilon(delta, noise_multiplier=z, ...).epsilon <=
        target_epsilon``.
    """
    if "noise_multiplier" in params:
        raise TypeError("noise_multiplier is what is calibrated; do not pass it")
    last_iterate_rdp(noise_multiplier=1.0, **params)  # validate the parameters up front
    return calibrate_noise_multiplier(
        lambda z: last_iterate_rdp(noise_multiplier=z, **params), target_epsilon, delta,
        rtol=rtol)
