"""DPCyclicSGD: cyclic DP-SGD released at its last iterate (Kong and Ribero 2024)."""


import math
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, softmax
from sklearn.base import BaseEstimator
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import ClassifierTags, RegressorTags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ..mechanisms.cyclic_sgd import (
    CLASSIFICATION_LOSSES,
    PENALTIES,
    REGRESSION_LOSSES,
    bound_rows_l2,
    cyclic_sgd,
    default_step_and_clip,
    feature_bound,
    plan_cyclic_sgd,
)
from ..utils._data import declared_classes
from ..utils import InstanceOf, Interval, Options, fit_random_source, validate_params
from ..base import check_fit_params, fit_input, release
from ..distributed import distributed_fit
from ..utils._data import check_fit_input
from ..utils._progress import VERBOSE_CONSTRAINT, Progress

_POSITIVE = Interval("real", 0, None, closed="neither")
_NONNEGATIVE = Interval("real", 0, None, closed="left")
_BOOL = InstanceOf(bool, np.bool_, description="bool")
#: The "auto" schedule (:func:`auto_schedule`): the noise std it aims at on a margin
#: or prediction of the last iterate (logit or target units), the most passes it
#: makes, and the least distance a prediction can travel (λ·C·G per step times T).
_AUTO_NOISE, _AUTO_MAX_EPOCHS, _AUTO_MIN_REACH = 0.35, 200, 40.0


def auto_schedule(n, *, reach, epsilon, delta, noise_multiplier=None, epochs=None,
                  batch_size=None, min_reach=_AUTO_MIN_REACH):
    """(E, b) of the "auto" schedule, from public numbers only.

    A step moves a margin (or a prediction) by at most u = ``reach`` = λ·C·G, and its
    noise by λ·z·C·G/b in std (on a row of norm G). Accounted by composition, a
    record read E times needs z = √(2E/ρ) for ρ-zCDP: each use is a Gaussian
    mechanism of sensitivity 2C and std zC, (2/z²)-zCDP, and uses add (Bun and
    Steinke 2016, "Concentrated differential privacy: simplifications, extensions,
    and lower bounds", Propositions 1.6 and 2.3), with ρ = (√(log(1/δ) + ε) −
    √log(1/δ))², the ρ that their Proposition 1.3 turns into (ε, δ). (The
    accountant calibrates its own z afterwards, a little smaller; this only sizes
    the schedule.) After T = E·n/b steps the noise on a margin of the last iterate
    has std s(T, E) = u·z·√T/b = u·z·T^{3/2}/(E·n), the penalty's decay ignored. At a
    fixed T, s falls as the batch grows, so full batches (E = T) are best, with
    s = u·T·√(2/ρ)/n: noise and distance travelled grow together, and the rule
    takes the most steps whose noise std is 0.35 (``_AUTO_NOISE``; logit or target
    units), T = 0.35·n·√(ρ/2)/u, in full batches. If that is more than 200
    (``_AUTO_MAX_EPOCHS``) passes: E = 200 and the T with s(T, 200) = 0.35,
    T = (0.35·E·n/(u·z))^{2/3}, in batches of ⌈E·n/T⌉. In both cases T is at least
    ``min_reach``/u (40/u: a prediction can travel 40 units, 10 logistic steps).
    A given ``epochs`` keeps its E (T from s(T, E) = 0.35, at least
    E); a given ``batch_size`` keeps its b and takes the largest E ≤ 200 with
    s ≤ 0.35. A given ``noise_multiplier`` z replaces √(2E/ρ).

    Parameters
    ----------
    n : int
        Number of rows (public).
    reach : float
        u = λ·C·G > 0.
    epsilon, delta : float
        The target (ε, δ).
    noise_multiplier : float or None
        A given z (``epsilon`` unused).
    epochs, batch_size : int or None
        A given E or b (None: "auto").
    min_reach : float
        The least λ·C·G·T.

    Returns
    -------
    epochs, batch_size : int
    """
    n = int(n)
    min_steps = float(min_reach) / reach
    if noise_multiplier is None:
        log_inv = math.log(1.0 / delta)
        rho = (math.sqrt(log_inv + epsilon) - math.sqrt(log_inv)) ** 2

        def z_of(e):
            return math.sqrt(2.0 * e / rho)
    else:
        def z_of(e):
            return float(noise_multiplier)

    def steps_at(e):  # the T with s(T, e) = _AUTO_NOISE
        return (_AUTO_NOISE * e * n / (reach * z_of(e))) ** (2.0 / 3.0)

    if batch_size is not None:
        b = min(int(batch_size), n)
        e = 1
        while e < _AUTO_MAX_EPOCHS and (
                reach * z_of(e + 1) * math.sqrt((e + 1) * n / b) / b <= _AUTO_NOISE):
            e += 1  # s(E·n/b, E) grows with E: the largest E with s <= the target
        return min(max(e, math.ceil(min_steps * b / n)), _AUTO_MAX_EPOCHS), b
    if epochs is not None:
        e = int(epochs)
        t = max(steps_at(e), min_steps, e)
        return e, max(1, min(n, math.ceil(e * n / t)))
    if noise_multiplier is None:
        full = _AUTO_NOISE * n * math.sqrt(rho / 2.0) / reach
    else:
        full = (_AUTO_NOISE * n / (reach * float(noise_multiplier))) ** 2
    full = max(full, min_steps, 1.0)
    if full <= _AUTO_MAX_EPOCHS:
        return math.ceil(full), n
    t = max(steps_at(_AUTO_MAX_EPOCHS), min_steps, _AUTO_MAX_EPOCHS)
    return _AUTO_MAX_EPOCHS, max(1, min(n, math.ceil(_AUTO_MAX_EPOCHS * n / t)))


class DPCyclicSGD(BaseEstimator):
    """Linear model trained by cyclic DP-SGD, private at its last iterate.

    Algorithm 1 of Kong and Ribero, "Privacy of the last iterate in cyclically-sampled
    DP-SGD on nonconvex composite losses" (2024; the formulas used are in the
    documentation's derivation "Cyclic DP-SGD and the privacy of the last iterate"): E
    passes over the rows in a fixed order in batches of b
    (wrapping at the end), each per-example gradient clipped to norm C, Gaussian noise
    of std λzC/b added to the displacement, then the proximal map of the penalty /
    constraint h; only the last iterate is released. Its privacy is accounted by
    composing the steps that read a record (the bound proven for the library's exact
    noise on a grid; the paper's last-iterate bounds, Theorems 4.4 and 4.5, are not
    used, see the guarantee below and :mod:`skdpsparse.mechanisms.cyclic_sgd`).

    The task follows ``loss``: ``"logistic"``, ``"smoothed_hinge"`` and ``"sigmoid"``
    (nonconvex) make a classifier, ``"squared"`` and ``"huber"`` a regressor. Two
    classes: one output (``classes_[1]`` is +1). K ≥ 3 classes: one joint model of K
    outputs in one run, the multinomial logistic loss for ``"logistic"`` (per-example
    gradient (softmax(z) − e_y)x̃ᵀ of norm < √2·G, whatever K) and the K binary losses
    summed one-vs-rest otherwise (norm ≤ √K·sup|ℓ'|·G); the noise is calibrated to that
    bound and the budget is spent once (:ref:`derivation_cyclic_multiclass`).

    Every row is scaled into ‖x‖₂ ≤ ``norm_bound`` (contribution bounding, never
    rejection); the same public scaling is applied by ``predict``, so the model is
    x ↦ ⟨w, s(x)⟩ + b with s(x) = x·min(1, R/‖x‖₂). The curvature constants (m, M) and
    the gradient bound that the accountant needs are computed from ``norm_bound`` and
    the loss, never read from the data.

    **Privacy guarantee.** *Protected:* each row (x_i, y_i) of the training set; the
    released output is the fitted model (``coef_``, ``intercept_``) together with the
    attributes computed from public quantities only (``classes_`` when declared,
    ``n_steps_``, ``noise_multiplier_``, ``accounting_``, ...). *Neighbouring
    relation:* neighbours differ by the replacement of one row (n, d, the declared
    ``classes`` and every hyperparameter are public). *Theorem:* each step releases the clipped gradient sum
    of its batch (ℓ2 sensitivity 2C under replacement, C = ``clip_norm_``: the whole
    K × p gradient for a multiclass model) rounded to a grid plus exact discrete
    Gaussian noise, a discrete Gaussian mechanism (Canonne, Kamath and Steinke 2020,
    "The discrete Gaussian for differential privacy", Theorem 14; the rounding charged
    in the noise scale, :ref:`derivation_exact_sampling`); a row is read by at most
    ``accounting_["max_uses"]`` steps, which compose (Mironov 2017, "Rényi
    differential privacy", Proposition 1), and the iterates are post-processing
    (:ref:`derivation_last_iterate`, "Why composition is the default"; lazy noise on
    CSR input keeps the same bound, and so does the scaled release that CSR fits with
    ``penalty="l2"`` run, whose noise on the coefficients is up to
    1/``accounting_["scale_floor"]`` times larger, :ref:`derivation_lazy_noise`). The
    Rényi curve is
    converted to (ε, δ) at ``delta`` (Balle et al. 2020, "Hypothesis testing
    interpretations and Rényi differential privacy", Theorem 21): ``privacy_spent_``,
    at most ``epsilon`` when calibrated. *Assumptions:* the noise comes from the
    operating system's randomness (a known ``random_state`` voids the guarantee); the
    pass order is the data order or a secret permutation (the bound holds for every
    fixed order, hence for the mixture). *Not covered:* a ``classes=None`` fit reveals
    the label set (a :class:`~skdpsparse.exceptions.PrivacyLeakWarning` says so);
    input refused before fitting (NaN, an undeclared label) raises, as every
    validation error does (user guide, "Validation errors"); timing; every further
    fit (a grid search over k settings spends k budgets). The last-iterate bounds of
    Kong and Ribero (2024, Theorems 4.4 and 4.5), smaller for many passes, are not
    claimed: their shift-reduction argument needs continuous noise, and a grid
    distribution cannot absorb a real shift.

    Parameters
    ----------
    loss : {"logistic", "smoothed_hinge", "sigmoid", "squared", "huber"}, \
default="logistic"
        f in Kong and Ribero (2024) eq. (1), ℓ(⟨θ, x̃⟩, y) with x̃ = (x, 1) when fitting an
        intercept.
    epsilon : float, default=1.0
        Target ε > 0, used when ``noise_multiplier`` is None.
    delta : float, default=1e-6
        δ in (0, 1).
    penalty : {"l2", "l1", "elasticnet"} or None, default="l2"
        The nonsmooth part h on the coefficients (never the intercept), applied by
        its proximal map after every step: α‖w‖₁, (α/2)‖w‖² or
        α(ρ‖w‖₁ + (1−ρ)/2‖w‖²), as in :class:`~sklearn.linear_model.SGDClassifier`.
    alpha : float, default=1e-4
        α ≥ 0.
    l1_ratio : float, default=0.15
        ρ in [0, 1] for ``"elasticnet"``.
    fit_intercept : bool, default=True
        Learn b as the coefficient of a constant feature 1; it shares the clipping and
        the noise, and the feature bound becomes G = √(R² + 1).
    norm_bound : float, default=1.0
        R > 0: rows with ‖x‖₂ > R are scaled down to norm R. M, m and the gradient
        bound are computed from G (R, or √(R² + 1) with an intercept): logistic
        M = G²/4, m = 0; smoothed hinge of width h M = G²/h, m = 0; sigmoid
        m = M = G²/(6√3); squared and huber M = G², m = 0; with K ≥ 3 classes,
        multinomial logistic M = G²/2, the others as for two classes.
    clip_norm : float or "auto", default="auto"
        C > 0. ``"auto"``: the largest possible gradient norm sup|ℓ'|·G (G, G/4 and
        δG for logistic / smoothed hinge, sigmoid and huber; √2·G for the multinomial
        logistic loss and √K times the binary bound for the other losses with K ≥ 3
        classes), so clipping never binds; G for the squared loss, whose gradients
        are unbounded.
    batch_size : int or "auto", default="auto"
        b ≥ 1; capped at n (public). ``"auto"`` (with ``epochs="auto"``): full
        batches, b = n, for the T steps whose noise on a margin of the last iterate
        has std 0.35 (logit units for a classifier, target units for a regressor),
        T = 0.35·n·√(ρ/2)/(λCG) with ρ the zCDP of (ε, δ) (Bun and Steinke 2016,
        "Concentrated differential privacy", Proposition 1.3), and E = T; if that is
        more than 200 passes, E = 200 and b = ⌈E·n/T⌉ for the T whose noise is 0.35
        at E = 200; T is at least 40/(λCG). Public numbers only (n, ε, δ or the
        given z, the loss, ``norm_bound``, the step and clip): :func:`auto_schedule`
        derives it. Why: accounted by composition, a record read E times needs
        z ∝ √E, so after T steps of batches of b = E·n/T the noise on a margin has
        std λCG·z·√T/b ∝ T^{3/2}/√E: at a fixed T full batches have the least, and
        then noise and the distance a margin can travel (λCG per step) both grow
        like T, so T is where the noise reaches a fixed size. With a given
        ``epochs``: the T whose noise is 0.35 at that E (b = ⌈E·n/T⌉).
        Measured on the validation splits of ``benchmarks/bench_real_data.py``
        (issue 18): the former default (E = 20, T = 100 or 400) lost 3–8 points on
        text at ε ≤ 2 to full batches of 50–100 steps, and ratings needed 600–3400
        steps at ε = 0.5–8. Targets far from unit scale (the clip of the squared
        loss, C = G, treats a residual of 1 as large) need more steps than the rule
        gives: scale them.
    learning_rate : float or "auto", default="auto"
        λ > 0. ``"auto"``: 1/(M + m), the largest step for which eq. (12) holds (the
        clipping-safe Theorem 4.5 bound holds for every λ).
    epochs : int or "auto", default="auto"
        E passes: T = ⌈E·n/b⌉ steps. ``"auto"``: see ``batch_size`` (E = T with full
        batches, at most 200); with a given ``batch_size``, the largest E ≤ 200
        whose noise on a margin has std at most 0.35 (at least 1).
    noise_multiplier : float or None, default=None
        z > 0 (noise N(0, z²C²I) on the sum of the clipped gradients of a batch).
        ``None``: the smallest z meeting (ε, δ), found by root finding. Given:
        ``epsilon`` is ignored and the ε reached is reported.
    weak_convexity, smoothness : float or None, default=None
        m and M of (A2), Kong and Ribero (2024) eq. (9). ``None``: computed as above. A declared
        value below the computed one is refused with a ``ValueError`` (it is false for
        some possible record and would void the guarantee); a larger one is used as
        declared (valid, and looser for the clipping-safe bound).
    radius : float or None, default=None
        h also contains the indicator of {‖(w, b)‖₂ ≤ r}: iterates stay in a ball of
        diameter 2r, which enables Theorem 4.4 (eq. (20)).
    box : (float, float) or None, default=None
        h also contains the indicator of [l, u]^p over (w, b): diameter (u − l)√p.
        At most one of ``radius`` and ``box``.
    smoothing : float, default=1.0
        Width h > 0 of the smoothed hinge (``loss="smoothed_hinge"``); ignored
        otherwise.

        .. versionadded:: 0.1
    huber_threshold : float, default=1.0
        Threshold δ > 0 of the Huber loss (``loss="huber"``); ignored otherwise.

        .. versionadded:: 0.1
    classes : array-like of at least 2 labels or None, default=None
        The labels of a classifier, declared (three or more make the multiclass
        model). ``None`` reads them from ``y``, which reveals which labels occur (a
        :class:`~skdpsparse.exceptions.PrivacyLeakWarning` is issued). A label of ``y``
        that is not declared is a ``ValueError`` naming ``classes`` (user guide,
        "Validation errors").
    shuffle : bool, default=True
        Visit the rows in one secret random order (the same in every pass) rather
        than the data order; the guarantee holds for every order. Never stored.
    verbose : bool or int, default=0
        ``True`` or ≥ 1 prints one line per pass, ``[DPCyclicSGD] epoch 3/20: 5 noisy
        steps, 0.84 s``: the plan's step count and the elapsed time, nothing
        data-dependent.
    random_state : None, int or numpy.random.Generator, default=None
        ``None`` draws fresh noise from the operating system. A fixed seed makes the
        noise known to whoever knows the seed: use it for tests and reports only.
    loss_param : float, default="deprecated"
        The former name of ``smoothing`` and ``huber_threshold``.

        .. deprecated:: 0.1
           ``loss_param`` was split into ``smoothing`` and ``huber_threshold`` in 0.1
           and will be removed in 0.2; setting it warns (``FutureWarning``) and is
           used as the loss's parameter.

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features) (classifier), \
(n_features,) (regressor)
        One row per class for three or more classes.
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray of shape (n_classes,)
        Classifiers only.
    n_iter_ : int
        Passes over the data (E).
    n_steps_ : int
        Noisy steps T.
    batch_size_, learning_rate_, clip_norm_ : int, float, float
        The b, λ and C used (after capping / ``"auto"``).
    noise_multiplier_ : float
        z used; the displacement noise std is ``accounting_["noise_std"]`` = λzC/b.
    privacy_spent_ : ApproxDP
        (ε, δ) at the requested δ; never above the target when calibrated.
    accounting_ : dict
        ``accounting`` (``"composition"``), ``bound`` (the bound's name, one of
        :data:`~skdpsparse.accounting.LAST_ITERATE_BOUNDS`), ``order``, ``epsilons``
        (ε of every bound computed), ``weak_convexity``, ``smoothness``,
        ``gradient_bound``, ``clipping_can_bind``, ``domain_diameter``, ``n_steps``,
        ``max_uses``, ``noise_std`` and ``scale_floor`` (1.0: the eager release; below 1
        on CSR input with ``penalty="l2"``: the scaled release's s_min, see
        :ref:`derivation_lazy_noise`).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has string feature names.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from skdpsparse.linear_model import DPCyclicSGD
    >>> X, y = make_classification(20000, 10, class_sep=2.0, random_state=0)
    >>> clf = DPCyclicSGD(epsilon=1.0, norm_bound=3.0, classes=[0, 1],
    ...                   random_state=0).fit(X, y)
    >>> clf.accounting_["bound"], bool(clf.privacy_spent_.epsilon <= 1.0)
    ('composition', True)
    >>> bool(clf.score(X, y) > 0.9)
    True

    Three classes, one multinomial model:

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y3 = rng.integers(0, 3, 6000)
    >>> X3 = 2.0 * np.eye(3, 5)[y3] + 0.3 * rng.standard_normal((6000, 5))
    >>> clf3 = DPCyclicSGD(epsilon=1.0, norm_bound=3.0, classes=[0, 1, 2],
    ...                    random_state=0).fit(X3, y3)
    >>> clf3.coef_.shape, clf3.predict_proba(X3[:2]).shape
    ((3, 5), (2, 3))
    >>> bool(clf3.score(X3, y3) > 0.9)
    True
    """

    _parameter_constraints = {
        "loss": [Options(*CLASSIFICATION_LOSSES, *REGRESSION_LOSSES)],
        "penalty": [Options(*PENALTIES), None],
        "alpha": [_NONNEGATIVE],
        "l1_ratio": [Interval("real", 0, 1, closed="both")],
        "fit_intercept": [_BOOL],
        "norm_bound": [_POSITIVE],
        "clip_norm": [Options("auto"), _POSITIVE],
        "batch_size": [Interval("integer", 1, None, closed="left"), Options("auto")],
        "learning_rate": [Options("auto"), _POSITIVE],
        "epochs": [Interval("integer", 1, None, closed="left"), Options("auto")],
        "epsilon": [_POSITIVE],
        "delta": [Interval("real", 0, 1, closed="neither")],
        "noise_multiplier": [_POSITIVE, None],
        "weak_convexity": [_NONNEGATIVE, None],
        "smoothness": [_NONNEGATIVE, None],
        "radius": [_POSITIVE, None],
        "box": [InstanceOf(tuple, list, description="a pair (lower, upper)"), None],
        "smoothing": [_POSITIVE],
        "huber_threshold": [_POSITIVE],
        "loss_param": [_POSITIVE, Options("deprecated")],
        "classes": [InstanceOf(list, tuple, np.ndarray, description="array-like"), None],
        "shuffle": [_BOOL],
        "verbose": VERBOSE_CONSTRAINT,
        # random_state is validated by fit_random_source.
    }

    def __init__(self, loss="logistic", *, epsilon=1.0, delta=1e-6, penalty="l2",
                 alpha=1e-4, l1_ratio=0.15, fit_intercept=True, norm_bound=1.0,
                 clip_norm="auto", batch_size="auto", learning_rate="auto", epochs="auto",
                 noise_multiplier=None, weak_convexity=None, smoothness=None, radius=None,
                 box=None, smoothing=1.0, huber_threshold=1.0, classes=None, shuffle=True,
                 verbose=0, random_state=None, loss_param="deprecated"):
        self.loss = loss
        self.penalty = penalty
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.norm_bound = norm_bound
        self.clip_norm = clip_norm
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.epochs = epochs
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.weak_convexity = weak_convexity
        self.smoothness = smoothness
        self.radius = radius
        self.box = box
        self.smoothing = smoothing
        self.huber_threshold = huber_threshold
        self.classes = classes
        self.shuffle = shuffle
        self.verbose = verbose
        self.random_state = random_state
        self.loss_param = loss_param

    def _is_classifier(self):
        return self.loss not in REGRESSION_LOSSES

    def _loss_param(self):
        """The loss's parameter: ``smoothing`` (smoothed hinge), ``huber_threshold``
        (Huber) or the deprecated ``loss_param``; 1.0 (unused) for the others."""
        if not (isinstance(self.loss_param, str) and self.loss_param == "deprecated"):
            # scikit-learn's deprecation of a renamed parameter: one release of warning.
            warnings.warn("The parameter 'loss_param' of DPCyclicSGD was split into "
                          "'smoothing' (smoothed_hinge) and 'huber_threshold' (huber) in "
                          "0.1 and will be removed in 0.2; its value is used as the "
                          "loss's parameter.", FutureWarning, stacklevel=3)
            return float(self.loss_param)
        return float({"smoothed_hinge": self.smoothing,
                      "huber": self.huber_threshold}.get(self.loss, 1.0))

    def _targets(self, y):
        """``classes_`` and the targets: ±1 (``classes_[1]`` is +1) for two classes,
        class indices for more (the multinomial or one-vs-rest model)."""
        classes = declared_classes(self, y)
        if classes.size == 2:
            return classes, np.where(y == classes[1], 1.0, -1.0)
        return classes, np.searchsorted(classes, y).astype(np.int64)

    def fit(self, X, y, **fit_params):
        """Run cyclic DP-SGD on ``(X, y)``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Sparse input stays sparse (CSR).
        y : array-like of shape (n_samples,)
            Labels (classification losses) or targets.
        **fit_params : dict
            Not supported: ``sample_weight`` (a weight changes the sensitivity the
            noise is calibrated to) and any other fit parameter raise
            :class:`~skdpsparse.exceptions.InvalidParameterError`.

        Returns
        -------
        self : DPCyclicSGD
        """
        check_fit_params(self, fit_params)
        if (fitted := distributed_fit(self, X, y)) is not None:  # Dask or Spark input
            return fitted
        validate_params(self, self._parameter_constraints)
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target "
                             "y is None.")
        loss_param = self._loss_param()
        classifier = self._is_classifier()
        # Nothing is set on self before release() has charged the budget.
        # Finiteness of X is checked by cyclic_sgd: on the dense one- and two-pass
        # path in the pass that reads the rows anyway (one read of X instead of two).
        (X, y), attrs = fit_input(self, X, y, y_numeric=not classifier,
                                  ensure_all_finite=False)
        n_outputs = 1
        if classifier:
            attrs["classes_"], targets = self._targets(y)
            n_outputs = 1 if attrs["classes_"].size == 2 else attrs["classes_"].size
        else:
            targets = np.asarray(y, dtype=np.float64)
        n, d = X.shape
        epochs, batch_size = self._schedule(n, n_outputs)
        plan = plan_cyclic_sgd(
            n, d, loss=self.loss, loss_param=loss_param, n_outputs=n_outputs,
            norm_bound=float(self.norm_bound), fit_intercept=bool(self.fit_intercept),
            batch_size=batch_size, epochs=epochs, delta=float(self.delta),
            epsilon=float(self.epsilon), noise_multiplier=self.noise_multiplier,
            learning_rate=self.learning_rate, clip_norm=self.clip_norm,
            weak_convexity=self.weak_convexity, smoothness=self.smoothness,
            penalty=self.penalty, alpha=float(self.alpha), l1_ratio=float(self.l1_ratio),
            radius=self.radius, box=None if self.box is None else tuple(self.box),
            # The input format is public: on CSR the ℓ2² penalty runs the scaled
            # release (lazy noise); dense fits keep the eager one, bit for bit.
            scale_floor="auto" if sp.issparse(X) else 1.0)
        rng = fit_random_source(self.random_state, self, X, targets)
        progress = Progress(self.verbose, type(self).__name__)
        coef, intercept = cyclic_sgd(X, targets, plan, rng,
                                     shuffle=bool(self.shuffle), verbose=progress)
        if n_outputs == 1:
            coef, intercept = (coef[None, :] if classifier else coef), np.array([intercept])
        attrs.update(
            coef_=coef, intercept_=intercept,
            n_iter_=plan.epochs, n_steps_=plan.n_steps, batch_size_=plan.batch_size,
            learning_rate_=plan.learning_rate, clip_norm_=plan.clip_norm,
            noise_multiplier_=plan.noise_multiplier, privacy_spent_=plan.budget,
            accounting_=plan.accounting)
        # Charges first: a refused fit releases nothing (classes_ included) and leaves
        # the estimator unfitted; a regression refit drops a former classes_.
        return release(self, attrs)

    def _schedule(self, n, n_outputs=1):
        """(E, b) with "auto" resolved from public numbers only (see the ``batch_size``
        parameter): n, ε, δ (or the given z), the loss, ``norm_bound``,
        ``fit_intercept``, K and the step and clip the plan will use."""
        if self.epochs != "auto" and self.batch_size != "auto":
            return int(self.epochs), int(self.batch_size)
        g = feature_bound(float(self.norm_bound), bool(self.fit_intercept))
        lr, clip = default_step_and_clip(
            self.loss, self._loss_param(), g, n_outputs=n_outputs,
            learning_rate=self.learning_rate, clip_norm=self.clip_norm,
            weak_convexity=self.weak_convexity, smoothness=self.smoothness)
        return auto_schedule(
            n, reach=lr * clip * g, epsilon=float(self.epsilon), delta=float(self.delta),
            noise_multiplier=self.noise_multiplier,
            epochs=None if self.epochs == "auto" else int(self.epochs),
            batch_size=None if self.batch_size == "auto" else int(self.batch_size))

    def _margins(self, X):
        """⟨w_k, s(x)⟩ + b_k: shape (n_samples,) for one output, else (n_samples, K)."""
        check_is_fitted(self)
        X = bound_rows_l2(check_fit_input(self, X, reset=False), float(self.norm_bound))
        if self.coef_.ndim == 2 and self.coef_.shape[0] > 1:
            return np.asarray(X @ self.coef_.T, dtype=np.float64) + self.intercept_
        return np.asarray(X @ self.coef_.ravel(), dtype=np.float64) + self.intercept_[0]

    @available_if(_is_classifier)
    def decision_function(self, X):
        """Margins ⟨w, s(x)⟩ + b: positive for ``classes_[1]`` (two classes), one
        column per class (more).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
        """
        return self._margins(X)

    def predict(self, X):
        """Predicted labels (classifier) or values (regressor).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        scores = self._margins(X)
        if not self._is_classifier():
            return scores
        if scores.ndim == 2:
            return self.classes_[scores.argmax(axis=1)]
        return self.classes_[(scores > 0).astype(np.intp)]

    def _has_proba(self):
        return self.loss == "logistic"

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Class probabilities of the logistic model (``loss="logistic"`` only).

        Two classes: the sigmoid of the margin. More: the softmax of the K margins
        (the multinomial model that was fitted).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        scores = self._margins(X)
        if scores.ndim == 2:
            return softmax(scores, axis=1)
        p = expit(scores)
        return np.column_stack([1.0 - p, p])

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        return np.log(self.predict_proba(X))

    def score(self, X, y, sample_weight=None):
        """Accuracy (classifier) or R² (regressor) on ``(X, y)``.

        Post-processing of the released model; scores on held-out rows are not private
        in those rows, and a grid search over k settings spends k budgets.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        float
        """
        metric = accuracy_score if self._is_classifier() else r2_score
        return float(metric(y, self.predict(X), sample_weight=sample_weight))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.target_tags.required = True
        # The task follows the loss, per instance (poor_score: noise by design).
        if self._is_classifier():
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags(multi_class=True, poor_score=True)
        else:
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags(poor_score=True)
        return tags
