"""Private stochastic convex optimization with heavy-tailed gradients (Kamath, Liu and Zhang 2022,
Algorithms 1-2, Theorems 5.2, 5.5, 5.7) for linear models.

Projected gradient descent on the ℓ2 ball of radius D (diameter M = 2D) whose
gradient at each step is a private mean of the per-example gradients, computed by
one of the heavy-tailed mean mechanisms of :mod:`skdpsparse.mechanisms.heavy_tailed`
(the same functions the mean estimator releases; here they are the gradient oracle).
For a linear model the per-example gradient is ``l'(z_i, y_i) x_i`` (with a constant
feature for the intercept), a scaled row, so the oracle reads it without forming
the ``n x d`` gradient matrix.

Plan, then run: :func:`plan_heavy_tailed_sco` fixes every step's oracle plan (its
noise scale, sensitivity and ρ_t), the batches and the budget from public numbers
(:class:`HeavyTailedSCOPlan`); :func:`run_heavy_tailed_sco` runs it;
:func:`heavy_tailed_sco` is both in one call. For the linear regressor,
:func:`plan_heavy_tailed_regression` goes from (ε, δ) and the declared constants to
that plan (the theorems' schedule, :func:`sco_schedule`), and
:func:`run_heavy_tailed_regression` adds what the fit does to the rows before the
run: the secret permutation, the cap on entries and the intercept's column.

Privacy (replacement neighbours; n, d public)
---------------------------------------------
* **Convex, full data each step** (Algorithm 2): each of the T steps runs the oracle
  on all n rows at ρ/T-zCDP; zCDP composes additively (Kamath, Liu and Zhang 2022,
  Lemma 2.4), so the run is ρ-zCDP (Lemma 5.1). The iterate w^{t-1} at which the
  gradients are taken is a function of earlier releases only (adaptive composition).
* **Strongly convex, disjoint batches** (Algorithm 1's second branch): step t uses
  rows S_t only. Replacing one row changes the input of exactly one step t₀: the
  steps before it have the same law on both datasets, step t₀ is ρ_t-zCDP for every
  fixed w^{t₀-1}, and every later step is a randomized map of w^{t₀} and of rows that
  are the same on both datasets, i.e. post-processing. Hence the run is
  max_t ρ_t-zCDP (parallel composition), and each step gets the full ρ. The seed's
  Algorithm 2 spends ρ/T per step here too: valid, but with T times the noise
  variance needed.
* The rows are put in random order once (a data-independent permutation: the
  guarantee holds for each fixed order, hence for the mixture, Rényi divergence being
  jointly quasi-convex), so that the consecutive groups of the median of means and the
  disjoint batches are exchangeable even when the input is sorted.
* The ridge term (α/2)‖w‖² of the strongly convex objective is data-independent:
  its gradient αw is added after the oracle, exactly. Projection, averaging and the
  step sizes are post-processing. T, η and τ are chosen from (n, d, ρ, the declared
  bounds) only — never from the data.
"""

import math
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from .._kernels.linear_losses import (HUBER, SQUARED, csr_margins, dense_margins,
                                      per_example_derivatives)
from .._kernels.projections import project_l2_ball
from ..accounting import ZCDP, approx_dp_to_zcdp
from .heavy_tailed import cwme, n_groups_for, nsme, plan_cwme, plan_noise_smoothing

__all__ = ["ORACLES", "SETTINGS", "HeavyTailedSCOPlan", "heavy_tailed_sco", "nsme_exponent",
           "plan_heavy_tailed_regression", "plan_heavy_tailed_sco",
           "run_heavy_tailed_regression", "run_heavy_tailed_sco", "sco_schedule",
           "zero_model_bound_ratio", "zero_model_rows_needed"]

ORACLES = ("cwme", "noise_smoothing")
SETTINGS = ("convex", "strongly_convex")
DEFAULT_MAX_AUTO_ITER = 1000
_FLOAT_MAX = float(np.finfo(np.float64).max)
#: Entries of X and y beyond ±ENTRY_CAP are capped before the run, so that margins
#: cannot overflow into inf - inf = NaN (a fixed map of each row: no privacy cost).
ENTRY_CAP = 1e150
_LOSS_CODES = {"squared": SQUARED, "huber": HUBER}


def nsme_exponent(d, rho):
    """q of Theorem 5.5: the q in [0.5, 2] minimising its bound's q-dependent part
    d^{(3-q)/2} + d^{(1+q)/2} ρ^{-1/4} (Remark 5.6: "choose q which minimizes their
    sum"), on a grid of step 0.01; q = 1 when d = 1 (the bound does not depend on q).

    **Privacy guarantee.** None needed: a function of public numbers only (d and ρ;
    no data enter it). q only shapes the truncation τ, and the noise-smoothing
    oracle is ρ_t-zCDP for every τ > 0: q affects accuracy, not privacy.
    """
    if d == 1:
        return 1.0
    q = np.linspace(0.5, 2.0, 151)
    bound = d ** ((3 - q) / 2) + d ** ((1 + q) / 2) * rho ** -0.25
    return float(q[np.argmin(bound)])


def sco_schedule(setting, oracle, n, d, rho, *, moment=2.0, moment_bound=1.0, diameter=2.0,
                 gradient_bound=1.0, smoothness=1.0, strong_convexity=0.0, n_iter=None,
                 max_iter=DEFAULT_MAX_AUTO_ITER):
    """T, η, τ (and q) of Kamath, Liu and Zhang (2022), theorems for the given public parameters.

    * convex, cwme (Theorem 5.2): τ = (√ρ n/(M d^{3/2}))^{1/k}, T = R²ρn²/(τ²d⁴),
      η = M/(R√T);
    * convex, noise_smoothing (Theorem 5.5): τ = (√ρ n/(M d^q))^{1/2} with
      q = :func:`nsme_exponent`, T = R²ρn²/(τ²d²), η = M/(R√T);
    * strongly convex, cwme (Theorem 5.7): G = √(d/n) + √d (√d/(√ρ n))^{(k-1)/k},
      T = log((λ+L)G/(λL)) / log((λ²+L²+λL)/(λ+L)²), η = 1/(λ+L), and τ from
      Corollary 4.2 for one step, (√ρ_t n_t/√d)^{1/k} with n_t = n/T rows and ρ_t = ρ
      (parallel composition, module notes); with the seed's ρ_t = ρ/T this is its
      τ = (√ρ n/(√d T^{3/2}))^{1/k}. For noise_smoothing, the k = 2 analogue
      (√ρ n_t/√d)^{1/2}.

    M is the diameter, R the bound on the norm of the expected gradient, L the
    smoothness, λ the strong convexity, k the moment; τ is multiplied by γ^{1/k} for
    a k-th moment bound γ (the theorems take γ = 1; standardisation as in
    :func:`~skdpsparse.mechanisms.heavy_tailed.truncation_for`). T is rounded up and
    clipped to [1, ``max_iter``] (or is ``n_iter`` when given), and at most n for
    disjoint batches; η and τ are then computed for the T used (Theorems 3.1-3.2
    hold for any T).

    **Privacy guarantee.** None needed: a function of public numbers only (n, d, ρ and
    the declared bounds; no data enter it), so T, η and τ may be published. The
    guarantee of :func:`heavy_tailed_sco` holds for any T, η and τ > 0 it is run with
    (each step's oracle is ρ_t-zCDP for every τ, η is post-processing, and
    :func:`heavy_tailed_sco` derives ρ_t from ρ and T itself: ρ/T on the full data,
    ρ on disjoint batches); the schedule sets the accuracy only, and the returned
    ``rho_step`` restates that split. Not covered: arguments estimated from the data
    (a moment, gradient or smoothness bound measured on ``X`` would make the
    schedule, hence the release, depend on the data without being charged).

    Returns
    -------
    dict with ``n_iter``, ``learning_rate``, ``truncation``, ``rho_step``,
    ``batch_size`` (rows per step), ``theorem_n_iter`` (before clipping), ``q``.
    """
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {SETTINGS}, got {setting!r}.")
    if oracle not in ORACLES:
        raise ValueError(f"oracle must be one of {ORACLES}, got {oracle!r}.")
    k, gamma, M, R = float(moment), float(moment_bound), float(diameter), float(gradient_bound)
    scale = gamma ** (1.0 / k)
    q = None
    if setting == "convex":
        if oracle == "cwme":
            tau = (math.sqrt(rho) * n / (M * d ** 1.5)) ** (1.0 / k)
            t_theorem = R**2 * rho * n**2 / (tau**2 * d**4)
        else:
            q = nsme_exponent(d, rho)
            tau = (math.sqrt(rho) * n / (M * d**q)) ** 0.5
            t_theorem = R**2 * rho * n**2 / (tau**2 * d**2)
        T = _steps(t_theorem, n_iter, max_iter)
        eta = M / (R * math.sqrt(T))
        rho_step = rho / T
        batch = n
    else:
        lam, L = float(strong_convexity), float(smoothness)
        if not lam > 0:
            raise ValueError("the strongly convex setting needs strong_convexity > 0.")
        G = math.sqrt(d / n) + math.sqrt(d) * (math.sqrt(d) / (math.sqrt(rho) * n)) ** (
            (k - 1) / k)
        ratio = (lam**2 + L**2 + lam * L) / (lam + L) ** 2  # in (3/4, 1)
        t_theorem = math.log((lam + L) * G / (lam * L)) / math.log(ratio)
        T = min(_steps(t_theorem, n_iter, max_iter), n)
        eta = 1.0 / (lam + L)
        rho_step = rho
        batch = n // T
        power = 1.0 / k if oracle == "cwme" else 0.5
        tau = (math.sqrt(rho_step) * batch / math.sqrt(d)) ** power
    return {"n_iter": T, "learning_rate": eta, "truncation": tau * scale,
            "rho_step": rho_step, "batch_size": batch, "theorem_n_iter": t_theorem, "q": q}


def _steps(t_theorem, n_iter, max_iter):
    if n_iter is not None:
        return int(n_iter)
    return int(min(max(math.ceil(t_theorem), 1), max_iter))


def _margins(X, w):
    if sp.issparse(X):
        return csr_margins(X.indptr, X.indices, X.data, w, 0.0)
    return dense_margins(X, w, 0.0)


@dataclass(frozen=True)
class HeavyTailedSCOPlan:
    """Everything :func:`run_heavy_tailed_sco` runs with, fixed before the data are
    read (built by :func:`plan_heavy_tailed_sco` from n, p and the schedule only).

    **Privacy guarantee.** A plan is public (no field depends on the data).
    ``budget`` = ρ-zCDP is the guarantee of :func:`run_heavy_tailed_sco` run with it,
    for one row (x, y) replaced (n and p public): each step's gradient is released by
    the oracle plan ``step`` (:class:`~skdpsparse.mechanisms.heavy_tailed.CWMEPlan` or
    :class:`~skdpsparse.mechanisms.heavy_tailed.NoiseSmoothingPlan`), ρ_t-zCDP for one
    row whatever its size; convex setting: T steps at ρ_t = ρ/T on all rows, composed
    additively (Bun and Steinke 2016, "Concentrated differential privacy:
    simplifications, extensions, and lower bounds", Lemma 2.3; Kamath, Liu and Zhang
    2022, Lemma 5.1); strongly convex setting: disjoint batches at ρ_t = ρ each, by
    parallel composition (module docstring). A plan whose ``step`` has less noise
    than its ``rho_step`` calls for is not covered by ``budget``.

    Attributes
    ----------
    n_samples, n_features : int
        n and p (the intercept's constant column included).
    oracle : {"cwme", "noise_smoothing"}
    setting : {"convex", "strongly_convex"}
    n_iter : int
        T.
    learning_rate, truncation : float
        η and τ.
    rho, rho_step : float
        The run's ρ and each step's.
    batch_size : int
        Rows per step (n, or n // T for disjoint batches).
    radius : float
        D.
    alpha : float
        Ridge weight.
    penalized : ndarray of float of shape (p,)
        1 where the ridge applies.
    loss_code, loss_param : int, float
    step : CWMEPlan or NoiseSmoothingPlan
        The oracle's plan for one step (its noise scale, sensitivity, budget).
    budget : ZCDP
    fit_intercept : bool
        Whether the last of the p columns is the intercept's constant column, added
        by :func:`run_heavy_tailed_regression` (False for plans of
        :func:`plan_heavy_tailed_sco`, whose X has its columns already).
    """

    n_samples: int
    n_features: int
    oracle: str
    setting: str
    n_iter: int
    learning_rate: float
    truncation: float
    rho: float
    rho_step: float
    batch_size: int
    radius: float
    alpha: float
    penalized: np.ndarray = field(compare=False, repr=False)
    loss_code: int
    loss_param: float
    step: object
    budget: ZCDP
    fit_intercept: bool = False

    @property
    def n_groups(self):
        """m of cwme (None for noise smoothing)."""
        return getattr(self.step, "n_groups", None)


def plan_heavy_tailed_sco(n_samples, n_features, *, loss_code, loss_param, oracle, setting,
                          n_iter, learning_rate, truncation, rho, radius, alpha=0.0,
                          failure_prob=0.1, smoothing_variance=1.0, penalized=None):
    """The plan of Kamath, Liu and Zhang (2022) Algorithm 1 with a heavy-tailed mean
    oracle, from public numbers (arguments as :func:`heavy_tailed_sco`, with n and p
    for the data).

    **Privacy guarantee.** Public numbers in, a public plan out; what the plan
    guarantees is its ``budget``, ρ-zCDP (:class:`HeavyTailedSCOPlan`): the oracle
    of every step is planned at ρ_t = ρ/T (convex, all rows) or ρ (disjoint batches
    of n // T rows), with m = ⌈4 log(2p/β)⌉ rounded up to even groups for cwme
    (:func:`~skdpsparse.mechanisms.heavy_tailed.n_groups_for`, at most the rows of a
    step).

    Returns
    -------
    HeavyTailedSCOPlan

    Examples
    --------
    >>> from skdpsparse.mechanisms.heavy_tailed_sco import plan_heavy_tailed_sco
    >>> plan = plan_heavy_tailed_sco(1000, 3, loss_code=0, loss_param=0.0,
    ...                              oracle="cwme", setting="convex", n_iter=10,
    ...                              learning_rate=0.1, truncation=2.0, rho=0.5,
    ...                              radius=1.0)
    >>> plan.rho_step, plan.n_groups, plan.budget.rho
    (0.05, 18, 0.5)
    """
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {SETTINGS}, got {setting!r}.")
    if oracle not in ORACLES:
        raise ValueError(f"oracle must be one of {ORACLES}, got {oracle!r}.")
    n, p, T = int(n_samples), int(n_features), int(n_iter)
    if setting == "convex":
        rho_step, batch = rho / T, n
    else:
        rho_step, batch = rho, n // T
        if batch < 1:
            raise ValueError(f"n_iter={T} disjoint batches need at least {T} rows, got {n}.")
    if oracle == "cwme":
        m = n_groups_for(p, failure_prob, batch, even=True)
        step = plan_cwme(batch, p, tau=truncation, n_groups=m, rho=rho_step)
    else:
        step = plan_noise_smoothing(batch, p, tau=truncation, rho=rho_step,
                                    smoothing_variance=smoothing_variance)
    mask = np.ones(p) if penalized is None else np.asarray(penalized, dtype=np.float64)
    return HeavyTailedSCOPlan(
        n_samples=n, n_features=p, oracle=oracle, setting=setting, n_iter=T,
        learning_rate=float(learning_rate), truncation=float(truncation), rho=float(rho),
        rho_step=rho_step, batch_size=batch, radius=float(radius), alpha=float(alpha),
        penalized=mask, loss_code=int(loss_code), loss_param=float(loss_param), step=step,
        budget=ZCDP(rho))


def run_heavy_tailed_sco(X, y, plan, rng, *, callback=None):
    """Run a :class:`HeavyTailedSCOPlan`: projected gradient descent whose gradient at
    each step is the oracle's private mean of the per-example gradients.

    **Privacy guarantee.** ``plan.budget`` (ρ-zCDP) for one row (x, y) replaced (n and
    p public), for a plan from :func:`plan_heavy_tailed_sco`
    (:class:`HeavyTailedSCOPlan`). Assumptions: ``X`` already in an order independent
    of the data's values (the caller permutes with the fit's key); ``rng`` secret.
    Not covered: the noise when ``rng`` is known (a fixed seed), and the run's
    duration.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n, p)
    y : ndarray of shape (n,)
    plan : HeavyTailedSCOPlan
    rng : RandomSource or numpy.random.Generator
    callback : callable, optional
        ``callback(t, w)`` after every step.

    Returns
    -------
    w : ndarray of shape (p,)
    info : dict
        ``n_groups``, ``noise_scale`` (per coordinate, per step), ``rho_step``,
        ``batch_size``.
    """
    n, p = X.shape
    if (n, p) != (plan.n_samples, plan.n_features):
        raise ValueError(f"X has shape {X.shape}, but the plan is for "
                         f"({plan.n_samples}, {plan.n_features}).")
    T, batch, step = plan.n_iter, plan.batch_size, plan.step
    oracle = cwme if plan.oracle == "cwme" else nsme
    w = np.zeros(p)
    w_sum = np.zeros(p)
    for t in range(T):
        if plan.setting == "convex":
            Xt, yt = X, y
        else:
            Xt, yt = X[t * batch:(t + 1) * batch], y[t * batch:(t + 1) * batch]
        der = per_example_derivatives(_margins(Xt, w), yt, plan.loss_code, plan.loss_param)
        # A finite row whose margin is beyond float64 gets the margin ±inf (never NaN,
        # :mod:`skdpsparse._kernels.linear_losses`), hence ℓ' = ±inf for the squared
        # loss, and inf·0 = NaN on its zero entries inside the oracle. Clamp to the
        # largest finite float of the same sign: a fixed map of the row (and of the
        # public w), so the oracle's bound on one row's contribution is unchanged.
        np.clip(der, -_FLOAT_MAX, _FLOAT_MAX, out=der)
        grad = oracle(Xt, step, rng, scale=der)
        if plan.alpha:
            grad += plan.alpha * plan.penalized * w
        w = w - plan.learning_rate * grad
        project_l2_ball(w, plan.radius, w)
        w_sum += w
        if callback is not None:
            callback(t, w)
    out = w_sum / T if plan.setting == "convex" else w
    return out, {"n_groups": plan.n_groups, "noise_scale": step.noise_scale,
                 "rho_step": plan.rho_step, "batch_size": batch}


def heavy_tailed_sco(X, y, *, loss_code, loss_param, oracle, setting, n_iter, learning_rate,
                     truncation, rho, radius, rng, alpha=0.0, failure_prob=0.1,
                     smoothing_variance=1.0, penalized=None, callback=None):
    """Run Algorithm 1 with a heavy-tailed mean oracle; ρ-zCDP in total.

    **Privacy guarantee.** Protected: one row (x, y) under replacement neighbours (n,
    p and the schedule are public). ρ-zCDP: each step's gradient is a private mean of
    the per-example gradients (cwme or noise smoothing, each ρ_t-zCDP for one row
    whatever its size, by the truncation τ: Kamath, Liu and Zhang (2022), "Improved
    rates for differentially private stochastic convex optimization with heavy-tailed
    data", Algorithms 3 and 4); convex setting: T steps at ρ/T composed additively
    (Bun and Steinke (2016), "Concentrated differential privacy: simplifications,
    extensions, and lower bounds", Lemma 2.3; Kamath et al. (2022), Lemma 5.1);
    strongly convex setting: disjoint batches, each step at ρ, by parallel
    composition (module doc). Assumptions: ``X`` already in an order independent of
    the data's values (the caller permutes with the fit's key), T, η and τ chosen
    from public numbers, and ``rng`` secret. Not covered: the noise when ``rng`` is
    known (a fixed seed), and the fit's duration.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n, p)
        Features, already in random order (the caller permutes), with a constant
        column if an intercept is wanted. Never rescaled or clipped here: the oracle
        bounds each row's influence, whatever its size (every finite row is used:
        margins beyond float64 are ±inf, never NaN, and ℓ' is clamped to ±the largest
        float).
    y : ndarray of shape (n,)
    loss_code, loss_param : int, float
        A loss of :mod:`skdpsparse._kernels.linear_losses` (derivative in the margin).
    oracle : {"cwme", "noise_smoothing"}
    setting : {"convex", "strongly_convex"}
        Full data each step and the average iterate, or disjoint consecutive batches
        of n // T rows (the last n mod T rows unused) and the last iterate.
    n_iter, learning_rate, truncation : int, float, float
        T, η, τ (see :func:`sco_schedule`); public.
    rho : float
        Total zCDP budget; each step spends ρ/T (convex) or ρ (disjoint batches).
    radius : float
        D: iterates are projected onto {‖w‖₂ ≤ D}.
    rng : numpy.random.Generator
    alpha : float, default=0.0
        Ridge weight: αw (on the ``penalized`` coordinates) is added to each private
        gradient.
    failure_prob : float, default=0.1
        β for the number of groups of cwme (⌈4 log(2p/β)⌉, rounded up to even).
    smoothing_variance : float, default=1.0
        c of noise_smoothing.
    penalized : ndarray of bool of shape (p,), optional
        Coordinates the ridge applies to (all by default; not the intercept).
    callback : callable, optional
        ``callback(t, w)`` after every step (progress reporting).

    Returns
    -------
    w : ndarray of shape (p,)
    info : dict
        ``n_groups``, ``noise_scale`` (per coordinate, per step), ``rho_step``,
        ``batch_size``.
    """
    plan = plan_heavy_tailed_sco(
        *X.shape, loss_code=loss_code, loss_param=loss_param, oracle=oracle,
        setting=setting, n_iter=n_iter, learning_rate=learning_rate, truncation=truncation,
        rho=rho, radius=radius, alpha=alpha, failure_prob=failure_prob,
        smoothing_variance=smoothing_variance, penalized=penalized)
    return run_heavy_tailed_sco(X, y, plan, rng, callback=callback)


def plan_heavy_tailed_regression(n_samples, n_features, *, epsilon, delta, radius,
                                 loss="squared", huber_threshold=1.0,
                                 oracle="noise_smoothing", alpha=0.0, fit_intercept=True,
                                 max_iter="auto", learning_rate="auto", truncation="auto",
                                 moment=2.0, moment_bound=1.0, gradient_bound=1.0,
                                 smoothness=1.0, failure_prob=0.1, smoothing_variance=1.0):
    """The plan of :class:`~skdpsparse.linear_model.DPHeavyTailedRegressor`'s fit, from
    public numbers: ρ from (ε, δ), the setting from α, T, η and τ from
    :func:`sco_schedule` unless given (``"auto"``: the theorems' values, T capped at
    1000 steps and at n for disjoint batches), then :func:`plan_heavy_tailed_sco` on
    p = d + 1 columns with an intercept (which the ridge does not penalise).

    **Privacy guarantee.** Public numbers in (n, d, ε, δ and the declared constants;
    no data enter), a public plan out; what it guarantees is its ``budget``, ρ-zCDP
    for one row (x, y) replaced, when run by :func:`run_heavy_tailed_regression`
    (:class:`HeavyTailedSCOPlan`). ρ is the largest value whose conversion (Canonne,
    Kamath and Steinke 2020, "The discrete Gaussian for differential privacy",
    Corollary 13) gives (ε, δ)-DP. Assumptions: the constants are declared, not
    measured on the data. Not covered: constants estimated from the data (the plan,
    hence the release, would then depend on the data without being charged).

    Parameters
    ----------
    n_samples, n_features : int
        n and d (without the intercept).
    epsilon, delta : float
        The (ε, δ)-DP target, converted to ρ-zCDP.
    radius : float
        D: the parameters (w, b) stay in the ℓ2 ball of radius D (diameter M = 2D).
    loss : {"squared", "huber"}, default="squared"
    huber_threshold : float, default=1.0
    oracle : {"cwme", "noise_smoothing"}, default="noise_smoothing"
    alpha : float, default=0.0
        Ridge weight; > 0 selects the strongly convex setting (disjoint batches).
    fit_intercept : bool, default=True
    max_iter, learning_rate, truncation : "auto", int or float
        T, η and τ, or ``"auto"`` for :func:`sco_schedule`'s.
    moment, moment_bound, gradient_bound, smoothness : float
        k, γ, R and L of :func:`sco_schedule`.
    failure_prob : float, default=0.1
        β for cwme's number of groups.
    smoothing_variance : float, default=1.0
        c of noise_smoothing.

    Returns
    -------
    HeavyTailedSCOPlan
        With ``fit_intercept`` set.

    Examples
    --------
    >>> from skdpsparse.mechanisms.heavy_tailed_sco import plan_heavy_tailed_regression
    >>> plan = plan_heavy_tailed_regression(20000, 3, epsilon=1.0, delta=1e-6,
    ...                                     radius=2.0)
    >>> plan.n_features, plan.fit_intercept, plan.setting, plan.n_iter
    (4, True, 'convex', 1000)
    >>> plan.penalized.tolist()  # the ridge (none here) would spare the intercept
    [1.0, 1.0, 1.0, 0.0]
    """
    if loss not in _LOSS_CODES:
        raise ValueError(f"loss must be one of {tuple(_LOSS_CODES)}, got {loss!r}.")
    n, d = int(n_samples), int(n_features)
    p = d + bool(fit_intercept)
    rho = approx_dp_to_zcdp(float(epsilon), float(delta))
    setting = "strongly_convex" if alpha > 0 else "convex"
    sched = sco_schedule(
        setting, oracle, n, p, rho, moment=moment, moment_bound=moment_bound,
        diameter=2.0 * radius, gradient_bound=gradient_bound, smoothness=smoothness,
        strong_convexity=alpha, max_iter=DEFAULT_MAX_AUTO_ITER,
        n_iter=None if _is_auto(max_iter) else int(max_iter))
    eta = sched["learning_rate"] if _is_auto(learning_rate) else float(learning_rate)
    tau = sched["truncation"] if _is_auto(truncation) else float(truncation)
    penalized = np.ones(p, dtype=bool)
    if fit_intercept:
        penalized[-1] = False  # the intercept is not penalised
    param = 0.0 if loss == "squared" else float(huber_threshold)
    plan = plan_heavy_tailed_sco(
        n, p, loss_code=_LOSS_CODES[loss], loss_param=param, oracle=oracle,
        setting=setting, n_iter=sched["n_iter"], learning_rate=eta, truncation=tau,
        rho=rho, radius=radius, alpha=float(alpha), failure_prob=float(failure_prob),
        smoothing_variance=float(smoothing_variance), penalized=penalized)
    return replace(plan, fit_intercept=bool(fit_intercept))


def zero_model_bound_ratio(plan, gradient_bound=1.0):
    """The convex setting's excess-risk bound over the ball, as a fraction of R·D, the
    most the zero model (w, b) = 0 can lose to the best model in the ball.

    The bound. Kamath, Liu and Zhang (2022), "Improved rates for differentially
    private stochastic convex optimization with heavy-tailed data", prove Theorems 5.2
    and 5.5 from their Theorem 3.1 (projected gradient descent with a gradient oracle
    of ℓ2 error at most α, step η = M/(R√T)): the average iterate's excess risk over
    the ball is at most M R/√T + M α, M = 2D the diameter. Here α is lower-bounded by
    the norm of the oracle's Gaussian noise alone, σ√p (σ the plan's per-coordinate
    noise scale, p the columns with the intercept's): the truncation bias and the
    theorems' logarithmic factors are dropped, so
    B = 2D R/√T + 2D σ√p is at most the theorem's bound (assumption: Theorem 3.1's
    constant is 1 as stated; a larger one makes B only more optimistic).

    The scale. The zero model is in the ball and, by convexity and Assumption
    2.12.6 at w = 0 (‖∇F(0)‖₂ ≤ R), F(0) − F(w) ≤ ⟨∇F(0), −w⟩ ≤ R D for every w of
    the ball. When B ≥ R D the theorem's guarantee F(w̄) ≤ min_ball F + B does not
    imply F(w̄) < F(0): it cannot promise a fit better than predicting 0.

    **Privacy guarantee.** None needed: a function of a public plan (n, p, ε, δ and
    the declared constants, no data) and of the declared R.

    Parameters
    ----------
    plan : HeavyTailedSCOPlan
        Of the convex setting (``alpha == 0``).
    gradient_bound : float, default=1.0
        R, as declared to the estimator.

    Returns
    -------
    float
        B / (R D); below 1 is needed for the theorem to promise beating the zero model.

    Examples
    --------
    >>> from skdpsparse.mechanisms.heavy_tailed_sco import (
    ...     plan_heavy_tailed_regression, zero_model_bound_ratio)
    >>> plan = plan_heavy_tailed_regression(20000, 3, epsilon=1.0, delta=1e-6,
    ...                                     radius=2.0)
    >>> round(zero_model_bound_ratio(plan), 2)  # not yet below 1 at n = 20 000
    1.52
    """
    if plan.setting != "convex":
        raise ValueError("zero_model_bound_ratio covers the convex setting (alpha == 0) "
                         f"only, got a plan of the {plan.setting} setting.")
    R = float(gradient_bound)
    noise_norm = plan.step.noise_scale * math.sqrt(plan.n_features)
    return 2.0 / math.sqrt(plan.n_iter) + 2.0 * noise_norm / R


def zero_model_rows_needed(n_features, *, epsilon, delta, radius, gradient_bound=1.0,
                           max_samples=10**15, **plan_params):
    """The fewest rows n at which :func:`zero_model_bound_ratio` of the plan of
    :func:`plan_heavy_tailed_regression` falls below 1 at this (ε, δ), or ``inf``
    when none up to ``max_samples`` does. Multiply by ε for the n·ε the theory needs.

    Found by bisection on n (doubling, then halving), which finds the first n below 1
    when the ratio does not increase with n. It does not near 1: there T is at its
    cap (or fixed by ``max_iter``) and σ falls as n^{-1/2} (``"auto"`` τ) or 1/n (a
    fixed τ). Far above 1 the rounding of T and cwme's groups make the ratio wiggle
    (the tests check both on grids); the answer is then still an n whose ratio is
    below 1 with the ratio of n − 1 at least 1. With the "auto"
    schedule, σ√p stays near 0.9 R below the cap of 1000 steps, so the rows needed
    are those that reach the cap and then shrink the noise.

    **Privacy guarantee.** None needed: public numbers only (d, ε, δ, the declared
    constants), no data.

    Parameters
    ----------
    n_features : int
        d, without the intercept.
    epsilon, delta, radius, gradient_bound : float
        As :func:`plan_heavy_tailed_regression` (``gradient_bound`` is R).
    max_samples : int, default=10**15
        Search no further.
    **plan_params
        The other arguments of :func:`plan_heavy_tailed_regression` (``alpha`` must
        be 0).

    Returns
    -------
    float
        n (an integer value) or ``inf``.

    Examples
    --------
    >>> from skdpsparse.mechanisms.heavy_tailed_sco import zero_model_rows_needed
    >>> zero_model_rows_needed(3, epsilon=1.0, delta=1e-6, radius=2.0)
    48402.0
    """
    def ratio(n):
        plan = plan_heavy_tailed_regression(
            n, n_features, epsilon=epsilon, delta=delta, radius=radius,
            gradient_bound=gradient_bound, **plan_params)
        return zero_model_bound_ratio(plan, gradient_bound)

    lo, hi = 1, 2
    if ratio(lo) < 1.0:
        return 1.0
    while ratio(hi) >= 1.0:  # ratio(lo) >= 1 throughout
        if hi >= max_samples:
            return math.inf
        lo, hi = hi, min(2 * hi, int(max_samples))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ratio(mid) >= 1.0 else (lo, mid)
    return float(hi)


def _is_auto(value):
    return isinstance(value, str) and value == "auto"


def run_heavy_tailed_regression(X, y, plan, rng, *, callback=None):
    """Run a plan of :func:`plan_heavy_tailed_regression` on (X, y): the rows in a
    secret random order, entries capped at ±1e150, the intercept's column of ones,
    then :func:`run_heavy_tailed_sco`.

    **Privacy guarantee.** ``plan.budget`` (ρ-zCDP) for one row (x, y) replaced (n and
    d public), for a plan from :func:`plan_heavy_tailed_regression`
    (:class:`HeavyTailedSCOPlan`): the permutation is drawn from ``rng`` and does not
    depend on the data, so the guarantee of every fixed order holds for the mixture
    (module notes); the cap is a fixed map of each row (no privacy cost). Assumptions:
    ``rng`` secret. Not covered: the noise and the order when ``rng`` is known (a
    fixed seed), and the run's duration.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n, d)
        Never rescaled or clipped beyond the cap: the oracle bounds each row's
        influence, whatever its size.
    y : array-like of shape (n,)
    plan : HeavyTailedSCOPlan
    rng : RandomSource or numpy.random.Generator
        The permutation is drawn first, then the noise of every step.
    callback : callable, optional
        ``callback(t, w)`` after every step.

    Returns
    -------
    coef : ndarray of shape (d,)
    intercept : float
        0.0 without an intercept.
    info : dict
        As :func:`run_heavy_tailed_sco`.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsparse.mechanisms.heavy_tailed_sco import (
    ...     plan_heavy_tailed_regression, run_heavy_tailed_regression)
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_t(5, (5000, 2))
    >>> y = X @ np.array([0.5, -0.5]) + rng.standard_t(3, 5000)
    >>> plan = plan_heavy_tailed_regression(5000, 2, epsilon=2.0, delta=1e-6, radius=2.0)
    >>> coef, intercept, info = run_heavy_tailed_regression(X, y, plan, rng)
    >>> coef.shape, bool(np.linalg.norm(np.r_[coef, intercept]) <= 2.0)
    ((2,), True)
    """
    n, d = X.shape
    if (n, d + plan.fit_intercept) != (plan.n_samples, plan.n_features):
        raise ValueError(f"X has shape {X.shape}, but the plan is for ({plan.n_samples}, "
                         f"{plan.n_features - plan.fit_intercept}).")
    perm = rng.permutation(n)
    y = np.clip(np.asarray(y, dtype=np.float64)[perm], -ENTRY_CAP, ENTRY_CAP)
    X = X[perm]
    if X.dtype == np.float64:  # (float32 cannot exceed the cap)
        if sp.issparse(X):
            np.clip(X.data, -ENTRY_CAP, ENTRY_CAP, out=X.data)
        else:
            X = np.clip(X, -ENTRY_CAP, ENTRY_CAP)
    if plan.fit_intercept:
        ones = np.ones((n, 1), dtype=X.dtype)
        X = sp.hstack([X, ones], format="csr") if sp.issparse(X) else np.hstack([X, ones])
    w, info = run_heavy_tailed_sco(X, y, plan, rng, callback=callback)
    return w[:d].copy(), float(w[d]) if plan.fit_intercept else 0.0, info
