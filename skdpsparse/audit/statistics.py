"""Empirical lower bounds on ε from a distinguishing attack, and the claims to compare
them with.

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

This module knows nothing of the package's mechanisms: it imports only NumPy, SciPy
and :mod:`skdpsparse.accounting`.
"""

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from ..accounting import ZCDP, ApproxDP, PureDP, gaussian_delta

__all__ = [
    "AuditResult", "audit", "audit_scores", "claimed_epsilons", "clopper_pearson",
    "epsilon_lower_bound", "gaussian_epsilon", "sample_scores",
]


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
