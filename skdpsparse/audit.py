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

The catalogue at the end (:data:`CASES`) holds, for every mechanism and estimator of
the package, a hard neighbouring pair and the attack statistic; ``tests/audit`` runs it
at CI size and ``benchmarks/audit.py`` at full size. The broken variants are made by
:func:`scaled_noise` (noise scale multiplied by a factor) and :func:`inflated_bounds`
(contribution bounding with a bound larger than the one the noise is calibrated for),
which temporarily replace functions of the package; :func:`memoized_calibration` caches
the pure noise-calibration functions (numbers in, numbers out) so that thousands of runs
are cheap, without changing a single output bit.
"""

import contextlib
import functools
import math
import sys
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

__all__ = [
    # toolkit
    "AuditResult", "audit", "audit_scores", "claimed_epsilons", "clopper_pearson",
    "epsilon_lower_bound", "gaussian_epsilon", "inflated_bounds", "memoized_calibration",
    "replaced", "sample_scores", "scaled_noise",
    # catalogue
    "AuditCase", "CASES", "CURVE_DELTA", "VARIANTS", "audit_failures", "format_results",
    "run_case",
]


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


def claimed_epsilons(budget, deltas, gaussian=None):
    """``(delta, epsilon)`` claims a budget object implies at each δ of ``deltas``.

    ``PureDP(ε)``: ε at δ = 0 (one claim). ``ZCDP(ρ)``: its tight conversion at each δ.
    ``ApproxDP(ε, δ₀)``: ε at δ₀ and, when ``gaussian=(sigma, sensitivity)`` gives the
    noise that produced it, :func:`gaussian_epsilon` at every other δ.
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


def scaled_noise(factor=0.5):
    """Every noise draw of the package multiplied by ``factor`` (0.5: noise halved),
    while the mechanisms keep reporting the budget of the full noise."""
    from .mechanisms import noise

    original = noise.add_noise_inplace

    def add_noise_inplace(values, rng, kind, scale):
        return original(values, rng, kind, factor * scale)

    return replaced({original: add_noise_inplace})


@contextlib.contextmanager
def inflated_bounds(factor=10.0):
    """Contribution bounding done with a bound ``factor`` times the one the noise assumes
    ("clipping skipped" for every row whose size is below the inflated bound).

    Inflates: the row bounds (L, L√s) of :func:`~.mechanisms.projection.bounded_mean`
    and of the ℓ1-recovery measurements with their 1.5L clip, the clipping scale τ of
    the trimmed median of means and the soft-truncation scale τ of the noise-smoothing
    mean. Noise calibration is untouched.
    """
    from .mechanisms import heavy_tailed as ht
    from .mechanisms import l1_recovery, projection
    from .mechanisms.sensing import SubsampledHadamardSensing

    def scale_kw(f, key):
        @functools.wraps(f)
        def g(*args, **kwargs):
            kwargs[key] = factor * kwargs[key]
            return f(*args, **kwargs)
        return g

    bm, rb = projection.bounded_mean, l1_recovery.row_bounds
    cms = SubsampledHadamardSensing.clipped_measurement_sum
    substitutes = {
        bm: lambda X, norm_bound, sparsity: bm(X, factor * norm_bound, sparsity),
        ht.trimmed_median_of_means: scale_kw(ht.trimmed_median_of_means, "tau"),
        ht.noise_smoothing_mean: scale_kw(ht.noise_smoothing_mean, "tau"),
    }
    with replaced(substitutes):
        # Only l1_recovery's own row_bounds: projection.mean_noise calibrates with it.
        l1_recovery.row_bounds = lambda L, s: rb(factor * L, s)
        SubsampledHadamardSensing.clipped_measurement_sum = \
            lambda self, X, scales, clip: cms(self, X, scales, factor * clip)
        try:
            yield
        finally:
            l1_recovery.row_bounds = rb
            SubsampledHadamardSensing.clipped_measurement_sum = cms


def memoized_calibration():
    """Cache the pure calibration functions of :mod:`skdpsparse.accounting` (numbers
    in, numbers out) wherever the package calls them. Outputs are unchanged; thousands
    of runs of a Gaussian or zCDP mechanism no longer pay a root find each."""
    from .accounting import budget, calibrate

    pure = [calibrate.gaussian_sigma, calibrate.analytic_gaussian_sigma,
            budget.approx_dp_to_zcdp, budget.zcdp_to_epsilon]
    return replaced({f: functools.lru_cache(maxsize=256)(f) for f in pure})


# ------------------------------------------------------------------------ catalogue
#: δ of the second audit point of the Gaussian mechanisms. At the requested small δ a
#: broken Gaussian mechanism is only refuted with ~1/δ runs; their guarantee (the exact
#: Gaussian curve of an analytic calibration, or ρ-zCDP) also fixes ε at every other δ,
#: and at this δ a factor 2 in the noise shows with a few hundred runs.
CURVE_DELTA = 0.2

#: Variants run by :func:`run_case`: the mechanism as shipped and two broken ones.
VARIANTS = {
    "correct": contextlib.nullcontext,
    "noise/2": lambda: scaled_noise(0.5),
    "bound x10": lambda: inflated_bounds(10.0),
}


@dataclass(frozen=True)
class AuditCase:
    """A mechanism, a hard neighbouring pair and the claims to audit.

    Attributes
    ----------
    name : str
    mechanism : callable
        ``mechanism(data, rng) -> float``, the attack statistic of one release.
    data : tuple
        ``(D, D')``.
    claims : tuple of (delta, epsilon)
        Read from the budget the mechanism itself reports.
    detect : dict
        Broken variant -> the δ at which it must be refuted (the audit's teeth).
    """

    name: str
    mechanism: object
    data: tuple
    claims: tuple
    detect: dict


def run_case(case, *, n_runs, seed=0, variants=tuple(VARIANTS)):
    """Audit ``case`` under each variant; returns ``{variant: [AuditResult, ...]}``."""
    out = {}
    with memoized_calibration():
        for v in variants:
            with VARIANTS[v]():
                out[v] = audit(case.mechanism, *case.data, claims=case.claims,
                               n_runs=n_runs, seed=seed)
    return out


def _sparse_pair(n, d, L, seed=0):
    """CSR pair: n - 1 rows with one entry ±L/2 on columns 1..d-1; row 0 is -10L·e₀ in
    D and +10L·e₀ in D' (column 0 touched by no other row; both far outside the ℓ2
    bound L, so bounding must scale them to ∓L: the largest possible change)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    cols = np.concatenate([[0], rng.integers(1, d, n - 1)])
    vals = np.concatenate([[-10.0 * L], rng.choice([-0.5, 0.5], n - 1) * L])
    X0 = sp.csr_matrix((vals, (np.arange(n), cols)), shape=(n, d))
    X1 = X0.copy()
    X1.data[0] = 10.0 * L
    return X0, X1


def _dense_pair(rows, target):
    """``rows`` with row 0 set to -``target`` (D) and +``target`` (D')."""
    X0, X1 = rows.copy(), rows.copy()
    X0[0], X1[0] = -target, target
    return X0, X1


# Where each broken variant must be refuted: pure DP at δ = 0; Gaussian mechanisms at
# CURVE_DELTA (at δ = 1e-5 an ε above ~log(runs/4) is out of reach of any attack).
_PURE_DETECT = {"noise/2": (0.0,), "bound x10": (0.0,)}
_GAUSSIAN_DETECT = {"noise/2": (CURVE_DELTA,), "bound x10": (CURVE_DELTA,)}


def _detect(delta):
    return _PURE_DETECT if delta == 0 else _GAUSSIAN_DETECT


def case_projection(epsilon=2.0, delta=0.0, n=50, d=8, L=1.0):
    """:func:`~.mechanisms.projection.projection_mechanism` on
    :func:`~.mechanisms.projection.bounded_mean` (s = 1): Laplace when δ = 0, analytic
    Gaussian otherwise; the statistic is the released coordinate of the unique column."""
    from .mechanisms import projection as P

    kw = dict(epsilon=epsilon, delta=delta, norm_bound=L, sparsity=1)

    def mechanism(X, rng):
        return P.projection_mechanism(P.bounded_mean(X, L, 1), n, rng=rng, **kw)[0][0]

    kind, scale, budget = P.mean_noise(n, **kw)
    claims = claimed_epsilons(budget, (delta, CURVE_DELTA), gaussian=(scale, 2 * L / n))
    return AuditCase(f"projection_mechanism ({kind})", mechanism, _sparse_pair(n, d, L),
                     tuple(claims), _detect(delta))


def case_sparse_mean(method, epsilon=2.0, delta=0.0, n=50, d=8, L=1.0):
    """:func:`~.mechanisms.sparse_mean.private_sparse_mean` with ``method``; the
    statistic is the released coordinate of the unique column."""
    from .mechanisms import projection as P
    from .mechanisms import sparse_mean as S

    kw = dict(epsilon=epsilon, delta=delta, norm_bound=L, sparsity=1)

    def mechanism(X, rng):
        return S.private_sparse_mean(X, method, rng=rng, **kw)[0][0]

    _, scale, budget = P.mean_noise(n, **kw)
    claims = claimed_epsilons(budget, (delta, CURVE_DELTA), gaussian=(scale, 2 * L / n))
    return AuditCase(f"private_sparse_mean({method!r})", mechanism, _sparse_pair(n, d, L),
                     tuple(claims), _detect(delta))


def case_l1_recovery(epsilon=8.0, delta=1e-5, n=10, d=64, m=8, L=1.0, max_iter=10):
    """:func:`~.mechanisms.l1_recovery.gaussian_l1_recovery`, compressed-sensing branch
    (d ≥ m ln² m); the statistic is the recovered coordinate of the unique column.

    Its noise is calibrated for the measurement sensitivity 3L/n (the 1.5L clip of
    each measurement vector), which 1-sparse rows cannot reach (‖Ae_j‖ = 1 for the
    Hadamard operator): halving its noise is not expected to be refuted.
    """
    from .mechanisms import l1_recovery as R

    kw = dict(epsilon=epsilon, delta=delta, norm_bound=L, sparsity=1,
              n_measurements_=m, max_iter=max_iter)

    def mechanism(X, rng):
        return R.gaussian_l1_recovery(X, rng=rng, **kw)[0][0]

    X0, X1 = _sparse_pair(n, d, L)
    _, budget, info = R.gaussian_l1_recovery(X0, rng=np.random.default_rng(0), **kw)
    if info["branch"] != "compressed_sensing":
        raise ValueError("parameters do not reach the compressed-sensing branch.")
    sens = 2 * R.MEASUREMENT_CLIP * L / n
    claims = claimed_epsilons(budget, (delta, CURVE_DELTA), gaussian=(info["sigma"], sens))
    return AuditCase("gaussian_l1_recovery", mechanism, (X0, X1), tuple(claims),
                     {"bound x10": (CURVE_DELTA,)})


def _cwme_rows(n_groups, group, d, seed=0):
    """Consecutive groups of ``group`` rows (centre 0, τ = 1): the lower groups far
    below -3τ, the upper ones far above +3τ, the middle one(s) near 0, so the median is
    the middle group's mean (odd m) or the average of the two middle ones (even m)."""
    rng = np.random.default_rng(seed)
    lo = n_groups // 2 - (1 if n_groups % 2 == 0 else 0)
    parts = []
    for g in range(n_groups):
        centre = -6.0 if g < lo else (6.0 if g > n_groups // 2 else 0.0)
        parts.append(centre + rng.uniform(-0.5, 0.5, (group, d)))
    # Row 0 must sit in a middle group: put the first middle group first.
    parts.insert(0, parts.pop(lo))
    return np.vstack(parts)


def case_cwme(epsilon=2.0, delta=0.0, n_groups=3, group=10, d=1, tau=1.0):
    """:func:`~.mechanisms.heavy_tailed.private_cwme` on consecutive groups whose
    median is the group of row 0, which goes from -100τ to +100τ in every coordinate:
    the sensitivity 6τ/n_min (odd m) or 3τ/n_min (even m) is attained. Laplace (d = 1:
    Δ₁ = Δ∞) when δ = 0, Gaussian under zCDP otherwise; statistic: the sum of the
    coordinates (the difference direction)."""
    from .mechanisms import heavy_tailed as H

    kw = dict(tau=tau, n_groups=n_groups, epsilon=epsilon, delta=delta)

    def mechanism(X, rng):
        return H.private_cwme(X, rng=rng, **kw)[0].sum()

    X0, X1 = _dense_pair(_cwme_rows(n_groups, group, d), 100.0 * tau)
    _, budget, _ = H.private_cwme(X0, rng=np.random.default_rng(0), **kw)
    claims = claimed_epsilons(budget, (delta, CURVE_DELTA))
    noise = "laplace" if delta == 0 else "gaussian, zCDP"
    return AuditCase(f"private_cwme ({noise}, m={n_groups})", mechanism, (X0, X1),
                     tuple(claims), _detect(delta))


def case_noise_smoothing(epsilon=8.0, delta=1e-5, n=20, d=3, tau=1.0):
    """:func:`~.mechanisms.heavy_tailed.private_noise_smoothing_mean`; row 0 goes from
    -10⁶τ to +10⁶τ in every coordinate (ψ_c saturates: change 2S_cτ/n per
    coordinate); statistic: the sum of the coordinates."""
    from .mechanisms import heavy_tailed as H

    kw = dict(tau=tau, epsilon=epsilon, delta=delta)

    def mechanism(X, rng):
        return H.private_noise_smoothing_mean(X, rng=rng, **kw)[0].sum()

    rows = np.random.default_rng(0).standard_normal((n, d))
    X0, X1 = _dense_pair(rows, 1e6 * tau)
    _, budget, _ = H.private_noise_smoothing_mean(X0, rng=np.random.default_rng(0), **kw)
    return AuditCase("private_noise_smoothing_mean", mechanism, (X0, X1),
                     tuple(claimed_epsilons(budget, (delta, CURVE_DELTA))),
                     _GAUSSIAN_DETECT)


def case_sparse_mean_estimator(epsilon=2.0, delta=0.0, n=50, d=8, L=1.0):
    """:class:`~.mean.DPSparseMeanEstimator` end to end on CSR input (projection
    method, s = 1); statistic: ``mean_`` on the unique column."""
    from .mean import DPSparseMeanEstimator
    from .mechanisms.projection import mean_noise

    params = dict(epsilon=epsilon, delta=delta, sparsity=1, norm_bound=L,
                  method="projection")

    def mechanism(X, rng):
        return DPSparseMeanEstimator(random_state=rng, **params).fit(X).mean_[0]

    X0, X1 = _sparse_pair(n, d, L)
    _, scale, _ = mean_noise(n, epsilon=epsilon, delta=delta, norm_bound=L, sparsity=1)
    budget = DPSparseMeanEstimator(random_state=0, **params).fit(X0).privacy_spent_
    claims = claimed_epsilons(budget, (delta, CURVE_DELTA), gaussian=(scale, 2 * L / n))
    return AuditCase("DPSparseMeanEstimator", mechanism, (X0, X1), tuple(claims),
                     _detect(delta))


def case_heavy_tailed_mean(epsilon=8.0, delta=1e-5, n=40, d=3, tau=1.0):
    """:class:`~.mean.DPHeavyTailedMean` (cwme, 2 groups, rows shuffled into groups at
    random as shipped). With two equal groups the median is the mean of all clipped
    rows whatever the permutation, so row 0 going from -100τ to +100τ moves every
    coordinate by the full 3τ/n_min; statistic: the sum of ``mean_``."""
    from .mean import DPHeavyTailedMean

    params = dict(epsilon=epsilon, delta=delta, truncation=tau, n_groups=2,
                  method="cwme", shuffle=True)

    def mechanism(X, rng):
        return DPHeavyTailedMean(random_state=rng, **params).fit(X).mean_.sum()

    rows = np.random.default_rng(0).uniform(-2 * tau, 2 * tau, (n, d))
    X0, X1 = _dense_pair(rows, 100.0 * tau)
    budget = DPHeavyTailedMean(random_state=0, **params).fit(X0).privacy_spent_
    claims = claimed_epsilons(budget, (delta, CURVE_DELTA))
    noise = "laplace" if delta == 0 else "gaussian, zCDP"
    return AuditCase(f"DPHeavyTailedMean (cwme, {noise})", mechanism, (X0, X1), tuple(claims),
                     _detect(delta))


def case_heavy_tailed_regressor(epsilon=8.0, delta=1e-5, n=20, d=3, tau=1.0):
    """:class:`~.linear_model.DPHeavyTailedRegressor` (noise-smoothing oracle, one
    step, with its random permutation of the rows). Row 0 is x = 10⁶(1, …, 1) with
    y = ∓10⁶, so its gradient at w = 0, -y(x, 1), saturates ψ_c in every coordinate of
    opposite signs in D and D'; statistic: the sum of ``coef_`` and ``intercept_``."""
    from .linear_model import DPHeavyTailedRegressor

    params = dict(epsilon=epsilon, delta=delta, mean_oracle="noise_smoothing",
                  max_iter=1, learning_rate=1.0, truncation=tau, radius=1e3)

    def mechanism(data, rng):
        reg = DPHeavyTailedRegressor(random_state=rng, **params).fit(*data)
        return reg.coef_.sum() + reg.intercept_

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((n, d)), rng.standard_normal(n)
    X[0] = 1e6
    y0, y1 = y.copy(), y.copy()
    y0[0], y1[0] = -1e6, 1e6
    budget = DPHeavyTailedRegressor(random_state=0, **params).fit(X, y0).privacy_spent_
    return AuditCase("DPHeavyTailedRegressor", mechanism, ((X, y0), (X, y1)),
                     tuple(claimed_epsilons(budget, (delta, CURVE_DELTA))),
                     _GAUSSIAN_DETECT)


#: name -> builder of its :class:`AuditCase`, with the CI-size defaults (a large ε,
#: where a factor 2 in the noise shows in a few thousand runs); keywords override them.
CASES = {
    "projection_laplace": functools.partial(case_projection, epsilon=2.0, delta=0.0),
    "projection_gaussian": functools.partial(case_projection, epsilon=8.0, delta=1e-5),
    "sparse_mean_laplace": functools.partial(case_sparse_mean, "laplace", epsilon=2.0,
                                             delta=0.0),
    "sparse_mean_gaussian": functools.partial(case_sparse_mean, "gaussian", epsilon=8.0,
                                              delta=1e-5),
    "l1_recovery": functools.partial(case_l1_recovery, epsilon=8.0, delta=1e-5),
    "cwme_laplace": functools.partial(case_cwme, epsilon=2.0, delta=0.0, n_groups=3, d=1),
    "cwme_gaussian": functools.partial(case_cwme, epsilon=8.0, delta=1e-5, n_groups=4, d=3),
    "noise_smoothing": functools.partial(case_noise_smoothing, epsilon=8.0, delta=1e-5),
    "sparse_mean_estimator": functools.partial(case_sparse_mean_estimator, epsilon=2.0,
                                               delta=0.0),
    "heavy_tailed_mean_laplace": functools.partial(case_heavy_tailed_mean, epsilon=2.0,
                                                   delta=0.0, d=1),
    "heavy_tailed_mean_gaussian": functools.partial(case_heavy_tailed_mean, epsilon=8.0,
                                                    delta=1e-5),
    "heavy_tailed_regressor": functools.partial(case_heavy_tailed_regressor, epsilon=8.0,
                                                delta=1e-5),
}


def audit_failures(case, results):
    """What an audit refutes: claims of the correct mechanism that the lower bound
    exceeds, and required detections (``case.detect``) of the broken variants present in
    ``results`` that did not happen. Empty when the audit passes."""
    out = []
    if not any(v in case.detect for v in results):
        out.append(f"{case.name}: no broken variant with a required detection was run")
    for r in results.get("correct", ()):
        if r.violated:
            out.append(f"{case.name}: eps_lb {r.epsilon_lb:.3f} > claimed "
                       f"{r.claimed_epsilon:.3f} at delta={r.delta:g}")
    for v, rs in results.items():
        for r in rs:
            if v != "correct" and r.delta in case.detect.get(v, ()) and not r.violated:
                out.append(f"{case.name} [{v}] not detected: eps_lb {r.epsilon_lb:.3f} <= "
                           f"claimed {r.claimed_epsilon:.3f} at delta={r.delta:g}")
    return out


def format_results(case, results):
    """One line per audited δ: claimed ε, ε_lb of each variant, runs per dataset."""
    variants = list(results)
    lines = []
    for i, (delta, eps) in enumerate(case.claims):
        lbs = "  ".join(f"{v}={results[v][i].epsilon_lb:6.3f}" for v in variants)
        n = results[variants[0]][i].n_runs
        lines.append(f"{case.name:42s} delta={delta:<7g} claimed={eps:6.3f}  {lbs}  "
                     f"runs={n}x2")
    return "\n".join(lines)
