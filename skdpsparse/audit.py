"""Empirical privacy auditing: lower bounds on ε from a distinguishing attack.

A mechanism M claimed (ε, δ)-DP must satisfy, for every pair of neighbouring datasets
D, D' and every event S, P[M(D') ∈ S] ≤ e^ε P[M(D) ∈ S] + δ (and with D, D'
swapped). Running M many times on a hard pair and testing "was the input D'?" with a
threshold on a scalar statistic of the output gives a false-positive rate FPR (on D) and
a false-negative rate FNR (on D') that must then satisfy

    ε ≥ max( log((1 − δ − FPR)/FNR), log((1 − δ − FNR)/FPR) )

(Kairouz, Oh and Viswanath 2015, Thm 2.1). With FPR and FNR replaced by Clopper–Pearson
upper confidence bounds this is the lower bound of Jagielski, Ullman and Oprea,
"Auditing differentially private machine learning: how private is private SGD?"
(NeurIPS 2020) and Nasr, Song, Thakurta, Papernot and Carlini, "Adversary
instantiation: lower bounds for differentially private machine learning" (IEEE S&P
2021). Here:

* each rate gets the upper end of a **two-sided** Clopper–Pearson interval at level
  ``confidence`` (a one-sided bound at 1 − α/2), so both bounds hold at once with
  probability ≥ ``confidence`` (union bound), and so does ε_lb ≤ ε_true;
* the threshold (and its direction) is chosen on the first half of the runs and the
  rates are counted on the second half only: a threshold tuned on the same runs would
  bias the bound upwards.

The catalogue (:data:`CASES`, :class:`AuditCase`, :func:`run_case`, …; defined in
``skdpsparse/_audit_cases.py`` and loaded from here on first use) holds, for every
mechanism and estimator of the package, a hard neighbouring pair and the attack
statistic; ``tests/audit`` runs it at CI size and ``benchmarks/audit.py`` at full size.
The broken variants are made by :func:`scaled_noise` (noise scale multiplied by a
factor), :func:`inflated_bounds` (contribution bounding with a bound larger than the
one the noise is calibrated for) and :func:`float_noise` (the floating-point samplers
the library used before its exact ones, which :func:`mironov_distinguisher` breaks),
which temporarily replace functions of the package;
:func:`memoized_calibration` caches the pure noise-calibration and planning functions
(numbers in, numbers or a frozen plan out) so that thousands of runs are cheap, without
changing a single output bit.
"""

import contextlib
import dataclasses
import functools
import importlib
import inspect
import math
import sys
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

_TOOLKIT = (
    "AuditResult", "audit", "audit_scores", "claimed_epsilons", "clopper_pearson",
    "epsilon_lower_bound", "float_laplace_support", "float_noise", "gaussian_epsilon",
    "inflated_bounds", "memoized_calibration", "mironov_distinguisher", "replaced",
    "sample_scores", "scaled_noise",
)
#: Names of the catalogue (``skdpsparse/_audit_cases.py``), served by ``__getattr__``.
_CATALOGUE = (
    "AuditCase", "CASES", "CURVE_DELTA", "SUBSAMPLED_DELTA", "VARIANTS", "audit_failures",
    "format_results", "run_case",
)
__all__ = list(_TOOLKIT + _CATALOGUE)


def __getattr__(name):
    # The catalogue imports this module's toolkit, so it is loaded lazily (PEP 562):
    # importing either module first works.
    if name in _CATALOGUE or name.startswith("case_"):
        from . import _audit_cases
        return getattr(_audit_cases, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_CATALOGUE))


# ------------------------------------------------------------------------- statistics
def clopper_pearson(k, n, confidence=0.95):
    """Two-sided Clopper–Pearson interval for a binomial proportion.

    Parameters
    ----------
    k, n : int or array of int
        Successes and trials (``0 <= k <= n``, ``n >= 1``).
    confidence : float, default=0.95
        Each end is a one-sided bound at level 1 − (1 − ``confidence``)/2.

    Returns
    -------
    lower, upper : float or ndarray
    """
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    a = 0.5 * (1.0 - confidence)
    lower = np.where(k > 0, stats.beta.ppf(a, np.maximum(k, 1), n - k + 1), 0.0)
    upper = np.where(k < n, stats.beta.ppf(1 - a, k + 1, np.maximum(n - k, 1)), 1.0)
    return lower[()], upper[()]


def epsilon_lower_bound(false_positives, negatives, false_negatives, positives, delta=0.0,
                        confidence=0.95):
    """ε lower bound of a test with the given error counts, at ``delta``.

    ε_lb = max(log((1 − δ − FPR_ub)/FNR_ub), log((1 − δ − FNR_ub)/FPR_ub), 0), with
    FPR_ub, FNR_ub the upper ends of two-sided Clopper–Pearson intervals at level
    ``confidence`` (both hold together with probability ≥ ``confidence``).

    Parameters
    ----------
    false_positives, false_negatives : int or array of int
        Runs on D classified as D', and runs on D' classified as D.
    negatives, positives : int
        Runs on D and on D'.
    delta : float, default=0.0
    confidence : float, default=0.95

    Returns
    -------
    float or ndarray
    """
    fpr = clopper_pearson(false_positives, negatives, confidence)[1]
    fnr = clopper_pearson(false_negatives, positives, confidence)[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log((1.0 - delta - fpr) / fnr)
        b = np.log((1.0 - delta - fnr) / fpr)
    out = np.fmax(np.fmax(np.nan_to_num(a, nan=0.0), np.nan_to_num(b, nan=0.0)), 0.0)
    return out[()]


def _error_counts(scores0, scores1, thresholds, greater):
    """(false positives, false negatives) of "D' iff score > t" (or "< t")."""
    s0, s1 = np.sort(scores0), np.sort(scores1)
    if greater:
        fp = s0.size - np.searchsorted(s0, thresholds, side="right")
        fn = np.searchsorted(s1, thresholds, side="right")
    else:
        fp = np.searchsorted(s0, thresholds, side="left")
        fn = s1.size - np.searchsorted(s1, thresholds, side="left")
    return fp, fn


def _select_threshold(scores0, scores1, delta, confidence):
    """The threshold and direction with the largest ε_lb on these scores."""
    candidates = np.unique(np.concatenate([scores0, scores1]))
    best = (-1.0, 0.0, True)
    for greater in (True, False):
        fp, fn = _error_counts(scores0, scores1, candidates, greater)
        eps = epsilon_lower_bound(fp, scores0.size, fn, scores1.size, delta, confidence)
        i = int(np.argmax(eps))
        if eps[i] > best[0]:
            best = (float(eps[i]), float(candidates[i]), greater)
    return best[1], best[2]


@dataclass(frozen=True)
class AuditResult:
    """Outcome of one audit at one δ.

    Attributes
    ----------
    epsilon_lb : float
        Lower bound on ε holding with probability ≥ ``confidence``.
    claimed_epsilon, delta : float
        The guarantee audited.
    n_runs : int
        Runs on each of D and D' (half chose the threshold, half were counted).
    threshold : float
    greater : bool
        The attack says D' when the statistic is above (True) or below the threshold.
    fpr, fnr : float
        Empirical error rates on the evaluation half.
    confidence : float
    """

    epsilon_lb: float
    claimed_epsilon: float
    delta: float
    n_runs: int
    threshold: float
    greater: bool
    fpr: float
    fnr: float
    confidence: float = 0.95

    @property
    def violated(self):
        """True when the audit refutes the claim (ε_lb > claimed ε)."""
        return self.epsilon_lb > self.claimed_epsilon

    @property
    def margin(self):
        """claimed ε − ε_lb (negative when the claim is refuted)."""
        return self.claimed_epsilon - self.epsilon_lb


def audit_scores(scores0, scores1, *, delta=0.0, claimed_epsilon=np.nan, confidence=0.95):
    """ε lower bound from attack statistics on runs on D (``scores0``) and D' (``scores1``).

    The first half of each array chooses the threshold and direction (the largest
    ε_lb there); the second half, independent of that choice, gives the bound.
    """
    s0 = np.asarray(scores0, dtype=np.float64)
    s1 = np.asarray(scores1, dtype=np.float64)
    if not (np.all(np.isfinite(s0)) and np.all(np.isfinite(s1))):
        raise ValueError("attack statistics must be finite.")
    h0, h1 = s0.size // 2, s1.size // 2
    if h0 < 1 or h1 < 1:
        raise ValueError("need at least two runs on each dataset.")
    t, greater = _select_threshold(s0[:h0], s1[:h1], delta, confidence)
    e0, e1 = s0[h0:], s1[h1:]
    fp, fn = (int(c[0]) for c in _error_counts(e0, e1, np.array([t]), greater))
    eps = epsilon_lower_bound(fp, e0.size, fn, e1.size, delta, confidence)
    return AuditResult(float(eps), float(claimed_epsilon), float(delta), int(s0.size), t,
                       greater, fp / e0.size, fn / e1.size, confidence)


def sample_scores(mechanism, data0, data1, *, n_runs, seed=0):
    """Attack statistics of ``n_runs`` independent runs on each of two datasets.

    Parameters
    ----------
    mechanism : callable
        ``mechanism(data, rng) -> float``: run the mechanism on ``data`` with the
        ``numpy.random.Generator`` ``rng`` (advanced from run to run, so runs are
        independent) and return the scalar statistic of its release.
    data0, data1 : object
        The neighbouring datasets D and D'.
    n_runs : int
    seed : int
        Seeds two independent streams, one per dataset.
    """
    rng0, rng1 = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    s0 = np.array([mechanism(data0, rng0) for _ in range(n_runs)], dtype=np.float64)
    s1 = np.array([mechanism(data1, rng1) for _ in range(n_runs)], dtype=np.float64)
    return s0, s1


def audit(mechanism, data0, data1, *, claims, n_runs, seed=0, confidence=0.95):
    """Run ``mechanism`` on D and D' and audit each ``(delta, claimed_epsilon)`` claim.

    The same runs serve every claim; the threshold is chosen separately for each δ.

    Returns
    -------
    list of AuditResult
    """
    s0, s1 = sample_scores(mechanism, data0, data1, n_runs=n_runs, seed=seed)
    return [audit_scores(s0, s1, delta=d, claimed_epsilon=e, confidence=confidence)
            for d, e in claims]


# --------------------------------------------------------------------------- claims
def gaussian_epsilon(sigma, sensitivity, delta):
    """Smallest ε with the Gaussian mechanism (σ, ℓ2 sensitivity Δ) (ε, δ)-DP.

    Inverts the exact curve of Balle and Wang 2018, Thm 8
    (:func:`skdpsparse.accounting.gaussian_delta`): the guarantee an analytic-Gaussian
    calibration implies at every other δ.
    """
    from .accounting import gaussian_delta

    def excess(eps):
        return gaussian_delta(sigma, sensitivity, eps) - delta

    if excess(0.0) <= 0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0:
        hi *= 2.0
    return optimize.brentq(excess, 0.0, hi, xtol=1e-10)


def claimed_epsilons(budget, deltas, gaussian=None, epsilon_at=None):
    """``(delta, epsilon)`` claims a budget object implies at each δ of ``deltas``.

    ``PureDP(ε)``: ε at δ = 0 (one claim). ``ZCDP(ρ)``: its tight conversion at each δ.
    ``ApproxDP(ε, δ₀)``: ε at δ₀ and, at every other δ, either :func:`gaussian_epsilon`
    when ``gaussian=(sigma, sensitivity)`` gives the noise that produced it, or
    ``epsilon_at(δ)`` when the mechanism's own accountant states its guarantee at any δ
    for the same noise (an RDP curve converted at δ, as the estimator would report).
    """
    from .accounting import ZCDP, ApproxDP, PureDP

    if isinstance(budget, PureDP):
        return [(0.0, float(budget.epsilon))]
    if isinstance(budget, ZCDP):
        return [(float(d), float(budget.to_approx_dp(d).epsilon)) for d in deltas]
    if isinstance(budget, ApproxDP):
        out = []
        for d in deltas:
            if math.isclose(d, budget.delta):
                out.append((float(d), float(budget.epsilon)))
            elif gaussian is not None:
                out.append((float(d), gaussian_epsilon(*gaussian, d)))
            elif epsilon_at is not None:
                out.append((float(d), float(epsilon_at(d))))
        return out
    raise TypeError(f"unknown budget {budget!r}")


# ------------------------------------------------------------------ broken variants
@contextlib.contextmanager
def replaced(substitutes, package="skdpsparse"):
    """Temporarily rebind, in every loaded module of ``package``, each module-level name
    bound to a key of ``substitutes`` (a dict original -> replacement).

    Names are found by identity, so ``from .noise import add_noise_inplace`` in any
    module is caught. Not thread-safe: for audits and tests only.
    """
    by_id = {id(k): v for k, v in substitutes.items()}
    saved = []
    try:
        for name, module in list(sys.modules.items()):
            if module is None or not (name == package or name.startswith(package + ".")):
                continue
            for attr, value in list(vars(module).items()):
                if id(value) in by_id:
                    saved.append((module, attr, value))
                    setattr(module, attr, by_id[id(value)])
        yield
    finally:
        for module, attr, value in reversed(saved):
            setattr(module, attr, value)


def _load_estimators():
    # The estimators bind the mechanism runners by name: load them before patching.
    importlib.import_module(__package__ + ".linear_model")


def scaled_noise(factor=0.5):
    """Every noise draw of the package multiplied by ``factor`` (0.5: noise halved),
    while the mechanisms keep reporting the budget of the full noise.

    Gaussian and Laplace draws (:func:`~.mechanisms.noise.add_noise_inplace` and
    :func:`~.mechanisms.noise.grid_noise`) get
    ``factor`` times their scale; the exponential mechanism
    (:func:`~.mechanisms.sparse_exponential.exponential_mechanism`) samples at
    ``factor`` times its temperature 2Δ_u/ε (``factor`` 0.5: ε doubled).
    """
    from .mechanisms import noise, sparse_exponential

    _load_estimators()
    original = noise.add_noise_inplace
    original_grid = noise.grid_noise
    expo = sparse_exponential.exponential_mechanism

    def add_noise_inplace(values, rng, kind, scale, **bounds):
        return original(values, rng, kind, factor * scale, **bounds)

    def grid_noise(shape, rng, kind, scale, **bounds):
        return original_grid(shape, rng, kind, factor * scale, **bounds)

    def exponential_mechanism(scores, sensitivity, epsilon, rng, size=None):
        return expo(scores, factor * sensitivity, epsilon, rng, size)

    return replaced({original: add_noise_inplace, original_grid: grid_noise,
                     expo: exponential_mechanism})


def float_noise():
    """The library's noise as it was drawn before the exact samplers: NumPy's
    floating-point Laplace (and Gaussian) draws added to the float statistic.

    Kept as a broken variant: :func:`mironov_distinguisher` tells neighbouring inputs
    apart with certainty from one release of it.
    """
    from .mechanisms import noise
    from .utils import as_random_source

    _load_estimators()
    original = noise.add_noise_inplace
    original_grid = noise.grid_noise

    def grid_noise(shape, rng, kind, scale, **bounds):  # float draws, no grid (γ = 0)
        gen = np.random.default_rng(as_random_source(rng).secret_int(128))
        if kind == "laplace":
            return gen.laplace(0.0, scale, size=shape), 0.0
        return scale * gen.standard_normal(shape), 0.0

    def add_noise_inplace(values, rng, kind, scale, **bounds):
        gen = np.random.default_rng(as_random_source(rng).secret_int(128))
        flat = np.asarray(values).reshape(-1)
        if kind == "laplace":
            flat += gen.laplace(0.0, scale, size=flat.size)
        else:
            flat += scale * gen.standard_normal(flat.size)
        values[...] = flat.reshape(np.shape(values))
        return values

    return replaced({original: add_noise_inplace, original_grid: grid_noise})


def _numpy_laplace(k, scale):
    """NumPy's Laplace(0, scale) draw from the 53-bit uniform U = k·2⁻⁵³ (the
    ``random_laplace`` routine of numpy/random/src/distributions: log of 2U below ½,
    of 2 − 2U above), with the C library's ``log`` as NumPy calls it."""
    u = k * 2.0**-53
    if u >= 0.5:
        return -(scale * math.log(2.0 - u - u))
    return scale * math.log(u + u)


def float_laplace_support(release, mean, scale):
    """Whether ``release == fl(mean + Y)`` for some draw Y of NumPy's float Laplace.

    Every draw is a function of a 53-bit integer k, monotone on each half; the floats
    Y that round ``mean + Y`` to ``release`` lie within one ulp of ``release − mean``,
    so the candidate k are those whose draw lands there, checked exactly.
    """
    release, mean = float(release), float(mean)
    gap = math.ulp(release) + math.ulp(release - mean)
    lo, hi = release - mean - gap, release - mean + gap
    for negative in (True, False):
        if negative:  # Y = b log(2U), U < 1/2
            if lo >= 0:
                continue
            ends = [math.exp(min(v, 0.0) / scale) / 2 for v in (lo, hi)]
        else:  # Y = −b log(2 − 2U), U ≥ 1/2
            if hi < 0:
                continue
            ends = [1 - math.exp(-max(v, 0.0) / scale) / 2 for v in (lo, hi)]
        first = max(1, math.floor(min(ends) * 2.0**53) - 2)
        last = min(2**53 - 1, math.ceil(max(ends) * 2.0**53) + 2)
        if last - first > 10_000:
            raise ValueError("the release is too far from the mean for this attack.")
        for k in range(first, last + 1):
            if (k * 2.0**-53 < 0.5) == negative and mean + _numpy_laplace(k, scale) == release:
                return True
    return False


def mironov_distinguisher(release, mean0, mean1, scale):
    """Mironov (2012)'s attack on one release of a Laplace mechanism in floating point:
    0 or 1 when only that candidate statistic can have produced ``release`` (decided
    with certainty, coordinate by coordinate), ``None`` otherwise.

    Parameters
    ----------
    release, mean0, mean1 : array-like of shape (d,)
        The released vector and the two candidate noiseless statistics.
    scale : float
        The Laplace scale b.
    """
    for r, m0, m1 in zip(np.ravel(release), np.ravel(mean0), np.ravel(mean1)):
        if m0 == m1:
            continue
        in0, in1 = float_laplace_support(r, m0, scale), float_laplace_support(r, m1, scale)
        if in0 != in1:
            return 0 if in0 else 1
    return None


@contextlib.contextmanager
def inflated_bounds(factor=10.0):
    """Contribution bounding done with a bound ``factor`` times the one the noise assumes
    ("clipping skipped" for every row whose size is below the inflated bound).

    Inflates: the row bounds (L, L√s) of :func:`~.mechanisms.projection.bounded_mean`
    and of the ℓ1-recovery measurements with their 1.5L clip, the clipping scale τ of
    the trimmed median of means and the soft-truncation scale τ of the noise-smoothing
    mean; for the linear models, the row bound R and the label bound B of noisy SGD,
    of output perturbation (whose solver is given the constants of the inflated rows,
    so that it still certifies its solution) and of the sparse exponential mechanism,
    and both R and the clip norm C of cyclic DP-SGD. Noise calibration is untouched:
    the plans keep the noise scale (and the score sensitivity Δ_u) of the true bounds.
    """
    from .mechanisms import cyclic_sgd as cs
    from .mechanisms import heavy_tailed as ht
    from .mechanisms import l1_recovery, noisy_sgd, projection, sparse_exponential
    from .mechanisms import output_perturbation as op
    from .mechanisms.sensing import SubsampledHadamardSensing

    _load_estimators()

    def scale_kw(f, *keys):
        signature = inspect.signature(f)

        @functools.wraps(f)
        def g(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            for key in keys:  # None: no bound at all
                if bound.arguments[key] is not None:
                    bound.arguments[key] = factor * bound.arguments[key]
            return f(*bound.args, **bound.kwargs)
        return g

    def wide_cyclic_sgd(X, y, plan, rng, **kwargs):
        # plan.noise_std (σ = λzC/b of the true C) is kept.
        wide = dataclasses.replace(plan, norm_bound=factor * plan.norm_bound,
                                   clip_norm=factor * plan.clip_norm)
        return run_cyclic(X, y, wide, rng, **kwargs)

    def wide_output_perturbation(X, targets, plan, rng, **kwargs):
        # plan.noise_scale (for the true Δ) is kept; the solver's smoothness and its
        # certificate follow the inflated rows, so the solution stays certified.
        R, B = factor * plan.norm_bound, factor * plan.label_bound
        consts = op.loss_constants(
            plan.loss, loss_param=plan.loss_param, norm_bound=R, sparsity=plan.sparsity,
            intercept_scaling=plan.intercept_scaling, label_bound=B, alpha=plan.alpha,
            radius=plan.radius)
        d2, d1 = op.minimizer_sensitivity(consts, plan.alpha, plan.n, plan.n_params)
        wide = dataclasses.replace(plan, norm_bound=R, label_bound=B, constants=consts,
                                   sensitivity_l2=d2, sensitivity_l1=d1)
        return run_op(X, targets, wide, rng, **kwargs)

    bm, rb = projection.bounded_mean, l1_recovery.row_bounds
    run_cyclic, run_op = cs.cyclic_sgd, op.output_perturbation
    expo_bound = sparse_exponential.bound_inputs
    cms = SubsampledHadamardSensing.clipped_measurement_sum
    substitutes = {
        bm: lambda X, norm_bound, sparsity: bm(X, factor * norm_bound, sparsity),
        ht.trimmed_median_of_means: scale_kw(ht.trimmed_median_of_means, "tau"),
        ht.noise_smoothing_mean: scale_kw(ht.noise_smoothing_mean, "tau"),
        run_cyclic: wide_cyclic_sgd,
        noisy_sgd.noisy_projected_sgd: scale_kw(noisy_sgd.noisy_projected_sgd,
                                                "norm_bound", "label_bound"),
        run_op: wide_output_perturbation,
    }
    with replaced(substitutes):
        # Only l1_recovery's own row_bounds: projection.mean_noise calibrates with it.
        l1_recovery.row_bounds = lambda L, s: rb(factor * L, s)
        # Only the exponential mechanism's bound_inputs (output perturbation's own runs
        # through its widened plan); its Δ_u is computed from the true bounds.
        sparse_exponential.bound_inputs = scale_kw(expo_bound, "norm_bound", "label_bound")
        SubsampledHadamardSensing.clipped_measurement_sum = \
            lambda self, X, scales, clip: cms(self, X, scales, factor * clip)
        try:
            yield
        finally:
            l1_recovery.row_bounds = rb
            sparse_exponential.bound_inputs = expo_bound
            SubsampledHadamardSensing.clipped_measurement_sum = cms


def memoized_calibration():
    """Cache the pure calibration and planning functions (numbers in, numbers or a frozen
    plan out) wherever the package calls them. Outputs are unchanged; thousands of runs
    of a Gaussian or zCDP mechanism, or fits of an estimator whose noise comes from an
    accountant's root find, no longer pay it each time.

    Cached: :mod:`skdpsparse.accounting`'s Gaussian calibrations and zCDP conversions,
    :func:`~.mechanisms.cyclic_sgd.plan_cyclic_sgd`,
    :func:`~.mechanisms.output_perturbation.plan_output_perturbation` and
    :func:`~.mechanisms.noisy_sgd.noisy_sgd_privacy`. (The broken variants patch the
    runners, never these functions, so they compose with the cache.)
    """
    from .accounting import budget, calibrate, discrete
    from .mechanisms import cyclic_sgd, noisy_sgd, output_perturbation

    _load_estimators()
    pure = [calibrate.gaussian_sigma, calibrate.analytic_gaussian_sigma,
            discrete.discrete_gaussian_sigma,
            budget.approx_dp_to_zcdp, budget.zcdp_to_epsilon, cyclic_sgd.plan_cyclic_sgd,
            output_perturbation.plan_output_perturbation, noisy_sgd.noisy_sgd_privacy]
    return replaced({f: functools.lru_cache(maxsize=256)(f) for f in pure})
