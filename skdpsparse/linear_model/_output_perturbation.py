"""Private linear models by output perturbation (Ghazi et al. 2024, Section 5, Algorithms 3-4)."""

import contextlib
import math
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from ..mechanisms.output_perturbation import (centred_interval, output_perturbation,
                                              plan_output_perturbation)
from ..mechanisms.sparse_exponential import (MAX_NET_SIZE, plan_sparse_exponential,
                                             sparse_exponential)
from ..utils import InstanceOf, Interval, Options, fit_random_source, validate_params
from ..accounting import PureDP
from ..base import check_fit_params, fit_input, release
from ..ledger import charge_budget
from ..distributed import distributed_fit
from ..utils._data import check_fit_input
from ..utils._progress import VERBOSE_CONSTRAINT, Progress
from ..utils._data import declared_classes
from ._base import (OneVsRestClassifierMixin, compose_with_bounds,
                    one_vs_rest_targets, private_bound, row_l2_norms)

_POSITIVE = Interval("real", 0, None, closed="neither")

_COMMON_CONSTRAINTS = {
    "epsilon": [_POSITIVE],
    "delta": [Interval("real", 0, 1, closed="left"), None],
    "alpha": [_POSITIVE, Options("auto", "theorem")],
    "objective": [Options("erm", "population")],
    "method": [Options("output_perturbation", "exponential")],
    "fit_intercept": [InstanceOf(bool, np.bool_, description="bool")],
    "intercept_scaling": [_POSITIVE, Options("auto")],
    "norm_bound": [_POSITIVE, Options("private")],
    "bound_fraction": [Interval("real", 0, 1, closed="neither")],
    "sparsity": [Interval("integer", 1, None, closed="left"), None],
    "radius": [_POSITIVE, None],
    "calibration": [Options("analytic", "classic")],
    "tol": [_POSITIVE, Options("auto")],
    "solver_max_iter": [Interval("integer", 1, None, closed="left")],
    "tau": [_POSITIVE, Options("auto")],
    "max_net_size": [Interval("integer", 1, None, closed="left")],
    "verbose": VERBOSE_CONSTRAINT,
    # random_state is validated by fit_random_source.
}

_PRIVACY_DOC = """**Privacy guarantee.** Protected: one row (x, y), under replacement
    neighbours (n, d, the hyperparameters and the declared bounds are public).
    ``method="output_perturbation"``: (ε, δ)-DP with δ > 0 by the discrete Gaussian
    mechanism for the minimizer's ℓ2 sensitivity (1 + tol)·2L/(λn) (√K times that for
    K one-vs-rest models released jointly), ε-DP with δ = 0 by the discrete Laplace
    mechanism for its ℓ1 sensitivity (Ghazi et al. 2024, Theorem 5.1, with the
    constants corrected in :ref:`derivation_sensitivities`, "Output perturbation:
    the regularized minimizer"; Canonne, Kamath and Steinke 2020, "The discrete
    Gaussian for differential privacy", Theorem 14; Dwork and Roth 2014, Theorem
    3.6); the ℓ∞ projection is post-processing. ``method="exponential"``: ε-DP by the
    exponential mechanism over a public net (McSherry and Talwar 2007; Dwork and Roth
    2014, Theorem 3.10; K classes at ε/K each). ``norm_bound`` or ``label_bound`` set to
    ``"private"``: private quantiles at ``bound_fraction``·ε, added by basic
    composition (Dwork and Roth 2014, Theorem 3.16). Assumptions: every row is scaled
    into {‖x‖₂ ≤ R, ‖x‖₁ ≤ √s·R} and every target clipped into [−B, B] before use; λ, the intercept
    scaling and every other default come from n, d, s, ε, δ and the declared bounds
    only; the released minimizer is within tol·Δ/2 of the exact one, certified by
    strong convexity from a residual, or, when the adaptive solvers end without
    that certificate, by the analysis of projected gradient descent run for a
    public number of steps (:ref:`derivation_sensitivities`, "The solver's
    fallback"; Nesterov 2004, Theorem 2.1.12), so whether a fit completes does not
    depend on the data, and tol itself comes from public numbers; the noise is exact
    (:ref:`derivation_exact_sampling`) and drawn from a
    secret key (``random_state=None``). Not covered: the label set of a classifier
    fitted with ``classes=None`` (a :class:`~skdpsparse.exceptions.PrivacyLeakWarning`
    says so); the noise when ``random_state`` is fixed; the fit's duration (the
    solver's iteration count depends on the data and is not exposed)."""


_SHARED_DOC = """epsilon : float, default=1.0
        Privacy loss ε > 0.
    delta : float or None, default=1e-6
        δ in [0, 1). δ > 0: Gaussian noise for the ℓ2 sensitivity, (ε, δ)-DP. ``0`` or
        ``None``: Laplace noise for Theorem 5.1's ℓ1 sensitivity, ε-DP (smooth losses
        and ``radius=None`` only; otherwise use ``method="exponential"``).
    alpha : float, "auto" or "theorem", default="auto"
        λ of the objective mean loss + (λ/2)‖θ‖² (scikit-learn's ``Ridge`` alpha is
        n·λ). ``"auto"``: the smallest λ ≥ 1/n (scikit-learn's ``C=1``) at which the
        noise moves the margin of a bounded row by at most 0.1 (classification) or
        0.05·B (regression) in standard deviation
        (:func:`~skdpsparse.mechanisms.output_perturbation.choose_alpha_noise`): λ
        falls like 1/(εn), so accuracy rises with ε towards the non-private model.
        ``"theorem"``: Theorem 5.1 or 5.6 (``objective``), which minimizes a
        worst-case bound and regularizes much harder (flat in ε on real data). Both
        use n, d, s, ε, δ and the declared bounds only (n and d are public under
        replacement neighbours).
    objective : {"erm", "population"}, default="erm"
        Which risk ``alpha="theorem"`` targets: empirical (Theorem 5.1) or population
        (Theorem 5.6).
    method : {"output_perturbation", "exponential"}, default="output_perturbation"
        Algorithm 3, or Algorithm 4 (the sparse exponential mechanism: ε-DP for any
        loss including the hinge, by exact enumeration of a net; needs ``radius`` and
        a tiny number of features, see
        :mod:`skdpsparse.mechanisms.sparse_exponential`).
    fit_intercept : bool, default=True
        The intercept is the coefficient of an extra constant feature of value
        ``intercept_scaling``; it counts in the feature bounds (ℓ2 bound
        √(norm_bound² + c²), ℓ1 bound √s·norm_bound + c), is regularized, noised and
        projected like every coefficient.
    intercept_scaling : float or "auto", default="auto"
        c, the value of that constant feature. ``"auto"``: c = R/√s (s = d when
        ``sparsity`` is None), the size of one coordinate of an s-sparse row of norm
        R, so the intercept is regularized like a typical coefficient and costs a
        factor √(1 + 1/s) in noise; c = R (scikit-learn's liblinear default of 1 for
        unit rows) costs √2, and with strong regularization the constant feature,
        present in every row, can outweigh sparse features that each appear in few
        rows. Raise it when the classes (or the targets' mean) are far from balanced
        (centred) and the intercept must be large.
    norm_bound : float or "private", default=1.0
        R: rows with ‖x‖₂ > R are scaled down to norm R (never dropped).
        ``"private"``: R is a private 0.95-quantile of the row norms (the exponential
        mechanism over a public geometric grid,
        :func:`~skdpsparse.mechanisms.quantile.private_quantiles`; ε-DP), paid from
        ``bound_fraction`` of ε.
    bound_fraction : float, default=0.1
        The share of ε spent on the bounds set to ``"private"`` (split equally
        between them; in (0, 1)); the model gets the rest and ``privacy_spent_`` is
        the sum (basic composition, Dwork and Roth 2014, Theorem 3.16).
    sparsity : int or None, default=None
        s: rows with ‖x‖₁ > √s·R are scaled down too; gradients then have ℓ1 norm
        ≤ √s·R·|ℓ'|, which is how sparsity enters (Ghazi et al. 2024 Remark 2.1). ``None``: s = d.
    radius : float or None, default=None
        D of the feasible set 𝒳 = {‖θ‖₂ ≤ D}, or ``None`` for ℝᵖ. The released
        parameters are the point of 𝒳 nearest in ℓ∞ to the noisy minimizer (a
        soft-thresholding, which removes most of the noise on irrelevant features).
    calibration : {"analytic", "classic"}, default="analytic"
        Gaussian noise from the analytic Gaussian mechanism or the seed's classic
        σ = Δ₂√(2 ln(1.25/δ))/ε (valid for ε < 1).
    tol : float or "auto", default="auto"
        Relative slack of the solver: it runs until the distance to the exact
        minimizer is certified (by strong convexity) to be ≤ tol·Δ/2, and the noise is
        calibrated to (1 + tol)·Δ, so the guarantee covers what is computed.
        ``"auto"``: 10⁻², or the smallest slack the solver's fallback can certify at
        these public sizes if larger (it grows like n²·√d: past about n = 8·10⁶ at
        d = 2¹⁸ with unit rows;
        :func:`~skdpsparse.mechanisms.output_perturbation.certification_tol`).
        A float below that smallest slack is refused before the data is read.
    solver_max_iter : int, default=1000
        Iterations per phase of the adaptive solvers (L-BFGS, Newton, accelerated
        projected gradient). If they end without a certificate, projected gradient
        descent runs for a public number of steps whose distance to the minimizer is
        certified by analysis, so a fit never fails on its data. (The iteration count
        depends on the data and is not exposed: no ``n_iter_``.)
    tau : float or "auto", default="auto"
        Net step of ``method="exponential"``; "auto" minimizes its error bound among
        nets of at most ``max_net_size`` points.
    max_net_size : int, default=1_000_000
        Largest net ``method="exponential"`` enumerates (else a ``ValueError``).
    verbose : bool or int, default=0
        ``True``/``1`` (or more): progress lines in the one format of the package
        (``[DPOutputPerturbationClassifier] solve: ...``): the phases (private
        bounds, solving, release), the number of problems, the method and the
        requested budget, then the budget spent once the model is released. Only
        public numbers: the solver's iteration count and its time depend on the data
        (the solver runs to a certificate), so neither is printed, and a verbose fit
        prints the same text for any two datasets of the same shape. A fit the
        ledger refuses prints its phases but no ``done`` line.
    random_state : None, int or numpy.random.Generator, default=None
        ``None`` draws fresh noise; a fixed seed makes the noise known to whoever knows
        the seed: for tests and reports only."""

#: The key under which _fit_problems hands _store the warnings it holds back.
_DEFERRED_WARNINGS = "_deferred_warnings"

_SHARED_ATTRS = """alpha_ : float
        The λ used (0 for ``method="exponential"``, which does not regularize).
    privacy_spent_ : ApproxDP or PureDP
        The guarantee of this fit.
    noise_scale_ : float
        Gaussian σ or Laplace scale per coordinate (output perturbation only).
    tol_ : float
        The solver's relative slack used, ``tol="auto"`` resolved (output
        perturbation only).
    intercept_scaling_ : float
        The c used (0 when ``fit_intercept=False``).
    norm_bound_ : float
        The R used (declared, or the private quantile).
    tau_ : float
        The net step (``method="exponential"`` only).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has string feature names."""


class _BaseOutputPerturbation(BaseEstimator):
    """Shared fit logic; subclasses build the target vectors."""

    def _fit_problems(self, X, targets, loss, loss_param, label_bound):
        """Run the mechanism; return (coef, intercept, budget, attributes).

        ``label_bound`` (regression) and ``self.norm_bound`` may be ``"private"``:
        each then costs an equal share of ``bound_fraction``·ε (a private 0.95-quantile
        of |y| or of the row norms, :func:`~._base.private_bound`), the model gets the
        rest, and the budget is the sum (basic composition). Sets nothing: the caller
        releases through :meth:`_store` (charge first, then every fitted attribute at
        once).
        """
        n, d = X.shape
        K = targets.shape[0]
        delta = 0.0 if self.delta is None else float(self.delta)
        rng = fit_random_source(self.random_state, self, X, targets)
        private = [v for v in (self.norm_bound, label_bound) if v == "private"]
        eps_bound = float(self.bound_fraction) * float(self.epsilon) if private else 0.0
        eps_each = eps_bound / max(len(private), 1)
        # Public facts only (the parameters, n, d, K), never a private bound's value
        # (not yet charged) nor the solver's iterations or time (data-dependent).
        progress = Progress(self.verbose, type(self).__name__)
        if private:
            names = [name for name, v in (("norm_bound", self.norm_bound),
                                          ("label_bound", label_bound)) if v == "private"]
            each = " each" if len(names) > 1 else ""
            progress.report("bounds", detail=f"private 0.95-quantile of "
                            f"{' and '.join(names)} at epsilon={eps_each:.4g}{each}",
                            seconds=False)
        problems = "1 problem" if K == 1 else f"{K} one-vs-rest problems"
        progress.report("solve", detail=f"{problems}, n={n}, d={d}, method={self.method}, "
                        f"alpha={self.alpha!r}", seconds=False)
        norm_bound = (private_bound(row_l2_norms(X), eps_each, rng)
                      if self.norm_bound == "private" else float(self.norm_bound))
        centre, label_bound = label_interval(targets[0], label_bound, eps_each, rng)
        if centre != 0.0:
            # A public (declared, or released just above) offset, the same for every
            # row: the model fits y − m clipped to [−B, B] (module notes).
            targets = targets - centre
        epsilon = float(self.epsilon) - eps_bound
        c = self._intercept_scaling(d, norm_bound) if self.fit_intercept else 0.0
        bounds = dict(norm_bound=norm_bound, sparsity=self.sparsity,
                      intercept_scaling=c, label_bound=float(label_bound))
        # After a private draw, what the fit says depends on the released bound, which
        # the budget pays for only if the ledger accepts the charge: warnings wait
        # for the release (_store), and an explicit tol below what the solver can
        # certify at that bound is raised to it instead of refused.
        deferred = (warnings.catch_warnings(record=True) if private
                    else contextlib.nullcontext([]))
        refused = None
        with deferred as caught:
            if private:
                warnings.simplefilter("always")
            try:
                theta, budget, attrs = self._plan_and_run(X, targets, loss, loss_param,
                                                          epsilon, delta, bounds, rng,
                                                          tol_is_minimum=bool(private))
            except Exception as error:  # noqa: BLE001 - re-raised below
                if not private:
                    raise
                refused = error
        if refused is not None:
            # A refusal after the draws (a plan the solver cannot certify at the
            # released bound) may depend on them: their share is spent. Charged
            # outside the handler, so that a ledger's own refusal carries nothing of it.
            charge_budget(self, PureDP(eps_bound))
            raise refused
        attrs[_DEFERRED_WARNINGS] = list(caught)
        if private:
            budget = compose_with_bounds(eps_bound, budget)
        coef = theta[:, :d]
        intercept = c * theta[:, d] if c > 0 else np.zeros(K)
        if centre != 0.0:
            intercept = intercept + centre  # post-processing by a released constant
        attrs["intercept_scaling_"] = c
        attrs["norm_bound_"] = norm_bound
        if loss in ("squared", "huber"):
            attrs["label_bound_"] = float(label_bound)
            attrs["label_center_"] = float(centre)
        return coef, intercept, budget, attrs

    def _plan_and_run(self, X, targets, loss, loss_param, epsilon, delta, bounds, rng, *,
                      tol_is_minimum=False):
        """The mechanism's plan from public numbers (and the bounds, declared or
        already released), then its run: (theta, budget, attributes)."""
        (n, d), K = X.shape, targets.shape[0]
        if self.method == "exponential":
            plan = plan_sparse_exponential(
                n, d, K, loss=loss, loss_param=loss_param, epsilon=epsilon,
                radius=self.radius, tau=self.tau, max_net_size=int(self.max_net_size),
                **bounds)
            theta = sparse_exponential(X, targets, plan, rng)
            return theta, plan.budget, {"alpha_": 0.0, "tau_": plan.tau}
        plan = plan_output_perturbation(
            n, d, K, loss=loss, loss_param=loss_param, epsilon=epsilon, delta=delta,
            alpha=self.alpha, objective=self.objective, radius=self.radius,
            calibration=self.calibration, tol=self.tol, tol_is_minimum=tol_is_minimum,
            **bounds)
        self._warn_plan(plan, n, epsilon)  # public numbers only, before the solve
        # info (solver diagnostics) depends on the data: dropped
        theta, _ = output_perturbation(X, targets, plan, rng, max_iter=self.solver_max_iter)
        return theta, plan.budget, {"alpha_": plan.alpha, "noise_scale_": plan.noise_scale,
                                    "tol_": plan.tol}

    def _warn_plan(self, plan, n, epsilon):
        """Warnings that follow from the plan alone (public numbers); none by default."""

    def _intercept_scaling(self, n_features, norm_bound):
        """c: the declared value, or R/√s for "auto" (R declared or privately
        estimated)."""
        if self.intercept_scaling != "auto":
            return float(self.intercept_scaling)
        s = n_features if self.sparsity is None else min(int(self.sparsity), n_features)
        return float(norm_bound) / math.sqrt(s)

    def _store(self, budget, attrs):
        # Charges first; a refused fit releases nothing (and leaves the estimator
        # unfitted); attributes of an earlier fit (tau_ or noise_scale_ of the other
        # method) are removed. Warnings that depend on a private bound follow the
        # release (_fit_problems).
        attrs = dict(attrs)
        deferred = attrs.pop(_DEFERRED_WARNINGS, [])
        release(self, dict(attrs, privacy_spent_=budget))
        for caught in deferred:
            warnings.warn(caught.message, caught.category, stacklevel=3)
        Progress(self.verbose, type(self).__name__).report(
            "done", detail=f"released, privacy spent {budget}", seconds=False)
        return self

    def _decision(self, X):
        check_is_fitted(self)
        X = check_fit_input(self, X, reset=False)
        # In float64 (float32 coef_ times an extreme float32 row would overflow).
        return np.asarray(X @ self.coef_.astype(np.float64).T) + self.intercept_

    def _check_y(self, y):
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the "
                             "target y is None.")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


#: The share of the label bound's ε spent on the private median (``label_bound=
#: "private"``); the 0.95-quantile of |y − m| gets the rest. A median is located by
#: ranks that move fast around it; the upper quantile is the fragile draw: every grid
#: point above the data scores 0.05n + 1 (:func:`~._base.private_bound`), so at a
#: small n·ε it can land octaves above the data, with probability at most
#: 481·exp(−ε_B·(0.05n + 1)/4) (481 positive grid points, Δu = 2).
LABEL_CENTRE_SHARE = 0.25


class _LabelInterval:
    """Constraint: a declared label interval (low, high), finite, low < high."""

    def is_satisfied_by(self, value):
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            return False
        try:
            low, high = (float(v) for v in value)
        except (TypeError, ValueError):
            return False
        # The half-width (high − low)/2 must be finite too: (−1e308, 1e308) passed
        # and failed later with an error that did not name label_bound.
        return (math.isfinite(low) and math.isfinite(high) and low < high
                and math.isfinite(0.5 * high - 0.5 * low) and 0.5 * high - 0.5 * low > 0)

    def __str__(self):
        return ("a pair (low, high) of finite reals with low < high and a finite "
                "half-width (high - low)/2")


def label_interval(y, label_bound, epsilon, rng):
    """(m, B): the regressor fits the targets y − m clipped to [−B, B].

    ``label_bound`` B (a float): m = 0, the interval [−B, B]. A pair (low, high):
    m = (low + high)/2 and B = (high − low)/2, so the targets are clipped to
    [low, high] and centred. ``"private"``: m is a private median of y
    (:func:`~skdpsparse.mechanisms.quantile.private_quantiles`, ε/4) and B a private
    0.95-quantile of |y − m| (:func:`~._base.private_bound`, 3ε/4;
    :data:`LABEL_CENTRE_SHARE`), so 95 % of the targets lie in [m − B, m + B], as 95 %
    lay in [−B, B] under the 0.95-quantile of |y| this replaced. With ε the label's
    share (``bound_fraction``·ε of the fit, halved when ``norm_bound`` is private
    too), the chance that B lands far above the data is at most 1 % from
    n·ε ≈ 1 150 on (the single draw on |y| it replaced: n·ε ≈ 860). Not the 2.5 %
    and 97.5 % quantiles of y by ``private_quantiles``: above an atom at the top of
    the data (5 stars) its score ties on every grid point, and the upper draw wandered
    octaves above the maximum at ε = 0.05 per draw; ``private_bound``'s score has a
    unique minimum there.

    Why: the penalty (λ/2)‖θ‖² shrinks the intercept toward 0 like every coefficient
    (:func:`intercept_pull`), so targets far from 0 relative to their spread (ratings
    in [0.5, 5]) were pulled toward 0, below the constant prediction at small ε.
    Centred, the pull acts on ȳ − m, at most B, instead of on ȳ; and the half-width
    (high − low)/2 is smaller than max(|low|, |high|), so is the noise.

    **Privacy guarantee.** A declared pair: m and B are public, and
    y ↦ clip(y − m, −B, B) is the same function for every row, so datasets that
    differ in one row (x, y) map to centred datasets that differ in that row only,
    with every target in [−B, B]: the minimizer's sensitivity 2L/(λn) of Ghazi et al.
    (2024), Theorem 5.1 (L from B, :mod:`~skdpsparse.mechanisms.output_perturbation`)
    holds for the centred problem unchanged (the strong convexity λ is untouched: the
    intercept stays penalised), and adding m to the released intercept is
    post-processing. ``"private"``: the median's score moves by at most 1 and
    ``private_bound``'s by at most 2 when a row is replaced (the second reads |y − m|
    with m already released, the same function for every row), so the draws are
    ε/4- and 3ε/4-DP (exponential mechanism, McSherry and Talwar 2007; Dwork and Roth
    2014, Theorem 3.10), together ε-DP (basic composition, Theorem 3.16); the fit is
    then the declared case given the released (m, B) (adaptive composition), and the
    caller charges ε with the model's budget. Assumptions: a secret ``rng``; m and B
    read the data only through these draws (bounds read from the data, as diffprivlib
    does without ``bounds_y``, make the noise scale and the released intercept depend
    on one row: the broken variants the tests catch). Not covered: add/remove
    neighbours.

    Parameters
    ----------
    y : ndarray of shape (n,)
    label_bound : float, pair of floats or "private"
    epsilon : float
        ε of the pair of draws (``"private"`` only).
    rng : RandomSource or numpy.random.Generator

    Returns
    -------
    m, B : float
    """
    if isinstance(label_bound, str) and label_bound == "private":
        from ..mechanisms.quantile import private_quantiles

        y = np.asarray(y, dtype=np.float64)
        eps_centre = LABEL_CENTRE_SHARE * float(epsilon)
        centre = float(private_quantiles(y.reshape(-1, 1), [0.5], epsilon_each=eps_centre,
                                         rng=rng)[0, 0])
        return centre, private_bound(np.abs(y - centre), float(epsilon) - eps_centre, rng)
    if isinstance(label_bound, (tuple, list)):
        return centred_interval(*label_bound)
    return 0.0, float(label_bound)


#: DPOutputPerturbationRegressor warns before the solve when the penalty pulls the
#: intercept toward 0 by more than this fraction, λ/(c² + λ).
_INTERCEPT_PULL_WARNING = 0.02


def intercept_pull(alpha, intercept_scaling):
    """λ/(c² + λ): the fraction by which the ℓ2 penalty pulls the intercept toward 0.

    The intercept is the weight θ₀ of a constant feature c, penalised as the others:
    on the squared loss, an intercept-only fit of mean ȳ minimises ½(ȳ − cθ₀)² +
    (λ/2)θ₀², so its prediction is cθ₀ = ȳ·c²/(c² + λ), short of ȳ by the returned
    fraction of ȳ (the features do not undo it: they are penalised too). A public
    number (λ from :func:`~skdpsparse.mechanisms.output_perturbation.plan_output_perturbation`,
    c declared or R/√s).
    """
    lam, c2 = float(alpha), float(intercept_scaling) ** 2
    return lam / (c2 + lam) if c2 > 0 else 0.0


class DPOutputPerturbationRegressor(RegressorMixin, _BaseOutputPerturbation):
    __doc__ = """Differentially private linear regression by output perturbation.

    Ghazi, Guzmán, Kamath, Kumar and Manurangsi, "Differentially Private Optimization
    with Sparse Gradients", Algorithm 3: minimize the λ-regularized
    empirical risk, add Gaussian (δ > 0) or Laplace (δ = 0) noise calibrated to the
    minimizer's sensitivity, return the point of 𝒳 nearest in ℓ∞. Derivations of the
    Lipschitz/smoothness constants and sensitivities are in
    :mod:`skdpsparse.mechanisms.output_perturbation`.

    Rows are scaled into {‖x‖₂ ≤ R, ‖x‖₁ ≤ R√s} and targets clipped to [−B, B]
    (contribution bounding, never rejection).

    {privacy}

    Parameters
    ----------
    loss : {"squared", "huber"}, default="squared"
        Squared loss (Lipschitz on the ball where the minimizers lie:
        |ℓ'| ≤ ρ·√(R² + c²) + B with ρ ≤ min(D, B/√λ) a bound on their norm) or Huber
        (|ℓ'| ≤ threshold).
    huber_threshold : float, default=1.0
        κ of the Huber loss.
    label_bound : float, (low, high), "private" or None, default=None
        B: targets are clipped to [−B, B]. Declare it from public knowledge (a rating
        scale, a legal maximum) whenever you can; a pair ``(low, high)`` (ratings:
        ``(0.5, 5)``) clips them to [low, high] and centres them at
        m = (low + high)/2 before the fit (the model fits y − m in
        [−(high − low)/2, (high − low)/2], and ``intercept_`` includes m), so the
        penalty no longer pulls the predictions toward 0 (:func:`label_interval`).
        ``"private"``: centred too, at a private median m of y, with B a private
        0.95-quantile of |y − m|, paid from ``bound_fraction`` of ε as for
        ``norm_bound``. ``None``: B = 1 with a
        ``UserWarning`` before fitting, since clipping real targets to [−1, 1]
        silently destroys the fit (R² −0.54 on ratings of 0.5 to 5 stars, issue 18).
    {shared}

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    label_bound_ : float
        The half-width B used (declared, 1 for ``None``, (high − low)/2 of a pair,
        or the private quantile of |y − m|).
    label_center_ : float
        The centre m subtracted from the targets (0 for a float or ``None``); it is
        included in ``intercept_``.
    {attrs}

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsparse.linear_model import DPOutputPerturbationRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(5000, 5)) / np.sqrt(5)
    >>> y = X @ np.ones(5) / 2 + 0.1 * rng.normal(size=5000)
    >>> reg = DPOutputPerturbationRegressor(epsilon=1.0, label_bound=2.0,
    ...                                     random_state=0).fit(X, y)
    >>> str(reg.privacy_spent_), reg.coef_.shape
    ('(1, 1e-06)-DP', (5,))
    """.replace("{shared}", _SHARED_DOC).replace("{attrs}", _SHARED_ATTRS).replace(
        "{privacy}", _PRIVACY_DOC)

    _parameter_constraints = {
        **_COMMON_CONSTRAINTS,
        "loss": [Options("squared", "huber")],
        "huber_threshold": [_POSITIVE],
        "label_bound": [_POSITIVE, _LabelInterval(), Options("private"), None],
    }

    def __init__(self, loss="squared", *, epsilon=1.0, delta=1e-6, alpha="auto",
                 objective="erm", method="output_perturbation", fit_intercept=True,
                 intercept_scaling="auto", norm_bound=1.0, sparsity=None, label_bound=None,
                 bound_fraction=0.1, radius=None, huber_threshold=1.0, calibration="analytic",
                 tol="auto",
                 solver_max_iter=1000, tau="auto", max_net_size=MAX_NET_SIZE, verbose=0,
                 random_state=None):
        self.loss = loss
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.objective = objective
        self.method = method
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.norm_bound = norm_bound
        self.sparsity = sparsity
        self.label_bound = label_bound
        self.bound_fraction = bound_fraction
        self.radius = radius
        self.huber_threshold = huber_threshold
        self.calibration = calibration
        self.tol = tol
        self.solver_max_iter = solver_max_iter
        self.tau = tau
        self.max_net_size = max_net_size
        self.verbose = verbose
        self.random_state = random_state

    def fit(self, X, y, **fit_params):
        """Fit the private linear model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Sparse input stays sparse.
        y : array-like of shape (n_samples,)
            Targets, clipped to [−label_bound, label_bound].
        **fit_params : dict
            Not supported: ``sample_weight`` (a weight changes the sensitivity the
            noise is calibrated to) and any other fit parameter raise
            :class:`~skdpsparse.exceptions.InvalidParameterError`.

        Returns
        -------
        self : DPOutputPerturbationRegressor
        """
        check_fit_params(self, fit_params)
        if (fitted := distributed_fit(self, X, y)) is not None:  # Dask or Spark input
            return fitted
        validate_params(self, self._parameter_constraints)
        self._check_y(y)
        if self.label_bound is None:
            # Data-independent: said before anything is read.
            warnings.warn(
                "label_bound was not declared: targets are clipped to [-1, 1], which "
                "destroys the fit when they are larger. Declare a bound from public "
                "knowledge (a float B, or an interval (low, high)), or set "
                "label_bound='private' to spend bound_fraction of epsilon on private "
                "quantiles of y.",
                UserWarning, stacklevel=2)
        (X, y), input_attrs = fit_input(self, X, y, y_numeric=True)
        targets = np.asarray(y, dtype=np.float64)[None, :]
        loss_param = float(self.huber_threshold) if self.loss == "huber" else 1.0
        bound = 1.0 if self.label_bound is None else self.label_bound
        coef, intercept, budget, attrs = self._fit_problems(X, targets, self.loss,
                                                            loss_param, bound)
        return self._store(budget, dict(attrs, **input_attrs, coef_=coef[0],
                                        intercept_=float(intercept[0])))

    def _warn_plan(self, plan, n, epsilon):
        """Before the solve, from the plan (public numbers): the penalty's pull of the
        intercept toward 0 (:func:`intercept_pull`). On targets far from 0 relative to
        their spread (ratings in [0.5, 5], prices) a pull of a few percent alone puts
        the model below the constant prediction: on MovieLens ratings
        (``benchmarks/bench_real_data.py``, s = 2, c = 1/√2, B = 5) the pull was 8 %
        at ε = 1 (λ = 0.046) and the test R² −0.15; 2.5 % at ε = 8 and R² 0.014."""
        pull = intercept_pull(plan.alpha, plan.intercept_scaling)
        centred = (isinstance(self.label_bound, (tuple, list))
                   or (isinstance(self.label_bound, str) and self.label_bound == "private"))
        if pull <= _INTERCEPT_PULL_WARNING or centred:
            # Centred targets (label_interval): the pull acts on ȳ − m, at most B,
            # like the shrinkage of any coefficient, not on ȳ.
            return
        c2 = plan.intercept_scaling ** 2
        target = c2 * _INTERCEPT_PULL_WARNING / (1.0 - _INTERCEPT_PULL_WARNING)
        # alpha="auto" falls like 1/(n·ε) above its floor 1/n (choose_alpha_noise).
        needed = n * float(epsilon) * plan.alpha / target
        warnings.warn(
            f"{type(self).__name__}: at n={n}, epsilon={float(epsilon):.3g} the penalty "
            f"alpha={plan.alpha:.3g} also pulls the intercept toward 0 by "
            f"{100 * pull:.1f} % of the targets' mean (intercept_scaling="
            f"{plan.intercept_scaling:.3g}); on targets far from 0 (ratings, prices) the "
            "model can fall below the constant prediction. Under 2 % needs about "
            f"n*epsilon >= {needed:.3g} (alpha='auto' falls like 1/(n*epsilon)); or "
            "declare label_bound=(low, high) or 'private', which centre the targets.",
            UserWarning, stacklevel=4)

    def predict(self, X):
        """Predicted targets ``X @ coef_ + intercept_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._decision(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True  # noise by design
        return tags


class DPOutputPerturbationClassifier(OneVsRestClassifierMixin, ClassifierMixin,
                                     _BaseOutputPerturbation):
    __doc__ = """Differentially private linear classification by output perturbation.

    Ghazi et al. (2024) Algorithm 3 (or Algorithm 4 with ``method="exponential"``) for the
    logistic or smoothed hinge loss (the hinge loss: exponential method only). Binary
    problems fit one model (label ``classes_[1]`` is +1). More classes are fit one
    versus rest, all K models on all rows and released together: replacing a row
    moves each by at most Δ, so the joint sensitivity is √K·Δ₂ (one Gaussian
    mechanism) or K·Δ₁ (Laplace, the same as ε/K per class); the exponential method
    splits ε into K equal parts (basic composition). Derivations in
    :mod:`skdpsparse.mechanisms.output_perturbation`.

    {privacy}

    Parameters
    ----------
    loss : {"logistic", "smoothed_hinge", "hinge"}, default="logistic"
        |ℓ'| ≤ 1 for all three, and ≤ σ(ρ·√(R² + c²)) ∈ [1/2, 1) for the logistic
        loss at the minimizers (ρ bounds their norm: the noise shrinks towards half
        as λ grows); ℓ'' ≤ 1/4 (logistic) or 1/h (smoothed hinge).
    smoothing : float, default=1.0
        Width h of the smoothed hinge.
    classes : array-like or None, default=None
        The label set, declared in advance. ``None`` takes the labels present in
        ``y``, which reveals them (a :class:`~skdpsparse.exceptions.PrivacyLeakWarning`
        says so). A label of ``y`` that is not declared is a ``ValueError`` naming
        ``classes`` (user guide, "Validation errors").
    {shared}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    {attrs}

    Examples
    --------
    >>> from skdpsparse.datasets import make_sparse_classification
    >>> from skdpsparse.linear_model import DPOutputPerturbationClassifier
    >>> X, y, _ = make_sparse_classification(4000, 500, 8, random_state=0)
    >>> clf = DPOutputPerturbationClassifier(epsilon=2.0, sparsity=8, radius=10.0,
    ...                                      classes=[0, 1], random_state=0).fit(X, y)
    >>> clf.coef_.shape, str(clf.privacy_spent_)
    ((1, 500), '(2, 1e-06)-DP')
    """.replace("{shared}", _SHARED_DOC).replace("{attrs}", _SHARED_ATTRS).replace(
        "{privacy}", _PRIVACY_DOC)

    _parameter_constraints = {
        **_COMMON_CONSTRAINTS,
        "loss": [Options("logistic", "smoothed_hinge", "hinge")],
        "smoothing": [_POSITIVE],
        "classes": [InstanceOf(list, tuple, np.ndarray, description="array-like"), None],
    }

    def __init__(self, loss="logistic", *, epsilon=1.0, delta=1e-6, alpha="auto",
                 objective="erm", method="output_perturbation", fit_intercept=True,
                 intercept_scaling="auto", norm_bound=1.0, bound_fraction=0.1,
                 sparsity=None, radius=None, smoothing=1.0, classes=None,
                 calibration="analytic", tol="auto",
                 solver_max_iter=1000, tau="auto", max_net_size=MAX_NET_SIZE, verbose=0,
                 random_state=None):
        self.loss = loss
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.objective = objective
        self.method = method
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.norm_bound = norm_bound
        self.bound_fraction = bound_fraction
        self.sparsity = sparsity
        self.radius = radius
        self.smoothing = smoothing
        self.classes = classes
        self.calibration = calibration
        self.tol = tol
        self.solver_max_iter = solver_max_iter
        self.tau = tau
        self.max_net_size = max_net_size
        self.verbose = verbose
        self.random_state = random_state

    def fit(self, X, y, **fit_params):
        """Fit the private linear classifier.

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
        self : DPOutputPerturbationClassifier
        """
        check_fit_params(self, fit_params)
        if (fitted := distributed_fit(self, X, y)) is not None:  # Dask or Spark input
            return fitted
        validate_params(self, self._parameter_constraints)
        self._check_y(y)
        (X, y), input_attrs = fit_input(self, X, y)
        classes = declared_classes(self, y)
        targets = one_vs_rest_targets(y, classes)
        loss_param = float(self.smoothing) if self.loss == "smoothed_hinge" else 1.0
        coef, intercept, budget, attrs = self._fit_problems(
            X, targets, self.loss, loss_param, 1.0)
        return self._store(budget, dict(attrs, **input_attrs, classes_=classes, coef_=coef,
                                        intercept_=intercept))
