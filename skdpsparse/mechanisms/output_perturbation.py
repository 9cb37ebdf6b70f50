"""Output perturbation with an ℓ∞ projection (Ghazi et al. 2024, Section 5, Algorithm 3).

Release the minimizer of the λ-regularized empirical risk of a linear model plus
Gaussian (δ > 0) or Laplace (δ = 0) noise, then the point of the feasible set 𝒳 nearest
to it in ℓ∞ (:func:`~skdpsparse._kernels.linf_nearest_in_l2_ball`). By default λ is the
smallest that keeps the noise on a margin at a tenth of its scale
(:func:`choose_alpha_noise`); Theorem 5.1 (ERM) and Theorem 5.6 (population risk)
choose it with ``alpha="theorem"`` (:func:`choose_alpha`).

Setting and notation
--------------------
θ = (w, θ_b) ∈ ℝᵖ: the intercept is the coefficient of a constant feature of value c
(``intercept_scaling``), so x̄ = (x, c), the margin is ⟨θ, x̄⟩ and the intercept is
b = c·θ_b (p = d + 1; without intercept c = 0, x̄ = x, p = d). The intercept is
regularized and noised like any coefficient. Every row is first scaled into
{‖x‖₂ ≤ R, ‖x‖₁ ≤ R√s} (R = ``norm_bound``, s = ``sparsity``; Ghazi et al. (2024) Remark 2.1:
the ℓ1 ball stands in for s-sparsity) and regression targets are clipped to
[−B, B] (B = ``label_bound``): contribution bounding, never rejection. Hence

    G₂ := √(R² + c²) ≥ ‖x̄‖₂,        G₁ := √s·R + c ≥ ‖x̄‖₁.

Lipschitz and smoothness constants (the derivation)
---------------------------------------------------
∇_θ ℓ(⟨θ, x̄⟩, y) = ℓ'(z, y)·x̄, and its Hessian is ℓ''(z, y)·x̄x̄ᵀ. With Λ ≥ |ℓ'| and
β ≥ ℓ'' over the margins that occur,

    L  = Λ·G₂   (ℓ2 norm of a gradient),       L₁  = Λ·G₁   (its ℓ1 norm),
    H  = β·G₂²  (ℓ2 smoothness),               H₁₂ = β·G₁G₂,

where H₁₂ bounds ‖∇f(θ, z) − ∇f(θ', z)‖₁ = |ℓ'(⟨θ,x̄⟩) − ℓ'(⟨θ',x̄⟩)|·‖x̄‖₁ ≤
β|⟨θ − θ', x̄⟩|·G₁ ≤ βG₂G₁‖θ − θ'‖₂. Per loss (t = y·z with y = ±1; r = z − y):

=================  ==========================  =======  ==================================
loss               Λ ≥ |ℓ'| for |z| ≤ ρG₂      β        ℓ₀ = max_y ℓ(0, y)
=================  ==========================  =======  ==================================
logistic           σ(ρG₂) ∈ [1/2, 1)           1/4      log 2
smoothed hinge h   min(1, (1 + ρG₂)/h)         1/h      1 − h/2 if h ≤ 1, else 1/(2h)
squared            ρG₂ + B (|r| ≤ |z| + B)     1        B²/2
Huber κ            min(κ, ρG₂ + B)             1        B²/2 if B ≤ κ, else κ(B − κ/2)
=================  ==========================  =======  ==================================

(σ is the logistic function: |ℓ'| = σ(−yz) ≤ σ(|z|).) ℓ₀ is not taken from this
table: :func:`loss_constants` evaluates the loss itself at the margin 0
(:func:`skdpsparse._kernels.loss_value`), over y = ±1 for classification and y = ±B
for regression (ℓ(0, y) = ℓ(−y) grows with |y| for both regression losses, so |y| = B
is the maximum over the clipped targets); the column states what that gives. For the
smoothed hinge, t = 0 lies in the linear branch t ≤ 1 − h only when h ≤ 1; for h > 1
it is in the quadratic branch, ℓ(0) = 1/(2h) > 1 − h/2 (the linear formula is ≤ 0
from h = 2 on and would give ρ = 0, hence Λ = 1/h: half the true bound at h = 2).
ρ bounds the norm of the exact
minimizers, which is all the sensitivity arguments evaluate gradients at, so only
the margins |z| ≤ ρG₂ matter. Three bounds, each valid for every dataset:
F^λ(θ*) ≤ F^λ(0) ≤ ℓ₀ gives ‖θ*‖₂ ≤ √(2ℓ₀/λ); θ* ∈ 𝒳 gives ‖θ*‖₂ ≤ D; and the
unconstrained minimizer u = −∇F_S(u)/λ has ‖u‖₂ ≤ Λ(ρ)G₂/λ whenever ‖u‖₂ ≤ ρ, while
‖θ*‖₂ ≤ ‖u‖₂ (over a ball centred at 0 the constrained minimizer of a strongly
convex function is u itself or lies on the sphere of radius D < ‖u‖). So
ρ₀ = min(D, √(2ℓ₀/λ)) and ρ_{k+1} = min(ρ_k, Λ(ρ_k)G₂/λ) are all valid; the code
iterates to the fixed point. For large λ this brings the logistic Λ down to ≈ 1/2
(its slope at 0), halving the noise against the global bound Λ = 1; the squared
loss is only Lipschitz on such a ball, hence its Λ depends on λ.

Sensitivities of the exact minimizer θ*(S) (replacement neighbours, n public)
----------------------------------------------------------------------------
* ℓ2: Δ₂ = 2L/(λn). With g(θ) = [∇f(θ, z_j) − ∇f(θ, z'_j)]/n (‖g‖₂ ≤ 2L/n), strong
  convexity and the optimality conditions of both problems over 𝒳 give
  λ‖θ* − θ'*‖² ≤ ⟨g(θ'*), θ'* − θ*⟩, hence the bound; it holds for constrained 𝒳 too.
  The seed states 4L/(λn) (proof of Theorem 5.1, citing [10, 33, 18]); that is valid
  but twice as large: the tests exhibit neighbours whose minimizers are 0.9·Δ₂ apart.
* ℓ1 (𝒳 = ℝᵖ, smooth losses): from θ* = −∇F_S(θ*)/λ, as in the seed's proof,

      ‖θ* − θ'*‖₁ ≤ (1/λn)[(n − 1)·H₁₂·Δ₂ + 2L₁] = (2L₁/λn)·(1 + (n − 1)H/(λn)),

  the seed's 2√(2s)L/(λn)·(2H/λ + 1) with the linear-model constants (L₁ = √s·L and
  H₁₂ = √s·H for R-bounded s-sparse rows without intercept: √2 and 2 smaller, since
  the differences are bounded by triangle inequalities instead of 2s-sparsity, and
  with Δ₂ = 2L/(λn)). Also ‖·‖₁ ≤ √p‖·‖₂, so Δ₁ = min(that, √p·Δ₂).

What is computed is not θ*. The solver (:mod:`skdpsparse._solvers.erm`) stops
at θ̂ with a residual u ∈ ∂(F^λ + ι_𝒳)(θ̂), and λ-strong convexity gives
‖θ̂ − θ*‖₂ ≤ ‖u‖₂/λ. In ℓ1 (unconstrained): λ(θ̂ − θ*) = u − [∇F_S(θ̂) − ∇F_S(θ*)]
gives ‖θ̂ − θ*‖₁ ≤ (‖u‖₁ + H₁₂‖u‖₂/λ)/λ, and also ≤ √p‖u‖₂/λ; the smaller is used.
The solver runs until that certified distance is at most ``tol``·Δ/2 (a threshold
fixed before seeing data), so ‖θ̂(S) − θ̂(S')‖ ≤ (1 + tol)·Δ, and this is the
sensitivity the noise is calibrated to. Whether it gets there depends on the data;
when it does not, projected gradient descent runs for a public number of steps whose
distance is bounded by analysis instead (:func:`certification_tol`), so no fit fails
on its data.

Several problems (one-vs-rest classes): the K solutions are released jointly, each
computed on all rows, so replacing a row moves each by at most Δ: the joint
sensitivity is √K·Δ₂ in ℓ2 and K·Δ₁ in ℓ1. One Gaussian mechanism for √K·Δ₂ is
cheaper than K mechanisms at (ε/K, δ/K); for Laplace it is the same as ε/K each.
"""

import math
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import brentq

from .. import _kernels
from .._solvers.erm import (FixedPointObjective, InMemoryRows, descent_floor,
                            descent_iterations, solve_certified)
from ..accounting import (ApproxDP, DiscreteGaussianEvent, DiscreteLaplaceEvent, PureDP,
                          laplace_scale, with_event)
from ..accounting.discrete import discrete_gaussian_sigma
from ..utils._data import as_canonical_csr
from .noise import add_noise_inplace
from .projection import row_bounds

__all__ = [
    "CLASSIFICATION_LOSSES",
    "REGRESSION_LOSSES",
    "SMOOTH_LOSSES",
    "LossConstants",
    "OutputPerturbationPlan",
    "bound_inputs",
    "bound_rows",
    "bounded_rows",
    "centred_interval",
    "certified_minimizers",
    "certification_tol",
    "certified_objective",
    "choose_alpha",
    "choose_alpha_noise",
    "loss_constants",
    "minimizer_sensitivity",
    "output_perturbation",
    "plan_output_perturbation",
    "regularized_minimizers",
    "release",
]

CLASSIFICATION_LOSSES = ("logistic", "smoothed_hinge", "hinge")
REGRESSION_LOSSES = ("squared", "huber")
SMOOTH_LOSSES = ("logistic", "smoothed_hinge", "squared", "huber")
#: Failure probability β in the λ formulas of Theorems 5.1 and 5.6.
BETA = 0.05


@dataclass(frozen=True)
class LossConstants:
    """Bounds of one loss over the contribution-bounded rows (see the module doc).

    **Privacy guarantee.** None needed: public numbers only (computed by
    :func:`loss_constants` from the declared bounds, λ and D, never from the data).
    What the sensitivities built from them rely on: each bound holds for every
    dataset of rows scaled into {‖x‖₂ ≤ R, ‖x‖₁ ≤ R√s} with targets clipped to
    [−B, B] (or ±1 labels), at every parameter of norm ≤ ``coef_bound``
    (:ref:`derivation_sensitivities`, "Output perturbation: the regularized
    minimizer").

    Attributes
    ----------
    feature_l2, feature_l1 : float
        G₂ ≥ ‖x̄‖₂ and G₁ ≥ ‖x̄‖₁.
    derivative : float
        Λ ≥ |ℓ'| at every margin of a parameter of norm ≤ ``coef_bound``.
    curvature : float
        β ≥ ℓ'' (``inf`` for the hinge).
    zero_loss : float
        ℓ₀ = max_y ℓ(0, y), evaluated by the loss itself.
    coef_bound : float
        ρ ≥ ‖θ*‖₂ for the exact minimizers.
    """

    feature_l2: float
    feature_l1: float
    derivative: float
    curvature: float
    zero_loss: float
    coef_bound: float

    @property
    def lipschitz(self):
        """L = Λ·G₂."""
        return self.derivative * self.feature_l2

    @property
    def lipschitz_l1(self):
        """L₁ = Λ·G₁."""
        return self.derivative * self.feature_l1

    @property
    def smoothness(self):
        """H = β·G₂²."""
        return self.curvature * self.feature_l2 ** 2

    @property
    def smoothness_l1(self):
        """H₁₂ = β·G₁G₂."""
        return self.curvature * self.feature_l1 * self.feature_l2


def _zero_loss(loss, loss_param, label_bound):
    """ℓ₀ = max_y ℓ(0, y), evaluated by the loss itself (module doc).

    Classification losses are functions of t = y·z, so ℓ(0, ±1) = ℓ(t = 0) for both
    labels; regression losses are functions of r = z − y that grow with |r| (squared,
    Huber), so the maximum over the clipped targets |y| ≤ B is at y = ±B.
    """
    code = _kernels.LOSS_CODES[loss]
    labels = (-1.0, 1.0) if loss in CLASSIFICATION_LOSSES else (-label_bound, label_bound)
    return max(float(_kernels.loss_value(code, 0.0, y, float(loss_param))) for y in labels)


#: The relative excess of a row's norm over its bound R that the constants allow for
#: (:func:`loss_constants`): rows are bounded in floating point.
ROW_NORM_SLACK = 1.0 + 2.0 ** -22


def loss_constants(loss, *, loss_param, norm_bound, sparsity, intercept_scaling,
                   label_bound, alpha, radius):
    """The constants of the module doc's table for one loss.

    **Privacy guarantee.** None needed: public numbers in (the declared R, s, c, B,
    the loss, λ and D), public numbers out; no data enters it. What it guarantees:
    ρ ≥ ‖θ*‖₂ for the exact regularized minimizer of every dataset of
    contribution-bounded rows (ℓ₀ evaluated by the loss itself at the margin 0, then
    the stationarity refinement to its fixed point), and Λ ≥ |ℓ'| at every margin
    such a minimizer produces (:ref:`derivation_sensitivities`, "Output
    perturbation: the regularized minimizer"), for rows whose computed scaling leaves
    them at most R·:data:`ROW_NORM_SLACK` in norm (floating-point bounding of rows of
    up to 2³⁰ entries). Not covered: bounds R or B estimated from the data without
    paying for the estimate.

    Parameters
    ----------
    loss : {"logistic", "smoothed_hinge", "hinge", "squared", "huber"}
    loss_param : float
        Smoothed-hinge width h or Huber threshold κ (ignored otherwise).
    norm_bound, sparsity : float
        R and s of the rows.
    intercept_scaling : float
        c (0 without intercept).
    label_bound : float
        B (regression).
    alpha : float
        λ > 0.
    radius : float or None
        D of 𝒳, or None for ℝᵖ.

    Returns
    -------
    LossConstants
    """
    # The rows are scaled into the balls in floating point: a computed norm can be
    # slightly too small, so a bounded row of p entries may exceed R by a relative
    # p·2⁻⁵³ plus a few units (the sum of squares, its root, the factor and the
    # products). Every constant below is computed for R(1 + 2⁻²²), which covers rows
    # of up to 2³⁰ entries: the sensitivities hold for the rows the kernels read.
    R, c = float(norm_bound) * ROW_NORM_SLACK, float(intercept_scaling)
    g2 = math.hypot(R, c)
    g1 = math.sqrt(sparsity) * R + c
    l0 = _zero_loss(loss, loss_param, label_bound)
    rho = math.sqrt(2.0 * l0 / alpha)
    if radius is not None:
        rho = min(rho, float(radius))
    # Stationarity refinement (module doc): ‖θ*‖ ≤ ‖u‖ ≤ Λ(ρ)·G₂/λ whenever ‖u‖ ≤ ρ,
    # so each step keeps a valid bound; the map is monotone, 60 steps reach its
    # fixed point to rounding for every λ that occurs.
    for _ in range(60):
        previous = rho
        rho = min(rho, _derivative_bound(loss, loss_param, rho * g2, label_bound) * g2 / alpha)
        if rho >= previous * (1.0 - 1e-12):
            break
    lam = _derivative_bound(loss, loss_param, rho * g2, label_bound)
    beta = {"logistic": 0.25, "smoothed_hinge": 1.0 / loss_param if loss_param else math.inf,
            "hinge": math.inf, "squared": 1.0, "huber": 1.0}[loss]
    return LossConstants(g2, g1, lam, beta, l0, rho)


def _derivative_bound(loss, loss_param, margin_bound, label_bound):
    """Λ ≥ |ℓ'(z, y)| over |z| ≤ ``margin_bound`` (and |y| ≤ B for regression).

    Logistic: |ℓ'| = σ(−yz) ≤ σ(|z|) (σ the logistic function). Smoothed hinge of
    width h: |ℓ'| = clip((1 − yz)/h, 0, 1) ≤ min(1, (1 + |z|)/h). Hinge: 1. Huber κ:
    |clip(z − y, ±κ)| ≤ min(κ, |z| + B). Squared: |z − y| ≤ |z| + B.
    """
    if loss == "logistic":
        return 1.0 / (1.0 + math.exp(-margin_bound))
    if loss == "smoothed_hinge":
        return min(1.0, (1.0 + margin_bound) / loss_param) if loss_param else 1.0
    if loss == "hinge":
        return 1.0
    if loss == "huber":
        return min(float(loss_param), margin_bound + label_bound)
    return margin_bound + label_bound  # squared


def minimizer_sensitivity(constants, alpha, n, n_params):
    """ℓ2 and ℓ1 sensitivities of the exact regularized minimizer of one problem.

    **Privacy guarantee.** None needed: public numbers only, no data enters it. What
    it guarantees: for replace-one neighbours (n public) the exact minimizers are at
    most Δ₂ = 2L/(λn) apart in ℓ2, for any convex loss over ℝᵖ or a ball, and at most
    Δ₁ apart in ℓ1 over ℝᵖ for a smooth loss (the proof of Theorem 5.1 of Ghazi,
    Guzmán, Kamath, Kumar and Manurangsi (2024), "Differentially Private Optimization
    with Sparse Gradients", with the linear-model constants, half its 4L/(λn):
    :ref:`derivation_sensitivities`, "Output perturbation: the regularized
    minimizer"), provided ``constants`` come from :func:`loss_constants` at this λ.
    Not covered: the computed (inexact) minimizer, whose extra distance the plan's
    (1 + tol) slack and the solver's certificate account for.

    Returns
    -------
    delta_2 : float
        2L/(λn).
    delta_1 : float
        min((2L₁/λn)(1 + (n−1)H/(λn)), √p·Δ₂); only the first term needs
        𝒳 = ℝᵖ and a smooth loss, the caller enforces that for Laplace noise.
    """
    d2 = 2.0 * constants.lipschitz / (alpha * n)
    d1 = (2.0 * constants.lipschitz_l1 / (alpha * n)) * (
        1.0 + (n - 1) * constants.smoothness / (alpha * n))
    return d2, min(d1, math.sqrt(n_params) * d2)


def choose_alpha(objective, n, n_params, epsilon, delta, *, constants_at, radius,
                 n_problems=1, beta=BETA):
    """λ of Theorem 5.1 (``"erm"``) or Theorem 5.6 (``"population"``), constant 1.

    **Privacy guarantee.** None needed: public numbers only (n, p, K, ε, δ and, through
    ``constants_at``, the declared bounds), no data enters it; a λ fixed before the
    data is what lets the sensitivities of :func:`minimizer_sensitivity` hold for
    every pair of neighbours. Assumption: ``constants_at`` is itself a function of
    public numbers (as :func:`plan_output_perturbation` builds it).

    With s_eff = (G₁/G₂)² (= s without intercept), p = ``n_params`` and ε_eff = ε/√K
    (Gaussian: joint ℓ2 sensitivity √K·Δ₂) or ε/K (Laplace) for K problems:

    * δ = 0 (both): λ = (L²H·s_eff·log(p/β)/(D²·ε_eff·n))^{1/3}  (Thm 5.1 / 5.6);
    * δ > 0, ERM: λ = (L/D)·[s_eff·log(1/δ)·log(p/β)]^{1/4}/√(ε_eff·n)  (Thm 5.1);
    * δ > 0, population: λ = (L/D)·(log n·log(1/β)/n
      + √(s_eff·log(1/δ)·log(p/β))/(ε_eff·n))^{1/2}  (Thm 5.6).

    D is ``radius``; for 𝒳 = ℝᵖ it is the a-priori bound √(2ℓ₀/λ) on the regularized
    minimizer's norm (which F^λ(θ*) ≤ F^λ(0) guarantees). L (through the bound ρ on
    the minimizers' norm, for every loss) and D then depend on λ, and λ is the fixed
    point, found by Brent's method on log λ (L does not grow with λ and 1/D grows as
    √λ, so the map has slope ≤ 1/2 in log λ and the fixed point is unique). Only
    public numbers enter: n, p, K, ε, δ and the declared bounds.

    Parameters
    ----------
    constants_at : callable
        λ ↦ :class:`LossConstants`.

    Returns
    -------
    float
    """
    k = n_problems
    eps = epsilon / (math.sqrt(k) if delta > 0 else k)
    log_p = math.log(n_params / beta)

    def rhs(lam):
        c = constants_at(lam)
        D = float(radius) if radius is not None else math.sqrt(2.0 * c.zero_loss / lam)
        s_eff = (c.feature_l1 / c.feature_l2) ** 2
        L = c.lipschitz
        if delta == 0:
            return (L * L * c.smoothness * s_eff * log_p / (D * D * eps * n)) ** (1.0 / 3.0)
        if objective == "erm":
            return (L / D) * (s_eff * math.log(1 / delta) * log_p) ** 0.25 / math.sqrt(eps * n)
        return (L / D) * math.sqrt(math.log(n) * math.log(1 / beta) / n
                                   + math.sqrt(s_eff * math.log(1 / delta) * log_p) / (eps * n))

    def h(u):
        return u - math.log(rhs(math.exp(u)))

    lo, hi = -30.0, 30.0
    while h(lo) > 0:
        lo -= 30.0
    while h(hi) < 0:
        hi += 30.0
    return math.exp(brentq(h, lo, hi, xtol=1e-12))


#: κ of :func:`choose_alpha_noise`: the noise may move the margin of a row of norm
#: ≤ R by a standard deviation of κ times the margin scale (1 for the logit of a
#: classifier, ``REGRESSION_MARGIN``·B for a regression target).
NOISE_MARGIN = 0.1
REGRESSION_MARGIN = 0.5


def _noise_scale(d2, d1, n_problems, tol, epsilon, delta, calibration):
    """The per-coordinate noise scale of the plan (Gaussian σ or Laplace b)."""
    if delta > 0:
        sensitivity = math.sqrt(n_problems) * (1.0 + tol) * d2
        return discrete_gaussian_sigma(sensitivity, epsilon, delta, calibration)
    return laplace_scale(n_problems * (1.0 + tol) * d1, epsilon)


def choose_alpha_noise(n, margin_noise, margin_scale, *, kappa=NOISE_MARGIN):
    """λ of ``alpha="auto"``: the smallest λ ≥ 1/n whose noise keeps margins readable.

    **Privacy guarantee.** None needed: public numbers only (n, the margin scale, κ
    and, through ``margin_noise``, the declared bounds, ε and δ), no data enters it.
    Assumption: ``margin_noise`` is itself a function of public numbers (as
    :func:`plan_output_perturbation` builds it). κ is a library constant chosen once
    on benchmark validation splits, not on the data being fitted.

    Theorem 5.1's λ (:func:`choose_alpha`, ``alpha="theorem"``) minimizes a worst-case
    excess-risk bound; its bias term assumes the worst data, so it regularizes as
    hard at ε = 8 as the noise would allow at much smaller ε, and accuracy stays flat
    in ε on real data (issue 18). Here λ is instead the smallest value at which the
    noise moves the margin ⟨θ̃ − θ̂, x̄⟩ of any contribution-bounded row by at most
    κ·m in standard deviation (σ·G₂ ≤ κm: m = 1, the unit of a logit, for
    classification; m = B/2 for regression, B being usually several standard
    deviations of y), and never below 1/n, scikit-learn's
    default regularization (``C=1``: λ = 1/n). σ(λ) decreases in λ (σ ∝ Λ(λ)/λ and Λ
    does not grow with λ), so the root is unique. Only public numbers enter (n, p, K,
    ε, δ and the declared bounds), and as ε grows λ falls like 1/(εn) towards the
    non-private 1/n, so the model approaches the non-private one. κ = 0.1 was chosen
    on the validation splits of ``benchmarks/bench_real_data.py`` (text and one-hot
    classification, ratings and income regression; never on their test splits); it is
    a default, not a theorem.

    Parameters
    ----------
    n : int
    margin_noise : callable
        λ ↦ σ(λ)·G₂, the standard deviation of the noise on a margin.
    margin_scale : float
        m.
    kappa : float

    Returns
    -------
    float
    """
    floor = 1.0 / n
    target = kappa * margin_scale
    if margin_noise(floor) <= target:
        return floor

    def h(u):
        return math.log(margin_noise(math.exp(u))) - math.log(target)

    lo, hi = math.log(floor), math.log(floor) + 5.0
    while h(hi) > 0:
        lo, hi = hi, hi + 5.0
    return math.exp(brentq(h, lo, hi, xtol=1e-10))


@dataclass(frozen=True)
class OutputPerturbationPlan:
    """Everything Algorithm 3 decides before seeing data (public numbers only).

    **Privacy guarantee.** None needed: public numbers only. Its ``budget`` is the
    guarantee of :func:`release` (and :func:`output_perturbation`) for replace-one
    neighbours, provided the released minimizers are certified within tol·Δ/2 of the
    exact ones. ``accept`` and ``certified_l1_distance`` read residual norms, which
    depend on the data; they only decide when the solver stops (against a threshold
    fixed here) and release nothing, and the stopping point is covered by the (1 +
    tol) slack, not by the budget. If they never accept, the fallback of
    ``fallback_iterations`` public steps is certified by analysis instead
    (:func:`certification_tol`). Not covered: the iteration count and residuals
    themselves (see :func:`output_perturbation`, "Not covered").

    Attributes
    ----------
    loss, code, loss_param : str, int, float
    n, n_features, n_problems : int
    intercept_scaling : float
        c, 0 without intercept.
    norm_bound, sparsity, label_bound : float
    radius : float or None
    alpha : float
        λ.
    constants : LossConstants
    sensitivity_l2, sensitivity_l1 : float
        Of one problem's exact minimizer (Δ₂, Δ₁).
    tol : float
        Relative slack of the certified solutions (the value used, ``tol="auto"``
        resolved).
    fallback_iterations : int
        The public step count of the solver's fallback, projected gradient descent
        certified by analysis within tol·Δ/2
        (:func:`~skdpsparse._solvers.erm.descent_iterations`).
    noise_kind : {"gaussian", "laplace"}
    noise_scale : float
        σ for √K(1 + tol)Δ₂, or b = K(1 + tol)Δ₁/ε.
    budget : ApproxDP or PureDP
    """

    loss: str
    code: int
    loss_param: float
    n: int
    n_features: int
    n_problems: int
    intercept_scaling: float
    norm_bound: float
    sparsity: float
    label_bound: float
    radius: object
    alpha: float
    constants: LossConstants
    sensitivity_l2: float
    sensitivity_l1: float
    tol: float
    noise_kind: str
    noise_scale: float
    budget: object
    fallback_iterations: int

    @property
    def n_params(self):
        return self.n_features + (self.intercept_scaling > 0)

    def certified_l1_distance(self, r_l2, r_l1):
        """Bound on ‖θ̂ − θ*‖₁ from the residual norms (𝒳 = ℝᵖ; module doc)."""
        lam = self.alpha
        return min(math.sqrt(self.n_params) * r_l2,
                   r_l1 + self.constants.smoothness_l1 * r_l2 / lam) / lam

    def accept(self, r_l2, r_l1):
        """Whether a residual certifies a distance ≤ tol·Δ/2 to the exact minimizer."""
        if self.noise_kind == "gaussian":
            return r_l2 / self.alpha <= 0.5 * self.tol * self.sensitivity_l2
        return self.certified_l1_distance(r_l2, r_l1) <= 0.5 * self.tol * self.sensitivity_l1


def plan_output_perturbation(n, n_features, n_problems, *, loss, loss_param=1.0, epsilon,
                             delta, alpha="auto", objective="erm", norm_bound=1.0,
                             sparsity=None, intercept_scaling=1.0, label_bound=1.0,
                             radius=None, calibration="analytic", tol="auto",
                             tol_is_minimum=False):
    """Choose λ, the sensitivities and the noise of Algorithm 3 from public numbers.

    **Privacy guarantee.** None needed: public numbers in, public numbers out; no
    data enters it (its errors depend on the arguments only). What it guarantees to
    :func:`release`: the noise is calibrated to the joint sensitivity of K minimizers
    certified within tol·Δ/2 of the exact ones, √K(1 + tol)Δ₂ (discrete Gaussian,
    ρ = Δ²/(2σ²)-zCDP, Canonne, Kamath and Steinke (2020), "The discrete Gaussian for
    differential privacy", Theorem 14, converted to (ε, δ)) or K(1 + tol)Δ₁ (discrete
    Laplace of scale Δ/ε, ε-DP), as in Ghazi et al. (2024), Algorithm 3 and Fact 2.3,
    for replace-one neighbours with n public. Assumptions: n, d, K and the bounds R,
    s, B, D are public (declared, or private estimates paid for separately), and δ = 0
    only with a smooth loss over ℝᵖ (enforced). Not covered: data-dependent bounds or
    λ passed in by a caller.

    Parameters
    ----------
    n, n_features, n_problems : int
        Rows, features d and the number K of problems released together.
    loss : {"logistic", "smoothed_hinge", "squared", "huber"}
    loss_param : float
        Smoothed-hinge width h or Huber threshold κ.
    epsilon, delta : float
        δ > 0: Gaussian noise, (ε, δ)-DP. δ = 0: Laplace noise, ε-DP; needs a smooth
        loss and ``radius=None`` (Theorem 5.1's ℓ1 sensitivity uses both).
    alpha : float, "auto" or "theorem"
        λ; ``"auto"``: :func:`choose_alpha_noise` (the noise moves a margin by at most
        0.1 of its scale, 1 or B/2, and λ ≥ 1/n); ``"theorem"``: :func:`choose_alpha` with
        ``objective`` (Theorem 5.1 or 5.6).
    objective : {"erm", "population"}
        Which theorem ``alpha="theorem"`` uses.
    norm_bound, sparsity, intercept_scaling, label_bound, radius
        R, s (None: d), c (0: no intercept), B and D of the module doc.
    calibration : {"analytic", "classic"}
        Gaussian calibration
        (:func:`~skdpsparse.accounting.discrete.discrete_gaussian_sigma`).
    tol : float or "auto"
        Relative slack: the noise is calibrated to (1 + tol)·Δ. ``"auto"``: 10⁻², or
        the smallest value the solver's fallback can certify if that is larger
        (:func:`certification_tol`). A float below that raises ``ValueError``.
    tol_is_minimum : bool
        Raise a float ``tol`` below what the fallback can certify to that value
        instead of refusing it (for bounds released privately just before: a refusal
        would depend on them).

    Returns
    -------
    OutputPerturbationPlan
    """
    if loss not in SMOOTH_LOSSES:
        raise ValueError(
            f"Output perturbation needs a differentiable loss, got loss={loss!r}; "
            "use method='exponential' for the hinge loss.")
    if delta == 0 and radius is not None:
        raise ValueError(
            "Pure DP output perturbation (delta=0) uses the l1 sensitivity of Theorem 5.1, "
            f"which holds only for an unconstrained domain: set radius=None (got "
            f"radius={radius!r}) or delta > 0.")
    s = n_features if sparsity is None else min(float(sparsity), n_features)
    p = n_features + (intercept_scaling > 0)

    def constants_at(lam):
        return loss_constants(loss, loss_param=loss_param, norm_bound=norm_bound,
                              sparsity=s, intercept_scaling=intercept_scaling,
                              label_bound=label_bound, alpha=lam, radius=radius)

    if alpha == "theorem":
        alpha = choose_alpha(objective, n, p, epsilon, delta, constants_at=constants_at,
                             radius=radius, n_problems=n_problems)
    elif alpha == "auto":
        # The margin scale: a logit (1), or a fraction of the target bound B, which
        # is usually several standard deviations of y (0.05·B measured best).
        margin = 1.0 if loss in CLASSIFICATION_LOSSES else REGRESSION_MARGIN * float(label_bound)

        nominal = DEFAULT_TOL if tol == "auto" else tol

        def margin_noise(lam):
            constants = constants_at(lam)
            d2, d1 = minimizer_sensitivity(constants, lam, n, p)
            return constants.feature_l2 * _noise_scale(d2, d1, n_problems, nominal,
                                                       epsilon, delta, calibration)

        alpha = choose_alpha_noise(n, margin_noise, margin)
    elif isinstance(alpha, str):
        raise ValueError(f"alpha must be a positive float, 'auto' or 'theorem', got {alpha!r}")
    alpha = float(alpha)
    constants = constants_at(alpha)
    d2, d1 = minimizer_sensitivity(constants, alpha, n, p)
    code = _kernels.LOSS_CODES[loss]
    descent = _DescentProblem(
        n=int(n), n_features=int(n_features), code=code, loss_param=float(loss_param),
        alpha=alpha, constants=constants, intercept_scaling=float(intercept_scaling),
        norm_bound=float(norm_bound), radius=radius,
        grid_label_bound=float(label_bound) if loss in REGRESSION_LOSSES else 1.0,
        unit=d2 if delta > 0 else d1 / math.sqrt(p))
    tol, fallback_iterations = certification_tol(descent, tol, minimum=tol_is_minimum)
    if delta > 0:
        # Ghazi et al. (2024) Algorithm 3 / Fact 2.3(b): Gaussian noise for the joint ℓ2
        # sensitivity.
        sensitivity = math.sqrt(n_problems) * (1.0 + tol) * d2
        scale = discrete_gaussian_sigma(sensitivity, epsilon, delta, calibration)
        kind = "gaussian"
        budget = with_event(ApproxDP(epsilon, delta), DiscreteGaussianEvent(scale / sensitivity))
    else:
        # Ghazi et al. (2024) Algorithm 3 / Fact 2.3(a): Laplace scale Δ₁/ε for the joint ℓ1
        # sensitivity.
        sensitivity = n_problems * (1.0 + tol) * d1
        scale = laplace_scale(sensitivity, epsilon)
        kind = "laplace"
        budget = with_event(PureDP(epsilon), DiscreteLaplaceEvent(scale / sensitivity))
    return OutputPerturbationPlan(
        loss=loss, code=code, loss_param=float(loss_param), n=int(n),
        n_features=int(n_features), n_problems=int(n_problems),
        intercept_scaling=float(intercept_scaling), norm_bound=float(norm_bound),
        sparsity=float(s), label_bound=float(label_bound), radius=radius, alpha=alpha,
        constants=constants, sensitivity_l2=d2, sensitivity_l1=d1, tol=float(tol),
        noise_kind=kind, noise_scale=float(scale), budget=budget,
        fallback_iterations=int(fallback_iterations))


#: ``tol="auto"``'s value wherever the solver's fallback can certify it.
DEFAULT_TOL = 1e-2


@dataclass(frozen=True)
class _DescentProblem:
    """The public numbers :func:`certification_tol` reads. ``unit``: the ℓ2 distance
    that tol = 1 allows per half-sensitivity (Δ₂ for Gaussian noise; Δ₁/√p for
    Laplace noise, since ‖·‖₁ ≤ √p‖·‖₂)."""

    n: int
    n_features: int
    code: int
    loss_param: float
    alpha: float
    constants: LossConstants
    intercept_scaling: float
    norm_bound: float
    radius: object
    grid_label_bound: float
    unit: float

    def floor(self, target):
        """The fallback's rounding floor for iterates within ``target`` of θ*
        (‖xₖ‖ ≤ 2ρ + target: x₀ = 0 is within ρ ≥ ‖θ*‖ of θ*)."""
        return descent_floor(
            self.n, self.n_features, code=self.code, param=self.loss_param,
            alpha=self.alpha, smoothness=self.constants.smoothness + self.alpha,
            intercept_scaling=self.intercept_scaling, row_bound=self.norm_bound,
            label_bound=self.grid_label_bound,
            reach=2.0 * self.constants.coef_bound + target, radius=self.radius)

    def iterations(self, tol, floor):
        """The fallback's public step count: from x₀ = 0 (within ρ of θ*) to within
        tol·unit/2, given the rounding floor."""
        return descent_iterations(self.constants.coef_bound, floor, 0.5 * tol * self.unit,
                                  alpha=self.alpha,
                                  smoothness=self.constants.smoothness + self.alpha)


def certification_tol(problem, tol, *, minimum=False):
    """The slack tol the plan uses and the fallback's public step count.

    **Privacy guarantee.** None needed: public numbers only, so whether a plan is
    refused, and the tol it uses, are the same for every dataset. What it guarantees:
    the solver never fails in a way that depends on the data. Its adaptive solvers
    certify a residual (data-dependent: they may stop short of it); if they do, the
    fallback of :func:`~skdpsparse._solvers.erm.solve_certified` runs
    :func:`~skdpsparse._solvers.erm.projected_descent` for the returned number of
    steps, which lands within tol·Δ/2 of the exact minimizer by analysis
    (:func:`~skdpsparse._solvers.erm.descent_floor`: ‖xₖ − θ*‖ ≤ qᵏρ + floor), provided
    floor ≤ tol·Δ/4, checked here. The floor is the rounding of the 63-bit exact
    sums with every column's count at its public maximum n; it grows like
    n²·√(d + c²)·R/2⁶², so tol = 10⁻² is certifiable up to n ≈ 8·10⁶ at d = 2¹⁸
    (unit rows), and ``"auto"`` raises tol beyond (the noise grows by the factor
    (1 + tol)).

    Parameters
    ----------
    problem : _DescentProblem
    tol : float or "auto"
    minimum : bool
        A float ``tol`` is a minimum, raised as ``"auto"`` raises 10⁻², instead of
        refused.

    Returns
    -------
    tol : float
    fallback_iterations : int

    Raises
    ------
    ValueError
        A float ``tol`` below what the fallback can certify (naming the smallest that
        works), or bounds beyond what float64 sums can represent (naming them).
    """
    unit = problem.unit
    if tol == "auto" or minimum:
        start = DEFAULT_TOL if tol == "auto" else float(tol)
        tol = start
        for _ in range(60):
            floor = problem.floor(0.5 * tol * unit)
            if not math.isfinite(floor):
                break
            if floor <= 0.25 * tol * unit:
                if tol > max(10 * DEFAULT_TOL, start):  # public numbers only
                    warnings.warn(
                        f"tol is {tol:.3g} at these public scales (n={problem.n}, "
                        f"n_features={problem.n_features}, norm_bound="
                        f"{problem.norm_bound:.3g}): the rounding of the solver's exact "
                        f"sums allows no less, and the noise grows by the factor "
                        f"(1 + tol). A smaller norm_bound or intercept_scaling lowers it.",
                        UserWarning, stacklevel=3)
                return tol, problem.iterations(tol, floor)
            tol = 4.0 * floor / unit * 1.01
        raise ValueError(
            "Output perturbation cannot certify its minimizer at these public scales "
            f"(n={problem.n}, norm_bound={problem.norm_bound:.3g}, intercept_scaling="
            f"{problem.intercept_scaling:.3g}, alpha={problem.alpha:.3g}): the exact "
            "63-bit sums of its solver cannot represent them. Declare a smaller "
            "norm_bound (or label_bound).")
    tol = float(tol)
    floor = problem.floor(0.5 * tol * unit)
    if not floor <= 0.25 * tol * unit:
        smallest = 4.0 * floor / unit
        raise ValueError(
            f"tol={tol:.3g} is below what the solver can certify at n={problem.n}, "
            f"n_features={problem.n_features}: the rounding of its exact sums alone "
            f"allows a distance of {floor:.3g} to the minimizer, more than tol*Delta/4; "
            f"use tol >= {smallest:.3g} (or tol='auto').")
    return tol, problem.iterations(tol, floor)


def bound_rows(X, norm_bound, sparsity):
    """A float64 copy of ``X`` with every row scaled into {‖x‖₂ ≤ R, ‖x‖₁ ≤ R√s}.

    Sparse input stays CSR (same pattern); rows are scaled, never dropped.

    **Privacy guarantee.** None by itself: it reads the data and releases nothing;
    the result is the data, bounded, and must not be released. It is the contribution
    bounding the sensitivities rest on: each output row is a function of its input
    row alone (and of the public R and s), inside the two balls, so replacing one
    input row replaces one output row. Assumption: finite entries (the estimators
    validate them).
    """
    l2_bound, l1_bound = row_bounds(norm_bound, sparsity)
    if sp.issparse(X):
        X = as_canonical_csr(X)
        scales = _kernels.csr_bounding_scales(X.indptr, X.data, l2_bound, l1_bound)
        data = _kernels.csr_scale_rows(X.indptr, X.data, scales,
                                       out=np.empty(X.data.shape, dtype=np.float64))
        return sp.csr_matrix((data, X.indices, X.indptr), shape=X.shape)
    X = np.ascontiguousarray(X)
    scales = _kernels.dense_bounding_scales(X, l2_bound, l1_bound)
    return _kernels.dense_scale_rows(X, scales, out=np.empty(X.shape, dtype=np.float64))


def centred_interval(low, high):
    """(m, B) = ((low + high)/2, (high − low)/2) of a declared label interval: the
    regressor fits y − m clipped to [−B, B]. The halves are taken first ((low + high)
    overflows for |low|, |high| near 1.8·10³⁰⁸).

    **Privacy guarantee.** None needed: public numbers in and out, no data. What the
    regressor's guarantee rests on: y ↦ clip(y − m, −B, B) is the same function for
    every row, so neighbouring datasets stay neighbours with every target in [−B, B],
    and adding m back to the released intercept is post-processing."""
    low, high = float(low), float(high)
    return 0.5 * low + 0.5 * high, 0.5 * high - 0.5 * low


def bound_inputs(X, targets, loss, *, norm_bound, sparsity, label_bound):
    """Contribution bounding of rows and targets (rows scaled, regression targets clipped).

    ``targets`` has shape (K, n): one target vector per problem; classification
    targets must be ±1 (they are built by the estimator, not read from the data).

    **Privacy guarantee.** None by itself: it reads the data and releases nothing;
    the bounded rows and targets must not be released. Each row is scaled as in
    :func:`bound_rows` and each regression target clipped to [−B, B] on its own, so
    replacing one (x, y) replaces one bounded row and its K targets. Assumptions:
    finite targets (NaN is not clipped; the estimators validate). Not covered: the
    error on a classification target other than ±1, which reveals that one exists
    (the estimators build ±1 targets, so it never fires there).
    """
    targets = _bound_targets(targets, loss, label_bound)
    return bound_rows(X, norm_bound, sparsity), targets


def _bound_targets(targets, loss, label_bound):
    """The targets part of :func:`bound_inputs` (each clipped on its own)."""
    targets = np.atleast_2d(np.asarray(targets, dtype=np.float64))
    if loss in REGRESSION_LOSSES:
        targets = np.clip(targets, -label_bound, label_bound)
    elif not np.all(np.abs(targets) == 1.0):
        raise ValueError("classification targets must be -1 or +1.")
    return np.ascontiguousarray(targets)


def _bounded_rows_in_place(X, targets, plan):
    """:func:`bounded_rows` with the plan's bounds."""
    return bounded_rows(X, targets, plan.loss, norm_bound=plan.norm_bound,
                        sparsity=plan.sparsity, label_bound=plan.label_bound)


def bounded_rows(X, targets, loss, *, norm_bound, sparsity, label_bound):
    """The rows of :func:`bound_inputs` for the solver, without the bounded copy of X:
    each row's factor is applied where the kernels read it
    (:class:`~skdpsparse._solvers.erm.InMemoryRows` with ``row_bounds``), and the sums
    are those of the copy, bit for bit (the in-memory fit, and each chunk of a
    distributed one).

    **Privacy guarantee.** None by itself: it reads the data and releases nothing.
    Same contribution bounding, same argument as :func:`bound_inputs` (each bounded
    row and target a function of its own row).
    """
    targets = _bound_targets(targets, loss, label_bound)
    if sp.issparse(X):
        X = as_canonical_csr(X)
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
    else:
        X = np.asarray(X)
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
    return InMemoryRows(X, targets, row_bounds=row_bounds(norm_bound, sparsity))


def regularized_minimizers(X_bounded, targets, plan, *, max_iter=1000):
    """Certified minimizers θ̂ of the K regularized problems (not private).

    **Privacy guarantee.** None by itself: it reads the data and its minimizers and
    ``info`` are not private. Each minimizer is certified within tol·Δ/2 of the exact
    one (:func:`certified_minimizers`), which is what :func:`release` needs for its
    guarantee.

    Parameters
    ----------
    X_bounded, targets
        From :func:`bound_inputs`.
    plan : OutputPerturbationPlan
    max_iter : int

    Returns
    -------
    theta : ndarray of shape (K, p)
    info : dict
        ``n_iter``, ``residual_l2``, ``residual_l1``: arrays of shape (K,).
    """
    return certified_minimizers(InMemoryRows(X_bounded, targets), plan, max_iter=max_iter)


def certified_minimizers(rows, plan, *, max_iter=1000):
    """The K certified minimizers over ``rows``: the one driver of the in-memory and
    the distributed fits.

    **Privacy guarantee.** None by itself: the minimizers are not private. Each is
    certified within tol·Δ/2 of the exact minimizer (module doc), which is what
    :func:`release` needs for its guarantee.

    ``rows`` holds the contribution-bounded rows and K target vectors, in memory
    (:class:`~skdpsparse._solvers.erm.InMemoryRows`) or on a cluster
    (``skdpsparse.distributed``); ``rows.problem = k`` selects problem k. Each
    problem is solved by :func:`~skdpsparse._solvers.erm.solve_certified` on
    :func:`certified_objective` until ``plan.accept`` certifies it.

    Returns
    -------
    theta : ndarray of shape (K, p)
    info : dict
        ``n_iter``, ``residual_l2``, ``residual_l1``: arrays of shape (K,).
    """
    K = plan.n_problems
    theta = np.empty((K, plan.n_params))
    info = {key: np.empty(K) for key in ("n_iter", "residual_l2", "residual_l1")}
    info["n_iter"] = np.empty(K, dtype=np.int64)
    for k in range(K):
        rows.problem = k
        theta[k], res = solve_certified(
            certified_objective(rows, plan), radius=plan.radius,
            smoothness=plan.constants.smoothness + plan.alpha, accept=plan.accept,
            max_iter=max_iter, fallback_iterations=plan.fallback_iterations)
        for key in ("n_iter", "residual_l2", "residual_l1"):
            info[key][k] = res[key]
    return theta, info


def certified_objective(rows, plan):
    """The exact-sum objective of one problem of ``plan`` over ``rows`` (in memory,
    :class:`~skdpsparse._solvers.erm.InMemoryRows`, or on a cluster): the
    oracle of the one certified solver both fits run
    (:func:`~skdpsparse._solvers.erm.solve_certified`). Its grid is sized by
    the declared bounds R and B (1 for ±1 labels), never by the data.

    **Privacy guarantee.** None by itself: an oracle over the data whose values are
    not private; it releases nothing. What it guarantees: its sums are exact integers
    on a grid set by public numbers and θ, so the iterates and the certified
    minimizer do not depend on how the rows are chunked, and the gradient error it
    reports is added to the solver's certificate
    (:class:`~skdpsparse._solvers.erm.FixedPointObjective`). Not covered: the
    last ulps of each row's own float arithmetic.
    """
    label_bound = plan.label_bound if plan.loss in REGRESSION_LOSSES else 1.0
    return FixedPointObjective(rows, code=plan.code, param=plan.loss_param,
                               alpha=plan.alpha, intercept_scaling=plan.intercept_scaling,
                               row_bound=plan.norm_bound, label_bound=label_bound)


def noise_sensitivity(plan):
    """The joint sensitivity the noise is calibrated to: √K(1 + tol)Δ₂ or K(1 + tol)Δ₁."""
    if plan.noise_kind == "gaussian":
        return math.sqrt(plan.n_problems) * (1.0 + plan.tol) * plan.sensitivity_l2
    return plan.n_problems * (1.0 + plan.tol) * plan.sensitivity_l1


def release(theta, plan, rng):
    """Noise and ℓ∞ projection (the last two lines of Algorithm 3).

    **Privacy guarantee.** The plan's ``budget`` for the row-level neighbours of the
    data ``theta`` was computed from, *provided* ``theta`` holds minimizers certified
    within tol·Δ/2 of the exact ones (:func:`certified_minimizers` on
    contribution-bounded rows): their joint sensitivity is then (1 + tol)·√K·Δ₂ or
    (1 + tol)·K·Δ₁, which the noise is calibrated to (Ghazi et al. (2024), Algorithm 3
    and Fact 2.3; discrete Gaussian or Laplace noise on a grid, Canonne, Kamath and
    Steinke (2020), "The discrete Gaussian for differential privacy", Theorem 14).
    The projection is post-processing. Not covered: any other ``theta``.

    Returns
    -------
    theta_hat : ndarray of shape (K, p)
        argmin over 𝒳 of ‖θ − θ̃‖∞, per problem (𝒳^K is a product, so per-block
        minimizers minimize the maximum).
    theta_noisy : ndarray of shape (K, p)
        θ̃ = θ + noise.
    """
    noisy = np.array(theta, dtype=np.float64, copy=True)
    add_noise_inplace(noisy, rng, plan.noise_kind, plan.noise_scale,
                      sensitivity=noise_sensitivity(plan))
    if plan.radius is None:
        return noisy.copy(), noisy
    out = np.vstack([_kernels.linf_nearest_in_l2_ball(row, float(plan.radius))
                     for row in noisy])
    return out, noisy


def output_perturbation(X, targets, plan, rng, *, max_iter=1000):
    """Ghazi et al. (2024) Algorithm 3: bound, solve to a certificate, add noise, ℓ∞-project.

    **Privacy guarantee.** Protected: one row (x, y) of ``X`` and ``targets`` under
    replacement neighbours (n, d, K and the plan's parameters are public). The result
    is (ε, δ)-DP with Gaussian noise (δ > 0) or ε-DP with Laplace noise (δ = 0), the
    plan's ``budget``: Ghazi, Guzmán, Kamath, Kumar and Manurangsi (2024),
    "Differentially Private Optimization with Sparse Gradients", Theorem 5.1 (proof:
    the sensitivity of the regularized minimizer) with the module doc's sensitivities
    (Δ₂ = 2L/(λn), half the paper's 4L/(λn)), the Gaussian or Laplace mechanism
    (Fact 2.3) on the discrete grid of :mod:`skdpsparse.mechanisms.noise`, and the
    ℓ∞ projection as post-processing. Assumptions: rows scaled into
    {‖x‖₂ ≤ R, ‖x‖₁ ≤ R√s} and targets clipped to [−B, B] here (contribution bounding);
    a smooth loss; the computed minimizer certified within tol·Δ/2 of the exact one
    (the solver's certificate covers the rounding of its sums,
    :class:`~skdpsparse._solvers.erm.FixedPointObjective`; its fallback is certified
    by analysis with public numbers, :func:`certification_tol`), so the noise
    calibrated to (1 + tol)·Δ covers what is computed. Not covered: ``info`` (the
    iteration count and residuals depend on the data; the estimators drop them), a
    data-dependent λ or bound (they must come from public numbers or a private
    estimate paid separately), and the last ulps of each row's own float arithmetic.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n, d)
    targets : ndarray of shape (K, n)
        Regression targets or ±1 labels, one row per problem.
    plan : OutputPerturbationPlan
        From :func:`plan_output_perturbation` with the same n, d and K.
    rng : numpy.random.Generator
    max_iter : int

    Returns
    -------
    theta : ndarray of shape (K, p)
        Private parameters; the last column is θ_b (intercept c·θ_b) when c > 0.
    info : dict
        Solver diagnostics (``n_iter``, residuals), which depend on the data and are
        not released by the estimators.
    """
    n, d = X.shape
    if (n, d, targets.shape[0]) != (plan.n, plan.n_features, plan.n_problems):
        raise ValueError("X and targets do not match the plan's n, d and K.")
    # bound_inputs + regularized_minimizers, with the rows bounded where they are
    # read (no copy of X; the same sums, iterates and minimizers).
    rows = _bounded_rows_in_place(X, targets, plan)
    theta, info = certified_minimizers(rows, plan, max_iter=max_iter)
    theta_hat, _ = release(theta, plan, rng)
    return theta_hat, info
