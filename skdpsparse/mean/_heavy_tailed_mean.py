"""DPHeavyTailedMean: private means of heavy-tailed vectors.

The fit is validate → plan → run → release: the plan (every method's noise, budget
and bounds, from n, d and the parameters only) is
:func:`~skdpsparse.mechanisms.heavy_tailed_mean.plan_heavy_tailed_mean`, the run
:func:`~skdpsparse.mechanisms.heavy_tailed_mean.heavy_tailed_mean`.
"""

import warnings

import numpy as np
from sklearn.base import BaseEstimator

from ..utils._params import keyword_only_since
from ..utils._progress import VERBOSE_CONSTRAINT, Progress
from ..base import check_fit_params, fit_input, release
from ..distributed import distributed_fit
from ..mechanisms.heavy_tailed_clip import SCALE_FRACTION
from ..mechanisms.heavy_tailed_mean import (  # noqa: F401 (check_* re-exported)
    check_bounds,
    check_center,
    heavy_tailed_mean,
    plan_heavy_tailed_mean,
    resolved_method,
)
from ..utils import InstanceOf, Interval, Options, fit_random_source, validate_params
from ._base import PrivateMeanMixin


#: The former positional order of the parameters (by position: a FutureWarning until 0.2).
_LEGACY_ORDER = ("epsilon", "delta", "moment", "moment_bound", "method", "bounds",
                 "scale_fraction", "clip_level", "noise", "truncation", "failure_prob",
                 "n_groups", "center", "smoothing_variance", "shuffle", "random_state")


class DPHeavyTailedMean(PrivateMeanMixin, BaseEstimator):
    """Differentially private mean of heavy-tailed vectors, with nothing to state.

    The default (``method="auto"``, which runs ``"private_clip"``) needs no bound
    from the user: a declared share of the budget (``scale_fraction``) locates every
    column's clipping interval by five private quantiles (the exponential mechanism
    over a public geometric grid, :mod:`skdpsparse.mechanisms.quantile`; the median
    first, then the tail quantiles on the union of that grid and the grid shifted by
    the released median, each scored by the grid cell it closes so that it is the
    quantile rounded outwards and a top-coded maximum is found at its atom), noisy
    counts of the rows beyond each outer quantile (which check the tail model: a tail
    that ends, e.g. a top-coded column, is not stretched) and a Pareto extrapolation
    of each tail, never inside the outer quantiles and, where the counts cannot tell a
    tail that ends from one that goes on, the interval least worse than the best under
    either reading (minimax regret; post-processing), and the rest
    releases the mean of each column clipped into its interval, with noise
    proportional to the interval's width
    (:func:`~skdpsparse.mechanisms.heavy_tailed_clip.private_quantile_clipped_mean`).
    With ``bounds=(lower, upper)`` stated, the whole budget goes to the clipped mean.

    The estimators of Kamath, Liu and Zhang (2022), "Improved rates for
    differentially private stochastic convex optimization with heavy-tailed data"
    (ICML), Section 4, stay available by name: ``method="cwme"``, the coordinate-wise
    trimmed median of means (Algorithm 3, CDPCWME / DPCWME of Theorem 4.1), and
    ``method="noise_smoothing"``, Holland's noise-smoothing mean (Algorithm 4,
    CDPNSME), both with the truncation τ of their Corollary 4.2 (``truncation="auto"``
    or ``"corollary_4_2"``). Their τ is chosen for the rate, not the constant, and
    they need a moment bound; on real columns they were 10 to 250 times less
    accurate than the default (``benchmarks/real_data/means.py``).

    Rows are never rejected or rescaled for being large: each coordinate is clipped
    (private_clip, cwme) or soft-truncated (noise_smoothing), which is what bounds
    one row's influence.

    **Privacy guarantee.** Protected: one row of ``X``, all its coordinates.
    Neighbouring datasets differ by replacing one row (n and d public; adding or
    removing a row is covered only as far as a replacement covers it). The released
    ``mean_``, ``clip_lower_``, ``clip_upper_`` and every fitted attribute together
    satisfy ``privacy_spent_`` (and the (ε, δ) of ``approx_dp_spent_``). With
    private_clip and δ > 0: ρ-zCDP with ρ = ``approx_dp_to_zcdp(epsilon, delta)``; the
    5d quantile draws (or the 2 draws of the shared scale, each of score sensitivity d;
    exponential mechanism, McSherry and Talwar 2007, "Mechanism design via differential
    privacy"; each ε_q-bounded range, hence ε_q²/8-zCDP, Cesar and Rogers 2021, Lemma
    3.2) spend fρ; the 4d tail bins (disjoint per column, so ℓ2 sensitivity √(2d),
    discrete Gaussian of σ = 2/ε_q, hence 2d·ε_q²/8-zCDP; not with the shared scale)
    spend 2f/5·ρ more; the clipped mean the rest, (1 − 7f/5)ρ, with discrete Gaussian
    noise for ℓ2 sensitivity √d/n in unit coordinates (Canonne, Kamath and Steinke
    2020, "The discrete Gaussian for differential privacy", Theorem 14), composed
    adaptively (Bun and Steinke 2016, Lemma 2.3); with Laplace noise for the mean (few
    columns), the draws and an ε_m-DP release composed by Rényi accounting to (ε, δ),
    the draws' zCDP budget the largest that leaves ε_m = (1 − 7f/5)ε
    (:func:`~skdpsparse.mechanisms.heavy_tailed_clip.mixed_draws_rho`).
    With private_clip and δ = 0: fε for the draws, 2f/5·ε for the bins (discrete
    Laplace of scale 1/ε_q for ℓ1 sensitivity 2d), the rest for the mean with discrete
    Laplace noise for ℓ1 sensitivity d/n; ε-DP by basic composition. With stated
    ``bounds``: the clipped mean alone on the whole budget. With cwme: a change of
    6τ/⌊n/m⌋ per coordinate for odd m and 3τ/⌊n/m⌋ for even m (a half and a quarter of
    Kamath, Liu and Zhang 2022's bound in Theorem 4.1); noise_smoothing: 2S_c·τ/n, which
    corrects a too-small constant of their Algorithm 4 for c < 0.756 (derivations in
    :mod:`skdpsparse.mechanisms.heavy_tailed`). The derivation of private_clip is the
    page "Means without stated bounds, and thresholded sparse means" of the
    documentation's derivations. Assumptions: ``bounds``, ``center``, ``truncation``,
    ``moment_bound`` and every other parameter chosen without looking at ``X``;
    ``random_state=None`` (a seed makes the noise known to whoever knows it). The moment
    bound and the Pareto model of the tails matter for accuracy only, never for privacy.
    Not covered: add/remove neighbours with n secret; several rows of one person
    (user-level privacy); side channels such as the fit's running time; rows outside the
    stated bounds are clipped, which is covered (contribution bounding), but a choice of
    bounds made from the data is not.

    Parameters
    ----------
    epsilon : float, default=1.0
        ε > 0.
    delta : float or None, default=1e-6
        δ in [0, 1). With δ > 0 the Gaussian mechanism runs under ρ-zCDP with ρ the
        largest value whose tight zCDP→(ε, δ) conversion meets (ε, δ). ``0`` or
        ``None``: pure ε-DP with Laplace noise (``method="cwme"`` only).
    moment : float, default=2
        k > 1: every coordinate has a bounded k-th central moment (k ≥ 2 for
        ``noise_smoothing``). Enters only the automatic truncation of cwme and
        noise_smoothing.
    moment_bound : float, default=1.0
        The bound M on E|x_j − μ_j|^k (on E|x_j|^k for noise_smoothing, which shrinks
        towards 0). The guarantees of Theorem 4.1 are for M = 1; the automatic τ is
        multiplied by M^{1/k}. Enters only the automatic truncation.
    method : {"auto", "private_clip", "cwme", "noise_smoothing"}, default="auto"
        ``"private_clip"``: clip every column into an interval located privately (or
        stated in ``bounds``), average, add noise. ``"auto"``: private_clip, unless a
        numeric ``truncation`` is given, which is a stated scale for cwme (the
        estimator τ belongs to, as before this default existed). ``"cwme"``: clip
        every coordinate into [c_j − 3τ, c_j + 3τ], average in m
        groups, take the coordinate-wise median, add noise. ``"noise_smoothing"``:
        (τ/n)Σ_i ψ_c(x_ij/τ) with ψ_c(a) = E φ(a(1 + N)), N ~ N(0, c), in closed
        form, plus Gaussian noise (δ > 0 only).
    bounds : None or (lower, upper), default=None
        For private_clip: public clipping bounds (floats or arrays of shape
        (n_features,)), chosen without looking at the data. ``None``: located
        privately with ``scale_fraction`` of the budget.
    scale_fraction : float, default=0.1
        For private_clip without ``bounds``: the share f of the budget spent on the
        private quantiles that locate the clipping intervals; the tail counts that
        check them take 2f/5 more (so f < 5/7), the mean the rest.
    clip_level : "auto" or float, default="auto"
        For private_clip without ``bounds``: α in (0, 1/8), the outer level of the
        private quantiles q_α, q_{4α}, q_{1/2}, q_{1−4α}, q_{1−α} of each column from
        which the interval is extrapolated
        (:func:`~skdpsparse.mechanisms.heavy_tailed_clip.extrapolated_interval`).
        ``"auto"``: the exponential mechanism's rank error over n, at most 1/16
        (:func:`~skdpsparse.mechanisms.heavy_tailed_clip.auto_clip_level`), public numbers
        only. When that reaches 1/32 for d > 1 columns, n·ε is too small to locate
        each column's scale: two private quantiles of all n·d absolute values
        (sensitivity d) locate one interval [−C, C] shared by every column instead
        (:func:`~skdpsparse.mechanisms.heavy_tailed_clip.shared_scale_draws`; α is then
        their level), and a warning says to state ``bounds``. For one column the
        same warning is given at the cap 1/16.
    noise : {"auto", "gaussian", "laplace"}, default="auto"
        For private_clip with δ > 0: Gaussian noise under ρ-zCDP, or Laplace noise
        under ε-DP (which implies (ε, δ)-DP). ``"auto"``: the one with the smaller
        noise for (d, ε, δ) (:func:`~skdpsparse.mechanisms.heavy_tailed_clip.laplace_is_better`;
        Laplace for few columns).
    truncation : "auto", "corollary_4_2" or float, default="auto"
        τ of cwme and noise_smoothing. ``"auto"`` (or ``"corollary_4_2"``):
        Corollary 4.2, τ = (√ρ n/√d)^{1/k} (δ > 0) or (εn/d)^{1/k}
        (δ = 0), times M^{1/k}; for noise_smoothing the k = 2 balance
        τ = (√ρ n/√d)^{1/2}·M^{1/k} (:func:`~skdpsparse.mechanisms.heavy_tailed.truncation_for`).
        It depends on (n, d, ε, δ, k, M) only, never on the data. Corollary 4.2's τ
        is chosen for the rate, not for the constant: on moderate n it is often far
        larger than the practical optimum (tune it with ``score``, paying for each fit).
    failure_prob : float, default=0.1
        β in (0, 1) of Theorem 4.1, which sets the number of groups.
    n_groups : "auto" or int, default="auto"
        m for cwme. ``"auto"``: ⌈4 log(2d/β)⌉ (Algorithm 3) rounded up to an even
        number, which halves the sensitivity while keeping m ≥ 4 log(2d/β); at most n.
    center : float or array-like of shape (n_features,), default=0.0
        Centre c of the clipping intervals of cwme, to be chosen without looking at
        the data (Theorem 4.1 needs |μ_j − c_j| ≤ 3τ for accuracy, not for privacy).
    smoothing_variance : float, default=1.0
        c ≥ 0, the variance of the multiplicative noise of noise_smoothing.
    shuffle : bool, default=True
        Assign the rows of cwme to groups by a random permutation (drawn from
        ``random_state``), so that sorted data does not bias the group means. The
        groups keep the sizes of the consecutive split: the sensitivity holds for
        every assignment, hence for the mixture (Rényi divergence and the ε-DP
        likelihood ratio are jointly quasi-convex). ``False``: consecutive rows.
    verbose : bool or int, default=0
        ``True``/``1`` (or more): progress lines in the one format of the package
        (``[DPHeavyTailedMean] plan: ...``): the method and n, d (public numbers)
        before the data are read, then the budget spent once the mean is released. A
        fit the ledger refuses prints no ``done`` line.
    random_state : None, int or numpy.random.Generator, default=None
        ``None`` draws fresh noise from the operating system. A fixed seed makes the
        noise known to whoever knows the seed: use it for tests and reports only.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,)
        The private mean.
    method_ : str
        What ran: ``"private_clip"`` (interval located privately), ``"clipped"``
        (stated ``bounds``), ``"cwme"`` or ``"noise_smoothing"``.
    clip_lower_, clip_upper_ : ndarray of shape (n_features,)
        The clipping interval of each column (private_clip; a release).
    clip_level_ : float
        α (private_clip without ``bounds``).
    truncation_ : float
        The τ used (cwme and noise_smoothing).
    n_groups_ : int
        The number of groups used (cwme only).
    noise_scale_ : float or ndarray of shape (n_features,)
        σ of the Gaussian noise or b of the Laplace noise, per coordinate (an array
        for private_clip, whose noise is proportional to each interval's width).
    privacy_spent_ : ZCDP or PureDP
        ``ZCDP(ρ)`` for δ > 0, ``PureDP(ε)`` for δ = 0.
    approx_dp_spent_ : ApproxDP or PureDP
        The (ε, δ)-DP guarantee that ``privacy_spent_`` implies at the requested δ
        (never above the request).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has string feature names.

    Examples
    --------
    >>> from skdpsparse.datasets import make_heavy_tailed
    >>> from skdpsparse.mean import DPHeavyTailedMean
    >>> X, mu = make_heavy_tailed(100_000, 20, random_state=0)
    >>> est = DPHeavyTailedMean(epsilon=1.0, random_state=0).fit(X)
    >>> est.method_, str(est.privacy_spent_)
    ('private_clip', '0.024356-zCDP')
    >>> bool(abs(est.mean_ - mu).max() < 0.05)
    True
    """

    _parameter_constraints = {
        "epsilon": [Interval("real", 0, None, closed="neither")],
        "delta": [Interval("real", 0, 1, closed="left"), None],
        "moment": [Interval("real", 1, None, closed="neither")],
        "moment_bound": [Interval("real", 0, None, closed="neither")],
        "method": [Options("auto", "private_clip", "cwme", "noise_smoothing")],
        "bounds": [InstanceOf(tuple, list, description="a pair (lower, upper)"), None],
        "scale_fraction": [Interval("real", 0, 1, closed="neither")],
        "clip_level": [Options("auto"), Interval("real", 0, 0.125, closed="neither")],
        "noise": [Options("auto", "gaussian", "laplace")],
        "truncation": [Options("auto", "corollary_4_2"),
                       Interval("real", 0, None, closed="neither")],
        "failure_prob": [Interval("real", 0, 1, closed="neither")],
        "n_groups": [Options("auto"), Interval("integer", 1, None, closed="left")],
        "smoothing_variance": [Interval("real", 0, None, closed="left")],
        "shuffle": [InstanceOf(bool, np.bool_, description="bool")],
        "verbose": VERBOSE_CONSTRAINT,
        # center is checked against n_features in fit; random_state by fit_random_source.
    }

    @keyword_only_since("0.2", _LEGACY_ORDER)
    def __init__(self, *, epsilon=1.0, delta=1e-6, moment=2, moment_bound=1.0,
                 method="auto", bounds=None, scale_fraction=SCALE_FRACTION,
                 clip_level="auto", noise="auto", truncation="auto", failure_prob=0.1,
                 n_groups="auto",
                 center=0.0, smoothing_variance=1.0, shuffle=True, verbose=0,
                 random_state=None):
        self.epsilon = epsilon
        self.delta = delta
        self.moment = moment
        self.moment_bound = moment_bound
        self.method = method
        self.bounds = bounds
        self.scale_fraction = scale_fraction
        self.clip_level = clip_level
        self.noise = noise
        self.truncation = truncation
        self.failure_prob = failure_prob
        self.n_groups = n_groups
        self.center = center
        self.smoothing_variance = smoothing_variance
        self.shuffle = shuffle
        self.verbose = verbose
        self.random_state = random_state

    def _resolved_method(self):
        """``method`` with "auto" resolved (the distributed fit reads it)."""
        return resolved_method(self.method, self.truncation)

    def fit(self, X, y=None, **fit_params):
        """Compute the private mean of the rows of ``X``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Sparse input stays sparse (implicit zeros are clipped like explicit ones).
        y : None
            Ignored.
        **fit_params : dict
            Not supported: ``sample_weight`` (a weight changes the sensitivity the
            noise is calibrated to) and any other fit parameter raise
            :class:`~skdpsparse.exceptions.InvalidParameterError`.

        Returns
        -------
        self : DPHeavyTailedMean
        """
        check_fit_params(self, fit_params)
        if (fitted := distributed_fit(self, X, y)) is not None:  # Dask or Spark input
            return fitted
        validate_params(self, self._parameter_constraints)
        # Finiteness is checked by the compiled pass itself (a non-finite entry makes
        # its column NaN, and the mechanism raises before releasing anything): one read
        # of X instead of two.
        X, input_attrs = fit_input(self, X, ensure_all_finite=False)  # sets nothing
        params = self.get_params()
        del params["random_state"], params["verbose"]
        plan = plan_heavy_tailed_mean(*X.shape, **params)
        if plan.warning is not None:  # public numbers only
            warnings.warn(plan.warning, UserWarning, stacklevel=2)
        progress = Progress(self.verbose, type(self).__name__)
        progress.report("plan", detail=f"method={self._resolved_method()}, "
                        f"n={X.shape[0]}, d={X.shape[1]}, epsilon={self.epsilon}, "
                        f"delta={self.delta}", seconds=False)
        mean, info = heavy_tailed_mean(X, plan, fit_random_source(self.random_state, self, X))
        release(self, dict(input_attrs, **_fitted_attributes(plan, mean, info)))
        progress.report("done", detail=f"released, privacy spent {self.privacy_spent_}")
        return self


def _fitted_attributes(plan, mean, info):
    """The attributes a fit with ``plan`` releases (the estimator's names)."""
    attrs = dict(mean_=mean, method_=plan.method, privacy_spent_=plan.budget,
                 approx_dp_spent_=plan.approx_dp)
    if plan.method in ("cwme", "noise_smoothing"):
        attrs.update(truncation_=plan.truncation, noise_scale_=float(info["noise_scale"]))
        if plan.method == "cwme":
            attrs["n_groups_"] = int(plan.mechanism.groups_used)
        return attrs
    attrs.update(clip_lower_=info["lower"], clip_upper_=info["upper"],
                 noise_scale_=info["noise_scale"])
    if plan.method == "private_clip":
        attrs["clip_level_"] = float(info["level"])
    return attrs
