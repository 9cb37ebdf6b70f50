"""Linear models by noisy projected SGD over half the data (Arora, Marinov and Ullah 2020,
"Private stochastic convex optimization: efficient algorithms for non-smooth
objectives", Algorithm 1)."""

import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from ..mechanisms.noisy_sgd import noisy_sgd, plan_noisy_sgd, rows_needed  # noqa: F401
from ..utils import InstanceOf, Interval, Options, fit_random_source, validate_params
from ..base import check_fit_params, fit_input, release
from ..distributed import distributed_fit
from ..utils._data import check_fit_input
from ..utils._progress import VERBOSE_CONSTRAINT
from ._base import OneVsRestClassifierMixin, one_vs_rest_targets
from ..utils._data import declared_classes

_POSITIVE = Interval("real", 0, None, closed="neither")

_COMMON_CONSTRAINTS = {
    "epsilon": [_POSITIVE],
    "delta": [Interval("real", 0, 1, closed="neither")],
    "norm_bound": [_POSITIVE],
    "radius": [_POSITIVE],
    "fit_intercept": [InstanceOf(bool, np.bool_, description="bool")],
    "noise_calibration": [Options("provable", "paper", "rdp")],
    "learning_rate": [Options("paper"), _POSITIVE],
    "verbose": VERBOSE_CONSTRAINT,
    # random_state is validated by fit_random_source.
}

_SHARED_DOC = """epsilon : float, default=1.0
        Target ε > 0 of the whole fit.
    delta : float, default=1e-6
        Target δ in (0, 1) (Gaussian noise: no pure-DP variant).
    norm_bound : float, default=1.0
        R_x: every row is scaled into ‖x‖₂ ≤ R_x before it is used (contribution
        bounding; rows are never dropped). Prediction uses rows as given: scale or
        normalize features beforehand (e.g. ``Normalizer``) so both see the same rows.
    radius : float, default=1.0
        D: the iterates live in W = {‖(w, b)‖₂ ≤ D} (projection after every step).
    fit_intercept : bool, default=True
        Learn b jointly with w: the gradient is ℓ'·(x̃, 1), so G = √(R_x² + 1).
    noise_calibration : {"provable", "paper", "rdp"}, default="provable"
        ``"provable"``: σ = the discrete Gaussian's σ for sensitivity 2L√K at (ε̄, δ̄)
        (K runs: 1, or the classes of a one-vs-rest fit). Each row enters at most one
        noisy gradient step, so a run is (2L)²/(2σ²)-zCDP (the theorem and its proof
        are in :mod:`skdpsparse.mechanisms.noisy_sgd`); no amplification by the
        random choice of rows is claimed, so σ does not shrink with n. Never refuses
        a valid target. The two others are **unproven** (their subsampling argument
        treats the set of seen rows as fixed in each step, although it is hidden
        state shared across steps) and kept as options: ``"paper"``,
        σ = 8L√log(2/δ)/(√n ε) with Arora et al. 2020 Remark 1's split δ = δ′ = δ̄/3,
        ε = ε̄/(8√log(1/δ′)) (Theorem 6; the per-step δ halved), far more noise than
        its own accounting needs outside tiny ε̄, and ``fit`` raises if no accounting
        certifies (ε̄, δ̄) for that σ (large ε̄ with large n); ``"rdp"``, the smallest
        σ whose subsampled-RDP accounting meets (ε̄, δ̄).
    learning_rate : "paper" or float, default="paper"
        η. ``"paper"``: D/(√n (L + σ√p)), p = dim (w, b) (Arora et al. 2020 Theorems 4 and 6).
    verbose : bool or int, default=0
        ``True``/``1``: progress lines (steps taken and fresh examples seen about every
        tenth of a run, then σ, η and the budget), all fixed by public numbers and the
        data-independent index sequence; ``0``/``False``: silent.
    random_state : None, int or numpy.random.Generator, default=None
        ``None`` draws fresh noise and indices from the operating system. A fixed seed
        makes both known to whoever knows it: for tests and reports only."""

_SHARED_ATTRS = """n_iter_ : {attr_n_iter}
    privacy_spent_ : ApproxDP
        ``"provable"``: (ε, δ̄) of ρ = K(2L)²/(2σ²), carrying the privacy event
        ``DiscreteGaussianEvent(σ/(2L), count=K)`` (a ledger composes it in ρ).
        ``"paper"`` / ``"rdp"``: the smallest ε of the three accountings for the σ
        used; an unproven ε carries no event.
    accounting_ : {{"provable", "paper", "rdp"}}
        Which accounting gave that ε.
    privacy_accounts_ : dict
        The ε of each accounting computed: ``"provable"`` only by default, all
        three otherwise (``inf`` for the paper outside Theorem 6's regime).
    noise_std_ : float
        σ of the discrete Gaussian noise ξ_t, per coordinate.
    noise_multiplier_ : float
        σ/(2L).
    learning_rate_ : float
        η.
    lipschitz_ : float
        L, the gradient bound the noise is calibrated to.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has string feature names."""

_ALGORITHM_DOC = """Arora, Marinov and Ullah (2020, "Private Stochastic Convex
    Optimization: Efficient Algorithms for Non-smooth Objectives"), Algorithm 1: draw
    indices uniformly *with replacement*; a fresh index gives a projected step with the
    noisy gradient, an index already seen a noise-only projected step; stop once
    ⌈n/2⌉ distinct examples have been seen (about n·ln 2 steps, linear time); release
    the average of the iterates at which fresh examples were evaluated. The index
    sequence is never stored. Every derivation (L per loss, σ, η, the three
    accountings) is in :mod:`skdpsparse.mechanisms.noisy_sgd`.

    **Privacy guarantee.** Protected: one row (x, y), under replacement neighbours
    (n, d, the hyperparameters and the declared ``classes`` are public). With the
    default ``noise_calibration="provable"`` the fit is ρ-zCDP with
    ρ = K(2L)²/(2σ²) (K runs: 1, or the classes of a one-vs-rest fit), reported as
    (ε, δ)-DP at the requested δ. Proof (derivation:
    :ref:`derivation_noisy_mirror_descent`): for a fixed index sequence each row is
    used in at most one noisy gradient step and all other steps do not depend on
    it, so a run is a post-processing of one discrete Gaussian mechanism of ℓ2
    sensitivity 2L (Canonne, Kamath and Steinke 2020, "The discrete Gaussian for
    differential privacy", Theorem 14); the random index sequence is a mixture with
    data-independent weights, and Rényi divergence is jointly quasi-convex (van Erven
    and Harremoës 2014, "Rényi divergence and Kullback-Leibler divergence",
    Theorem 13), so the bound holds for the mixture too; no amplification by the
    random choice of rows is claimed. Assumptions: every row is scaled into
    ‖x‖₂ ≤ R_x (and, for regression, every target clipped into [−B, B]) before use,
    so every per-example gradient has norm ≤ L, a function of the declared bounds
    only (:ref:`derivation_sensitivities`, "Per-example gradients of the linear
    losses"); the noise is exact discrete Gaussian noise on a grid
    (:ref:`derivation_exact_sampling`); the indices and the noise come from a secret
    key (``random_state=None``). Not covered: ``noise_calibration="paper"`` and
    ``"rdp"``, which are **unproven** (Arora et al. 2020, Theorem 6, and a
    subsampled-RDP accountant both treat the set of seen rows as fixed in each step,
    although it is hidden state shared across steps); the classifier's label set
    when ``classes=None`` (a :class:`~skdpsparse.exceptions.PrivacyLeakWarning` says so);
    the noise when ``random_state`` is fixed (whoever knows the seed knows it); the
    fit's duration.

    When it cannot beat the zero model. Each step adds noise of σ = z·2L to all
    p = n_features + intercept coordinates and σ does not shrink with n, so the
    excess-risk bound (Arora et al. 2020, Theorem 4, at the step size used) is of
    order D(L + σ√p)/√n, above the zero model's D·L unless n ≥ (1 + σ√p/L)². At
    δ = 10⁻⁶ (one run) σ/L is 17.4, 9.06, 4.76, 2.54 and 1.38 for ε = 0.5, 1, 2, 4
    and 8: about n ≥ 82·p rows at ε = 1 and 6.4·p at ε = 4, e.g. 8·10⁶ rows for
    10⁵ hashed text features at ε = 1. ``fit`` warns (``UserWarning``, from these
    public numbers, before reading the data) when n is below that. The real tasks of
    issue 18 (n ≈ 10⁴–10⁵, p ≈ 10³–10⁵) are all below it, which is where the estimator
    stayed at the majority class."""


class _BaseNoisySGD(BaseEstimator):
    """Shared fit logic: validate → plan (:func:`~skdpsparse.mechanisms.noisy_sgd.plan_noisy_sgd`)
    → run (:func:`~skdpsparse.mechanisms.noisy_sgd.noisy_sgd`) → release."""

    def _fit_runs(self, X, targets, loss, loss_param, label_bound):
        """Plan and run the K = ``len(targets)`` runs; returns their results and the
        attributes of the plan.

        Sets nothing on ``self``: the caller releases.
        """
        n, d = X.shape
        plan = plan_noisy_sgd(
            n, d, loss=loss, epsilon=self.epsilon, delta=self.delta,
            norm_bound=float(self.norm_bound), radius=float(self.radius),
            fit_intercept=self.fit_intercept, loss_param=loss_param,
            label_bound=label_bound, n_runs=targets.shape[0],
            noise_calibration=self.noise_calibration, learning_rate=self.learning_rate)
        if n < plan.rows_needed:
            # Public numbers only (n, d, K, ε, δ, the bounds): warned before any data use.
            warnings.warn(
                f"{type(self).__name__}: with n={n} rows the privacy noise dominates. "
                f"The excess-risk bound of Arora et al. 2020 (Theorem 4 with the step "
                f"size used here) is of order D(L + sigma*sqrt(p))/sqrt(n), which is below "
                f"the D*L that the zero model already attains only for n >= "
                f"(1 + sigma*sqrt(p)/L)^2 = {plan.rows_needed:.3g} (sigma="
                f"{plan.noise_std:.3g}, L={plan.lipschitz:.3g}, p={plan.dim}; sigma does "
                "not shrink with n): expect the trivial baseline. A larger epsilon, fewer "
                "features or another estimator (DPCyclicSGD*, DPOutputPerturbation*) help.",
                UserWarning, stacklevel=3)
        rng = fit_random_source(self.random_state, self, X, targets)
        coef, intercept, n_iter = noisy_sgd(X, targets, plan, rng, verbose=self.verbose,
                                            name=type(self).__name__)
        attrs = dict(privacy_spent_=plan.budget, accounting_=plan.accounting,
                     privacy_accounts_=plan.epsilons, noise_std_=plan.noise_std,
                     noise_multiplier_=plan.noise_multiplier, learning_rate_=plan.step_size,
                     lipschitz_=plan.lipschitz)
        return coef, intercept, n_iter, attrs

    def _decision(self, X):
        check_is_fitted(self)
        X = check_fit_input(self, X, reset=False)
        # In float64 (float32 coef_ times an extreme float32 row would overflow).
        return (np.asarray(X @ np.atleast_2d(self.coef_).astype(np.float64).T)
                + self.intercept_)

    def _check_y(self, y):
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the "
                             "target y is None.")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class DPNoisySGDClassifier(OneVsRestClassifierMixin, ClassifierMixin, _BaseNoisySGD):
    __doc__ = """Differentially private linear classifier by noisy SGD over half the data.

    {algorithm}

    Binary problems run once (label ``classes_[1]`` is +1). More classes are fit one
    versus rest: K runs on all rows with independent randomness, composed (the
    provable bound adds the K runs' ρ; the paper budget gives each run (ε̄/K, δ̄/K);
    the RDP accounting composes the K curves).

    Parameters
    ----------
    loss : {{"logistic", "hinge", "smoothed_hinge"}}, default="logistic"
        Convex with |ℓ'| ≤ 1, so L = G = √(R_x² + 1) (R_x without intercept).
    {shared}
    smoothing : float, default=1.0
        Width h of the smoothed hinge.
    classes : array-like or None, default=None
        The label set, declared in advance. ``None`` reads it from ``y``, which reveals
        which labels occur (a :class:`~skdpsparse.exceptions.PrivacyLeakWarning` says
        so). A label of ``y`` outside ``classes`` is a ``ValueError`` naming
        ``classes``, raised before anything is charged or set.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    {attrs}

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsparse.linear_model import DPNoisySGDClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((4000, 5)) / np.sqrt(5)
    >>> y = (X[:, 0] > 0).astype(int)
    >>> clf = DPNoisySGDClassifier(epsilon=1.0, classes=[0, 1], random_state=0).fit(X, y)
    >>> clf.accounting_, clf.privacy_spent_.epsilon <= 1.0
    ('provable', True)
    """.format(algorithm=_ALGORITHM_DOC, shared=_SHARED_DOC,
               attrs=_SHARED_ATTRS.format(attr_n_iter="ndarray of shape (1,) or (n_classes,)"
                                          "\n        Steps τ of each run (noise-only included)."))

    _parameter_constraints = {
        **_COMMON_CONSTRAINTS,
        "loss": [Options("logistic", "hinge", "smoothed_hinge")],
        "smoothing": [_POSITIVE],
        "classes": [InstanceOf(list, tuple, np.ndarray, description="array-like"), None],
    }

    def __init__(self, loss="logistic", *, epsilon=1.0, delta=1e-6, norm_bound=1.0,
                 radius=1.0, fit_intercept=True, noise_calibration="provable",
                 learning_rate="paper", smoothing=1.0, classes=None, verbose=0,
                 random_state=None):
        self.loss = loss
        self.epsilon = epsilon
        self.delta = delta
        self.norm_bound = norm_bound
        self.radius = radius
        self.fit_intercept = fit_intercept
        self.noise_calibration = noise_calibration
        self.learning_rate = learning_rate
        self.smoothing = smoothing
        self.classes = classes
        self.verbose = verbose
        self.random_state = random_state

    def fit(self, X, y, **fit_params):
        """Fit by noisy projected SGD (one run per one-vs-rest problem).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Sparse input stays sparse.
        y : array-like of shape (n_samples,)
        **fit_params : dict
            Not supported: ``sample_weight`` (a weight changes the sensitivity the
            noise is calibrated to) and any other fit parameter raise
            :class:`~skdpsparse.exceptions.InvalidParameterError`.

        Returns
        -------
        self : DPNoisySGDClassifier
        """
        check_fit_params(self, fit_params)
        if (fitted := distributed_fit(self, X, y)) is not None:  # Dask or Spark input
            return fitted
        validate_params(self, self._parameter_constraints)
        self._check_y(y)
        (X, y), inputs = fit_input(self, X, y)  # sets nothing: see release
        classes = declared_classes(self, y)
        targets = one_vs_rest_targets(y, classes)
        loss_param = float(self.smoothing) if self.loss == "smoothed_hinge" else 1.0
        coef, intercept, n_iter, attrs = self._fit_runs(X, targets, self.loss, loss_param,
                                                        None)
        return release(self, dict(attrs, **inputs, classes_=classes, coef_=coef,
                                  intercept_=intercept, n_iter_=n_iter))


class DPNoisySGDRegressor(RegressorMixin, _BaseNoisySGD):
    __doc__ = """Differentially private linear regression by noisy SGD over half the data.

    {algorithm}

    Parameters
    ----------
    loss : {{"squared", "huber"}}, default="squared"
        ``"huber"`` (threshold κ): |ℓ'| ≤ κ, L = κG. ``"squared"`` is not Lipschitz
        on ℝᵖ: targets are clipped to [−B, B] and, as ‖(w, b)‖ ≤ D on W, the residual
        is at most DG + B, so L = (DG + B)·G (G = √(R_x² + 1), or R_x without
        intercept). Scale the targets to [−B, B] beforehand and keep D modest.
    {shared}
    label_bound : float or None, default=None
        B (squared loss only; Huber needs no clipping). ``None``: B = 1, with a
        warning before anything is read (targets larger than 1 are clipped, which
        destroys the fit); declare a bound from public knowledge.
    huber_threshold : float, default=1.0
        κ of the Huber loss.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    label_bound_ : float
        The B the targets were clipped to (1 when ``label_bound`` is None).
    {attrs}

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsparse.linear_model import DPNoisySGDRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((4000, 5)) / np.sqrt(5)
    >>> y = X @ np.array([0.5, -0.5, 0.0, 0.0, 0.0])
    >>> reg = DPNoisySGDRegressor(epsilon=1.0, label_bound=1.0, random_state=0).fit(X, y)
    >>> reg.coef_.shape, reg.privacy_spent_.epsilon <= 1.0
    ((5,), True)
    """.format(algorithm=_ALGORITHM_DOC, shared=_SHARED_DOC,
               attrs=_SHARED_ATTRS.format(attr_n_iter="int\n        Steps τ of the run "
                                          "(noise-only steps included)."))

    _parameter_constraints = {
        **_COMMON_CONSTRAINTS,
        "loss": [Options("squared", "huber")],
        "label_bound": [_POSITIVE, None],
        "huber_threshold": [_POSITIVE],
    }

    def __init__(self, loss="squared", *, epsilon=1.0, delta=1e-6, norm_bound=1.0,
                 radius=1.0, label_bound=None, huber_threshold=1.0, fit_intercept=True,
                 noise_calibration="provable", learning_rate="paper", verbose=0,
                 random_state=None):
        self.loss = loss
        self.epsilon = epsilon
        self.delta = delta
        self.norm_bound = norm_bound
        self.radius = radius
        self.label_bound = label_bound
        self.huber_threshold = huber_threshold
        self.fit_intercept = fit_intercept
        self.noise_calibration = noise_calibration
        self.learning_rate = learning_rate
        self.verbose = verbose
        self.random_state = random_state

    def fit(self, X, y, **fit_params):
        """Fit by one run of noisy projected SGD.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Sparse input stays sparse.
        y : array-like of shape (n_samples,)
        **fit_params : dict
            Not supported: ``sample_weight`` (a weight changes the sensitivity the
            noise is calibrated to) and any other fit parameter raise
            :class:`~skdpsparse.exceptions.InvalidParameterError`.

        Returns
        -------
        self : DPNoisySGDRegressor
        """
        check_fit_params(self, fit_params)
        if (fitted := distributed_fit(self, X, y)) is not None:  # Dask or Spark input
            return fitted
        validate_params(self, self._parameter_constraints)
        squared = self.loss == "squared"
        if squared and self.label_bound is None:
            # Data-independent: said before anything is read, as the other regressors do.
            warnings.warn(
                "label_bound was not declared: targets are clipped to [-1, 1], which "
                "destroys the fit when they are larger. Declare a bound from public "
                "knowledge (label_bound=...).", UserWarning, stacklevel=2)
        self._check_y(y)
        (X, y), inputs = fit_input(self, X, y, y_numeric=True)  # sets nothing: see release
        Y = 1.0 if self.label_bound is None else float(self.label_bound)
        coef, intercept, n_iter, attrs = self._fit_runs(
            X, np.asarray(y, dtype=np.float64)[None, :], self.loss,
            1.0 if squared else float(self.huber_threshold), Y if squared else None)
        return release(self, dict(attrs, **inputs, coef_=coef[0],
                                  intercept_=float(intercept[0]), n_iter_=int(n_iter[0]),
                                  label_bound_=Y))

    def predict(self, X):
        """Predictions X w + b.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._decision(X)[:, 0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True  # noise by design
        return tags
