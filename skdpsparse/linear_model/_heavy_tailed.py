"""DPHeavyTailedRegressor: linear regression by private SCO with heavy-tailed gradients
(Kamath, Liu and Zhang 2022, Algorithms 1-2)."""

import warnings

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from ..mechanisms.heavy_tailed_sco import (ORACLES, plan_heavy_tailed_regression,
                                           run_heavy_tailed_regression,
                                           zero_model_bound_ratio, zero_model_rows_needed)
from ..utils import InstanceOf, Interval, Options, fit_random_source, validate_params
from ..base import check_fit_params, fit_input, release
from ..distributed import distributed_fit
from ..utils._data import check_fit_input
from ..utils._params import keyword_only_since
from ..utils._progress import VERBOSE_CONSTRAINT, Progress

_DEFAULT_RADIUS = 10.0  # used, with a warning, when radius is not declared
#: The order the parameters after ``loss`` took by position before 0.1 (keyword-only
#: since; passing them by position warns until 0.2).
_LEGACY_ORDER = ("epsilon", "delta", "mean_oracle", "alpha", "fit_intercept", "radius",
                 "max_iter", "learning_rate", "truncation", "moment", "moment_bound",
                 "gradient_bound", "smoothness", "huber_threshold", "failure_prob",
                 "smoothing_variance", "random_state", "huber_delta")


class DPHeavyTailedRegressor(RegressorMixin, BaseEstimator):
    """Linear regression under zCDP when gradients are heavy-tailed.

    Private stochastic convex optimization of Kamath, Liu and Zhang:
    projected gradient descent on the ℓ2 ball {‖(w, b)‖₂ ≤ D} whose gradient is a
    private heavy-tailed mean (:class:`~skdpsparse.mean.DPHeavyTailedMean`'s
    mechanisms) of the per-example gradients ℓ'(x·w + b, y)(x, 1). No bound on the
    features or labels is assumed: each coordinate of each per-example gradient is
    clipped (cwme) or soft-truncated (noise_smoothing) at the scale τ, which bounds
    one row's influence; rows are never rejected or rescaled.

    * ``alpha == 0`` (convex, Algorithm 2 with Theorems 5.2/5.5): T steps on all rows,
      each at ρ/T-zCDP, output the average iterate.
    * ``alpha > 0`` (strongly convex, Theorem 5.7): minimises the risk plus
      (α/2)‖w‖² (not the intercept) with T steps on disjoint batches of n // T rows,
      output the last iterate; each step gets the full ρ by parallel composition (the
      seed spends ρ/T, which is valid but needlessly noisy; proof in
      :mod:`skdpsparse.mechanisms.heavy_tailed_sco`).

    When it cannot beat the zero model. The theorems bound the excess risk over the
    ball {‖(w, b)‖₂ ≤ D} only: a population minimizer outside it (an intercept of
    about 22 with D = 10, the value used when ``radius`` is not declared, on the
    income task of the real-data benchmark) is out of reach at any n and ε, and the
    fit can then be worse than predicting a constant. The radius is a declared public
    number; ``fit`` warns (``UserWarning``, before reading the data) when it is left
    undeclared. Centring ``y`` by a public
    offset, or declaring D from what is known about the model, avoids it.

    Even inside the ball, the theory needs many rows. In the convex setting the
    excess-risk bound over the ball (Kamath, Liu and Zhang 2022, Theorem 3.1, which
    Theorems 5.2 and 5.5 instantiate: M R/√T + M α with M = 2D, α the oracle's error)
    is at least 2D R/√T + 2D σ√p, σ the per-coordinate noise of a step and p the
    columns (intercept included): only the noise's norm is counted in α. By
    convexity and ‖∇F(0)‖₂ ≤ R (``gradient_bound``), the zero model loses at most
    R·D to the best model in the ball; while the bound is not below R·D, the theorem
    does not promise a fit better than predicting 0. With the ``"auto"`` schedule,
    T grows with n until its cap of 1000 steps and σ√p stays near 0.9 R meanwhile
    (default moment constants),
    so the rows needed are those that reach the cap and then shrink the noise:
    :func:`~skdpsparse.mechanisms.heavy_tailed_sco.zero_model_rows_needed` gives n
    (and n·ε) at given ε, δ, d and constants, and ``fit`` warns (``UserWarning``,
    from these public numbers only, before the run) when n is below it, naming both
    n·ε. The real-data benchmark's tasks are far below (δ = 1e-6, D = 10, R = 1,
    defaults): income (GSS wages; n = 22 732 training rows, d = 616) needs n·ε ≈
    2.6·10⁶ at ε = 0.5, 1.8·10⁶ at ε = 1 and 9.1·10⁵ at ε = 8 (it has 1.1·10⁴ to
    1.8·10⁵), and measured R² −0.28 / −0.25 / −0.23 / −0.22 / −0.21 at ε = 0.5, 1,
    2, 4, 8 (5 seeds; the trivial baseline scores 0); ratings (MovieLens; n = 60 002,
    d = 9 737) needs n·ε ≈ 3.0·10⁷ at ε = 1 and 1.4·10⁷ at ε = 8, and measured R²
    −1.17 / −0.43 / −0.12 / −0.01 / 0.02. The criterion is necessary, not
    sufficient: it drops the truncation bias and the theorems' logarithmic factors,
    takes Theorem 3.1 in the form above (constant 1), holds only under the declared R
    (income's mean of 22 already breaks R = 1 at w = 0), and compares with the zero
    model, not the best constant. It covers the convex setting (``alpha == 0``) only.

    **Privacy guarantee.** Protected: one row (x, y), under replacement neighbours
    (n, d and the hyperparameters are public). The fit is ρ-zCDP, with ρ the largest
    value whose conversion (Canonne, Kamath and Steinke 2020, "The discrete Gaussian
    for differential privacy", Corollary 13) gives the requested (ε, δ)-DP. Each step
    is a private mean of the per-example gradients whose sensitivity comes from the
    truncation τ alone (Kamath, Liu and Zhang 2022, "Improved rates for differentially
    private stochastic convex optimization with heavy-tailed data", Algorithms 3 and
    4, with the noise-smoothing sensitivity corrected in
    :ref:`derivation_sensitivities`), with discrete Gaussian noise (Canonne, Kamath
    and Steinke 2020, Theorem 14). Convex setting: T steps on all rows at ρ/T each,
    composed additively (Bun and Steinke 2016, Lemma 2.3; Kamath et al. 2022, Lemma
    5.1). Strongly convex setting: disjoint batches of a secret random permutation,
    each step at the full ρ (parallel composition; proof in
    :mod:`skdpsparse.mechanisms.heavy_tailed_sco`). Assumptions: none on the data for
    privacy: every coordinate of every per-example gradient is clipped (cwme) or
    soft-truncated (noise_smoothing) at τ, which is computed from n, d, ρ and the
    declared constants only (the moment assumptions enter the accuracy, not the
    guarantee); entries beyond ±1e150 are capped (a fixed map per row); the noise is
    exact (:ref:`derivation_exact_sampling`) and drawn from a secret key
    (``random_state=None``). Not covered: the noise when ``random_state`` is fixed;
    the fit's duration.

    Parameters
    ----------
    loss : {"squared", "huber"}, default="squared"
        ½(z − y)², or Huber with threshold ``huber_threshold`` (bounded derivative in the
        residual; the features can still be heavy-tailed).
    epsilon : float, default=1.0
        ε > 0.
    delta : float, default=1e-6
        δ in (0, 1): the SCO of Kamath, Liu and Zhang (2022) is stated under zCDP (Gaussian noise).
    mean_oracle : {"cwme", "noise_smoothing"}, default="noise_smoothing"
        The private mean of the gradients: coordinate-wise trimmed median of means
        (Algorithm 3) or the noise-smoothing mean (Algorithm 4). At the theorems'
        parameters the noise-smoothing oracle is much less noisy (no factor of the
        number of groups in its sensitivity), hence the default.
    alpha : float, default=0.0
        Ridge weight λ of the strongly convex setting; 0 for the convex setting.
    fit_intercept : bool, default=True
        Add a constant feature (its coordinate is in the ball and is clipped like the
        others, but not penalised by ``alpha``).
    radius : float or None, default=None
        D in (0, 1e100]: the parameter vector (w, b) stays in the ℓ2 ball of radius D (the
        domain 𝒲 of diameter M = 2D of the theorems), intercept included. Choose it
        from what you know about the model, not from the data. ``None``: D = 10 with a
        ``UserWarning`` before the data are read (see "When it cannot beat the zero
        model" above).
    max_iter : "auto" or int, default="auto"
        T. ``"auto"``: the theorems' T (5.2 or 5.5 for the convex setting, 5.7 for
        the strongly convex one), rounded up and capped at 1000 steps (and at n for
        disjoint batches); the step size is computed for the T used.
    learning_rate : "auto" or float, default="auto"
        η. ``"auto"``: M/(R√T) (convex; Theorem 3.1's choice) or 1/(λ + L) (strongly
        convex; Theorem 3.2).
    truncation : "auto" or float, default="auto"
        τ of the mean oracle. ``"auto"``: Theorem 5.2's (√ρ n/(M d^{3/2}))^{1/k}
        (cwme), 5.5's (√ρ n/(M d^q))^{1/2} (noise_smoothing, q minimising its bound),
        or Corollary 4.2 for one step of the strongly convex setting; times γ^{1/k}.
        Here d counts the intercept.
    moment : float, default=2
        k: the gradients' coordinates have bounded k-th moments (Assumption 2.12.5).
    moment_bound : float, default=1.0
        γ: the bound on those moments (the theorems take γ = 1).
    gradient_bound : float, default=1.0
        R: ‖E∇ℓ(w, x)‖₂ ≤ R on 𝒲 (Assumption 2.12.6); enters T and η.
    smoothness : float, default=1.0
        L: the loss is L-smooth (Assumption 2.12.2); enters the strongly convex T
        and η only.
    huber_threshold : float, default=1.0
        Threshold of the Huber loss (the same name as in
        :class:`~skdpsparse.linear_model.DPNoisySGDRegressor` and
        :class:`~skdpsparse.linear_model.DPBiasReducedSGDRegressor`).
    failure_prob : float, default=0.1
        β: cwme uses ⌈4 log(2d/β)⌉ groups, rounded up to an even number.
    smoothing_variance : float, default=1.0
        c of the noise-smoothing oracle.
    verbose : bool or int, default=0
        ``True``/``1``: progress lines in the one format of the package
        (``[DPHeavyTailedRegressor] step 100/1000``): the plan (T, the setting, the
        oracle, η and τ, all computed from n, d, ρ and the declared constants before
        the data are read), a line every T/10 steps (every step at ``2``), and the
        budget once the model is released. Only public numbers: no loss, no gradient,
        no elapsed time, so a verbose fit prints the same text for any two datasets of
        the same shape.
    random_state : None, int or numpy.random.Generator, default=None
        ``None`` draws fresh noise from the operating system. A fixed seed makes the
        noise known to whoever knows the seed: use it for tests and reports only.
    huber_delta : float, default="deprecated"
        The former name of ``huber_threshold``.

        .. deprecated:: 0.1
           ``huber_delta`` was renamed ``huber_threshold`` in 0.1 and will be removed
           in 0.2; setting it warns (``FutureWarning``) and is used as
           ``huber_threshold``.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    n_iter_ : int
        T, the number of private gradient steps.
    learning_rate_ : float
    truncation_ : float
    setting_ : {"convex", "strongly_convex"}
    noise_scale_ : float
        σ of the Gaussian noise added to each gradient coordinate at each step.
    privacy_spent_ : ZCDP
        The total ρ.
    approx_dp_spent_ : ApproxDP
        The (ε, δ)-DP guarantee ρ implies at the requested δ.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has string feature names.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsparse.linear_model import DPHeavyTailedRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_t(5, size=(20000, 3))
    >>> y = X @ np.array([0.5, -0.3, 0.2]) + rng.standard_t(3, size=20000)
    >>> reg = DPHeavyTailedRegressor(radius=10.0, random_state=0).fit(X, y)
    >>> reg.coef_.shape, reg.setting_
    ((3,), 'convex')
    """

    _parameter_constraints = {
        "loss": [Options("squared", "huber")],
        "epsilon": [Interval("real", 0, None, closed="neither")],
        "delta": [Interval("real", 0, 1, closed="neither")],
        "mean_oracle": [Options(*ORACLES)],
        "alpha": [Interval("real", 0, None, closed="left")],
        "fit_intercept": [InstanceOf(bool, np.bool_, description="bool")],
        "radius": [Interval("real", 0, 1e100, closed="right"), None],
        "max_iter": [Options("auto"), Interval("integer", 1, None, closed="left")],
        "learning_rate": [Options("auto"), Interval("real", 0, None, closed="neither")],
        "truncation": [Options("auto"), Interval("real", 0, None, closed="neither")],
        "moment": [Interval("real", 1, None, closed="neither")],
        "moment_bound": [Interval("real", 0, None, closed="neither")],
        "gradient_bound": [Interval("real", 0, None, closed="neither")],
        "smoothness": [Interval("real", 0, None, closed="neither")],
        "huber_threshold": [Interval("real", 0, None, closed="neither")],
        "huber_delta": [Interval("real", 0, None, closed="neither"), Options("deprecated")],
        "failure_prob": [Interval("real", 0, 1, closed="neither")],
        "smoothing_variance": [Interval("real", 0, None, closed="left")],
        "verbose": VERBOSE_CONSTRAINT,
    }

    @keyword_only_since("0.2", _LEGACY_ORDER)
    def __init__(self, loss="squared", *, epsilon=1.0, delta=1e-6,
                 mean_oracle="noise_smoothing", alpha=0.0, fit_intercept=True, radius=None,
                 max_iter="auto", learning_rate="auto", truncation="auto", moment=2,
                 moment_bound=1.0, gradient_bound=1.0, smoothness=1.0, huber_threshold=1.0,
                 failure_prob=0.1, smoothing_variance=1.0, verbose=0, random_state=None,
                 huber_delta="deprecated"):
        self.loss = loss
        self.epsilon = epsilon
        self.delta = delta
        self.mean_oracle = mean_oracle
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.radius = radius
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.truncation = truncation
        self.moment = moment
        self.moment_bound = moment_bound
        self.gradient_bound = gradient_bound
        self.smoothness = smoothness
        self.huber_threshold = huber_threshold
        self.failure_prob = failure_prob
        self.smoothing_variance = smoothing_variance
        self.verbose = verbose
        self.random_state = random_state
        self.huber_delta = huber_delta

    def fit(self, X, y, **fit_params):
        """Fit the private linear model.

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
        self : DPHeavyTailedRegressor
        """
        check_fit_params(self, fit_params)
        if (fitted := distributed_fit(self, X, y)) is not None:  # Dask or Spark input
            return fitted
        validate_params(self, self._parameter_constraints)
        huber_threshold, radius = self._huber_threshold(), self._radius()
        if self.mean_oracle == "noise_smoothing" and self.moment < 2:
            raise ValueError("mean_oracle='noise_smoothing' needs a bound on a moment of "
                             f"order k >= 2, got moment={self.moment!r}.")
        (X, y), input_attrs = fit_input(self, X, y, supervised=True, y_numeric=True)
        y = np.asarray(y, dtype=np.float64)
        n, d = X.shape
        # Plan from public numbers only: T, η, τ and every step's noise come from n, d,
        # (ε, δ) and the declared constants, before the data are read.
        plan = plan_heavy_tailed_regression(
            n, d, epsilon=self.epsilon, delta=self.delta, radius=radius, loss=self.loss,
            huber_threshold=huber_threshold, oracle=self.mean_oracle, alpha=self.alpha,
            fit_intercept=self.fit_intercept, max_iter=self.max_iter,
            learning_rate=self.learning_rate, truncation=self.truncation,
            moment=self.moment, moment_bound=self.moment_bound,
            gradient_bound=self.gradient_bound, smoothness=self.smoothness,
            failure_prob=self.failure_prob, smoothing_variance=self.smoothing_variance)
        T, eta, tau, rho = plan.n_iter, plan.learning_rate, plan.truncation, plan.rho
        if plan.setting == "convex":
            self._warn_if_theory_cannot_beat_zero(plan, n, d, radius, huber_threshold)
        progress = Progress(self.verbose, type(self).__name__)
        progress.report("plan", detail=f"{T} steps, {plan.setting} setting, "
                        f"{self.mean_oracle} oracle, learning rate {eta:.4g}, truncation "
                        f"{tau:.4g}, rho={rho:.4g}", seconds=False)
        every = max(1, T // 10)

        def report(t, w):  # the step count only, never the iterate w
            progress.report("step", t + 1, T, level=1 if (t + 1) % every == 0 else 2,
                            seconds=False)

        # The run draws the secret row order, then the noise of every step.
        rng = fit_random_source(self.random_state, self, X, y)
        coef, intercept, info = run_heavy_tailed_regression(
            X, y, plan, rng, callback=report if progress else None)
        budget = plan.budget
        # Charges first: a refused fit releases nothing and leaves the estimator unfitted.
        release(self, dict(
            input_attrs, coef_=coef, intercept_=intercept, n_iter_=T, learning_rate_=eta,
            truncation_=tau, setting_=plan.setting, noise_scale_=float(info["noise_scale"]),
            privacy_spent_=budget, approx_dp_spent_=budget.to_approx_dp(float(self.delta))))
        progress.report("done", detail=f"released, privacy spent {budget} "
                        f"({self.approx_dp_spent_})", seconds=False)
        return self

    def _warn_if_theory_cannot_beat_zero(self, plan, n, d, radius, huber_threshold):
        """Warn (UserWarning, from the plan and the declared constants only: the same
        text for every dataset of this shape) when the convex setting's excess-risk
        bound is not below R·D, what the zero model can lose to the best model in the
        ball, naming the n·ε at which it would be
        (:func:`~skdpsparse.mechanisms.heavy_tailed_sco.zero_model_bound_ratio`)."""
        R = float(self.gradient_bound)
        ratio = zero_model_bound_ratio(plan, R)
        if ratio < 1.0:
            return
        needed = zero_model_rows_needed(
            d, epsilon=self.epsilon, delta=self.delta, radius=radius, gradient_bound=R,
            loss=self.loss, huber_threshold=huber_threshold, oracle=self.mean_oracle,
            fit_intercept=self.fit_intercept, max_iter=self.max_iter,
            learning_rate=self.learning_rate, truncation=self.truncation,
            moment=self.moment, moment_bound=self.moment_bound,
            smoothness=self.smoothness, failure_prob=self.failure_prob,
            smoothing_variance=self.smoothing_variance)
        eps = float(self.epsilon)
        where = (f"The bound falls below R*D from n*epsilon = {needed * eps:.3g} (n = "
                 f"{needed:.0f} rows at this epsilon)." if np.isfinite(needed) else
                 "The bound stays above R*D for every n up to 1e15 at this epsilon "
                 "(a fixed max_iter of few steps keeps 2/sqrt(T) large).")
        warnings.warn(
            f"DPHeavyTailedRegressor: at n*epsilon = {n * eps:.3g} (n = {n}, d = {d}, "
            f"epsilon = {eps:g}, delta = {float(self.delta):g}, radius D = {radius:g}, "
            f"gradient_bound R = {R:g}) the excess-risk bound of Kamath, Liu and Zhang "
            "(2022, Theorem 3.1 with the noise of Theorems 5.2/5.5's oracle) is "
            f"{ratio:.3g} times R*D, the most the zero model can lose to the best model "
            "in the ball: the theory does not promise a fit better than predicting 0 "
            "(on the real-data benchmark this estimator is below the trivial baseline: "
            "income R^2 -0.28 to -0.21, ratings -1.17 to 0.02 at epsilon 0.5 to 8). "
            f"{where}", UserWarning, stacklevel=3)

    def _huber_threshold(self):
        """``huber_threshold``, or the deprecated ``huber_delta`` when set (with a
        FutureWarning: scikit-learn's deprecation of a renamed parameter, one release)."""
        if isinstance(self.huber_delta, str) and self.huber_delta == "deprecated":
            return float(self.huber_threshold)
        warnings.warn("The parameter 'huber_delta' of DPHeavyTailedRegressor was "
                      "renamed 'huber_threshold' in 0.1 and will be removed in 0.2; "
                      "its value is used as huber_threshold.", FutureWarning,
                      stacklevel=3)
        return float(self.huber_delta)

    def _radius(self):
        """D: the declared radius, or 10 with a warning from the parameters only,
        before the data are read (never from the data)."""
        if self.radius is not None:
            return float(self.radius)
        warnings.warn(
            "DPHeavyTailedRegressor: radius was not declared, so the parameters "
            f"(w, b) are kept in the l2 ball of radius {_DEFAULT_RADIUS:g}. The "
            "guarantees of Kamath, Liu and Zhang (2022) on the excess risk need the "
            "population minimizer inside that ball, intercept included: a model "
            f"with ||(w, b)|| > {_DEFAULT_RADIUS:g} (targets whose mean is far from "
            "0, say) cannot be fit and may do worse than predicting a constant. "
            "Declare radius from public knowledge of the model (the scale of y), "
            "or centre y by a public offset.", UserWarning, stacklevel=3)
        return _DEFAULT_RADIUS

    def predict(self, X):
        """Predict with the private linear model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        X = check_fit_input(self, X, reset=False)
        # In float64 (float32 coef_ times an extreme float32 row would overflow).
        return np.asarray(X @ self.coef_.astype(np.float64)).ravel() + self.intercept_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.regressor_tags.poor_score = True  # private fits on tiny test data
        return tags
