"""Linear models by bias-reduced private SGD with sparse gradients (Ghazi, Guzmán,
Kamath, Kumar and Manurangsi 2024, "Differentially private optimization with sparse
gradients", Sections 6-7)."""

import math
import os
import sys
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from .. import _kernels
from ._base import OneVsRestClassifierMixin, one_vs_rest_targets
from ..utils._data import declared_classes
from ..mechanisms.bias_reduced import (
    ACCOUNTINGS,
    MECHANISMS,
    bias_reduced_design,
    bias_reduced_linear_fit,
    bias_reduced_oracle_epsilon,
    bounded_rows,
    plan_bias_reduced_sgd,
)
from ..utils import InstanceOf, Interval, Options, fit_random_source, validate_params
from ..base import check_fit_params, fit_input, release
from ..distributed import distributed_fit
from ..utils._progress import VERBOSE_CONSTRAINT, Progress
from ..utils._data import check_fit_input

_POSITIVE = Interval("real", 0, None, closed="neither")

_COMMON_CONSTRAINTS = {
    "epsilon": [_POSITIVE],
    "delta": [Interval("real", 0, 1, closed="neither")],
    "mechanism": [Options(*MECHANISMS)],
    "boosting": [Options("noisy_min", "random_stopping"), None],
    "n_runs": [Options("auto"), Interval("integer", 1, None, closed="left")],
    "failure_prob": [Interval("real", 0, 1, closed="neither")],
    "learning_rate": [Options("auto"), _POSITIVE],
    "radius": [_POSITIVE, None],
    "fit_intercept": [InstanceOf(bool, np.bool_, description="bool")],
    "intercept_scaling": [_POSITIVE],
    "norm_bound": [_POSITIVE],
    "sparsity": [Interval("integer", 1, None, closed="left"), None],
    "max_iter": [Interval("integer", 1, None, closed="left"), None],
    "calibration": [Options("analytic", "classic")],
    "accounting": [Options(*ACCOUNTINGS)],
    "verbose": VERBOSE_CONSTRAINT,
    # random_state is validated by fit_random_source.
}

_BASELINE_DOC = """When it cannot beat the zero model. With the theorem's step size the
    convex excess-risk bound of Ghazi et al. 2024 (Theorem 6.7, absolute constants set
    to 1) is of order D·ν/√τ with τ = n/ln(2/δ) and ν² = L² ln(n) √(s ln(p/s)
    ln(1/δ))/ε′, below the D·L that the zero model attains only for
    n·ε′ > ln(n)·ln(2/δ)·√(s ln(p/s) ln(1/δ)), ε′ the budget whose ε′/8 the gradient
    oracle runs at (ε with ``accounting="paper"``; the Rényi filter's much larger
    oracle budget by default). ``fit`` warns (``UserWarning``, from these public
    numbers, before the data are used) below it. At n = 10⁴, p = 10⁴, s = 50 and
    δ = 10⁻⁶ this asks for ε ≥ 0.81 with the paper's accounting and ε ≥ 0.091 with
    the default one.
    No measured figure on the real-data benchmark yet (it is not run there by
    default)."""


_PRIVACY_DOC = """**Privacy guarantee.** Protected: one row (x, y), under replacement
    neighbours (n, d, the hyperparameters and the declared bounds are public). One
    run is (ε, δ)-DP. Default ``accounting="renyi_filter"``: each step releases four
    discrete Gaussian means of bounded gradient rows, of which a replaced row reaches
    at most two (2ρ₀-zCDP, Canonne, Kamath and Steinke 2020, Theorem 14; Bun and
    Steinke 2016, Lemma 2.3), amplified exactly by the random batch (Wang, Balle and
    Kasiviswanathan 2019, "Subsampled Rényi differential privacy and analytical
    moments accountant": the smaller of their Theorem 9 and their expansion with the
    discrete Gaussian's exact ternary moments); the run stops by a Rényi filter on these
    per-step costs, which depend on the data-independent level N_t only (Feldman and
    Zrnic 2021, "Individual privacy accounting via a Rényi filter", Theorem 3.1),
    converted to (ε, δ) at the filter's order (derivation:
    :ref:`derivation_bias_reduced_accounting`). ``accounting="paper"``: Ghazi et al.
    2024, Lemma 6.3, under the (ε, δ) filter of Whitehouse, Ramdas, Rogers and Wu
    2023, "Fully-adaptive composition in differential privacy" (Theorem A.4 of Ghazi
    et al.). Boosting: ``"noisy_min"`` runs K copies and a report-noisy-min at
    (ε/(K+1), δ/(K+1)) each (basic composition, Dwork and Roth 2014, Theorem 3.16;
    Ghazi et al. 2024, Theorem 7.1); ``"random_stopping"`` releases the best of a
    random number of runs (Liu and Talwar 2019, "Private selection from private
    candidates", Theorem 3.4; :ref:`derivation_private_selection`). Assumptions:
    every row is scaled into {‖x‖₂ ≤ R, ‖x‖₁ ≤ √s·R} (and every target clipped into
    [−Y, Y] for regression) before use, so every per-example gradient is bounded by
    the declared constants (:ref:`derivation_sensitivities`); the levels, batches and
    noise come from a secret key (``random_state=None``) and the noise is exact
    (:ref:`derivation_exact_sampling`). Not covered: the number of runs of
    ``boosting="random_stopping"`` and the unselected runs (never released, nor
    printed); the label set of a classifier fitted with ``classes=None`` (a
    :class:`~skdpsparse.exceptions.PrivacyLeakWarning` says so); the noise when
    ``random_state`` is fixed; the fit's duration."""


_SHARED_DOC = """epsilon : float, default=1.0
        ε > 0.
    delta : float, default=1e-6
        δ in (0, 1); the filter needs δ > 0. Lemma 6.5 (how long the run lasts)
        assumes δ < 1/n²; ``boosting="random_stopping"`` needs δ ≤ ε/10.
    mechanism : {"projection", "l1_recovery"}, default="projection"
        The private mean inside Algorithm 5: the projection mechanism (Ghazi et al.
        2024, Algorithm 1) or Gaussian ℓ1-recovery (Algorithm 2, the choice of the later
        version; much slower: a basis pursuit per mean).
    boosting : {None, "noisy_min", "random_stopping"}, default=None
        ``None``: one run of Algorithm 6 at (ε, δ). ``"noisy_min"``: Ghazi et al.
        2024, Algorithm 7, K runs at (ε/(K+1), δ/(K+1)) and report-noisy-min on F_S (convex
        losses; sensitivity B/n, needs ``radius``) or ‖∇F_S‖₂ (sigmoid; 2L/n).
        ``"random_stopping"``: the later version's Algorithm 5 (runs at
        (ε/12, (δ/(4K))²), Liu and Talwar's random stopping with γ from
        ``failure_prob``).
    n_runs : "auto" or int, default="auto"
        K of ``"noisy_min"``; "auto": ⌈log₂(2/β)⌉ (Theorem 7.1).
    failure_prob : float, default=0.1
        β of the boosting theorems (K, or γ = min{1/2, β/2} for random stopping).
    learning_rate : "auto" or float, default="auto"
        η. "auto": Theorem 6.7 (convex, η = D/(ν√τ), needs ``radius``) or 6.8
        (sigmoid, η = √(Γ/(Hτν²)) with Γ = 1/2, the loss at 0 being 1/2 and ≥ 0),
        absolute constants 1 (:func:`~skdpsparse.mechanisms.bias_reduced.
        theorem_learning_rate`), from the run's own budget (with the Rényi filter,
        from the noise the run actually adds: the paper's formula at 8× the oracle's
        budget).
    radius : float or None, default=10.0
        D: iterates are projected onto {‖θ‖₂ ≤ D} (θ = (w, b/c)); ``None`` for ℝᵖ.
    fit_intercept : bool, default=True
        The intercept is the coefficient of a constant feature c; it counts in the
        gradient bounds (ℓ2 √(R² + c²), ℓ1 √s·R + c).
    intercept_scaling : float, default=1.0
        c.
    norm_bound : float, default=1.0
        R: rows are scaled into {‖x‖₂ ≤ R, ‖x‖₁ ≤ √s·R} (never dropped), in ``fit``
        and in ``predict``. The gradient rows ℓ'·(x, c) then have ℓ2 norm ≤ L =
        sup|ℓ'|·√(R² + c²) and ℓ1 norm ≤ L√s′ with s′ = ((√s R + c)/√(R² + c²))²
        ≤ s + 1: the L and s of the mean mechanisms.
    sparsity : int or None, default=None
        s (nonzeros per row); ``None``: s = n_features.
    max_iter : int or None, default=None
        Optional cap on the number of steps of a run (the filter decides otherwise;
        stopping earlier never costs more, and may cost less: ``privacy_spent_``).
    calibration : {"analytic", "classic"}, default="analytic"
        Gaussian noise of the means: analytic Gaussian mechanism or the paper's
        σ = Δ₂√(2 ln(1.25/δ))/ε.
    accounting : {"renyi_filter", "paper"}, default="renyi_filter"
        When a run stops, and how much noise its means get.
        ``"renyi_filter"``: each step is accounted by its exact RDP curve (the record
        enters two of the three batch means, each subsampled part amplified by
        the smaller of Wang, Balle and Kasiviswanathan 2019, Theorem 9, and their
        expansion with the exact ternary moments of the discrete Gaussian) and the
        run stops at the
        first step that does not fit a Rényi filter at one order fixed in advance
        (Feldman and Zrnic 2021, Theorem 3.1), whose budget converts to exactly
        (ε, δ); the oracle's budget is then raised until the run lasts the paper's
        τ = n/ln(2/δ) steps on average (:func:`~skdpsparse.mechanisms.bias_reduced.
        plan_renyi_filter`): at n = 10⁵, δ = 10⁻⁶ and ε = 0.5, 1, 4 the noise standard
        deviation of each mean is 99, 84 and 53 times smaller than with the paper's
        accounting, for about the same number of steps (derivation:
        ``doc/derivations/bias_reduced_accounting.rst``).
        ``"paper"``: Ghazi et al. 2024, Lemma 6.3 (three means charged, linearised
        amplification) under the (ε, δ) filter of Theorem A.4 at (ε/2, δ/2), the
        oracle at (ε/8, δ/4) (:func:`~skdpsparse.mechanisms.bias_reduced.
        step_privacy`, valid for ε ≤ 13.4).
    verbose : bool or int, default=0
        Progress lines (step count, N_t and the filter's state: nothing
        data-dependent) every 1000 steps at ``True``/``1``, every step at ``2``, one
        line per class with K ≥ 3 classes, and the steps taken and the budget once
        the model is released.
        Silent with ``boosting="random_stopping"``: its number of runs is not covered
        by the guarantee (Liu and Talwar 2019, Theorem 3.4 releases the best run
        only).
    random_state : None, int or numpy.random.Generator, default=None
        ``None`` draws fresh noise; a fixed seed makes the noise known to whoever knows
        the seed: for tests and reports only."""

_SHARED_ATTRS = """n_iter_ : int
        The number of steps of the (selected) run, Algorithm 6's stopping time: the
        output is built from the iterates x⁰, …, x^k with k = ``n_iter_``, which is
        one more than eq. (8)'s T (the first step whose inclusion exceeds the filter).
    learning_rate_ : float
        η of the (selected) run.
    privacy_spent_ : ApproxDP
        One run: ``"renyi_filter"``, the filter's (α, B)-RDP converted at δ, i.e.
        (ε, δ); ``"paper"``, the filter's budget (ε/2, δ/2) plus the one step it may
        overshoot by (Lemma 6.3), never above (ε, δ). ``"noisy_min"``: the runs' guarantees plus
        the selection's ε/(K+1). ``"random_stopping"``: Liu-Talwar Thm 3.4's total.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has string feature names."""


def _user_stacklevel():
    """The ``stacklevel`` of the first frame outside this package (the line that called
    ``fit``), however many helpers lie in between (as
    :func:`~skdpsparse.exceptions.warn_privacy_leak` does)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def one_vs_rest_budget(epsilon, delta, n_problems):
    """The (ε, δ) of each of K one-vs-rest problems: (ε/K, δ/K), rounded down.

    Every row enters all K problems (it is a positive of one and a negative of the
    others), so the K runs are K mechanisms on the same data, and the split is what
    makes their release (ε, δ)-DP by basic composition (Dwork and Roth 2014, Theorem
    3.16); parallel composition does not apply. Each part is rounded down until the
    floating-point sum of K parts, added left to right as ``privacy_spent_`` adds
    them, is at most the total (float addition is monotone, so runs within their part
    sum to at most the total too): a ledger whose limit is exactly (ε, δ) accepts the
    fit.

    Examples
    --------
    >>> from skdpsparse.linear_model._bias_reduced_sgd import one_vs_rest_budget
    >>> eps, delta = one_vs_rest_budget(0.7, 1e-6, 3)
    >>> eps + eps + eps <= 0.7, delta + delta + delta <= 1e-6
    (True, True)
    """
    K = int(n_problems)
    return _part(float(epsilon), K), _part(float(delta), K)


def _part(total, K):
    part = total / K
    while True:
        acc = part
        for _ in range(K - 1):
            acc += part
        if acc <= total:
            return part
        part = math.nextafter(part, 0.0)


class _BaseBiasReducedSGD(BaseEstimator):
    """Shared fit: validate → plan → run → release; subclasses give the loss."""

    def _bounded(self, X):
        """Rows scaled into {‖x‖₂ ≤ R, ‖x‖₁ ≤ √s R}, as the fit bounded its rows (a copy;
        sparse stays sparse)."""
        R = float(self.norm_bound)
        s = X.shape[1] if self.sparsity is None else min(int(self.sparsity), X.shape[1])
        return bounded_rows(X, R, math.sqrt(s) * R)

    def _plan(self, shape, epsilon, delta, deriv_bound, loss_range, convex):
        """The plan of one problem at (``epsilon``, ``delta``) from public numbers (n, d,
        the parameters); warns, before the rows are read, when that budget is below
        what Theorem 6.7 needs."""
        n, d = shape
        plan = plan_bias_reduced_sgd(
            n, d, epsilon=epsilon, delta=delta, norm_bound=self.norm_bound,
            sparsity=self.sparsity,
            intercept_scaling=float(self.intercept_scaling) if self.fit_intercept else 0.0,
            deriv_bound=deriv_bound, convex=convex, loss_range=loss_range,
            radius=self.radius, learning_rate=self.learning_rate, boosting=self.boosting,
            n_runs=self.n_runs, failure_prob=self.failure_prob, mechanism=self.mechanism,
            calibration=self.calibration, accounting=self.accounting,
            max_iter=self.max_iter)
        if convex and plan.radius is not None:
            self._warn_below_theory(n, plan.dim, plan.gradient_sparsity, epsilon, delta)
        return plan

    def _fit_linear(self, X, targets, code, param, deriv_bound, loss_range, convex):
        """One problem at the whole budget (ε, δ) (a binary classifier, the regressor);
        return (coef, intercept, info, budget). Sets nothing."""
        plan = self._plan(X.shape, float(self.epsilon), float(self.delta), deriv_bound,
                          loss_range, convex)
        design = bias_reduced_design(X, plan)
        rng = fit_random_source(self.random_state, self, design, targets)
        return self._run(design, targets, code, param, plan, rng)

    def _run(self, design, targets, code, param, plan, rng):
        return bias_reduced_linear_fit(design, targets, code, param, plan, rng,
                                       verbose=self._verbose_level(),
                                       name=type(self).__name__)

    def _verbose_level(self):
        # Progress per run would reveal random stopping's number of runs.
        return 0 if self.boosting == "random_stopping" else int(self.verbose)

    def _warn_below_theory(self, n, p, s_grad, eps, delta):
        """Warn, before the data are used, when n·ε is below what Theorem 6.7 needs.

        With η = D/(ν√τ) the convex excess-risk bound of Ghazi et al. 2024 (Theorem
        6.7, absolute constants set to 1, as for the step size) is of order D·ν/√τ,
        τ = n/ln(2/δ), ν² = L² ln(n) √(s ln(p/s) ln(1/δ))/ε′; the zero model is within
        D·L of the optimum on the ball (the loss is L-Lipschitz there). The bound is
        below that only for n·ε′ > ln(n)·ln(2/δ)·√(s ln(p/s) ln(1/δ)), where ε′ is the
        ε whose ε′/8 the oracle runs at (ε itself with the paper's accounting; the
        Rényi filter's larger oracle budget otherwise). The whole budget is assumed to
        go to one run: boosting only makes it worse.
        """
        eps_oracle = bias_reduced_oracle_epsilon(n, eps, delta, self.accounting)
        s = min(float(s_grad), float(p))
        needed = (math.log(n) * math.log(2.0 / delta)
                  * math.sqrt(s * max(math.log(p / s), 1.0) * math.log(1.0 / delta)))
        if n * eps_oracle < needed:
            warnings.warn(
                f"{type(self).__name__}: n*eps' = {n * eps_oracle:.3g} (n={n}, the "
                f"oracle's eps'={eps_oracle:.3g} at the run's epsilon={eps:g}, accounting="
                f"{self.accounting!r}) is below the {needed:.3g} = ln(n) ln(2/delta) "
                f"sqrt(s ln(p/s) ln(1/delta)) (s={s:.3g}, p={p}) at which the excess-risk "
                "bound of Ghazi et al. 2024 (Theorem 6.7, constants set to 1) falls below "
                "the D*L that the zero model already attains: expect the trivial "
                "baseline. A larger epsilon or n, fewer features or another estimator "
                "(DPCyclicSGD, DPOutputPerturbation*) help.", UserWarning,
                stacklevel=_user_stacklevel())

    def _store(self, info, budget, attrs):
        # Charges first; a refused fit releases nothing and leaves the estimator
        # unfitted (base.release).
        release(self, dict(attrs, n_iter_=int(info["n_iter"]),
                           learning_rate_=float(info["learning_rate"]),
                           privacy_spent_=budget))
        self._report_done(f"{self.n_iter_} steps")
        return self

    def _report_done(self, what):
        # After the release: a boosted fit's n_iter_ is that of the privately selected
        # run, not to be printed before the ledger has accepted the charge.
        Progress(self._verbose_level(), type(self).__name__).report(
            "done", detail=f"{what}, privacy spent {self.privacy_spent_}")

    def _margins(self, X):
        check_is_fitted(self)
        X = self._bounded(check_fit_input(self, X, reset=False))
        return np.asarray(X @ self.coef_.ravel(), dtype=np.float64) + float(
            np.ravel(self.intercept_)[0])

    @staticmethod
    def _check_n(n):
        if n < 2:
            raise ValueError(f"the bias-reduced SGD needs n_samples >= 2; got {n} sample.")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class DPBiasReducedSGDClassifier(OneVsRestClassifierMixin, ClassifierMixin,
                                 _BaseBiasReducedSGD):
    __doc__ = """Linear classifier by bias-reduced private SGD (Ghazi et al. 2024, §6-7).

    Ghazi, Guzmán, Kamath, Kumar and Manurangsi, "Differentially Private Optimization
    with Sparse Gradients": projected SGD whose gradient is the subsampled
    bias-reduced estimator of Algorithm 5 (four private sparse means on a batch of
    random size 2^{N+1}, N ~ TGeom(⌊log₂ n⌋ − 1), its halves and one example),
    stopped by a fully adaptive composition filter (Algorithm 6: by default a Rényi
    filter on each step's exact RDP, see ``accounting``; the paper's Lemma 6.3 as an
    option), with optional boosting of the confidence (Algorithm 7, or the later
    version's Algorithm 5). Per-example gradients ℓ'·(x, c) of s-sparse rows are (s+1)-sparse
    and are kept sparse. Mechanisms in :mod:`skdpsparse.mechanisms.bias_reduced`.

    Two classes: one model (label ``classes_[1]`` is +1) at the whole budget. K ≥ 3
    classes: one versus rest, K models each fitted as above at (ε/K, δ/K) (each
    class against the others, on all rows), released together.

    {privacy}
    One-vs-rest (K ≥ 3 classes): every row enters all K problems, so each run gets
    (ε/K, δ/K) and their release is (ε, δ)-DP by basic composition (Dwork and Roth
    2014, Theorem 3.16); ``privacy_spent_`` is the sum of the K runs' guarantees,
    charged to the ledger once for the fit.

    {baseline}
    With K ≥ 3 classes the condition applies to each run's ε/K.

    With the paper's accounting each mean runs at ε/32 and the algorithm needs a large n·ε, or a
    strong gradient signal, to beat chance; the default exact accounting gives the
    means 35-70 times less noise (standard deviation) at the same run length.

    Parameters
    ----------
    loss : {"logistic", "smoothed_hinge", "sigmoid"}, default="logistic"
        |ℓ'| ≤ 1, 1 and 1/4. "sigmoid" (1/(1 + e^{yz})) is smooth and nonconvex: the
        output is a uniformly random iterate and boosting scores ‖∇F_S‖₂.
    smoothing : float, default=1.0
        Width h of the smoothed hinge.
    classes : array-like or None, default=None
        Declared labels (two or more); ``None`` reads them from ``y``, which reveals
        them (a :class:`~skdpsparse.exceptions.PrivacyLeakWarning` says so). A label
        of ``y`` that is not declared is a ``ValueError`` naming ``classes`` (user
        guide, "Validation errors"). K ≥ 3 declared labels fit K one-vs-rest models.
    {shared}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    {attrs}
        With K ≥ 3 classes ``n_iter_`` and ``learning_rate_`` are arrays of shape
        (n_classes,), one entry per one-vs-rest run, and ``privacy_spent_`` is
        their sum.

    Methods ``decision_function`` (shape (n_samples,) for two classes, else
    (n_samples, n_classes)), ``predict``, and ``predict_proba`` / ``predict_log_proba``
    for ``loss="logistic"`` only: the one loss of the three that is a log-likelihood
    (the sigmoid of the margin for two classes, the one-vs-rest sigmoids normalized to
    sum to one for more). The smoothed hinge and the sigmoid loss define no
    probabilities.

    Examples
    --------
    >>> from skdpsparse.accounting import ApproxDP
    >>> from skdpsparse.datasets import make_sparse_classification
    >>> from skdpsparse.linear_model import DPBiasReducedSGDClassifier
    >>> X, y, _ = make_sparse_classification(2000, 500, 8, random_state=0)
    >>> clf = DPBiasReducedSGDClassifier(sparsity=8, classes=[0, 1],
    ...                                  random_state=0).fit(X, y)
    >>> clf.coef_.shape, clf.n_iter_ > 0, clf.privacy_spent_ <= ApproxDP(1.0, 1e-6)
    ((1, 500), True, True)
    >>> import numpy as np
    >>> y3 = np.arange(2000) % 3  # three classes: three runs at (1/3, 1e-6/3) each
    >>> clf = DPBiasReducedSGDClassifier(sparsity=8, classes=[0, 1, 2], max_iter=20,
    ...                                  random_state=0).fit(X, y3)
    >>> clf.coef_.shape, clf.predict_proba(X[:4]).shape, clf.privacy_spent_ <= ApproxDP(1.0, 1e-6)
    ((3, 500), (4, 3), True)
    """.replace("{shared}", _SHARED_DOC).replace("{attrs}", _SHARED_ATTRS).replace(
        "{privacy}", _PRIVACY_DOC).replace("{baseline}", _BASELINE_DOC)

    _parameter_constraints = {
        **_COMMON_CONSTRAINTS,
        "loss": [Options("logistic", "smoothed_hinge", "sigmoid")],
        "smoothing": [_POSITIVE],
        "classes": [InstanceOf(list, tuple, np.ndarray, description="array-like"), None],
    }

    def __init__(self, loss="logistic", *, epsilon=1.0, delta=1e-6, mechanism="projection",
                 boosting=None, n_runs="auto", failure_prob=0.1, learning_rate="auto",
                 radius=10.0, fit_intercept=True, intercept_scaling=1.0, norm_bound=1.0,
                 sparsity=None, smoothing=1.0, classes=None, max_iter=None,
                 calibration="analytic", accounting="renyi_filter", verbose=0,
                 random_state=None):
        self.loss = loss
        self.epsilon = epsilon
        self.delta = delta
        self.mechanism = mechanism
        self.boosting = boosting
        self.n_runs = n_runs
        self.failure_prob = failure_prob
        self.learning_rate = learning_rate
        self.radius = radius
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.norm_bound = norm_bound
        self.sparsity = sparsity
        self.smoothing = smoothing
        self.classes = classes
        self.max_iter = max_iter
        self.calibration = calibration
        self.accounting = accounting
        self.verbose = verbose
        self.random_state = random_state

    def fit(self, X, y, **fit_params):
        """Fit the private classifier (one model, or K one-vs-rest models).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Sparse input stays sparse (CSR).
        y : array-like of shape (n_samples,)
        **fit_params : dict
            Not supported: ``sample_weight`` (a weight changes the sensitivity the
            noise is calibrated to) and any other fit parameter raise
            :class:`~skdpsparse.exceptions.InvalidParameterError`.

        Returns
        -------
        self : DPBiasReducedSGDClassifier
        """
        check_fit_params(self, fit_params)
        if (fitted := distributed_fit(self, X, y)) is not None:  # Dask or Spark input
            return fitted
        validate_params(self, self._parameter_constraints)
        (X, y), input_attrs = fit_input(self, X, y, supervised=True)  # sets nothing
        classes = declared_classes(self, y)
        targets = one_vs_rest_targets(y, classes)              # (K, n), K = 1 for two
        self._check_n(X.shape[0])
        code = _kernels.LOSS_CODES[self.loss]
        param = float(self.smoothing) if self.loss == "smoothed_hinge" else 0.0
        deriv_bound = 0.25 if self.loss == "sigmoid" else 1.0
        convex = self.loss != "sigmoid"

        def loss_range(a):  # ℓ is decreasing in the signed margin t ∈ [−a, a]
            return _kernels.loss_value(code, -a, 1.0, param) - _kernels.loss_value(
                code, a, 1.0, param)

        if targets.shape[0] == 1:  # two classes: one problem at the whole budget
            coef, intercept, info, budget = self._fit_linear(
                X, targets[0], code, param, deriv_bound, loss_range, convex)
            return self._store(info, budget, dict(input_attrs, classes_=classes,
                                                  coef_=coef[None, :],
                                                  intercept_=np.array([intercept])))
        K = targets.shape[0]
        eps, delta = one_vs_rest_budget(self.epsilon, self.delta, K)
        plan = self._plan(X.shape, eps, delta, deriv_bound, loss_range, convex)
        design = bias_reduced_design(X, plan)
        # One key for the fit; the K runs draw from it one after the other.
        rng = fit_random_source(self.random_state, self, design, targets)
        progress = Progress(self._verbose_level(), type(self).__name__)
        fits = []
        for k in range(K):
            fits.append(self._run(design, targets[k], code, param, plan, rng))
            progress.report("class", k + 1, K, f"fitted at epsilon={eps:.4g}, "
                            f"delta={delta:.4g}")
        # Basic composition of the K releases (one_vs_rest_budget): at most (ε, δ).
        budget = sum((f[3] for f in fits[1:]), fits[0][3])
        release(self, dict(
            input_attrs, classes_=classes, coef_=np.stack([f[0] for f in fits]),
            intercept_=np.array([f[1] for f in fits]),
            n_iter_=np.array([int(f[2]["n_iter"]) for f in fits]),
            learning_rate_=np.array([float(f[2]["learning_rate"]) for f in fits]),
            privacy_spent_=budget))
        self._report_done(f"{K} one-vs-rest models of {', '.join(map(str, self.n_iter_))} "
                          "steps")
        return self

    def _decision(self, X):
        """(n_samples, n_problems) margins ⟨w_k, x̄⟩ + b_k of the bounded rows x̄ (as in
        ``fit``), for the prediction methods of
        :class:`._base.OneVsRestClassifierMixin`."""
        check_is_fitted(self)
        X = self._bounded(check_fit_input(self, X, reset=False))
        return np.asarray(X @ self.coef_.T, dtype=np.float64) + np.asarray(
            self.intercept_, dtype=np.float64)


class DPBiasReducedSGDRegressor(RegressorMixin, _BaseBiasReducedSGD):
    __doc__ = """Linear regression by bias-reduced private SGD (Ghazi et al. 2024, §6-7).

    The estimator of :class:`DPBiasReducedSGDClassifier` for the Huber and the
    squared loss. Targets are clipped to [−Y, Y] (``label_bound``). The squared loss
    needs a bounded domain: its derivative z − y is bounded by D·√(R² + c²) + Y only
    on the ball of radius D, so ``radius`` is required.

    {privacy}

    {baseline}

    Parameters
    ----------
    loss : {"huber", "squared"}, default="huber"
        Huber with threshold κ (|ℓ'| ≤ κ) or ½(z − y)² (|ℓ'| ≤ D√(R² + c²) + Y).
    huber_threshold : float, default=1.0
        κ.
    label_bound : float or None, default=None
        Y: targets are clipped to [−Y, Y]. Declare it from public knowledge (a rating
        scale, a legal maximum). ``None``: Y = 1 with a ``UserWarning`` before
        fitting (the same default as
        :class:`~skdpsparse.linear_model.DPOutputPerturbationRegressor`), since
        clipping larger targets to [−1, 1] silently destroys the fit.
    {shared}

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    label_bound_ : float
        The Y used (declared, or 1 for ``None``).
    {attrs}

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsparse.linear_model import DPBiasReducedSGDRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 5)) / np.sqrt(5)
    >>> y = np.clip(X @ np.ones(5) / 2, -1, 1)
    >>> reg = DPBiasReducedSGDRegressor(radius=2.0, label_bound=1.0,
    ...                                 random_state=0).fit(X, y)
    >>> reg.coef_.shape
    (5,)
    """.replace("{shared}", _SHARED_DOC).replace("{attrs}", _SHARED_ATTRS).replace(
        "{privacy}", _PRIVACY_DOC).replace("{baseline}", _BASELINE_DOC)

    _parameter_constraints = {
        **_COMMON_CONSTRAINTS,
        "loss": [Options("huber", "squared")],
        "huber_threshold": [_POSITIVE],
        "label_bound": [_POSITIVE, None],
    }

    def __init__(self, loss="huber", *, epsilon=1.0, delta=1e-6, mechanism="projection",
                 boosting=None, n_runs="auto", failure_prob=0.1, learning_rate="auto",
                 radius=10.0, fit_intercept=True, intercept_scaling=1.0, norm_bound=1.0,
                 sparsity=None, huber_threshold=1.0, label_bound=None, max_iter=None,
                 calibration="analytic", accounting="renyi_filter", verbose=0,
                 random_state=None):
        self.loss = loss
        self.epsilon = epsilon
        self.delta = delta
        self.mechanism = mechanism
        self.boosting = boosting
        self.n_runs = n_runs
        self.failure_prob = failure_prob
        self.learning_rate = learning_rate
        self.radius = radius
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.norm_bound = norm_bound
        self.sparsity = sparsity
        self.huber_threshold = huber_threshold
        self.label_bound = label_bound
        self.max_iter = max_iter
        self.calibration = calibration
        self.accounting = accounting
        self.verbose = verbose
        self.random_state = random_state

    def fit(self, X, y, **fit_params):
        """Fit the private linear regression.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Sparse input stays sparse (CSR).
        y : array-like of shape (n_samples,)
            Targets, clipped to [−label_bound, label_bound].
        **fit_params : dict
            Not supported: ``sample_weight`` (a weight changes the sensitivity the
            noise is calibrated to) and any other fit parameter raise
            :class:`~skdpsparse.exceptions.InvalidParameterError`.

        Returns
        -------
        self : DPBiasReducedSGDRegressor
        """
        check_fit_params(self, fit_params)
        if (fitted := distributed_fit(self, X, y)) is not None:  # Dask or Spark input
            return fitted
        validate_params(self, self._parameter_constraints)
        if self.label_bound is None:
            # Data-independent: said before anything is read.
            warnings.warn(
                "label_bound was not declared: targets are clipped to [-1, 1], which "
                "destroys the fit when they are larger. Declare a bound from public "
                "knowledge (label_bound=...).", UserWarning, stacklevel=2)
        (X, y), input_attrs = fit_input(self, X, y, supervised=True, y_numeric=True)
        self._check_n(X.shape[0])
        Y = 1.0 if self.label_bound is None else float(self.label_bound)
        targets = np.clip(np.asarray(y, dtype=np.float64), -Y, Y)
        code = _kernels.LOSS_CODES[self.loss]
        param = float(self.huber_threshold) if self.loss == "huber" else 0.0
        if self.loss == "squared":
            if self.radius is None:
                raise ValueError("loss='squared' has unbounded gradients on R^d: set "
                                 "radius (|z - y| <= D*sqrt(R^2 + c^2) + Y on the ball).")
            c = float(self.intercept_scaling) if self.fit_intercept else 0.0
            deriv_bound = float(self.radius) * math.hypot(float(self.norm_bound), c) + Y
        else:
            deriv_bound = param

        def loss_range(a):  # residuals r = z − y lie in [−(a + Y), a + Y]; ℓ(0) = 0
            return _kernels.loss_value(code, a + Y, 0.0, param)

        coef, intercept, info, budget = self._fit_linear(
            X, targets, code, param, deriv_bound, loss_range, convex=True)
        return self._store(info, budget, dict(input_attrs, coef_=coef,
                                              intercept_=intercept, label_bound_=Y))

    def predict(self, X):
        """Predicted targets ⟨w, x̄⟩ + b on the bounded rows x̄ (as in ``fit``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._margins(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True  # noise by design
        return tags
