"""Linear models by noisy projected SGD over half the data (seed 001, Algorithm 1)."""

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from ..mechanisms.noisy_sgd import (
    lipschitz_constant,
    noisy_projected_sgd,
    noisy_sgd_privacy,
    paper_noise_std,
    paper_step_size,
    rdp_noise_multiplier,
)
from ..ledger import charge_budget
from ..utils import InstanceOf, Interval, Options, fit_random_source, validate_params
from ..utils._data import check_fit_input
from ._base import OneVsRestClassifierMixin, declared_classes, one_vs_rest_targets

_POSITIVE = Interval("real", 0, None, closed="neither")

_COMMON_CONSTRAINTS = {
    "epsilon": [_POSITIVE],
    "delta": [Interval("real", 0, 1, closed="neither")],
    "norm_bound": [_POSITIVE],
    "radius": [_POSITIVE],
    "fit_intercept": [InstanceOf(bool, np.bool_, description="bool")],
    "noise_calibration": [Options("paper", "rdp")],
    "learning_rate": [Options("paper"), _POSITIVE],
    "verbose": [Interval("integer", 0, None, closed="left")],
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
    noise_calibration : {"paper", "rdp"}, default="paper"
        ``"paper"``: σ = 8L√log(2/δ)/(√n ε) with seed 001 Remark 1's split
        δ = δ′ = δ̄/3, ε = ε̄/(8√log(1/δ′)) (Theorem 6; the per-step δ halved as in the
        notes §1.8 item 4). It is far more noise than needed outside tiny ε̄, and the
        RDP accounting then reports a much smaller ``privacy_spent_``. If neither
        accounting certifies (ε̄, δ̄) for that σ (large ε̄ with large n), ``fit`` raises.
        ``"rdp"``: the smallest σ whose RDP accounting meets (ε̄, δ̄).
    learning_rate : "paper" or float, default="paper"
        η. ``"paper"``: D/(√n (L + σ√p)), p = dim (w, b) (seed 001 Theorems 4 and 6).
    verbose : int, default=0
        ≥ 1 prints progress of each run (steps taken, fresh examples seen).
    random_state : None, int or numpy.random.Generator, default=None
        ``None`` draws fresh noise and indices from the operating system. A fixed seed
        makes both known to whoever knows it: for tests and reports only."""

_SHARED_ATTRS = """n_iter_ : {attr_n_iter}
    privacy_spent_ : ApproxDP
        (min(ε_paper, ε_rdp), δ̄).
    accounting_ : {{"paper", "rdp"}}
        Which accounting gave that ε.
    privacy_accounts_ : dict
        Both ε (``inf`` for the paper outside Theorem 6's regime).
    noise_std_ : float
        σ of ξ_t ~ N(0, σ²I).
    noise_multiplier_ : float
        σ/(2L).
    learning_rate_ : float
        η.
    lipschitz_ : float
        L, the gradient bound the noise is calibrated to.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has string feature names."""

_ALGORITHM_DOC = """Seed 001 (Arora, Marinov and Ullah 2020, "Private Stochastic Convex
    Optimization: Efficient Algorithms for Non-smooth Objectives"), Algorithm 1 as
    reconstructed in the recovered notes (``osmd_and_private_selection.md`` §1.2): draw
    indices uniformly *with replacement*; a fresh index gives a projected step with the
    noisy gradient, an index already seen a noise-only projected step; stop once ⌈n/2⌉
    distinct examples have been seen (about n·ln 2 steps, linear time); release the
    average of the iterates at which fresh examples were evaluated. The index sequence
    is never stored. Every derivation (L per loss, σ, η, both accountings) is in
    :mod:`skdpsparse.mechanisms.noisy_sgd`.

    Privacy unit: one row (replacement neighbours, n public). ``privacy_spent_`` is the
    smaller of two valid statements for the same run: seed 001 Theorem 6,
    (4ε(√log(1/δ′) + 2), δ + δ′ + 2e^{−n/16}) with Remark 1's split, only when
    n ≥ 16, ε ≤ 1/(2√n) and 2e^{−n/16} ≤ δ̄/3 (the notes' conservative reading,
    §1.8); and an RDP accountant: conditional on the (data-independent) pattern of
    fresh and stale steps, the j-th fresh step samples 1 of the n − j + 1 unseen rows
    (rate ≤ 2/n, notes §1.2 and §1.7), a subsampled Gaussian without replacement
    with replace-one sensitivity 2L, composed over exactly ⌈n/2⌉ fresh steps, so the
    random stopping time costs no extra δ. Both analyses treat the set of seen
    indices as fixed in each step, as the paper's proof does."""


class _BaseNoisySGD(BaseEstimator):
    """Shared fit logic: budget → σ, η; one run per target vector; accounting."""

    def _fit_runs(self, X, targets, loss, loss_param, label_bound):
        n, d = X.shape
        K = targets.shape[0]
        dim = d + 1 if self.fit_intercept else d
        eps, delta = float(self.epsilon), float(self.delta)
        lip = lipschitz_constant(loss, float(self.norm_bound), self.fit_intercept,
                                 radius=float(self.radius), label_bound=label_bound,
                                 loss_param=loss_param)
        # Everything below depends on (n, d, K, hyperparameters) only, not on the data.
        if self.noise_calibration == "paper":
            # K one-vs-rest runs share (ε̄, δ̄) by basic composition: ε̄/K, δ̄/K each.
            sigma = paper_noise_std(n, eps / K, delta / K, lip)  # seed 001 Thm 6, Rem. 1
            z = sigma / (2.0 * lip)
        else:
            z = rdp_noise_multiplier(n, eps, delta, K)  # sensitivity 2L, notes §1.7
            sigma = 2.0 * lip * z
        privacy = noisy_sgd_privacy(n, z, delta, K)
        if privacy.budget.epsilon > eps * (1.0 + 1e-9):
            raise ValueError(
                f"epsilon={self.epsilon!r}: with noise_calibration='paper' the noise of "
                f"seed 001 Theorem 6 is certified only to epsilon="
                f"{privacy.budget.epsilon:.4g} for n={n} (outside the theorem's regime "
                "eps <= 1/(2 sqrt(n)), and the RDP accounting gives more); use "
                "noise_calibration='rdp' or a smaller epsilon.")
        if self.learning_rate == "paper":
            eta = paper_step_size(n, float(self.radius), lip, sigma, dim)
        else:
            eta = float(self.learning_rate)
        rng = fit_random_source(self.random_state, self, X, targets)
        coef, intercept, n_iter = np.zeros((K, d)), np.zeros(K), np.zeros(K, dtype=np.int64)
        for k in range(K):
            name = type(self).__name__ + (f" run {k + 1}/{K}" if K > 1 else "")
            run = noisy_projected_sgd(
                X, targets[k], loss=loss, noise_std=sigma, step_size=eta,
                radius=float(self.radius), norm_bound=float(self.norm_bound),
                fit_intercept=self.fit_intercept, loss_param=loss_param,
                label_bound=label_bound, rng=rng, verbose=self.verbose, name=name)
            coef[k], intercept[k], n_iter[k] = run.coef, run.intercept, run.n_steps
        if self.verbose:
            print(f"[{type(self).__name__}] sigma={sigma:.4g}, eta={eta:.4g}, "
                  f"privacy spent {privacy.budget} ({privacy.accounting} accounting)")
        charge_budget(self, privacy.budget)  # may refuse: nothing is set before this line
        self.privacy_spent_ = privacy.budget
        self.accounting_ = privacy.accounting
        self.privacy_accounts_ = {"paper": privacy.epsilon_paper, "rdp": privacy.epsilon_rdp}
        self.noise_std_, self.noise_multiplier_ = sigma, z
        self.learning_rate_, self.lipschitz_ = eta, lip
        return coef, intercept, n_iter

    def _decision(self, X):
        check_is_fitted(self)
        X = check_fit_input(self, X, reset=False)
        return np.asarray(X @ np.atleast_2d(self.coef_).T, dtype=np.float64) + self.intercept_

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
    versus rest: K runs on all rows with independent randomness, composed (the paper
    budget gives each run (ε̄/K, δ̄/K); the RDP accounting composes the K curves).

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
        so). Rows with an undeclared label are negatives of every one-vs-rest run.

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
    ('rdp', True)
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
                 radius=1.0, fit_intercept=True, noise_calibration="paper",
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

    def fit(self, X, y):
        """Fit by noisy projected SGD (one run per one-vs-rest problem).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Sparse input stays sparse.
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : DPNoisySGDClassifier
        """
        validate_params(self, self._parameter_constraints)
        self._check_y(y)
        X, y = check_fit_input(self, X, y)
        classes = declared_classes(self, y)
        self.classes_ = classes
        targets = one_vs_rest_targets(y, classes)
        loss_param = float(self.smoothing) if self.loss == "smoothed_hinge" else 1.0
        self.coef_, self.intercept_, self.n_iter_ = self._fit_runs(
            X, targets, self.loss, loss_param, None)
        return self


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
    label_bound : float, default=1.0
        B (squared loss only; Huber needs no clipping).
    huber_threshold : float, default=1.0
        κ of the Huber loss.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    {attrs}

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsparse.linear_model import DPNoisySGDRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((4000, 5)) / np.sqrt(5)
    >>> y = X @ np.array([0.5, -0.5, 0.0, 0.0, 0.0])
    >>> reg = DPNoisySGDRegressor(epsilon=1.0, random_state=0).fit(X, y)
    >>> reg.coef_.shape, reg.privacy_spent_.epsilon <= 1.0
    ((5,), True)
    """.format(algorithm=_ALGORITHM_DOC, shared=_SHARED_DOC,
               attrs=_SHARED_ATTRS.format(attr_n_iter="int\n        Steps τ of the run "
                                          "(noise-only steps included)."))

    _parameter_constraints = {
        **_COMMON_CONSTRAINTS,
        "loss": [Options("squared", "huber")],
        "label_bound": [_POSITIVE],
        "huber_threshold": [_POSITIVE],
    }

    def __init__(self, loss="squared", *, epsilon=1.0, delta=1e-6, norm_bound=1.0,
                 radius=1.0, label_bound=1.0, huber_threshold=1.0, fit_intercept=True,
                 noise_calibration="paper", learning_rate="paper", verbose=0,
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

    def fit(self, X, y):
        """Fit by one run of noisy projected SGD.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Sparse input stays sparse.
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : DPNoisySGDRegressor
        """
        validate_params(self, self._parameter_constraints)
        self._check_y(y)
        X, y = check_fit_input(self, X, y, y_numeric=True)
        squared = self.loss == "squared"
        coef, intercept, n_iter = self._fit_runs(
            X, np.asarray(y, dtype=np.float64)[None, :], self.loss,
            1.0 if squared else float(self.huber_threshold),
            float(self.label_bound) if squared else None)
        self.coef_, self.intercept_, self.n_iter_ = coef[0], float(intercept[0]), int(n_iter[0])
        return self

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

