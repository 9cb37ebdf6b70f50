"""DP-SGD with batches sampled without replacement, accounted by subsampled RDP.

The plain DP-SGD of Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar and Zhang
(2016, "Deep learning with differential privacy", Algorithm 1) for linear models, in
the library's privacy unit (replace one row) and with its exact noise:

1. every row is scaled into ‖x‖₂ ≤ R (contribution bounding), x̃ = (x, 1) with an
   intercept, so ‖x̃‖ ≤ G = √(R² + 1) (or R);
2. each of T steps draws a batch B_t of exactly b distinct rows, uniformly among the
   C(n, b) subsets, independently of the other steps and of the data, with the exact
   uniform sampler of :class:`~skdpsparse.utils.RandomSource` (never a float
   sampler);
3. each per-example gradient g_i of the loss at the current iterate is clipped to
   ‖g_i‖₂ ≤ C (for the built-in losses the default C is the largest norm a gradient
   can have, so clipping never binds: logistic abs(ℓ') ≤ 1, ‖g‖ ≤ G; joint softmax
   ‖(p − e_y) ⊗ x̃‖ = ‖p − e_y‖·‖x̃‖ ≤ √2·G; Huber on targets scaled into [−1, 1]
   with threshold 1, abs(ℓ') ≤ 1, ‖g‖ ≤ G);
4. the batch sum S_t = Σ_{i∈B_t} g_i is released with exact discrete Gaussian noise on
   a grid (:func:`~skdpsparse.mechanisms.noise.add_noise_inplace`), scale σ = z·Δ with
   Δ = 2C, and the iterate moves by −λ·(S̃_t/b + αw) (α ≥ 0 an optional ℓ2 penalty
   on the coefficients);
5. the released model is the last iterate or the average of the iterates of the last
   half of the steps (post-processing of the noisy sums either way).

**Sensitivity.** Replacing one row x by x′ changes S_t only if x ∈ B_t (same indices
under the natural coupling of the two samples), and then by g(x′) − g(x), of norm at
most 2C: the batch sum has ℓ2 sensitivity Δ = 2C under replace-one neighbours. The
computed sum is a floating-point sum of b products; its error is charged through
``true_sensitivity`` of :func:`~skdpsparse.mechanisms.noise.plan_grid_noise`
(:func:`batch_sum_sensitivity`).

**Accounting.** (i) One release of S_t on a fixed batch is the discrete Gaussian
mechanism on the grid: the integer vectors round(S_t/γ) of any two batches that
differ in one row are at most N/z apart in ℓ2 (the rounding and the float error are
charged in N, see :mod:`skdpsparse.mechanisms.noise`). (ii) On a batch drawn uniformly
without replacement, the RDP at an integer order α is at most
log(1 + Σ_{j≥2} C(α, j) γ^j M_j)/(α − 1), γ = b/n: the expansion of Wang, Balle and
Kasiviswanathan (2019, "Subsampled Rényi differential privacy and analytical moments
accountant"), whose ternary-abs(χ)^j divergence is bounded here by its exact supremum
over triples of Gaussians with means pairwise within 1/z standard deviations
(:func:`~skdpsparse.accounting.subsampled_without_replacement_discrete_gaussian_rdp`).
Only integer-order mixed moments of the three Gaussians enter, and for discrete
Gaussians with integer means these equal the continuous ones, so the bound holds for
this noise. It is never above their Theorem 9, and about four times smaller in its
leading term. Fractional orders use the chord of the convex cumulant generating
function (their Corollary 10). (iii) The T steps compose adaptively (Mironov 2017,
"Rényi differential privacy", Proposition 1), and (iv) the curve converts to (ε, δ) by
:func:`~skdpsparse.accounting.rdp_to_epsilon` (Balle, Barthe, Gaboardi, Hsu and Sato
2020, Theorem 21). z is the smallest noise multiplier (to a relative 1e-4) whose
curve gives at most the target ε. The derivation, with the proof of (ii), is
``doc/derivations/dp_sgd.rst``.
"""

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, softmax

from .._kernels.row_margins import dense_row_margins
from ..accounting import (ApproxDP, DEFAULT_ORDERS,
                          subsampled_without_replacement_discrete_gaussian_rdp)
from ..accounting.rdp import rdp_to_epsilon
from ..utils._random import as_random_source
from .cyclic_sgd import bound_rows_l2, feature_bound
from .noise import add_noise_inplace

__all__ = [
    "DPSGDPlan",
    "LOSSES",
    "batch_sum_sensitivity",
    "calibrate_dp_sgd_noise",
    "dp_sgd",
    "dp_sgd_rdp",
    "gradient_norm_bound",
    "plan_dp_sgd",
]

#: The built-in losses: binary logistic (±1 targets), joint softmax (K ≥ 3 classes)
#: and Huber with threshold 1 on targets scaled into [−1, 1].
LOSSES = ("logistic", "softmax", "huber")
_UNIT_ROUNDOFF = 2.0**-53
#: Relative accuracy of the calibrated noise multiplier (bisection in log scale).
_CALIBRATION_RTOL = 1e-4


def gradient_norm_bound(loss, feature_bound):
    """sup ‖g_i‖₂ over every possible record, for rows with ‖x̃‖ ≤ ``feature_bound``.

    logistic: abs(ℓ'(t)) = 1/(1 + e^{yt}) ≤ 1, so ‖ℓ'·x̃‖ ≤ G. softmax: the gradient in
    the K logits is p − e_y, ‖p − e_y‖² = (1 − p_y)² + Σ_{k≠y} p_k² ≤ 2(1 − p_y)² ≤ 2,
    and the gradient in the weights is the outer product (p − e_y) ⊗ x̃, of norm
    ‖p − e_y‖·‖x̃‖ ≤ √2·G. huber (threshold 1): abs(ℓ') ≤ 1, ‖g‖ ≤ G.

    **Privacy guarantee.** None needed: a function of public numbers only (the loss
    and G; no data enter it). What it guarantees: for rows scaled into ‖x̃‖ ≤ G and
    targets of the declared form (±1, class indices, or any target for huber) every
    per-example gradient has ‖g_i‖₂ ≤ the returned bound (:ref:`derivation_dp_sgd`,
    "Sensitivity of one step"), so with C equal to it clipping never binds. The
    privacy of :func:`dp_sgd` does not rest on it: every per-example gradient is
    clipped to C whatever C is, so a wrong bound would bias the gradients, not
    weaken the guarantee.
    """
    g = float(feature_bound)
    if loss in ("logistic", "huber"):
        return g
    if loss == "softmax":
        return math.sqrt(2.0) * g
    raise ValueError(f"unknown loss {loss!r}; expected one of {LOSSES}")


def smoothness(loss, feature_bound):
    """M, a bound on the Hessian of the average loss for rows with ‖x̃‖ ≤ G.

    logistic: ℓ'' ≤ 1/4, M = G²/4. softmax: the Hessian in the logits,
    diag(p) − ppᵀ, has largest eigenvalue ≤ 1/2 (Gershgorin: row k sums to
    2p_k(1 − p_k) ≤ 1/2), M = G²/2. huber: ℓ'' ≤ 1, M = G².
    """
    g2 = float(feature_bound) ** 2
    return {"logistic": 0.25 * g2, "softmax": 0.5 * g2, "huber": g2}[loss]


def batch_sum_sensitivity(clip_norm, batch_size):
    """(Δ, Δ_true): the ℓ2 sensitivity 2C of the batch sum and a bound on it as computed.

    Each clipped gradient is computed with norm at most C(1 + 4u) (u = 2⁻⁵³: the norm,
    the clip factor and the product each round once), and the batch sum is a
    floating-point sum of b terms (a sparse or dense product, each term rounded once
    more): componentwise error at most (b + 1)u·Σ_j abs(g_j) (Higham 2002, "Accuracy and
    stability of numerical algorithms", eq. (4.4), plus the product's rounding), hence
    an ℓ2 error at most (b + 1)u·Σ_j ‖g_j‖₂ ≤ (b + 1)u·b·C(1 + 4u) for each of the two
    neighbouring sums. So the computed sums differ by at most

        Δ_true = 2C(1 + 4u) + 2(b + 1)u·b·C(1 + 4u),

    which :func:`~skdpsparse.mechanisms.noise.plan_grid_noise` charges
    (``true_sensitivity``) while the noise keeps the privacy of σ for Δ = 2C.

    **Privacy guarantee.** None needed: a function of public numbers only (C and b;
    no data enter it). What it guarantees to its caller: under replace-one neighbours
    and clipping to C, the exact batch sums of two neighbouring data sets on the same
    batch differ by at most Δ = 2C in ℓ2, and the sums as :func:`dp_sgd` computes them
    by at most Δ_true (:ref:`derivation_dp_sgd`, "Sensitivity of one step"); passing
    both to :func:`~skdpsparse.mechanisms.noise.add_noise_inplace` keeps the privacy
    of σ for Δ. Assumptions: float64 arithmetic rounding to nearest, without
    overflow (finite rows scaled into the norm bound, gradients clipped). Not
    covered: a sum computed otherwise (more terms, lower precision).
    """
    c = float(clip_norm) * (1.0 + 4.0 * _UNIT_ROUNDOFF)
    b = int(batch_size)
    return 2.0 * float(clip_norm), 2.0 * c + 2.0 * (b + 1) * _UNIT_ROUNDOFF * b * c


def dp_sgd_rdp(batch_size, n_samples, noise_multiplier, n_steps, orders=DEFAULT_ORDERS):
    """RDP curve of T steps of DP-SGD (module docstring, steps (i)–(iii)).

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enter it). What it guarantees: T steps of :func:`dp_sgd` with batches of b out of
    n rows and noise multiplier z (σ = z·2C on a batch sum of replace-one
    sensitivity 2C) are (α, ε(α))-RDP at each returned order. One step is the bound
    of :func:`~skdpsparse.accounting.subsampled_without_replacement_discrete_gaussian_rdp`:
    the expansion of Wang, Balle and Kasiviswanathan (2019, "Subsampled Rényi
    differential privacy and analytical moments accountant") with the exact supremum
    of its ternary moments for Gaussians whose means are pairwise within 1/z standard
    deviations, moments that for the discrete Gaussian with integer means equal the
    continuous one's (Canonne, Kamath and Steinke 2020, "The discrete Gaussian for
    differential privacy", for the discrete Gaussian itself); fractional orders by
    their Corollary 10; the T adaptive steps add up (Mironov 2017, "Rényi
    differential privacy", Proposition 1). Derivation: :ref:`derivation_dp_sgd`.
    Assumptions: replace-one neighbours (not add/remove); batches of exactly b rows
    drawn uniformly without replacement, independently of each other and of the
    data; the computed batch sums of any two batches that differ in one row are
    within the charged sensitivity (:func:`batch_sum_sensitivity`). Not covered:
    Poisson sampling or shuffled epochs (other mechanisms).

    Parameters
    ----------
    batch_size : int
        b, 1 ≤ b ≤ n.
    n_samples : int
        n.
    noise_multiplier : float
        z = σ/Δ, the noise std on the batch sum over its replace-one sensitivity 2C.
    n_steps : int
        T.
    orders : array-like of float, default=DEFAULT_ORDERS

    Returns
    -------
    RdpCurve
        T times the one-step curve.
    """
    curve = subsampled_without_replacement_discrete_gaussian_rdp(
        int(batch_size), int(n_samples), float(noise_multiplier), orders)
    return curve * int(n_steps)


def _epsilon(batch_size, n_samples, z, n_steps, delta):
    curve = dp_sgd_rdp(batch_size, n_samples, z, n_steps)
    return rdp_to_epsilon(curve.orders, curve.epsilons, delta)


def calibrate_dp_sgd_noise(epsilon, delta, batch_size, n_samples, n_steps):
    """The smallest z (to a relative 1e-4, rounded up) whose T steps are (ε, δ)-DP.

    ε(z) is non-increasing in z (each order's bound is), so bisection in log z on
    [lo, hi] with ε(hi) ≤ ε returns hi: the guarantee holds at the returned value.

    **Privacy guarantee.** None needed: a function of public numbers only (ε, δ, b, n
    and T; no data enter it). What it guarantees to its caller: T steps of
    :func:`dp_sgd` with batches of b out of n rows and the returned z are (ε, δ)-DP
    under replace-one neighbours (the curve of :func:`dp_sgd_rdp`, converted by
    Balle, Barthe, Gaboardi, Hsu and Sato 2020, "Hypothesis testing interpretations
    and Rényi differential privacy", Theorem 21). The bound was evaluated at the
    returned value itself, the upper end of a bracket whose upper end always met it:
    the monotonicity of ε(z) and the 1e-4 tolerance affect only how small z is, not
    the guarantee. Not covered: the same z used with another b, n, T or δ.

    Returns
    -------
    float
    """
    epsilon, delta = float(epsilon), float(delta)
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be positive and finite, got {epsilon!r}")

    def eps_of(z):
        return _epsilon(batch_size, n_samples, z, n_steps, delta)[0]

    lo, hi = 0.05, 0.1
    while eps_of(hi) > epsilon:
        lo, hi = hi, 2.0 * hi
        if hi > 1e8:
            raise ValueError(f"no noise multiplier below 1e8 reaches epsilon={epsilon}")
    if eps_of(lo) <= epsilon:  # very large ε: a smaller z suffices; search down
        while lo > 1e-3 and eps_of(lo) <= epsilon:
            lo, hi = lo / 2.0, lo
    while hi / lo > 1.0 + _CALIBRATION_RTOL:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if eps_of(mid) > epsilon else (lo, mid)
    return hi


def noise_walk(learning_rate, noise_std, batch_size, n_steps):
    """s·√T: the std that the noise accumulates on a coordinate no row pulls back.

    Each step adds noise of std s = λ·σ/b per coordinate to the iterate; on a
    coordinate the data barely move (a rare one-hot column, a hashed n-gram), T steps
    make it a random walk of std s·√T (before averaging). Public numbers only: the
    estimators warn before fitting when it exceeds 1 (a logit, or the target bound)
    with more coordinates than rows per batch.

    **Privacy guarantee.** None needed: a function of public numbers (λ, σ, b, T),
    for replace-one neighbours as for the run; no assumption; not covered: nothing is
    released here.
    """
    return float(learning_rate) * float(noise_std) / int(batch_size) * math.sqrt(int(n_steps))


@dataclass(frozen=True)
class DPSGDPlan:
    """Everything :func:`dp_sgd` runs with, fixed from public numbers before the data
    are read (n, d, the declared bounds, ε, δ and the hyperparameters).

    **Privacy guarantee.** None needed: public numbers only (no data enter a plan
    made by :func:`plan_dp_sgd`). What it records: ``budget`` is the (ε, δ) that
    :func:`dp_sgd` run with this plan satisfies for one row under replace-one
    neighbours (module docstring, "Accounting"; :ref:`derivation_dp_sgd`), and
    ``sensitivity`` = 2C and ``noise_std`` = z·2C are what each step's noise is
    calibrated to. Not covered: a plan built from numbers read off the data (a norm
    bound, clip norm or number of classes computed from ``X`` or the targets), which
    the plan itself would then leak.
    """

    loss: str
    n_samples: int
    n_features: int
    n_outputs: int  #: 1 (logistic, huber) or K (softmax)
    fit_intercept: bool
    norm_bound: float
    clip_norm: float
    batch_size: int
    epochs: int
    n_steps: int
    learning_rate: float
    average: bool
    alpha: float  #: ℓ2 penalty on the coefficients (never the intercept)
    noise_multiplier: float  #: z = σ/Δ
    sensitivity: float  #: Δ = 2C, replace-one
    noise_std: float  #: σ = zΔ on the batch sum
    budget: ApproxDP
    accounting: dict = field(repr=False)


def plan_dp_sgd(n_samples, n_features, *, loss, n_outputs=1, norm_bound=1.0,
                fit_intercept=True, clip_norm="auto", batch_size, epochs,
                learning_rate="auto", epsilon=None, delta, noise_multiplier=None,
                average=True, alpha=0.0):
    """Noise, step size and guarantee of DP-SGD (module docstring), from public numbers.

    **Privacy guarantee.** None needed: public numbers in, a public plan out (n and d
    are public under replace-one neighbours; no data enter it). What it guarantees to
    its caller: :func:`dp_sgd` run with the returned plan is (``budget.epsilon``,
    δ)-DP for one row (features and target) under replace-one neighbours: batch sums
    of ℓ2 sensitivity 2C (clipping enforces C whatever ``clip_norm`` is), exact
    discrete Gaussian noise, amplification by sampling without replacement (the
    expansion of Wang, Balle and Kasiviswanathan 2019, "Subsampled Rényi
    differential privacy and analytical moments accountant", with the exact supremum
    of its ternary moments for the Gaussian, :ref:`derivation_dp_sgd`) and
    composition over the T steps
    (:func:`dp_sgd_rdp`), converted to ε at δ (Balle, Barthe, Gaboardi, Hsu and Sato
    2020, Theorem 21); ε is evaluated at the z used, given or calibrated. Derivation:
    :ref:`derivation_dp_sgd`. Assumptions: every argument is public (declared, not
    computed from the data); the learning rate, α and the averaging are
    post-processing and need none. Not covered: arguments chosen by looking at the
    data (each setting tried is another fit), and composition with other fits beyond
    what the ledger is given (the attached event, or the bare (ε, δ) when no event
    describes the run exactly).

    Parameters
    ----------
    n_samples, n_features : int
        n and d (public under replace-one neighbours).
    loss : {"logistic", "softmax", "huber"}
    n_outputs : int, default=1
        K for ``"softmax"`` (the number of declared classes), else 1.
    norm_bound : float, default=1.0
        R: rows are scaled into ‖x‖₂ ≤ R.
    fit_intercept : bool, default=True
    clip_norm : float or "auto", default="auto"
        C; ``"auto"`` is :func:`gradient_norm_bound` (clipping never binds).
    batch_size : int
        b, capped at n.
    epochs : int or float
        E > 0: T = ⌈E·n/b⌉ steps.
    learning_rate : float or "auto", default="auto"
        λ; ``"auto"`` is 1/M (:func:`smoothness`), the step of gradient descent on
        an M-smooth loss.
    epsilon : float, optional
        Target ε; needed when ``noise_multiplier`` is None.
    delta : float
        δ in (0, 1).
    noise_multiplier : float, optional
        z = σ/(2C); ``epsilon`` is then ignored and the ε reached is reported.
    average : bool, default=True
        Release the average of the iterates of the last half of the steps.
    alpha : float, default=0.0
        ℓ2 penalty (α/2)‖w‖² on the coefficients, applied to the iterate at every
        step (post-processing: the step is −λ(S̃/b + αw)).

    Returns
    -------
    DPSGDPlan
    """
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    n, d = int(n_samples), int(n_features)
    if n < 1:
        raise ValueError("DP-SGD needs at least one row")
    b = max(1, min(int(batch_size), n))
    epochs = float(epochs)
    if not (math.isfinite(epochs) and epochs > 0):
        raise ValueError(f"epochs must be positive, got {epochs!r}")
    steps = max(1, math.ceil(epochs * n / b))
    g = feature_bound(float(norm_bound), bool(fit_intercept))
    bound = gradient_norm_bound(loss, g)
    clip = bound if clip_norm == "auto" else float(clip_norm)
    if learning_rate == "auto":
        lr = 1.0 / smoothness(loss, g)
    else:
        lr = float(learning_rate)
    delta = float(delta)
    if noise_multiplier is None:
        if epsilon is None:
            raise ValueError("give epsilon (to calibrate the noise) or noise_multiplier")
        z = calibrate_dp_sgd_noise(float(epsilon), delta, b, n, steps)
    else:
        z = float(noise_multiplier)
        if not (math.isfinite(z) and z > 0):
            raise ValueError(f"noise_multiplier must be positive, got {noise_multiplier!r}")
    eps, order = _epsilon(b, n, z, steps, delta)
    if not math.isfinite(eps):
        raise ValueError(f"noise_multiplier={z} gives no finite epsilon at delta={delta}")
    budget = ApproxDP(max(eps, float(np.finfo(float).tiny)), delta)
    budget = _attach_event(budget, b, n, z, steps)
    sensitivity = 2.0 * clip
    alpha = float(alpha)
    if not (math.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be non-negative, got {alpha!r}")
    k = int(n_outputs) if loss == "softmax" else 1
    report = dict(theorem="the expansion of Wang, Balle and Kasiviswanathan 2019 with "
                          "the exact supremum of the Gaussian's ternary moments "
                          "(integer orders; doc/derivations/dp_sgd.rst), composed over "
                          "the steps",
                  order=order, sampling_rate=b / n, n_steps=steps,
                  gradient_bound=bound, clipping_can_bind=bool(clip < bound),
                  feature_bound=g, smoothness=smoothness(loss, g))
    return DPSGDPlan(loss=loss, n_samples=n, n_features=d, n_outputs=k,
                     fit_intercept=bool(fit_intercept), norm_bound=float(norm_bound),
                     clip_norm=clip, batch_size=b, epochs=epochs, n_steps=steps,
                     learning_rate=lr, average=bool(average), alpha=alpha,
                     noise_multiplier=z,
                     sensitivity=sensitivity, noise_std=z * sensitivity, budget=budget,
                     accounting=report)


def _attach_event(budget, batch_size, n, z, steps):
    """The budget with the event the ledger composes, when the library has one that
    describes this run exactly; else the bare budget (basic composition, the safe
    side).

    The run is T adaptive releases of a discrete Gaussian on a batch sampled without
    replacement: :class:`~skdpsparse.accounting.SampledWithoutReplacementEvent` of a
    :class:`~skdpsparse.accounting.DiscreteGaussianEvent`, composed ``steps`` times,
    whose curve is that of :func:`dp_sgd_rdp`. It is attached once checked to give at
    least that curve at every order (a mis-described event would understate the
    run's loss when the ledger composes it); otherwise the bare budget is kept.
    """
    from ..accounting import (DiscreteGaussianEvent, SampledWithoutReplacementEvent,
                              SelfComposedEvent, with_event)

    if batch_size >= n:
        # Full batches: every step is the discrete Gaussian itself, composed in zCDP.
        try:
            return with_event(budget, DiscreteGaussianEvent(z, count=int(steps)))
        except ValueError:  # the zCDP route gives more than the RDP one: keep it bare
            return budget
    try:
        event = SelfComposedEvent(SampledWithoutReplacementEvent(
            int(batch_size), int(n), DiscreteGaussianEvent(z)), int(steps))
    except TypeError:
        return budget
    leaf = event.event
    mine = subsampled_without_replacement_discrete_gaussian_rdp(int(batch_size), int(n), z,
                                                                DEFAULT_ORDERS)
    if not np.all(np.asarray(leaf.rdp(DEFAULT_ORDERS)) >= mine.epsilons * (1 - 1e-12)):
        return budget
    try:
        return with_event(budget, event)
    except ValueError:
        return budget


def _per_example(loss, margins, targets):
    """Gradients of the loss in the margins (n_batch, K), before clipping, and the
    ℓ2 norm of each row of them."""
    if loss == "logistic":
        t = targets  # ±1
        grad = (-t * expit(-t * margins[:, 0]))[:, None]
        return grad, np.abs(grad[:, 0])
    if loss == "huber":
        grad = np.clip(margins[:, 0] - targets, -1.0, 1.0)[:, None]
        return grad, np.abs(grad[:, 0])
    p = softmax(margins, axis=1)
    p[np.arange(p.shape[0]), targets] -= 1.0
    return p, np.sqrt(np.einsum("ij,ij->i", p, p))


def dp_sgd(X, targets, plan, rng, *, progress=None):
    """Run DP-SGD (module docstring) and return the released model.

    **Privacy guarantee.** Protected: one row (its features and its target) under
    replace-one neighbours; n, d and the plan are public. The released (coef,
    intercept) is (``plan.budget.epsilon``, ``plan.budget.delta``)-DP: rows are
    scaled into ‖x‖₂ ≤ R and every per-example gradient clipped to C, so each batch
    sum has ℓ2 sensitivity 2C (:func:`batch_sum_sensitivity`, floating-point error
    charged); it is released with exact discrete Gaussian noise (Canonne, Kamath and
    Steinke 2020, "The discrete Gaussian for differential privacy", Theorem 14) on a
    batch of b rows drawn uniformly without replacement (the expansion of Wang,
    Balle and Kasiviswanathan 2019, "Subsampled Rényi differential privacy and
    analytical moments accountant", with the exact supremum of its ternary moments
    for the Gaussian: :func:`dp_sgd_rdp`), the T steps composed (Mironov 2017, "Rényi
    differential privacy", Proposition 1) and converted to (ε, δ) (Balle, Barthe,
    Gaboardi, Hsu and Sato 2020, Theorem 21); the iterates, the penalty and the
    averaging are post-processing. Derivation: :ref:`derivation_dp_sgd`.
    Assumptions: the plan was made from public numbers (:func:`plan_dp_sgd`); ``X``
    and ``targets`` are finite and softmax targets are class indices in 0..K−1 (the
    caller validates them first: a bad value could raise mid-run, an exception that
    depends on one row); ``rng`` draws from a secret key. Not covered: the batches
    and the noise when the key is known (a fixed ``random_state``), and the running
    time (a step's cost depends on the number of nonzeros in its batch).

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, d)
        Finite values; rows are scaled into ‖x‖₂ ≤ ``plan.norm_bound`` here.
    targets : ndarray of shape (n,)
        ±1 (logistic), class indices 0..K−1 (softmax) or targets in [−1, 1] (huber).
    plan : DPSGDPlan
    rng : RandomSource, numpy.random.Generator or None
        The only source of randomness (batches and noise).
    progress : Progress, optional
        Prints the epochs (public counts and time only).

    Returns
    -------
    coef : ndarray of shape (K, d)
    intercept : ndarray of shape (K,)
    """
    n, d = X.shape
    if (n, d) != (plan.n_samples, plan.n_features):
        raise ValueError(f"X has shape {(n, d)}, the plan was made for "
                         f"{(plan.n_samples, plan.n_features)}")
    src = as_random_source(rng)
    X = bound_rows_l2(X, plan.norm_bound)
    sparse = sp.issparse(X)
    sq = (np.asarray(X.multiply(X).sum(axis=1)).ravel() if sparse
          else np.einsum("ij,ij->i", X, X))
    row_norm = np.sqrt(sq + (1.0 if plan.fit_intercept else 0.0))
    k, b = plan.n_outputs, plan.batch_size
    targets = np.asarray(targets)
    W = np.zeros((d, k))
    c = np.zeros(k)
    W_avg, c_avg, n_avg = np.zeros((d, k)), np.zeros(k), 0
    first_avg = plan.n_steps // 2 if plan.average else plan.n_steps - 1
    sens, true_sens = batch_sum_sensitivity(plan.clip_norm, b)
    step = plan.learning_rate / b
    per_epoch = max(1, math.ceil(n / b))
    flat = np.empty(d * k + (k if plan.fit_intercept else 0))
    for t in range(plan.n_steps):
        idx = np.sort(src.choice(n, b, replace=False))  # a uniform b-subset
        Xb = X[idx]
        # A dense row's margins must not depend on its place in the batch (the
        # replace-one sensitivity compares two batches holding it); a CSR product
        # reads each row's entries in its own order already.
        margins = (np.asarray(Xb @ W).reshape(b, k) if sparse
                   else dense_row_margins(X, idx, W)) + c
        grad, norms = _per_example(plan.loss, margins, targets[idx])
        norms = norms * row_norm[idx]
        with np.errstate(divide="ignore"):
            scale = np.where(norms > plan.clip_norm, plan.clip_norm / norms, 1.0)
        grad *= scale[:, None]
        flat[:d * k] = np.asarray(Xb.T @ grad).reshape(-1)
        if plan.fit_intercept:
            flat[d * k:] = grad.sum(axis=0)
        add_noise_inplace(flat, src, "gaussian", plan.noise_std, sensitivity=sens,
                          true_sensitivity=true_sens)
        if plan.alpha:
            W *= 1.0 - min(1.0, plan.learning_rate * plan.alpha)
        W -= step * flat[:d * k].reshape(d, k)
        if plan.fit_intercept:
            c -= step * flat[d * k:]
        if t >= first_avg:
            n_avg += 1
            W_avg += (W - W_avg) / n_avg
            c_avg += (c - c_avg) / n_avg
        if progress and ((t + 1) % per_epoch == 0 or t + 1 == plan.n_steps):
            progress.report("step", t + 1, plan.n_steps, f"batches of {b}")
    return W_avg.T.copy(), c_avg.copy()
