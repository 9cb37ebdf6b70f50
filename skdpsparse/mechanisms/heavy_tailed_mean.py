"""The plan of a private heavy-tailed mean, every method: what
:class:`~skdpsparse.mean.DPHeavyTailedMean` will spend, with which noise and bounds,
computed from public numbers before the data are read (:func:`plan_heavy_tailed_mean`),
and the run that follows it (:func:`heavy_tailed_mean`).

The methods and their proofs are in :mod:`skdpsparse.mechanisms.heavy_tailed`: the
located clipping interval (private_clip, :class:`~.heavy_tailed_clip.QuantileClipPlan`), the
clipped mean on stated bounds (:class:`~.heavy_tailed_clip.ClippedMeanPlan`), the trimmed
median of means (:class:`~.heavy_tailed.CWMEPlan`) and the noise-smoothing mean
(:class:`~.heavy_tailed.NoiseSmoothingPlan`). This module only chooses among them and
resolves the automatic parameters (τ of Corollary 4.2, the number of groups), all
from (n, d) and the parameters.
"""

from dataclasses import dataclass

import numpy as np

from ..accounting import (
    ZCDP, ApproxDP, PureDP, PureDPEvent, ZCDPEvent, approx_dp_to_zcdp, with_event,
)
from .heavy_tailed import (
    cwme, n_groups_for, nsme, plan_cwme, plan_noise_smoothing, truncation_for,
)
from .heavy_tailed_clip import (
    SCALE_FRACTION, clipped_mean, laplace_epsilon_after, laplace_is_better, plan_clipped_mean,
    plan_quantile_clipped_mean, quantile_clipped_mean,
)

# Public, but not yet in __all__: every name there must be listed in doc/api.rst
# (tests/test_package_surface.py), which this module's names are not yet.
__all__ = []

METHODS = ("auto", "private_clip", "cwme", "noise_smoothing")


def check_center(center, n_features):
    """``center`` as a finite float64 vector of length ``n_features``."""
    arr = np.asarray(center, dtype=np.float64) if center is not None else np.zeros(1)
    if arr.ndim == 0 or arr.shape == (1,):
        arr = np.full(n_features, float(arr.reshape(-1)[0]))
    if arr.shape != (n_features,):
        raise ValueError(f"center must be a float or have shape ({n_features},), "
                         f"got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise ValueError("center must be finite.")
    return arr


def check_bounds(bounds, n_features):
    """``bounds`` as two finite float64 vectors of length ``n_features``."""
    if not isinstance(bounds, (tuple, list)) or len(bounds) != 2:
        raise ValueError(f"bounds must be a pair (lower, upper), got {bounds!r}.")
    out = []
    for name, value in zip(("lower", "upper"), bounds):
        arr = np.asarray(value, dtype=np.float64)
        if arr.ndim == 0:
            arr = np.full(n_features, float(arr))
        if arr.shape != (n_features,):
            raise ValueError(f"bounds: {name} must be a float or have shape "
                             f"({n_features},), got shape {arr.shape}.")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"bounds: {name} must be finite.")
        out.append(arr)
    return out[0], out[1]


def resolved_method(method, truncation):
    """``method`` with "auto" resolved: a stated numeric ``truncation`` τ is a scale
    for cwme (the estimator τ belongs to), otherwise private_clip."""
    if method != "auto":
        return method
    return "private_clip" if isinstance(truncation, str) else "cwme"


@dataclass(frozen=True)
class HeavyTailedMeanPlan:
    """Everything a private heavy-tailed mean runs with, fixed before the data are
    read (built by :func:`plan_heavy_tailed_mean`, run by :func:`heavy_tailed_mean`).

    **Privacy guarantee.** A plan is public (no field depends on the data).
    ``budget`` is the guarantee of :func:`heavy_tailed_mean` run with it, for one row
    of the n replaced (n and d public): the guarantee of ``mechanism``, whose class
    states its theorem (:class:`~skdpsparse.mechanisms.heavy_tailed_clip.QuantileClipPlan`,
    :class:`~skdpsparse.mechanisms.heavy_tailed_clip.ClippedMeanPlan`,
    :class:`~skdpsparse.mechanisms.heavy_tailed.CWMEPlan`,
    :class:`~skdpsparse.mechanisms.heavy_tailed.NoiseSmoothingPlan`); for stated
    bounds with Laplace noise and δ > 0, (ε, δ)-DP by Rényi accounting of the ε_m-DP
    release (:func:`~skdpsparse.mechanisms.heavy_tailed_clip.laplace_epsilon_after`). The
    secret permutation of cwme's groups (``shuffle``) leaves the sensitivity
    unchanged (it holds for every assignment). ``approx_dp`` is the (ε, δ) that
    ``budget`` implies at the requested δ. A plan whose ``mechanism`` has less noise
    or wider bounds than the one planned is not covered by ``budget``: the audit's
    broken variants are such plans.

    Attributes
    ----------
    method : {"private_clip", "clipped", "cwme", "noise_smoothing"}
        What runs (``"clipped"``: private_clip on stated bounds).
    mechanism : QuantileClipPlan, ClippedMeanPlan, CWMEPlan or NoiseSmoothingPlan
    shuffle : bool
        cwme: rows assigned to groups by a secret random permutation.
    budget : ZCDP, PureDP or ApproxDP (with its event when it has one)
    approx_dp : ApproxDP or PureDP
    warning : str or None
        Why the plan is likely to be inaccurate (too few rows to locate the scale;
        public numbers only), for the estimator to warn with.
    """

    method: str
    mechanism: object
    shuffle: bool
    budget: object
    approx_dp: object
    warning: str | None = None

    @property
    def truncation(self):
        """τ of cwme and noise_smoothing (None otherwise)."""
        return getattr(self.mechanism, "tau", None)


def _auto_truncation(n, d, epsilon, delta, method, moment, moment_bound):
    if method == "noise_smoothing":
        return truncation_for("cdpnsme", n, d, moment,
                              rho=approx_dp_to_zcdp(epsilon, delta), moment_bound=moment_bound)
    if delta > 0:
        return truncation_for("cdpcwme", n, d, moment, rho=approx_dp_to_zcdp(epsilon, delta),
                              moment_bound=moment_bound)
    return truncation_for("dpcwme", n, d, moment, epsilon=epsilon, moment_bound=moment_bound)


def _plan_bounds(n, d, bounds, epsilon, delta, noise):
    """private_clip on stated bounds: the whole budget to the clipped mean."""
    lower, upper = check_bounds(bounds, d)
    if delta == 0 and noise == "gaussian":
        raise ValueError("noise='gaussian' needs delta > 0.")
    laplace = noise == "laplace" or (noise == "auto" and laplace_is_better(d, epsilon, delta))
    if not laplace:
        rho = approx_dp_to_zcdp(epsilon, delta)
        plan = plan_clipped_mean(n, lower, upper, rho=rho)
        budget = with_event(ZCDP(rho), ZCDPEvent(rho))
    elif delta > 0:  # ε_m-DP with ε_m from Rényi accounting at δ (at least ε)
        eps_m = laplace_epsilon_after([], epsilon, delta)
        plan = plan_clipped_mean(n, lower, upper, epsilon=eps_m)
        budget = with_event(ApproxDP(epsilon, delta), PureDPEvent(eps_m))
    else:
        plan = plan_clipped_mean(n, lower, upper, epsilon=epsilon)
        budget = PureDP(epsilon)
    return plan, budget


def _located_warning(plan, clip_level):
    n, d, eps = plan.n_samples, plan.n_features, plan.epsilon
    if plan.shared:
        return (f"n={n} rows are too few to locate the scale of {d} columns one by one "
                f"privately at epsilon={eps:g}: one interval [-C, C] shared by all "
                "columns was located instead (it ignores each column's centre and "
                "spread). State bounds=(lower, upper) if you can.")
    if clip_level == "auto" and plan.level >= 1.0 / 16.0:
        return (f"n={n} rows are too few to locate the scale of {d} column(s) privately "
                f"at epsilon={eps:g}: the clipping interval may be far too wide. State "
                "bounds=(lower, upper) if you can.")
    return None


def plan_heavy_tailed_mean(n_samples, n_features, *, epsilon=1.0, delta=1e-6, moment=2,
                           moment_bound=1.0, method="auto", bounds=None,
                           scale_fraction=SCALE_FRACTION, clip_level="auto",
                           noise="auto", truncation="auto", failure_prob=0.1,
                           n_groups="auto", center=0.0, smoothing_variance=1.0,
                           shuffle=True):
    """The plan of a private heavy-tailed mean, from public numbers (the parameters
    of :class:`~skdpsparse.mean.DPHeavyTailedMean`, whose docstring describes them,
    and n, d).

    **Privacy guarantee.** Public numbers in, a public plan out; what the plan
    guarantees is its ``budget`` (:class:`HeavyTailedMeanPlan`). δ = 0 or None is pure
    ε-DP. Automatic parameters are functions of (n, d, ε, δ, k, M, β) only:
    τ of Kamath, Liu and Zhang (2022), "Improved rates for differentially private
    stochastic convex optimization with heavy-tailed data", Corollary 4.2
    (:func:`~skdpsparse.mechanisms.heavy_tailed.truncation_for`), m = ⌈4 log(2d/β)⌉
    rounded up to even (Algorithm 3; :func:`~skdpsparse.mechanisms.heavy_tailed.n_groups_for`).

    Returns
    -------
    HeavyTailedMeanPlan

    Examples
    --------
    >>> from skdpsparse.mechanisms.heavy_tailed_mean import plan_heavy_tailed_mean
    >>> plan = plan_heavy_tailed_mean(1000, 4, epsilon=1.0, delta=0, method="cwme",
    ...                               truncation=2.0, n_groups=3)
    >>> plan.mechanism.kind, round(plan.mechanism.noise_scale, 6)  # b = d·6τ/⌊n/m⌋/ε
    ('laplace', 0.144144)
    """
    n, d = int(n_samples), int(n_features)
    eps = float(epsilon)
    delta_given, delta = delta, 0.0 if delta is None else float(delta)
    method = resolved_method(method, truncation)
    if method not in METHODS[1:]:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}.")
    if method == "noise_smoothing":
        if delta == 0:
            raise ValueError("method='noise_smoothing' is a Gaussian (zCDP) mechanism: "
                             f"delta must be positive, got delta={delta_given!r}.")
        if moment < 2:
            raise ValueError("method='noise_smoothing' needs a bound on a moment of "
                             f"order k >= 2, got moment={moment!r}.")
    warning = None
    if method == "private_clip" and bounds is not None:
        mech, budget = _plan_bounds(n, d, bounds, eps, delta, noise)
        method = "clipped"
    elif method == "private_clip":
        mech = plan_quantile_clipped_mean(n, d, epsilon=eps, delta=delta,
                                          scale_fraction=float(scale_fraction),
                                          level=clip_level, noise=noise)
        budget, warning = mech.budget, _located_warning(mech, clip_level)
    else:
        tau = (float(truncation) if truncation not in ("auto", "corollary_4_2") else
               _auto_truncation(n, d, eps, delta, method, moment, moment_bound))
        if method == "cwme":
            m = (n_groups_for(d, failure_prob, n, even=True) if n_groups == "auto"
                 else min(int(n_groups), n))
            mech = plan_cwme(n, d, tau=tau, n_groups=m, epsilon=eps, delta=delta,
                             center=check_center(center, d))
        else:
            mech = plan_noise_smoothing(n, d, tau=tau, epsilon=eps, delta=delta,
                                        smoothing_variance=float(smoothing_variance))
        budget = mech.budget
    approx = budget.to_approx_dp(delta) if isinstance(budget, ZCDP) else budget
    return HeavyTailedMeanPlan(method, mech, bool(shuffle) and method == "cwme", budget,
                               approx, warning)


def heavy_tailed_mean(X, plan, rng):
    """Run a :class:`HeavyTailedMeanPlan` on ``X``.

    **Privacy guarantee.** ``plan.budget`` for one row of ``X`` replaced (n and d
    public), for a plan from :func:`plan_heavy_tailed_mean`
    (:class:`HeavyTailedMeanPlan`). Assumptions: a secret random source. Not covered:
    add/remove neighbours; user-level privacy; timing side channels.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, d)
        Finite (a non-finite entry raises before anything is released).
    plan : HeavyTailedMeanPlan
    rng : RandomSource

    Returns
    -------
    mean : ndarray of shape (d,)
    info : dict
        ``noise_scale`` (float, or per column for a clipped mean); ``lower``,
        ``upper`` (clipped means), ``level`` (private_clip).
    """
    mech = plan.mechanism
    if plan.method == "cwme":
        # shuffle: secret labels with the consecutive sizes, one byte per row for up
        # to 256 groups (heavy_tailed_scaled.random_groups), drawn before the noise.
        return cwme(X, mech, rng, shuffle=plan.shuffle), {"noise_scale": mech.noise_scale}
    if plan.method == "noise_smoothing":
        return nsme(X, mech, rng), {"noise_scale": mech.noise_scale}
    if plan.method == "clipped":
        mean = clipped_mean(X, mech, rng)
        return mean, {"lower": mech.lower, "upper": mech.upper,
                      "noise_scale": mech.noise_scale * mech.width}
    mean, info = quantile_clipped_mean(X, mech, rng)
    return mean, {"lower": info["lower"], "upper": info["upper"], "level": mech.level,
                  "noise_scale": info["scale"] * (info["upper"] - info["lower"])}
