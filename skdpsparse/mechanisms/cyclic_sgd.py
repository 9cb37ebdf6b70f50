"""Cyclic DP-SGD released at its last iterate (Kong and Ribero 2024, "Privacy of the
last iterate in cyclically-sampled DP-SGD on nonconvex composite losses", Algorithm 1).

Pass over the n examples in a fixed order in batches of b (wrapping at the end), clip
each per-example gradient of f to norm C, average, step by λ, add N(0, σ²I) to the
displacement, apply prox_{λh}; after T = ⌈E·n/b⌉ steps release only the last iterate
(Kong and Ribero 2024, Section 2). The noise std is σ = λzC/b for the noise multiplier
z (noise N(0, z²C²I) on the sum of the clipped gradients, the paper's convention), and
the privacy of x_T is the minimum over every RDP bound that holds for the declared
assumptions (:func:`~skdpsparse.accounting.last_iterate_rdp`, Kong and Ribero 2024,
Section 4).

On CSR input without penalty or constraint the noise is added lazily (O(nnz) per
step, the same guarantee): :func:`uses_lazy_noise`, ``doc/derivations/lazy_noise.rst``.
With the ℓ2² penalty a plan with ``scale_floor`` < 1 runs the *scaled release* instead
(w = s·u with a public scale s ≥ ``scale_floor``, the rounded gradient part divided by
s and the noise scale raised by 1/``scale_floor``), which is lazy too and has the same
guarantee; its noise on θ is between 1 and 1/``scale_floor`` times the eager run's.

Those assumptions are not taken on trust. For the built-in losses of linear models,
f_i(θ) = ℓ(⟨θ, x̃_i⟩, y_i) with x̃ = (x, 1) (intercept) or x, and every row is scaled
into ‖x‖ ≤ R first, so ‖x̃‖ ≤ G = √(R² + 1) (or R). Along any direction u the second
derivative of f_i is ℓ''(z)⟨u, x̃⟩², so with a ≤ ℓ'' ≤ c (a.e.; ℓ' absolutely
continuous for every loss here) assumption (A2) of Kong and Ribero 2024, eq. (9), holds for every
possible record with

    M = max(c, 0)·G²,   m = max(−a, 0)·G²,

and each per-example gradient ℓ'(z)·x̃ has norm ≤ sup|ℓ'|·G:

==============  ==================  ===========  ==================================
loss            ℓ'' range           sup |ℓ'|     (m, M)
==============  ==================  ===========  ==================================
logistic        (0, 1/4]            1            (0, G²/4)
smoothed_hinge  {0, 1/h}            1            (0, G²/h), h = ``loss_param``
sigmoid         |ℓ''| ≤ 1/(6√3)     1/4          (G²/(6√3), G²/(6√3)), nonconvex
squared         1                   unbounded    (0, G²)
huber           {0, 1}              δ            (0, G²), δ = ``loss_param``
==============  ==================  ===========  ==================================

(sigmoid: ℓ(t) = s(−t), s the logistic function, s'' = s(1−s)(1−2s) peaks at
s = (3 ± √3)/6 with |s''| = 1/(6√3).) When sup|ℓ'|·G ≤ C clipping is the identity on
every possible record and the paper's eq. (12) Lipschitz constant is valid; otherwise
only the clipping-safe constant is (Kong and Ribero 2024, Section 3). The squared loss
has unbounded gradients, so clipping is always taken to bind for it.

Multiclass (``n_outputs`` = K ≥ 2 in :func:`plan_cyclic_sgd`): one K × p parameter
matrix Θ, margins z = Θx̃, per-example gradient g x̃ᵀ with g the derivative in z. For
the multinomial logistic loss g = softmax(z) − e_y and ‖g‖₂² = (1 − p_y)² + Σ_{k≠y} p_k²
≤ 2(1 − p_y)² < 2, so the gradient bound is √2·G whatever K, and the Hessian
(diag(p) − ppᵀ) ⊗ x̃x̃ᵀ has (m, M) = (0, G²/2) (Popoviciu's inequality). For the other
classification losses summed one-vs-rest, g_k = ℓ'(z_k, ±1): bound √K·sup|ℓ'|·G, and
the binary (m, M). The step releases a vector of ℝ^{Kp} whose replace-one sensitivity
is 2C as for one output, so the accounting is unchanged. The derivation is
``doc/derivations/cyclic_multiclass.rst``.

**Privacy guarantee** (of :func:`cyclic_sgd` run with a plan from
:func:`plan_cyclic_sgd`). *Protected:* each row (x_i, y_i); *neighbouring relation:*
replace one row, n, d and the plan public. *Theorem:* every step releases the clipped
gradient sum of its batch (ℓ2 sensitivity 2C) rounded to a grid plus exact discrete
Gaussian noise (Canonne, Kamath and Steinke 2020, "The discrete Gaussian for
differential privacy", Theorem 14, rounding charged in the noise scale:
``doc/derivations/exact_sampling.rst``); the at most ``max_uses`` steps that read a row
compose (Mironov 2017, "Rényi differential privacy", Proposition 1), the iterates are
post-processing, and the Rényi curve converts to (ε, δ) (Balle et al. 2020, "Hypothesis
testing interpretations and Rényi differential privacy", Theorem 21):
``plan.budget``. Lazy noise keeps the bound, and so does the scaled release of the
ℓ2² penalty (``scale_floor`` < 1: each step's rounded gradient divided by s ≥ s_min,
the noise scale charged for the sensitivity divided by s_min;
``doc/derivations/lazy_noise.rst``).
*Assumptions:* the random source is secret; rows are bounded by :func:`cyclic_sgd`
itself. *Not covered:* ``accounting="last_iterate"`` (unproven for grid noise, see
:func:`plan_cyclic_sgd`), timing, and errors raised on malformed input.
"""

import functools
import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from sklearn.utils import assert_all_finite

from .. import _kernels
from .._kernels.chacha import key_words
from .._kernels.cyclic_sgd import (
    BALL,
    BOX,
    NO_CONSTRAINT,
    csr_cyclic_sgd_steps,
    csr_lazy_cyclic_sgd_steps,
    csr_multiclass_cyclic_sgd_steps,
    dense_cyclic_sgd_steps,
    dense_gather_bounded_rows,
    dense_multiclass_cyclic_sgd_steps,
    dense_permuted_cyclic_sgd_steps,
    dense_sequential_cyclic_sgd_steps,
    discrete_gaussian_sums,
    lazy_final_flush,
    lazy_max_count,
)
from ..accounting import (
    ApproxDP,
    ZCDPEvent,
    calibrate_last_iterate_noise,
    cyclic_schedule,
    displacement_noise_std,
    last_iterate_rdp_bounds,
    with_event,
)
from .._kernels._common import GRID_MAX
from ..utils._data import as_canonical_csr
from ..utils._progress import Progress
from ..utils._random import as_random_source
from .noise import grid_noise, plan_grid_noise

__all__ = [
    "CLASSIFICATION_LOSSES",
    "REGRESSION_LOSSES",
    "PENALTIES",
    "CyclicSGDPlan",
    "bound_rows_l2",
    "cyclic_sgd",
    "feature_bound",
    "gradient_bound",
    "loss_curvature",
    "plan_cyclic_sgd",
    "uses_lazy_noise",
]

CLASSIFICATION_LOSSES = ("logistic", "smoothed_hinge", "sigmoid")
REGRESSION_LOSSES = ("squared", "huber")
PENALTIES = ("l1", "l2", "elasticnet")

_SIGMOID_CURVATURE = 1.0 / (6.0 * math.sqrt(3.0))
# Noise entries drawn per block of steps (8 MB of float64).
_NOISE_BLOCK = 1 << 20
#: Dense single-output fits of at most this many passes bound each row when it is
#: visited rather than in a permuted copy (the copy pays for itself from three passes).
_MAX_EPOCHS_WITHOUT_COPY = 2
# The lazy path needs N ≥ 2^29 (noise.py's grid guarantees it) for its bound on the
# gap between a sum of discrete Gaussians and one discrete Gaussian.
_LAZY_MIN_SCALE = 1 << 29
#: The range of scale_floor="auto" (plan_cyclic_sgd): the noise on θ is at most
#: 1/0.95 = 1.053 times the eager run's (1/0.99 = 1.010 at the other end).
_SCALE_FLOOR_MIN, _SCALE_FLOOR_MAX = 0.95, 0.99
#: scale_floor="auto" keeps the eager release when a block of the scaled one would
#: have fewer steps than this (its flushes would then cost d/8 draws a step or more).
_MIN_SCALED_BLOCK = 8


def feature_bound(norm_bound, fit_intercept):
    """G ≥ ‖x̃‖: R, or √(R² + 1) for the augmented row (x, 1) with an intercept.

    **Privacy guarantee.** Releases nothing and reads no data: a function of the
    public ``norm_bound`` and ``fit_intercept``. It holds for every row that
    :func:`bound_rows_l2` has bounded, which the gradient bound and curvature of
    :func:`plan_cyclic_sgd` rest on.
    """
    return math.hypot(norm_bound, 1.0) if fit_intercept else float(norm_bound)


def loss_curvature(loss, loss_param, feature_bound, n_outputs=1):
    """(m, M) of (A2), Kong and Ribero 2024, eq. (9), for every record with ‖x̃‖ ≤ ``feature_bound``.

    **Privacy guarantee.** Releases nothing and reads no data. The constants hold for
    every possible record with ‖x̃‖ ≤ ``feature_bound`` (derivation in the module
    docstring and ``doc/derivations/cyclic_multiclass.rst``), so the last-iterate
    bounds that use them (``accounting="last_iterate"`` only) never rely on the data.

    See the module docstring for the derivation; the bounds on ℓ'' are exact
    suprema, so no smaller (m, M) holds for every possible record. With
    ``n_outputs`` = K > 1 (a multiclass model): the multinomial logistic loss has
    (0, G²/2), the other classification losses, summed one-vs-rest, the binary (m, M)
    (their Hessian is block diagonal in the K outputs).

    Returns
    -------
    weak_convexity, smoothness : float
    """
    g2 = float(feature_bound) ** 2
    _check_outputs(loss, n_outputs)
    if loss == "logistic" and n_outputs > 1:
        return 0.0, 0.5 * g2
    if loss == "logistic":
        return 0.0, 0.25 * g2
    if loss == "smoothed_hinge":
        return 0.0, g2 / float(loss_param)
    if loss == "sigmoid":
        return _SIGMOID_CURVATURE * g2, _SIGMOID_CURVATURE * g2
    if loss in ("squared", "huber"):
        return 0.0, g2
    raise ValueError(f"unknown loss {loss!r}")


def gradient_bound(loss, loss_param, feature_bound, n_outputs=1):
    """sup ‖∇f_i‖ over every record (``inf`` for the squared loss).

    One output: sup|ℓ'|·‖x̃‖. K = ``n_outputs`` > 1 (module docstring, "Multiclass"):
    √2·G for the multinomial logistic loss, √K·sup|ℓ'|·G for the others summed
    one-vs-rest.

    **Privacy guarantee.** Releases nothing and reads no data. The bound holds for
    every possible record and every parameter value (proofs: module docstring and
    ``doc/derivations/cyclic_multiclass.rst``); ``clip_norm="auto"`` is this bound, so
    that clipping is the identity, while the sensitivity 2C the noise is calibrated to
    comes from the clipping itself and holds for any C.
    """
    lip = {"logistic": 1.0, "smoothed_hinge": 1.0, "sigmoid": 0.25, "squared": math.inf,
           "huber": float(loss_param)}
    if loss not in lip:
        raise ValueError(f"unknown loss {loss!r}")
    _check_outputs(loss, n_outputs)
    if n_outputs > 1:
        factor = math.sqrt(2.0) if loss == "logistic" else math.sqrt(n_outputs)
        return factor * lip[loss] * float(feature_bound)
    return lip[loss] * float(feature_bound)


def _check_outputs(loss, n_outputs):
    if not (isinstance(n_outputs, (int, np.integer)) and n_outputs >= 1):
        raise ValueError(f"n_outputs must be an integer >= 1, got {n_outputs!r}")
    if n_outputs > 1 and loss not in CLASSIFICATION_LOSSES:
        raise ValueError(f"n_outputs={n_outputs} needs a classification loss "
                         f"{CLASSIFICATION_LOSSES}, got loss={loss!r}")


def bound_rows_l2(X, norm_bound, order=None):
    """``X`` (float64) with every row of ℓ2 norm > R scaled down to norm R.

    Contribution bounding (never rejection, ARCHITECTURE.md): the bounds of the module
    docstring then hold for every row. Sparse input stays canonical CSR.

    **Privacy guarantee.** None by itself: the result is the data, bounded, and must
    not be released. It is the step the mechanism's sensitivity rests on: each output
    row is a function of its input row alone (and of the public R), with ℓ2 norm ≤ R
    for every finite input row (rows whose norm overflows float64 included), so
    replacing one input row replaces one output row.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, d)
    norm_bound : float
        R.
    order : ndarray of shape (n,), optional
        Also permute the rows (row k of the result is row ``order[k]`` of ``X``), in
        the same copy.

    Returns
    -------
    ndarray or scipy.sparse.csr_matrix
        ``X`` itself (as float64) when no row needs scaling and ``order`` is None.
    """
    r = float(norm_bound)
    if sp.issparse(X):
        X = as_canonical_csr(X)
        scales = _kernels.csr_bounding_scales(X.indptr, X.data, r, math.inf)
        if order is not None:
            X, scales = X[order], scales[order]  # row slicing keeps rows canonical
        if np.all(scales == 1.0) and X.data.dtype == np.float64:
            return X
        data = _kernels.csr_scale_rows(X.indptr, X.data, scales,
                                       out=np.empty(X.data.shape, dtype=np.float64))
        return sp.csr_matrix((data, X.indices, X.indptr), shape=X.shape)
    X = np.ascontiguousarray(X)
    scales = _kernels.dense_bounding_scales(X, r, math.inf)
    if order is not None:
        X = np.ascontiguousarray(X[order], dtype=np.float64)  # a new array: scale in place
        return _kernels.dense_scale_rows(X, scales[order], out=X)
    if np.all(scales == 1.0):
        return np.ascontiguousarray(X, dtype=np.float64)
    return _kernels.dense_scale_rows(X, scales, out=np.empty(X.shape, dtype=np.float64))


@dataclass(frozen=True)
class CyclicSGDPlan:
    """Everything :func:`cyclic_sgd` runs with, fixed before the data are read.

    Built by :func:`plan_cyclic_sgd` from public quantities only (n, d, the declared
    bounds and hyperparameters), so the noise and the guarantee never depend on the
    data.

    **Privacy guarantee.** A plan is public (no field depends on the data); ``budget``
    is the guarantee of :func:`cyclic_sgd` run with it, for one row replaced, under
    the theorem, assumptions and exclusions stated in :func:`plan_cyclic_sgd`.
    """

    loss: str
    loss_param: float
    norm_bound: float
    fit_intercept: bool
    n_samples: int
    n_features: int
    batch_size: int
    epochs: int
    n_steps: int
    learning_rate: float
    clip_norm: float
    alpha: float  #: elastic-net weight on w (0: no penalty)
    l1_ratio: float
    radius: float | None
    box: tuple | None
    weak_convexity: float
    smoothness: float
    gradient_bound: float
    clipping_can_bind: bool
    domain_diameter: float | None
    noise_multiplier: float
    noise_std: float  #: σ = λzC/b on the displacement
    budget: ApproxDP
    accounting: dict = field(repr=False)
    #: K: 1 (binary or regression), or the classes of a multiclass model.
    n_outputs: int = 1
    #: s_min of the scaled release of the ℓ2² penalty (:func:`plan_cyclic_sgd`); 1.0:
    #: not used, every step is the eager discrete Gaussian release.
    scale_floor: float = 1.0


def _resolve_curvature(loss, loss_param, g, weak_convexity, smoothness, n_outputs=1):
    m0, big_m0 = loss_curvature(loss, loss_param, g, n_outputs)
    # A declared constant below the computed supremum is false for some record and
    # would void the guarantee: refuse it. A larger one is a valid (looser) claim.
    for name, declared, true in (("smoothness", smoothness, big_m0),
                                 ("weak_convexity", weak_convexity, m0)):
        if declared is not None and float(declared) < true * (1.0 - 1e-12):
            raise ValueError(
                f"{name}={declared!r} is below the {name} {true:.6g} that loss={loss!r} has "
                f"on rows of norm <= norm_bound (feature bound {g:.6g}); leave it None to "
                "use the computed value.")
    m = m0 if weak_convexity is None else float(weak_convexity)
    big_m = big_m0 if smoothness is None else float(smoothness)
    return m, big_m


def default_step_and_clip(loss, loss_param, feature_bound, *, n_outputs=1,
                          learning_rate="auto", clip_norm="auto", weak_convexity=None,
                          smoothness=None):
    """(λ, C) as :func:`plan_cyclic_sgd` resolves them: ``"auto"`` λ = 1/(M + m) (the
    largest step of eq. (12), rounded down), ``"auto"`` C = the gradient bound when
    finite, else G; given values as given.

    **Privacy guarantee.** Releases nothing and reads no data: public numbers only
    (the estimator's "auto" schedule sizes itself from them before planning).
    """
    m, big_m = _resolve_curvature(loss, loss_param, feature_bound, weak_convexity,
                                  smoothness, n_outputs)
    if learning_rate == "auto":
        lr = 1.0 / (big_m + m)
        while lr * (big_m + m) > 1.0:  # rounding must not void λ ≤ 1/(M+m) of eq. (12)
            lr = math.nextafter(lr, 0.0)
    else:
        lr = float(learning_rate)
    if clip_norm == "auto":
        grad = gradient_bound(loss, loss_param, feature_bound, n_outputs)
        clip = grad if math.isfinite(grad) else float(feature_bound)
    else:
        clip = float(clip_norm)
    return lr, clip


@functools.lru_cache(maxsize=256)
def _calibrated_noise_multiplier(epsilon, delta, **params):
    # The smallest z meeting (ε, δ): a function of public numbers only, found by root
    # finding over the accountant's curves (39 evaluations, 5 ms, a sixth of a one-pass
    # fit at n = 10⁵, d = 100). Remembered, so that refits with the same public
    # numbers (cross-validation, a parameter search, a benchmark) do not search again.
    return calibrate_last_iterate_noise(epsilon, delta, **params)


@functools.lru_cache(maxsize=256)
def _guarantee(z, delta, **params):
    """(ε of every bound, its order, the best bound's name, the budget with its zCDP
    event when it has one) at noise multiplier z: a function of public numbers only,
    remembered like the calibration (the conversions to ε took 2 ms of a 20 ms fit
    at n = 10⁵, d = 100). The caller copies the dict it keeps; the budget is frozen."""
    # Every valid bound at z, converted at δ; the smallest ε is the guarantee (Kong and Ribero 2024, Section 4).
    epsilons, orders = {}, {}
    curves = last_iterate_rdp_bounds(noise_multiplier=z, **params)
    for name, curve in curves.items():
        epsilons[name], orders[name] = curve.to_epsilon(delta)
    best = min(epsilons, key=epsilons.get)  # dicts keep LAST_ITERATE_BOUNDS order: ties go first
    budget = ApproxDP(max(epsilons[best], float(np.finfo(float).tiny)), delta)
    # Every bound of last_iterate_rdp_bounds is a Gaussian RDP curve, ε(α) = αρ at every
    # order α > 1 (Mironov 2017, Prop. 7, scaled): that is ρ-zCDP (Bun and Steinke 2016,
    # Def. 1.1), the event the ledger composes in ρ. Attached only when the chosen
    # curve is linear in α at every computed order (to 1e-12) and ρ's tight conversion
    # implies the budget (with_event checks it); otherwise the bare budget, composed
    # by basic composition, is the safe side.
    ratio = curves[best].epsilons / curves[best].orders
    if np.ptp(ratio) <= 1e-12 * ratio.max():
        try:
            budget = with_event(budget, ZCDPEvent(float(ratio.max())))
        except ValueError:
            pass
    return epsilons, orders, best, budget


def plan_cyclic_sgd(n_samples, n_features, *, loss, loss_param=1.0, norm_bound,
                    fit_intercept, batch_size, epochs, delta, epsilon=None,
                    noise_multiplier=None, learning_rate="auto", clip_norm="auto",
                    weak_convexity=None, smoothness=None, penalty=None, alpha=0.0,
                    l1_ratio=0.15, radius=None, box=None, accounting="composition",
                    n_outputs=1, scale_floor=1.0):
    """Noise, step size and guarantee of cyclic DP-SGD, from public quantities.

    Reads no data: the plan, its noise and its guarantee are functions of the
    arguments only, all public.

    **Privacy guarantee.** ``budget`` is the (ε, δ) of :func:`cyclic_sgd` run with this
    plan, for one row replaced (n, d and every argument here public). With
    ``accounting="composition"`` (the default): each step is a discrete Gaussian
    mechanism on the clipped gradient sum of its batch, ℓ2 sensitivity 2C with C the
    clip norm (Canonne, Kamath and Steinke 2020, "The discrete Gaussian for
    differential privacy", Theorem 14; the grid rounding is charged in the noise
    scale), composed over the at most ``accounting["max_uses"]`` steps that read a row
    (Mironov 2017, "Rényi differential privacy", Proposition 1) and converted at
    ``delta`` (Balle et al. 2020, "Hypothesis testing interpretations and Rényi
    differential privacy", Theorem 21). Assumes the per-example gradient bound and
    curvature of the module docstring (computed here, or declared larger), and a
    secret random source. With ``accounting="last_iterate"`` the smallest of Kong and
    Ribero's (2024) bounds (Theorems 4.4, 4.5, eq. (12)) is reported: **not proven**
    for the library's grid noise (below); ``doc/derivations/last_iterate.rst``.

    Parameters
    ----------
    n_samples, n_features : int
        n and d (public under replace-one neighbours).
    loss : {"logistic", "smoothed_hinge", "sigmoid", "squared", "huber"}
    loss_param : float
        Smoothed-hinge width h or Huber threshold δ.
    norm_bound : float
        R: rows are scaled into ‖x‖₂ ≤ R by :func:`cyclic_sgd`.
    fit_intercept : bool
    batch_size : int
        b, capped at n.
    epochs : int
        E; T = ⌈E·n/b⌉ steps (:func:`~skdpsparse.accounting.cyclic_schedule`).
    delta : float
        δ in (0, 1).
    epsilon : float, optional
        Target ε; needed when ``noise_multiplier`` is None (then z is calibrated).
    noise_multiplier : float, optional
        z; ``epsilon`` is then ignored and the ε reached is reported.
    learning_rate : float or "auto"
        λ; ``"auto"`` is 1/(M + m), the largest step for which eq. (12) holds.
    clip_norm : float or "auto"
        C; ``"auto"`` is the gradient bound sup|ℓ'|·G when finite (clipping never
        binds) and G for the squared loss.
    weak_convexity, smoothness : float, optional
        Declared m and M; must be at least the computed ones (module docstring).
    penalty : {None, "l1", "l2", "elasticnet"}
        Penalty α(ρ‖w‖₁ + (1−ρ)/2‖w‖²) on w, with ρ = 1 ("l1"), 0 ("l2") or
        ``l1_ratio``.
    alpha, l1_ratio : float
    radius : float, optional
        h includes the indicator of {‖θ‖₂ ≤ r} over θ = (w, b): diameter 2r (eq. (19)).
    accounting : {"composition", "last_iterate"}, default="composition"
        ``"composition"``: the record's uses composed (Mironov 2017, Proposition 1),
        which holds for the exact grid noise the library adds: each step releases an
        integer vector (the displacement rounded to the grid plus discrete Gaussian
        noise, (Δ²/2σ²)-zCDP by Canonne, Kamath and Steinke 2020, Theorem 14, the grid
        rounding charged in the noise scale), and the iterates are a post-processing of
        those releases. ``"last_iterate"``: the smallest of every bound of
        :func:`~skdpsparse.accounting.last_iterate_rdp_bounds`. **Unproven with the
        library's noise**: the last-iterate theorems (shift reduction) need noise that
        can absorb any real shift, which a distribution on a grid cannot (its shifted
        copies off the grid have disjoint supports); they hold for continuous Gaussian
        noise, which no computer samples exactly.
    box : (float, float), optional
        h includes the indicator of [l, u]^{Kp}: diameter (u − l)√(Kp), p = d +
        intercept.
    n_outputs : int, default=1
        K: 1 for a binary classifier or a regressor; the number of classes of a
        multiclass model (classification losses only), whose per-example gradient
        bound and curvature are those of the module docstring's "Multiclass".
    scale_floor : float in (0, 1] or "auto", default=1.0
        s_min of the scaled release of the ℓ2² penalty, which :func:`cyclic_sgd` runs
        with lazy noise (``doc/derivations/lazy_noise.rst``, "The ℓ2² penalty"): the
        coefficients are w = s·u with a public s that decays by a = 1/(1 + λα) each
        step and is folded into u before it would fall below s_min; each step
        releases Y − round(λḡ/(γs)) with the grid scale N charged for the sensitivity
        divided by s_min, so ``budget`` is unchanged and the noise on θ is between 1
        and 1/s_min times the eager run's. 1.0: the eager release. Below 1 it needs
        ``penalty="l2"`` (α > 0), one output, no ``radius`` or ``box`` and
        ``accounting="composition"``. ``"auto"``: 1.0 when those do not hold,
        otherwise a^(⌈d/b⌉ − 1) clipped into [0.95, 0.99] (the block of ⌈d/b⌉ steps
        whose flushes add one draw per batch row and step, within a noise price of
        5 %), and 1.0 if a block would then have fewer than 8 steps. Public numbers
        only (λ, α, d, b); the input format is public too, and the estimator asks for
        ``"auto"`` on CSR input only, so that dense fits are unchanged.

    Returns
    -------
    CyclicSGDPlan
    """
    n, d = int(n_samples), int(n_features)
    b = min(int(batch_size), n)
    g = feature_bound(norm_bound, fit_intercept)
    m, big_m = _resolve_curvature(loss, loss_param, g, weak_convexity, smoothness, n_outputs)
    grad = gradient_bound(loss, loss_param, g, n_outputs)
    lr, clip = default_step_and_clip(loss, loss_param, g, n_outputs=n_outputs,
                                     learning_rate=learning_rate, clip_norm=clip_norm,
                                     weak_convexity=weak_convexity, smoothness=smoothness)
    if radius is not None and box is not None:
        raise ValueError("give at most one of radius and box (the proximal map of the "
                         "indicator of their intersection is not a projection composition)")
    p = (d + 1 if fit_intercept else d) * int(n_outputs)
    if radius is not None:
        diameter = 2.0 * float(radius)  # Kong and Ribero 2024, eq. (19), for a ball of radius r
    elif box is not None:
        lo, hi = (float(v) for v in box)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"box must be a pair (lower, upper) of finite floats with "
                             f"lower < upper, got {box!r}")
        box = (lo, hi)
        diameter = (hi - lo) * math.sqrt(p)
    else:
        diameter = None
    a, rho = {None: (0.0, 0.0), "l1": (alpha, 1.0), "l2": (alpha, 0.0),
              "elasticnet": (alpha, l1_ratio)}[penalty]
    if accounting not in ("composition", "last_iterate"):
        raise ValueError("accounting must be 'composition' or 'last_iterate', got "
                         f"{accounting!r}")
    # Without smoothness, last_iterate_rdp_bounds returns the composition bound only.
    params = dict(n_samples=n, batch_size=b, epochs=int(epochs), learning_rate=lr,
                  clip_norm=clip, weak_convexity=m if accounting == "last_iterate" else None,
                  smoothness=big_m if accounting == "last_iterate" else None,
                  clipping_can_bind=not grad <= clip, domain_diameter=diameter)
    if noise_multiplier is None:
        if epsilon is None:
            raise ValueError("give epsilon (to calibrate the noise) or noise_multiplier")
        z = _calibrated_noise_multiplier(float(epsilon), float(delta), **params)
    else:
        z = float(noise_multiplier)
    epsilons, orders, best, budget = _guarantee(z, float(delta), **params)
    epsilons = dict(epsilons)  # the plan's own copy (the cached one is shared)
    sched = cyclic_schedule(n, b, int(epochs))
    sigma = displacement_noise_std(z, lr, clip, b)
    floor = _resolve_scale_floor(
        scale_floor, scaled_ok=_scaled_release_applies(
            a, rho, radius, box, int(n_outputs), accounting, sigma, budget.epsilon),
        lr=lr, alpha=float(a), d=d, b=b, n_steps=sched.n_steps, sigma=sigma,
        rounding_sensitivity=lr * clip / b, p=d + 1 if fit_intercept else d)
    report = dict(accounting=accounting, bound=best, order=orders[best], epsilons=epsilons,
                      weak_convexity=m, smoothness=big_m, gradient_bound=grad,
                      clipping_can_bind=params["clipping_can_bind"],
                      domain_diameter=diameter, n_steps=sched.n_steps,
                      max_uses=sched.max_uses, noise_std=sigma, scale_floor=floor)
    return CyclicSGDPlan(
        loss=loss, loss_param=float(loss_param), norm_bound=float(norm_bound),
        fit_intercept=bool(fit_intercept), n_samples=n, n_features=d, batch_size=b,
        epochs=int(epochs), n_steps=sched.n_steps, learning_rate=lr, clip_norm=clip,
        alpha=float(a), l1_ratio=float(rho), radius=None if radius is None else float(radius),
        box=box, weak_convexity=m, smoothness=big_m, gradient_bound=grad,
        clipping_can_bind=params["clipping_can_bind"], domain_diameter=diameter,
        noise_multiplier=z, noise_std=sigma, budget=budget, accounting=report,
        n_outputs=int(n_outputs), scale_floor=floor)


def l2_decay(plan):
    """a = 1/(1 + λα): the ℓ2² prox's factor on w, as the eager prox computes it."""
    return 1.0 / (1.0 + plan.learning_rate * plan.alpha * (1.0 - plan.l1_ratio))


def block_scales(decay, floor, n_steps):
    """The scales s_0 = 1, s_{i+1} = a·s_i (float64, in this order) of one block of
    the scaled release: every s_i used by a step is ≥ ``floor``; the last entry is the
    factor folded into u at the block's end (below ``floor``), or s after step
    ``n_steps`` when one block covers the run. Public numbers only."""
    out = [1.0]
    while len(out) <= n_steps:
        nxt = out[-1] * decay
        out.append(nxt)
        if nxt < floor:
            break
    return np.array(out)


def _scaled_grid(sigma, rounding_sensitivity, p, floor):
    # The eager grid (same γ) with N charged for the sensitivity divided by s ≥ floor:
    # true_sensitivity Δ/s_min, rounded up so that it bounds Δ/s for every float s ≥
    # floor (plan_grid_noise reads it exactly).
    true = math.nextafter(rounding_sensitivity / floor, math.inf)
    return plan_grid_noise("gaussian", sigma, rounding_sensitivity, p,
                           true_sensitivity=max(true, rounding_sensitivity))


def _scaled_release_applies(alpha, l1_ratio, radius, box, n_outputs, accounting, sigma,
                            epsilon):
    """Whether the scaled release (``scale_floor`` < 1) covers a run with these public
    settings: the pure ℓ2² prox (α > 0, no ℓ1 part), no constraint, one output, the
    composition accounting, noise on (``doc/derivations/lazy_noise.rst``)."""
    return (alpha > 0.0 and l1_ratio == 0.0 and radius is None and box is None
            and int(n_outputs) == 1 and accounting == "composition" and sigma > 0.0
            and epsilon >= 1e-100)


def _resolve_scale_floor(scale_floor, *, scaled_ok, lr, alpha, d, b, n_steps, sigma,
                         rounding_sensitivity, p):
    """``scale_floor`` of :func:`plan_cyclic_sgd`, checked or resolved ("auto") from
    public numbers."""
    auto = isinstance(scale_floor, str)
    if auto and scale_floor != "auto":
        raise ValueError(f"scale_floor must be a float in (0, 1] or 'auto', got "
                         f"{scale_floor!r}")
    if not auto:
        floor = float(scale_floor)
        if not 0.0 < floor <= 1.0:
            raise ValueError(f"scale_floor must be in (0, 1], got {scale_floor!r}")
        if floor == 1.0:
            return 1.0
        if not scaled_ok:
            raise ValueError(
                "scale_floor < 1 (the scaled release) needs penalty='l2' with alpha > 0, "
                "one output, no radius or box, accounting='composition' and noise")
    elif not scaled_ok:
        return 1.0
    else:
        decay = 1.0 / (1.0 + lr * alpha)
        target = -(-d // b)  # ⌈d/b⌉ steps a block: its flush ≤ one draw per batch row
        floor = min(_SCALE_FLOOR_MAX, max(_SCALE_FLOOR_MIN, decay ** (target - 1)))
        steps = block_scales(decay, floor, min(n_steps, _MIN_SCALED_BLOCK)).size - 1
        if steps < min(n_steps, _MIN_SCALED_BLOCK):
            return 1.0
    if _scaled_grid(sigma, rounding_sensitivity, p, floor).grid_scale < _LAZY_MIN_SCALE:
        if auto:
            return 1.0
        raise ValueError("scale_floor < 1 needs the lazy path's grid scale (at least "
                         "2^29); this plan's noise and sensitivity do not give it")
    return floor


def uses_lazy_noise(plan, sparse):
    """Whether :func:`cyclic_sgd` adds the noise lazily (O(nnz) per step) for ``plan``.

    Lazy: CSR input, one output (not multiclass), no penalty (``alpha == 0``), no
    ``radius`` or ``box``, noise on, and the proven ``"composition"`` accounting. Then nothing acts on a coordinate
    between two steps that read it but the noise, which only adds up. Also lazy,
    whatever the input format (dense rows are run as CSR): a plan with
    ``scale_floor`` < 1, the scaled release of the ℓ2² penalty, whose u again only
    receives noise between reads (O(nnz) per step and O(d) per block of steps).
    Otherwise (ℓ1 or elastic-net prox, the ℓ2² prox with ``scale_floor`` = 1, a
    constraint, dense input) every step adds a dense noise vector (eager). The
    derivation is ``doc/derivations/lazy_noise.rst``.

    **Privacy guarantee.** Releases nothing: a function of the public plan and of
    whether the input is sparse. Both paths have the plan's guarantee: the lazy run's
    Rényi divergences are at most the eager run's at every order
    (``doc/derivations/lazy_noise.rst``, which also states what it assumes).
    """
    if plan.scale_floor < 1.0:  # grid scale checked by plan_cyclic_sgd
        # Checked again here: a plan edited after planning (``dataclasses.replace``)
        # with a radius, a box or an ℓ1 part would reach the scaled kernel, which
        # applies none of them: the run would not be the mechanism its proof covers.
        if not _scaled_release_applies(
                plan.alpha, plan.l1_ratio, plan.radius, plan.box, plan.n_outputs,
                plan.accounting.get("accounting"), plan.noise_std, plan.budget.epsilon):
            raise ValueError(
                "this plan has scale_floor < 1 (the scaled release of the l2 penalty) "
                "but also what that release does not apply (an l1 part, a radius or box, "
                "several outputs, another accounting or no noise): plan it again with "
                "plan_cyclic_sgd")
        return True
    # ε ≥ 1e-100 implies ρ ≥ 2^-900, which the derivation's last step needs.
    return (bool(sparse) and plan.n_outputs == 1 and plan.alpha == 0.0 and plan.radius is None and plan.box is None
            and plan.noise_std > 0.0 and plan.accounting.get("accounting") == "composition"
            and plan.budget.epsilon >= 1e-100)


def _lazy_run(X, y, theta, plan, src, code, progress):
    """The steps of :func:`cyclic_sgd` with lazy noise (see :func:`uses_lazy_noise`).

    The grid and its scale N are those of the eager path for the same plan (for a
    scaled plan, N charged for the sensitivity divided by ``plan.scale_floor``), with
    the integer scale raised to N + 1: the derivation shows that this run's Rényi
    divergences are then at most the eager run's at scale N at every order, whatever
    the partition of the steps into draws. A scaled plan cuts the run into blocks of
    the public length of :func:`block_scales`; at each block's end every coordinate's
    pending noise is added (O(d) draws) and s is folded into u on the grid.
    """
    n, d = X.shape
    p = d + 1 if plan.fit_intercept else d
    rounding_sensitivity = plan.learning_rate * plan.clip_norm / plan.batch_size
    scaled = plan.scale_floor < 1.0
    if scaled:
        grid = _scaled_grid(plan.noise_std, rounding_sensitivity, p, plan.scale_floor)
        decay = l2_decay(plan)
        scales = block_scales(decay, plan.scale_floor, plan.n_steps)
        length = scales.size - 1  # steps of a block (the last entry is the fold)
    else:
        grid = plan_grid_noise("gaussian", plan.noise_std, rounding_sensitivity, p)
        decay, scales, length = 1.0, np.ones(1), plan.n_steps + 1  # one block, no fold
    if grid.grid_scale < _LAZY_MIN_SCALE:
        return False
    scale = grid.grid_scale + 1
    kmax = lazy_max_count(scale)
    spacing = grid.spacing
    order = np.arange(n)
    last = np.zeros(d + 1, dtype=np.int64)
    scratch = np.zeros(d)
    row_nnz = np.diff(X.indptr)
    per_step = plan.batch_size * int(row_nnz.max(initial=0)) + 1
    block = max(1, _NOISE_BLOCK // per_step)
    total_steps = plan.n_steps
    split = 1 + total_steps // kmax  # draws per coordinate interval, at most
    start = step0 = 0
    none = np.zeros(0, dtype=np.int64)  # the draws' coordinates and steps: not recorded
    for epoch, steps in enumerate(_pass_steps(n, plan.batch_size, plan.epochs)):
        k = 0
        while k < steps:
            within = step0 % length  # position in the scaled release's block
            m = min(block, steps - k, length - within)
            counts = np.empty(m * per_step * split, dtype=np.int64)
            args = (X.indptr, X.indices, X.data, d, y, theta, order, start, step0, m, code,
                    plan.loss_param, plan.clip_norm, plan.batch_size, plan.learning_rate,
                    plan.fit_intercept, spacing)
            saved = last.copy()
            _, used = csr_lazy_cyclic_sgd_steps(*args, last, scratch, kmax, np.zeros(0),
                                                counts, none, none, True)
            # N_Z(0, k·(N+1)²) for each interval of k steps of one coordinate.
            key = key_words(src.secret_int(256).to_bytes(32, "little"))
            sums = discrete_gaussian_sums(counts[:used], scale, key).astype(np.float64)
            last[:] = saved
            if scaled:
                start, _ = csr_lazy_cyclic_sgd_steps(*args, last, scratch, kmax, sums,
                                                     counts, none, none, False,
                                                     scales[within], decay)
            else:
                start, _ = csr_lazy_cyclic_sgd_steps(*args, last, scratch, kmax, sums,
                                                     counts, none, none, False)
            step0 += m
            k += m
            if scaled and step0 % length == 0 and step0 < total_steps:
                # The block's end: every pending noise in, then w = s·u folded into u
                # on the grid (post-processing of the releases), s back to 1.
                _flush_all(theta, last, step0, p, kmax, spacing, src, scale, split)
                fold_scale(theta, d, scales[length], spacing)
        progress.report("epoch", epoch + 1, plan.epochs, f"{steps} noisy steps (lazy noise)")
    _flush_all(theta, last, step0, p, kmax, spacing, src, scale, split)
    if scaled:
        theta[:d] *= scales[step0 % length if step0 % length else length]
    return True


def _flush_all(theta, last, step, p, kmax, spacing, src, scale, split):
    """Add the pending noise of the first ``p`` coordinates up to ``step``: the
    draws are counted, drawn under a fresh key and added."""
    none = np.zeros(0, dtype=np.int64)
    counts = np.empty(p * split, dtype=np.int64)
    saved = last.copy()
    used = lazy_final_flush(theta, last, step, p, kmax, spacing, np.zeros(0), counts, none,
                            none, True)
    key = key_words(src.secret_int(256).to_bytes(32, "little"))
    sums = discrete_gaussian_sums(counts[:used], scale, key).astype(np.float64)
    last[:] = saved
    lazy_final_flush(theta, last, step, p, kmax, spacing, sums, counts, none, none, False)


def fold_scale(theta, d, s, spacing):
    """u ← γ·round(s·u/γ) on the first ``d`` entries of ``theta`` (the scaled
    release's fold at a block's end): w = s·u kept to within γ/2 and u back on the
    grid γℤ, so that the next block again adds integers times γ exactly. Public s and
    γ: post-processing."""
    np.multiply(theta[:d], s, out=theta[:d])
    np.multiply(theta[:d], 1.0 / spacing, out=theta[:d])  # exact: γ is a power of two
    np.clip(theta[:d], -GRID_MAX, GRID_MAX, out=theta[:d])
    np.rint(theta[:d], out=theta[:d])
    np.multiply(theta[:d], spacing, out=theta[:d])


def _pass_steps(n, b, epochs):
    """Steps of each pass: pass e ends at step ⌈(e+1)n/b⌉, so they sum to T = ⌈En/b⌉."""
    ends = [-(-(e + 1) * n // b) for e in range(epochs)]
    return [hi - lo for lo, hi in zip([0] + ends[:-1], ends)]


def _checks_finite_in_pass(X, plan, shuffle):
    # The path of cyclic_sgd whose step kernel reads every row in its first pass and
    # reports a non-finite one (dense_permuted_cyclic_sgd_steps): there, a separate
    # check would be one more read of X (a sixth of a one-pass fit at n = 10⁵, d = 100).
    return (shuffle and not sp.issparse(X) and plan.n_outputs == 1
            and plan.epochs <= _MAX_EPOCHS_WITHOUT_COPY)


def cyclic_sgd(X, y, plan, rng, *, shuffle=True, verbose=0):
    """Run Algorithm 1 of Kong and Ribero 2024 and return its last iterate.

    **Privacy guarantee.** The returned iterate is ``plan.budget``-DP for one row of
    ``(X, y)`` replaced (n, d and the plan public; see :func:`plan_cyclic_sgd` for the
    theorem): every row is scaled into ‖x‖₂ ≤ ``plan.norm_bound`` and every
    per-example gradient clipped to ``plan.clip_norm`` here, whatever the data, and
    every step's displacement is released on the noise grid with exact discrete
    Gaussian noise. Assumes ``rng`` is secret (a seeded generator makes the noise
    known to whoever has the seed) and ``y`` of the form below; not covered: the
    time taken and errors raised on malformed input (shape mismatch).

    Noise: on CSR input without penalty or constraint (and with the proven
    ``"composition"`` accounting) the noise of each coordinate is added lazily, when a
    step next reads it, as one exact discrete Gaussian of the summed variance: O(nnz)
    per step, the same guarantee (:func:`uses_lazy_noise`,
    ``doc/derivations/lazy_noise.rst``). A plan with ``scale_floor`` < 1 (the ℓ2²
    penalty's scaled release) is run the same way, dense rows as CSR. With an ℓ1 or
    elastic-net penalty, the ℓ2² penalty at ``scale_floor`` = 1, a radius or a box,
    or dense input, every step adds a dense noise vector.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, d)
        Rows are scaled into ‖x‖₂ ≤ ``plan.norm_bound`` here. A NaN or infinite
        entry raises ``ValueError`` before anything is returned (checked in the first
        pass on the dense one- and two-pass path, up front on the others).
    y : ndarray of shape (n,)
        ±1 for the classification losses, targets otherwise; with
        ``plan.n_outputs`` = K > 1, class indices in [0, K).
    plan : CyclicSGDPlan
    rng : numpy.random.Generator
        The only source of randomness (pass order and noise).
    shuffle : bool, default=True
        Visit the rows in one random order, the same in every pass, instead of the
        data order. The bounds hold for every fixed order (worst case over the
        position of the differing record), hence for the mixture over orders (joint
        quasi-convexity of Rényi divergence). The order is never returned or stored.
    verbose : bool, int or Progress, default=0
        ≥ 1 prints one line per pass (its number of steps and the elapsed time) in
        the format of :class:`~skdpsparse.utils._progress.Progress`; a ``Progress``
        prints under its own name. Nothing data-dependent is printed.

    Returns
    -------
    coef : ndarray of shape (d,), or (K, d) when ``plan.n_outputs`` = K > 1
    intercept : float, or ndarray of shape (K,)
    """
    progress = verbose if isinstance(verbose, Progress) else Progress(verbose, "cyclic_sgd")
    n, d = X.shape
    if (n, d) != (plan.n_samples, plan.n_features):
        raise ValueError(f"X has shape {(n, d)}, the plan was made for "
                         f"{(plan.n_samples, plan.n_features)}")
    multi = plan.n_outputs > 1
    y = np.asarray(y, dtype=np.int64 if multi else np.float64)
    if plan.scale_floor < 1.0 and not sp.issparse(X):
        # The scaled release is implemented lazily on CSR rows only (the same law).
        X = sp.csr_matrix(np.asarray(X, dtype=np.float64))
    row_norms = None
    visit_order = None  # dense rows bounded at each visit, in this order (no copy)
    if not _checks_finite_in_pass(X, plan, shuffle):
        assert_all_finite(X, input_name="X")
    if shuffle:
        # One secret order for every pass. The rows are permuted once, in the copy that
        # bounds them, so that each pass then reads memory sequentially.
        perm = rng.permutation(n)
        if sp.issparse(X):
            X = bound_rows_l2(X, plan.norm_bound, order=perm)
        elif not multi and plan.epochs <= _MAX_EPOCHS_WITHOUT_COPY:
            # For one or two passes the bounded copy costs more than it saves (a write
            # of n·d floats: 4× the steps of one pass at n = 10⁵, d = 100): each visit
            # bounds its row instead (the same scale factor, products in another
            # order: rounding only, charged as on every path).
            X, visit_order = np.ascontiguousarray(X), perm
        else:  # the same copy in one pass, with the bounded rows' norms
            X, row_norms = dense_gather_bounded_rows(
                np.ascontiguousarray(X), perm, float(plan.norm_bound),
                np.empty((n, d), dtype=np.float64), np.empty(n, dtype=np.float64))
        y = y[perm]
    else:
        X = bound_rows_l2(X, plan.norm_bound)
    y = np.ascontiguousarray(y)
    # The pass order of the kernels that take one (the rows are already in it); the
    # single-output dense paths that bound rows at their visit or read the bounded
    # copy with its norms need none.
    own_order = not multi and (visit_order is not None or row_norms is not None)
    order = None if own_order else np.arange(n)
    p = d + 1 if plan.fit_intercept else d
    k_out = plan.n_outputs
    theta = np.zeros(k_out * (d + 1))  # Θ flat: row k is (w_k, b_k)
    constraint, radius = NO_CONSTRAINT, 0.0
    lower = upper = np.zeros(1)
    if plan.radius is not None:
        constraint, radius = BALL, plan.radius
    elif plan.box is not None:
        constraint = BOX
        lower, upper = np.array([plan.box[0]]), np.array([plan.box[1]])
        view = theta.reshape(k_out, d + 1)
        view[:, :p] = np.clip(view[:, :p], lower[0], upper[0])  # x_0 ∈ dom h
    code = _kernels.LOSS_CODES[plan.loss]
    if uses_lazy_noise(plan, sp.issparse(X)):
        # (False only when the grid scale is below 2^29, which plan_cyclic_sgd refuses
        # for a scaled plan; the eager run below then has the plan's guarantee.)
        if _lazy_run(X, y, theta, plan, as_random_source(rng), code, progress):
            return theta[:d].copy(), float(theta[d])
    common = (plan.loss_param, plan.clip_norm, plan.batch_size, plan.learning_rate)
    tail = (plan.alpha, plan.l1_ratio, constraint, radius, lower, upper, plan.fit_intercept)
    block = max(1, _NOISE_BLOCK // (k_out * p))
    rounding_sensitivity = plan.learning_rate * plan.clip_norm / plan.batch_size
    softmax = plan.loss == "logistic"  # with K > 1: the multinomial logistic loss
    start = 0
    for epoch, steps in enumerate(_pass_steps(n, plan.batch_size, plan.epochs)):
        for k in range(0, steps, block):
            # N_t ~ N(0, σ²I) on the displacement, σ = λzC/b (Kong and Ribero 2024,
            # Algorithm 1), pre-drawn for a block of steps.
            # λC/b: the smallest sensitivity the displacement can be charged with.
            noise, spacing = grid_noise((min(block, steps - k), k_out * p), rng, "gaussian",
                                        plan.noise_std, sensitivity=rounding_sensitivity)
            if multi and sp.issparse(X):
                start = csr_multiclass_cyclic_sgd_steps(
                    X.indptr, X.indices, X.data, d, y, theta, k_out, order, start, code,
                    softmax, *common, noise, *tail, spacing)
            elif multi:
                start = dense_multiclass_cyclic_sgd_steps(
                    X, y, theta, k_out, order, start, code, softmax, *common, noise, *tail,
                    spacing)
            elif sp.issparse(X):
                start = csr_cyclic_sgd_steps(X.indptr, X.indices, X.data, d, y, theta, order,
                                             start, code, *common, noise, *tail, spacing)
            elif visit_order is not None:  # rows bounded when visited
                start = dense_permuted_cyclic_sgd_steps(
                    X, visit_order, float(plan.norm_bound), y, theta, start, code,
                    *common, noise, *tail, spacing)
                if start < 0:  # a non-finite row, found where the pass read it
                    assert_all_finite(X, input_name="X")  # scikit-learn's message
                    raise ValueError("Input X contains NaN or infinity.")
            elif row_norms is not None:  # rows in pass order, norms known
                start = dense_sequential_cyclic_sgd_steps(X, row_norms, y, theta, start, code,
                                                          *common, noise, *tail, spacing)
            else:
                start = dense_cyclic_sgd_steps(X, y, theta, order, start, code, *common,
                                               noise, *tail, spacing)
        progress.report("epoch", epoch + 1, plan.epochs, f"{steps} noisy steps")
    if multi:
        view = theta.reshape(k_out, d + 1)
        return view[:, :d].copy(), view[:, d].copy()
    return theta[:d].copy(), float(theta[d])
