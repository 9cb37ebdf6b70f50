"""Private selection: report-noisy-min and random stopping (Liu and Talwar 2019).

Two ways to pick the best of several private candidates:

* :func:`report_noisy_min` — a fixed list of scores, each of sensitivity Δ, plus
  Laplace noise; the argmin is ε-DP (Ghazi et al. 2024, Section 7, Algorithm 7, with the
  scale corrected for non-monotone scores, see its notes).
* Random stopping (Liu and Talwar 2019 [LT19]_, the selection of Ghazi et al. (2024 v2)
  Algorithm 5 / Theorem 6.1): run a private mechanism Q that returns
  ``(candidate, private score)`` again and again with fresh randomness, keep the best
  so far, and after every run stop with probability γ (at most T runs). If Q is
  (ε₁, δ₁)-DP the selected candidate is (3ε₁ + 3√(2δ₁), √(2δ₁)·T + δ₂)-DP with
  T = ⌈ln(1/δ₂)/γ⌉ ([LT19]_ Thm 3.4), and 3ε₁-DP when Q is pure and the loop is
  not truncated ([LT19]_ Thm 3.2). The cost does not grow with the number of runs,
  which is random, *and must stay hidden*: given κ = k the output is a best-of-k,
  whose privacy loss does grow with k.

The budgets are numbers only (:func:`random_stopping_budget`,
:func:`split_budget_for_random_stopping`); the scores are private numbers
(:func:`noisy_score`, :func:`private_mean_loss`); noise comes from
:func:`skdpsparse.mechanisms.noise.add_noise_inplace` only. The stopping coin and
the choice among candidates use the Generator directly: they are independent of the
data, not noise calibrated to a sensitivity.

References
----------
.. [LT19] J. Liu, K. Talwar. Private selection from private candidates. STOC 2019,
   arXiv:1811.07971, Theorems 3.2 and 3.4; the statements used are in the
   documentation's derivation "Private selection".
.. [GGKKM24] B. Ghazi, C. Guzmán, P. Kamath, R. Kumar, P. Manurangsi.
   Differentially private optimization with sparse gradients. 2024. "v1" is the first
   version (boosting by report-noisy-min, Algorithm 7), "v2" the revised one (private
   selection with random stopping, Algorithm 5 and Theorem 6.1).
.. [DR14] C. Dwork, A. Roth. The algorithmic foundations of differential privacy.
   2014. Thm 3.6 (Laplace mechanism), Claim 3.9 (report noisy max).
.. [DWZK19] Z. Ding, Y. Wang, D. Zhang, D. Kifer. Free gap information from the
   differentially private sparse vector and noisy max mechanisms. VLDB 2019.
"""

import math
from dataclasses import dataclass

import numpy as np

from ..accounting import ZCDP, ApproxDP, PureDP, laplace_scale
from ..utils._random import as_random_source
from .noise import add_noise_inplace

__all__ = [
    "gamma_for_failure_prob",
    "noisy_score",
    "private_mean_loss",
    "random_stopping_budget",
    "random_stopping_max_runs",
    "random_stopping_selection",
    "report_noisy_min",
    "split_budget_for_random_stopping",
]


def _positive(value, name):
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a real number, got {value!r}.")
    value = float(value)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be positive and finite, got {value!r}.")
    return value


def _gamma(gamma):
    gamma = _positive(gamma, "gamma")
    if gamma > 1:
        raise ValueError(f"gamma must be in (0, 1], got {gamma!r}.")
    return gamma


def _open_unit(value, name):
    value = _positive(value, name)
    if not value < 1:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}.")
    return value


# ------------------------------------------------------------------ report noisy min
def report_noisy_min(scores, *, sensitivity, epsilon, rng, monotone=False):
    """Index of the smallest score after Laplace noise: ε-DP selection.

    **Privacy guarantee.** Protected: whatever one neighbour changes in the scores,
    provided every score moves by at most ``sensitivity`` between neighbours (the
    caller's relation; replacement with n public for an empirical risk). Releasing the
    index is ε-DP: discrete Laplace noise of scale 2Δ/ε (Δ/ε if ``monotone``) on the
    grid (Ding, Wang, Zhang and Kifer 2019; Dwork and Roth 2014, Claim 3.9; the rounding
    is charged as in :func:`~skdpsparse.mechanisms.noise.add_noise_inplace`).
    Assumptions: the per-score sensitivity bound holds for every pair of neighbours; the
    scores are finite (a non-finite score raises: bound them first); the noise comes
    from a secret key. Not covered: the noisy scores themselves (releasing them would
    cost k·ε), and Ghazi et al. (2024 v1) Algorithm 7's scale Δ/ε for non-monotone
    scores (ε-DP only up to a factor 2).

    Parameters
    ----------
    scores : array-like of shape (k,)
        Finite scores (lower is better), each of sensitivity Δ = ``sensitivity``
        under replacement: |s_j(S) − s_j(S')| ≤ Δ for every j and neighbours S, S'.
    sensitivity : float
        Δ > 0 (e.g. B/n for an empirical risk with losses in [0, B]).
    epsilon : float
        ε > 0.
    rng : RandomSource or numpy.random.Generator
    monotone : bool, default=False
        True only if, for every pair of neighbours, all scores move in the same
        direction; then Lap(Δ/ε) suffices ([DR14]_ Claim 3.9).

    Returns
    -------
    int
        The index of the noisy minimum. Only the index may be released: the noisy
        scores themselves would cost k·ε.

    Notes
    -----
    Scale b = 2Δ/ε ([DWZK19]_; the argument of [DR14]_ Claim 3.9 with both sides
    moving). Fix the noise r_{-i} of the other scores; i wins iff
    r_i < t(s) := min_{j≠i}(s_j + r_j) − s_i. For a neighbour s', every s'_j ≤ s_j + Δ
    and s'_i ≥ s_i − Δ, so t(s') ≥ t(s) − 2Δ, and the Laplace CDF gives
    F(t − 2Δ) ≥ e^{−2Δ/b}F(t) = e^{−ε}F(t). The factor 2 is needed for arbitrary
    (non-monotone) scores such as F_S(x_k) of different models: with two candidates
    and b = Δ/ε, moving (s₁, s₂) by (+Δ, −Δ) shifts r₁ − r₂'s threshold by 2Δ, and the
    probability of choosing 1 at a gap of 0 falls from 1/2 to e^{−2ε}(1 + ε)/2, a ratio
    e^{2ε}/(1 + ε) > e^{ε} (3.69 against 2.72 at ε = 1). Ghazi et al. (2024 v1),
    Algorithm 7, uses Lap(Δ/ε_sel) with Δ = B/n (convex) or 2L/n; that is the monotone
    scale, so it is ε_sel-DP only up to this factor 2.
    """
    values = np.array(scores, dtype=np.float64).reshape(-1)
    if values.size == 0:
        raise ValueError("scores must not be empty.")
    if not np.all(np.isfinite(values)):
        raise ValueError("scores must be finite.")
    delta_ = _positive(sensitivity, "sensitivity")
    # On the grid (mechanisms/noise.py) each score moves by at most Δ/γ + 1 units and
    # the discrete Laplace log-density is 1/N-Lipschitz, so the threshold argument
    # above holds for the integer release with shift 2(Δ/γ + 1) ≤ εN (or Δ/γ + 1).
    factor = 1.0 if monotone else 2.0
    scale = laplace_scale(factor * delta_, _positive(epsilon, "epsilon"))
    add_noise_inplace(values, rng, "laplace", scale, sensitivity=factor * delta_,
                      n_changed=int(factor))
    return int(np.argmin(values))


# ---------------------------------------------------------------- private scores
def noisy_score(score, *, sensitivity, epsilon, rng):
    """``score`` + Lap(Δ/ε): the Laplace mechanism on one number ([DR14]_ Thm 3.6).

    The score of one random-stopping run: Ghazi et al. (2024 v2) Algorithm 5 adds Lap(λ) with
    λ = 12B/(nε) = (B/n)/(ε/12) to F_S(x_k) (Δ = B/n) and λ = 24L/(nε) to
    ‖∇F_S(x_k)‖₂ (Δ = 2L/n). With the run's model held fixed, the pair
    (model, score) is (ε_run + ε, δ_run)-DP by composition.

    **Privacy guarantee.** Protected: whatever one neighbour changes in ``score`` for a
    fixed candidate, provided it moves by at most ``sensitivity``. (Δ/b)-DP by the
    discrete Laplace mechanism on the grid (Dwork and Roth 2014, Theorem 3.6, in its
    discrete form: :func:`~skdpsparse.mechanisms.noise.add_noise_inplace`), and a
    candidate released with its score composes (basic composition). Assumptions: the
    sensitivity is a bound over all neighbours for the candidate as fixed before
    scoring; the score is finite (a non-finite score raises); the noise comes from a
    secret key. Not covered: a candidate whose own release is not accounted for
    separately.

    Parameters
    ----------
    score : float
    sensitivity : float
        Δ > 0 of ``score`` under replacement, for a fixed candidate.
    epsilon : float
    rng : RandomSource or numpy.random.Generator

    Returns
    -------
    float
    """
    value = np.array([float(score)], dtype=np.float64)
    if not np.isfinite(value[0]):
        raise ValueError(f"score must be finite, got {score!r}.")
    sensitivity = _positive(sensitivity, "sensitivity")
    add_noise_inplace(value, rng, "laplace",
                      laplace_scale(sensitivity, _positive(epsilon, "epsilon")),
                      sensitivity=sensitivity)
    return float(value[0])


def private_mean_loss(losses, *, loss_bound, epsilon, rng):
    """Private mean of per-example losses, each bounded into [0, ``loss_bound``].

    Contribution bounding, never rejection: NaN and +inf become ``loss_bound``,
    −inf becomes 0, everything is clipped into [0, B]. The mean of n values in
    [0, B] has sensitivity B/n under replacement (n public), so this is
    :func:`noisy_score` with Δ = B/n: ε-DP for a fixed model.

    **Privacy guarantee.** Protected: one example, under replacement neighbours (n
    public): each loss must depend on its own example only and the model must be fixed
    before scoring. ε-DP by :func:`noisy_score` with Δ = B/n, since every loss is
    clipped into [0, B] (NaN and +inf to B, −inf to 0; contribution bounding, no
    exception depends on a value). Assumptions: ``losses`` has one entry per example of
    a dataset of public size n; the noise comes from a secret key. Not covered: losses
    that depend on other examples (a loss normalised by the data, say), and the
    floating-point rounding of the mean itself (pairwise summation: of order
    n·log₂(n)·2⁻⁵³ of Δ, not charged).

    Parameters
    ----------
    losses : array-like of shape (n,)
        One loss per example; each must depend on that example only.
    loss_bound : float
        B > 0.
    epsilon : float
    rng : RandomSource or numpy.random.Generator

    Returns
    -------
    float
    """
    bound = _positive(loss_bound, "loss_bound")
    losses = np.asarray(losses, dtype=np.float64).reshape(-1)
    if losses.size == 0:
        raise ValueError("losses must not be empty.")
    clipped = np.clip(np.nan_to_num(losses, nan=bound, posinf=bound, neginf=0.0), 0.0, bound)
    return noisy_score(clipped.mean(), sensitivity=bound / losses.size, epsilon=epsilon,
                       rng=rng)


# ---------------------------------------------------------------- random stopping
def random_stopping_max_runs(gamma, delta2):
    """T = ⌈ln(1/δ₂)/γ⌉, the truncation of [LT19]_ Thm 3.4.

    Then P[Geom(γ) > T] = (1 − γ)^T ≤ e^{−γT} ≤ δ₂. Ghazi et al. (2024 v2) Algorithm 5 takes
    K = (1/γ)·ln(2/δ), i.e. δ₂ = δ/2.

    **Privacy guarantee.** None needed: a function of public numbers (γ, δ₂). The
    truncation T it returns is what :func:`random_stopping_budget` charges δ₂ for (Liu
    and Talwar 2019, Theorem 3.4).

    Parameters
    ----------
    gamma : float
        Stopping probability in (0, 1].
    delta2 : float
        In (0, 1).

    Returns
    -------
    int
    """
    gamma, delta2 = _gamma(gamma), _open_unit(delta2, "delta2")
    return max(1, math.ceil(math.log(1.0 / delta2) / gamma))


def random_stopping_budget(run_budget, *, gamma, delta2=None):
    """Privacy of the candidate chosen by random stopping from (ε₁, δ₁)-DP runs.

    **Privacy guarantee.** None needed: a function of public budgets. What it states:
    the candidate chosen by :func:`random_stopping_selection` from runs that are each
    (ε₁, δ₁)-DP (candidate and score together, under the runs' neighbouring relation) is
    ``PureDP(3ε₁)`` untruncated with pure runs (Liu and Talwar 2019, "Private selection
    from private candidates", Theorem 3.2) or (3ε₁ + 3√(2δ₁), √(2δ₁)·T + δ₂)-DP when
    truncated at T (their Theorem 3.4); derivation: :ref:`derivation_private_selection`.
    Not covered: the number of runs and the unselected runs.

    Parameters
    ----------
    run_budget : PureDP or ApproxDP
        The guarantee of one run, candidate and score together.
    gamma : float
        Stopping probability in (0, 1].
    delta2 : float or None, default=None
        ``None``: the loop is not truncated (pure runs only). Otherwise the loop is
        truncated at T = :func:`random_stopping_max_runs` (γ, δ₂).

    Returns
    -------
    PureDP or ApproxDP
        * pure runs, untruncated: ``PureDP(3ε₁)`` ([LT19]_ Thm 3.2; Papernot and
          Steinke 2022, Cor. 3 with η = 1);
        * truncated: ``ApproxDP(3ε₁ + 3√(2δ₁), √(2δ₁)·T + δ₂)`` ([LT19]_ Thm 3.4, as
          used in Ghazi et al. (2024 v2), proof of Theorem 6.1), δ₁ = 0 for pure runs.

    Raises
    ------
    TypeError
        For a zCDP run budget (convert it to (ε, δ) first).
    ValueError
        For δ₁ > 0 without ``delta2``, or when the resulting δ is not below 1.
    """
    gamma = _gamma(gamma)
    if isinstance(run_budget, ZCDP) or not isinstance(run_budget, (PureDP, ApproxDP)):
        raise TypeError("run_budget must be a PureDP or ApproxDP budget (convert a zCDP "
                        f"budget with .to_approx_dp(delta) first), got {run_budget!r}.")
    eps1 = run_budget.epsilon
    delta1 = run_budget.delta if isinstance(run_budget, ApproxDP) else 0.0
    if delta2 is None:
        if delta1 > 0:
            raise ValueError("delta2 is required for a run budget with delta > 0: only "
                             "the truncated loop (LT19 Thm 3.4) has a guarantee then.")
        return PureDP(3.0 * eps1)
    T = random_stopping_max_runs(gamma, delta2)
    root = math.sqrt(2.0 * delta1)
    delta = root * T + float(delta2)
    if not delta < 1:
        raise ValueError(f"the LT19 bound is vacuous: sqrt(2 delta1) T + delta2 = {delta:.3g} "
                         f">= 1 (delta1={delta1!r}, T={T}, delta2={delta2!r}).")
    return ApproxDP(3.0 * eps1 + 3.0 * root, delta)


def random_stopping_selection(draw_candidate, *, gamma, max_runs, rng):
    """Best-so-far selection with random stopping ([LT19]_; Ghazi et al. (2024 v2) Algorithm 5).

    ::

        for k = 0, 1, ...:
            (c_k, s_k) = draw_candidate(k)
            keep (c_k, s_k) if s_k < best score so far   # ties keep the earlier run
            stop with probability gamma, or when k + 1 == max_runs

    **Privacy guarantee.** Protected: what each run protects, under its neighbouring
    relation, when every call of ``draw_candidate`` is the same (ε₁, δ₁)-DP mechanism
    (candidate and private score) with fresh randomness. The returned candidate is then
    private at :func:`random_stopping_budget` (Liu and Talwar 2019, "Private selection
    from private candidates", Theorems 3.2 and 3.4; derivation:
    :ref:`derivation_private_selection`). Assumptions: the stopping coins are
    independent of the data (drawn from ``rng``); ``k`` does not change the mechanism; a
    NaN score raises, so callers must map failures to a finite worst score themselves.
    Not covered: ``n_runs`` (given κ = k the output is a best-of-k), the best score
    (estimators do not release it), and every unselected run.

    Parameters
    ----------
    draw_candidate : callable
        ``draw_candidate(k) -> (candidate, private_score)``, lower scores better. Every
        call must run the same (ε₁, δ₁)-DP mechanism with fresh randomness (LT19
        repeats one mechanism Q); ``k`` (0-based) is for bookkeeping and must not
        change the mechanism (e.g. cycling through settings would).
    gamma : float
        Stopping probability in (0, 1]; the number of runs is Geom(γ) truncated at
        ``max_runs``, with mean ≤ 1/γ.
    max_runs : int or None
        T, e.g. :func:`random_stopping_max_runs`. ``None``: no truncation, which has a
        guarantee for pure-DP runs only (:func:`random_stopping_budget`).
    rng : RandomSource or numpy.random.Generator
        For the stopping coin (independent of the data).

    Returns
    -------
    best : object
        The selected candidate: this is what :func:`random_stopping_budget` covers.
    best_score : float
        Its private score (part of LT19's output; estimators do not release it).
    n_runs : int
        The number of runs κ. **Not covered by the guarantee** (given κ = k the output
        is a best-of-k): for tests and diagnostics only, never to be released.
    """
    gamma = _gamma(gamma)
    rng = as_random_source(rng)
    if max_runs is not None:
        if isinstance(max_runs, (bool, np.bool_)) or int(max_runs) != max_runs or max_runs < 1:
            raise ValueError(f"max_runs must be a positive int or None, got {max_runs!r}.")
        max_runs = int(max_runs)
    best, best_score, k = None, math.inf, 0
    while True:
        candidate, score = draw_candidate(k)
        score = float(score)
        if math.isnan(score):
            raise ValueError(f"draw_candidate returned a NaN score at run {k}.")
        k += 1
        if best is None or score < best_score:
            best, best_score = candidate, score
        if rng.bernoulli(gamma) or (max_runs is not None and k >= max_runs):
            return best, best_score, k


def split_budget_for_random_stopping(epsilon, delta, *, gamma, split="paper",
                                     score_fraction=0.5):
    """Per-run budgets so that random stopping is (ε, δ)-DP in total.

    δ > 0, ``split="paper"``: Ghazi et al. (2024 v2) Algorithm 5 / Theorem 6.1. K = ⌈(1/γ)·ln(2/δ)⌉
    runs at most (δ₂ = δ/2); each run spends (ε/12, (δ/(4K))²) and its Laplace score
    ε/12, so a pair is (ε₁, δ₁) = (ε/6, (δ/(4K))²)-DP, and by [LT19]_ Thm 3.4 the
    choice is (ε/2 + 3√2·δ/(4K), (√2/4 + 1/2)·δ)-DP, within (ε, δ) when δ ≤ ε/10.

    ``split="tight"``: the same K, δ₁ and δ₂, but ε₁ = (ε − 3√(2δ₁))/3, so that
    Thm 3.4's ε is ε itself; Theorem 6.1 leaves half of ε unused. The δ ≤ ε/10
    condition is kept for both.

    δ = 0 (an extension, not in the seed): untruncated pure random stopping
    ([LT19]_ Thm 3.2) with ε₁ = ε/3, total 3ε₁ = ε. (ε₁ of the pure and tight splits
    is shaved by 1e-12 relative so that rounding never lifts the total above ε.)

    In every case the pair budget ε₁ is shared as run ``(1 − f)·ε₁``, score ``f·ε₁``
    with f = ``score_fraction`` (1/2 in Algorithm 5).

    **Privacy guarantee.** None needed: a function of public numbers. What it
    guarantees: run and score budgets whose random-stopping total (Liu and Talwar 2019,
    Theorem 3.4, or Theorem 3.2 for δ = 0) is within (ε, δ); derivation:
    :ref:`derivation_private_selection`.

    Parameters
    ----------
    epsilon : float
        ε > 0.
    delta : float
        δ in [0, 1) with δ ≤ ε/10.
    gamma : float
        Stopping probability in (0, 1].
    split : {"paper", "tight"}, default="paper"
    score_fraction : float, default=0.5
        f in (0, 1).

    Returns
    -------
    dict
        ``run_epsilon``, ``run_delta``, ``score_epsilon``, ``max_runs`` (K, or None
        for δ = 0), ``delta2`` (δ/2, or None) and ``total`` (the composed guarantee,
        :func:`random_stopping_budget` of the pair budget, never above (ε, δ)).
    """
    epsilon, gamma = _positive(epsilon, "epsilon"), _gamma(gamma)
    f = _open_unit(score_fraction, "score_fraction")
    if split not in ("paper", "tight"):
        raise ValueError(f"split must be 'paper' or 'tight', got {split!r}.")
    if isinstance(delta, (bool, np.bool_)):
        raise TypeError(f"delta must be a real number, got {delta!r}.")
    delta = float(delta)
    if not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1), got {delta!r}.")
    shave = 1 - 1e-12  # keeps the composed total at or below the request after rounding
    if delta == 0:
        run_eps, score_eps = (1 - f) * epsilon / 3 * shave, f * epsilon / 3 * shave
        return {"run_epsilon": run_eps, "run_delta": 0.0, "score_epsilon": score_eps,
                "max_runs": None, "delta2": None,
                "total": random_stopping_budget(PureDP(run_eps + score_eps), gamma=gamma)}
    if delta > epsilon / 10:
        raise ValueError(f"delta must be at most epsilon/10 (Ghazi et al. 2024 v2, Theorem "
                         f"6.1), got delta={delta!r} with epsilon={epsilon!r}.")
    delta2 = delta / 2
    K = random_stopping_max_runs(gamma, delta2)
    run_delta = (delta / (4 * K)) ** 2
    if split == "paper":
        eps1 = epsilon / 6
    else:
        eps1 = (epsilon - 3 * math.sqrt(2 * run_delta)) / 3 * shave
    run_eps, score_eps = (1 - f) * eps1, f * eps1
    total = random_stopping_budget(ApproxDP(run_eps + score_eps, run_delta), gamma=gamma,
                                   delta2=delta2)
    if not (total.epsilon <= epsilon and total.delta <= delta):  # Theorem 6.1's arithmetic
        raise RuntimeError(f"internal error: {total} exceeds ({epsilon}, {delta}).")
    return {"run_epsilon": run_eps, "run_delta": run_delta, "score_epsilon": score_eps,
            "max_runs": K, "delta2": delta2, "total": total}


def gamma_for_failure_prob(beta, *, success_prob=0.5):
    """Stopping probability γ = min{1/2, (β/2)·p/(1 − p)}; min{1/2, β/2} at p = 1/2.

    If each run succeeds independently with probability ≥ p, the chance that none
    of the κ ~ Geom(γ) runs does is Σ_k (1−p)^k (1−γ)^{k−1} γ
    = γ(1−p)/(p + γ(1−p)) ≤ γ(1−p)/p = β/2 (the T-truncation adds at most
    (1−γ)^{T−1}(1−p)^T), leaving β/2 for the score noise, as in the proof of Theorem 6.1 of
    Ghazi et al. (2024 v2) (runs succeed w.p. ≥ 1/2 there). Theorem 6.1 prints γ = min{1/2,
    3β/4}; with p = 1/2 that leaves γ/(1+γ) ≈ 3β/4 > β/2 for this term alone, so
    the stated β is off by a constant. Privacy does not depend
    on γ; only the number of runs and the truncation K do.

    **Privacy guarantee.** None needed: a function of public numbers. γ changes the
    accuracy and the expected number of runs, not the guarantee (which depends on the
    truncation and the per-run budget only).

    Parameters
    ----------
    beta : float
        Target failure probability in (0, 1).
    success_prob : float, default=0.5
        p in (0, 1]: e.g. 1/m when each run draws one of m settings uniformly and
        success means drawing a given one.

    Returns
    -------
    float
    """
    beta = _open_unit(beta, "beta")
    p = _positive(success_prob, "success_prob")
    if p > 1:
        raise ValueError(f"success_prob must be in (0, 1], got {success_prob!r}.")
    if p == 1:
        return 0.5
    return min(0.5, 0.5 * beta * p / (1.0 - p))


# ------------------------------------------------------------ the plan of the stopping
@dataclass(frozen=True)
class RandomStoppingPlan:
    """The plan of Liu–Talwar random stopping (public numbers only): the stopping
    rule, the truncation, the budget of each run and the total it will charge; built
    by :func:`plan_random_stopping` (from a target) or :meth:`for_runs` (from a run
    budget), run by :func:`random_stopping`.

    The number of runs κ is Geom(γ) truncated at T: P(κ = k) = γ(1 − γ)^{k−1} for
    k < T and P(κ = T) = (1 − γ)^{T−1} (:meth:`run_count_pmf`; untruncated when T is
    None). The coins are drawn from the fit's secret key, independently of the data.

    **Privacy guarantee.** A plan is public (no field depends on the data).
    ``budget`` is the guarantee of the candidate :func:`random_stopping` returns when
    every run is the same ``run_budget``-DP mechanism (candidate and score together)
    with fresh randomness: ``PureDP(3ε₁)`` for pure runs, untruncated (Liu and Talwar
    2019, "Private selection from private candidates", Theorem 3.2), or
    (3ε₁ + 3√(2δ₁), √(2δ₁)·T + δ₂)-DP truncated at T = ⌈ln(1/δ₂)/γ⌉, so that
    (1 − γ)^T ≤ δ₂ (their Theorem 3.4). The privacy event charged is ``budget`` itself
    (it carries no Rényi curve, so a ledger composes it by basic composition). Not
    covered: κ, the unselected runs, and a plan whose T exceeds ⌈ln(1/δ₂)/γ⌉ or whose
    runs are not pure while untruncated.

    Attributes
    ----------
    gamma : float
        γ, the stopping probability after every run.
    max_runs : int or None
        T (None: untruncated).
    delta2 : float or None
        δ₂ of the truncation.
    run_budget : PureDP or ApproxDP
        (ε₁, δ₁): one run, candidate and score together.
    budget : PureDP or ApproxDP
        The total.
    fit_epsilon, fit_delta, score_epsilon : float or None
        The split of ε₁ between a run's fit and its score (from
        :func:`plan_random_stopping`; None from :meth:`for_runs`).
    """

    gamma: float
    max_runs: int | None
    delta2: float | None
    run_budget: object
    budget: object
    fit_epsilon: float | None = None
    fit_delta: float | None = None
    score_epsilon: float | None = None

    @classmethod
    def for_runs(cls, run_budget, *, gamma, delta2=None):
        """The plan for runs of budget ``run_budget`` (:func:`random_stopping_budget`;
        truncated at :func:`random_stopping_max_runs` (γ, δ₂) when ``delta2`` is
        given)."""
        gamma = _gamma(gamma)
        budget = random_stopping_budget(run_budget, gamma=gamma, delta2=delta2)
        T = None if delta2 is None else random_stopping_max_runs(gamma, delta2)
        return cls(gamma, T, None if delta2 is None else float(delta2), run_budget, budget)

    def run_count_pmf(self, k):
        """P(κ = k), k ≥ 1."""
        k = int(k)
        if k < 1 or (self.max_runs is not None and k > self.max_runs):
            return 0.0
        if self.max_runs is not None and k == self.max_runs:
            return (1.0 - self.gamma) ** (k - 1)
        return self.gamma * (1.0 - self.gamma) ** (k - 1)

    @property
    def expected_runs(self):
        """E κ = (1 − (1 − γ)^T)/γ (1/γ untruncated)."""
        if self.max_runs is None:
            return 1.0 / self.gamma
        return (1.0 - (1.0 - self.gamma) ** self.max_runs) / self.gamma


def plan_random_stopping(epsilon, delta, *, gamma, split="paper", score_fraction=0.5):
    """The random-stopping plan that meets (ε, δ) in total: the per-run split of
    :func:`split_budget_for_random_stopping` (Ghazi et al. 2024 v2, Algorithm 5 and
    Theorem 6.1, or the tight split; pure untruncated runs for δ = 0).

    **Privacy guarantee.** Public numbers in, a public plan out; what the plan
    guarantees is its ``budget`` (:class:`RandomStoppingPlan`), never above (ε, δ).

    Returns
    -------
    RandomStoppingPlan

    Examples
    --------
    >>> from skdpsparse.mechanisms.private_selection import plan_random_stopping
    >>> plan = plan_random_stopping(1.0, 1e-6, gamma=0.25)
    >>> plan.max_runs, plan.budget.epsilon <= 1.0, plan.budget.delta <= 1e-6
    (59, True, True)
    """
    s = split_budget_for_random_stopping(epsilon, delta, gamma=gamma, split=split,
                                         score_fraction=score_fraction)
    pair = s["run_epsilon"] + s["score_epsilon"]
    run_budget = PureDP(pair) if s["run_delta"] == 0 else ApproxDP(pair, s["run_delta"])
    return RandomStoppingPlan(_gamma(gamma), s["max_runs"], s["delta2"], run_budget,
                              s["total"], s["run_epsilon"], s["run_delta"],
                              s["score_epsilon"])


def random_stopping(draw_candidate, plan, rng):
    """Run a :class:`RandomStoppingPlan`: :func:`random_stopping_selection` with the
    plan's γ and truncation.

    **Privacy guarantee.** ``plan.budget`` for the returned candidate when every call
    of ``draw_candidate`` is the same ``plan.run_budget``-DP mechanism with fresh
    randomness (:class:`RandomStoppingPlan`; Liu and Talwar 2019, Theorems 3.2 and
    3.4). Not covered: the number of runs and the unselected runs.

    Returns
    -------
    best, best_score, n_runs
        As :func:`random_stopping_selection` (``n_runs`` is never to be released).
    """
    return random_stopping_selection(draw_candidate, gamma=plan.gamma,
                                     max_runs=plan.max_runs, rng=rng)
