"""Audit cases of private selection (:mod:`skdpsparse.mechanisms.private_selection`:
report-noisy-min, Liu–Talwar random stopping) and of
:class:`~skdpsparse.model_selection.PrivateParameterSelection` end to end.
"""

import functools
import math

import numpy as np

from ..case import Case, Entry
from ..statistics import claimed_epsilons
from ..variants import replanned_epsilon
from ._pairs import linear_pair

__all__ = [
    "CATALOGUE", "case_private_parameter_selection", "case_random_stopping",
    "case_report_noisy_min", "random_stopping_tiers",
]


def case_report_noisy_min(epsilon=2.0, delta=0.0, sensitivity=0.1):
    """:func:`~skdpsparse.mechanisms.private_selection.report_noisy_min` on two scores
    of sensitivity Δ, non-monotone (Lap(2Δ/ε)): equal in D, moved by (+Δ, −Δ) in D'.
    Statistic: the index released. Claim: ε-DP as documented (δ = 0).

    With the noise halved (Lap(Δ/ε), the monotone scale Algorithm 7 of Ghazi, Guzmán,
    Kamath, Kumar and Manurangsi (2024) uses) the index 0 has probability 1/2 on D and
    e^{−2ε}(1 + ε)/2 on D', a ratio e^{2ε}/(1 + ε) > e^ε (the function's notes); as
    shipped, e^ε/(1 + ε/2) < e^ε.
    """
    from ...accounting import PureDP
    from ...mechanisms.private_selection import report_noisy_min

    if delta != 0:
        raise ValueError("report_noisy_min is pure DP: delta must be 0.")

    def mechanism(scores, rng, variant):
        return float(report_noisy_min(scores, sensitivity=sensitivity, epsilon=epsilon,
                                      rng=variant.source(rng)))

    data = (np.array([0.0, 0.0]), np.array([sensitivity, -sensitivity]))
    return Case("report_noisy_min (laplace 2D/eps)", mechanism, data,
                tuple(claimed_epsilons(PureDP(epsilon), (0.0,))), {"noise/2": (0.0,)})


def random_stopping_tiers(score, scale, low, high, gamma):
    """Probabilities of the tier random stopping releases (0, 1 or 2, lower better)
    when each run is the tier of ``score`` + Lap(``scale``): 0 below ``low``, 1 above
    ``high``, 2 between, and the number of runs is Geom(``gamma``).

    With a = P(one run is not tier 0) and c = P(tier 2), P(best ≥ t) over K runs is
    Σ_k γ(1−γ)^{k−1} p^k = γp/(1 − (1 − γ)p), at p = a for "no tier 0" and p = c for
    "only tier 2" (continuous Laplace; the grid noise differs by a relative 2^-29).
    """
    def below(x):
        return 0.5 * math.exp(x / scale) if x < 0 else 1.0 - 0.5 * math.exp(-x / scale)

    def runs(p):
        return gamma * p / (1.0 - (1.0 - gamma) * p)

    p_low = below(low - score)
    p_high = 1.0 - below(high - score)
    none_low, only_mid = runs(1.0 - p_low), runs(1.0 - p_low - p_high)
    return np.array([1.0 - none_low, none_low - only_mid, only_mid])


def case_random_stopping(epsilon=0.75, delta=0.0, gamma=0.1, sensitivity=1.0, low=0.0,
                         high=2.25):
    """:func:`~skdpsparse.mechanisms.private_selection.random_stopping` with the plan
    :meth:`~skdpsparse.mechanisms.private_selection.RandomStoppingPlan.for_runs`
    (Liu and Talwar 2019, "Private selection from private candidates"; untruncated,
    pure runs) whose run is :func:`~skdpsparse.mechanisms.private_selection.noisy_score`
    at ε₁ = ``epsilon`` (Lap(Δ/ε₁)) of one score, 0 in D and Δ in D', followed by a
    public post-processing, its tier: 0 (best) below ``low``·Δ, 1 above ``high``·Δ, 2
    between. A post-processed ε₁-DP run is an ε₁-DP run, so the claim is the plan's
    budget for PureDP(ε₁) runs, 3ε₁. Release: the best tier; statistic: its exact
    log-likelihood ratio (:func:`random_stopping_tiers`).

    This is the construction where Liu–Talwar's 3ε₁ is nearly attained: tier 1 is
    e^{ε₁} times as likely on D' while the better tier 0 is e^{−ε₁} times as likely,
    and tier 1 is released only when no run reached tier 0, so its probability moves by
    up to e^{3ε₁} as γ → 0. At γ = 0.1 the shipped noise reaches 0.70·3ε₁; with the
    noise halved tier 1 has probability 0.0055 on D and 0.142 on D', a ratio e^{3.25}
    against the claim e^{2.25}. The CI size, 8000 runs per dataset, refutes the halved
    noise with probability 0.9998 (ε_lb 2.78 on average); 6000 runs did so with
    probability 0.995 only, and missed it in ``benchmarks/audit.py --quick``. Both from
    the exact tier probabilities (:func:`random_stopping_tiers`): 40 000 simulated
    audits, multinomial counts of both halves, the threshold chosen on the first as
    :func:`~..statistics.audit_scores` does. The shipped noise gives ε_lb 1.31 on average.
    The parameters nearly minimise the noisy scores drawn (runs × 1/γ) for that power:
    over ε₁ ∈ {0.6, 0.75, 1}, γ ∈ {0.1, 0.2} and the tier cut-off ``high`` ∈ {2, 2.25,
    2.5, 3}, none needs fewer. The earlier pair (two settings whose scores move apart,
    statistic the likelihood ratio of setting and score) has a privacy loss of at most
    2ε₁ as shipped and 4ε₁ halved, and reached a factor 1.1 only with 4000 runs of 33
    draws each.
    """
    from ...accounting import PureDP
    from ...mechanisms.private_selection import RandomStoppingPlan, noisy_score, random_stopping

    if delta != 0:
        raise ValueError("this case audits the untruncated, pure-DP random stopping.")
    scale = sensitivity / epsilon
    tiers = [random_stopping_tiers(s, scale, low * sensitivity, high * sensitivity, gamma)
             for s in (0.0, sensitivity)]
    llr = np.log(tiers[1]) - np.log(tiers[0])

    def mechanism(score, rng, variant):
        source = variant.source(rng)

        def draw(k):
            v = noisy_score(score[0], sensitivity=sensitivity, epsilon=epsilon, rng=source)
            tier = 0 if v < low * sensitivity else (1 if v > high * sensitivity else 2)
            return tier, tier

        tier, _, _ = random_stopping(draw, plan, source)
        return float(llr[tier])

    plan = RandomStoppingPlan.for_runs(PureDP(epsilon), gamma=gamma)  # untruncated
    return Case("random_stopping_selection (pure, tiers)", mechanism,
                (np.array([0.0]), np.array([sensitivity])),
                tuple(claimed_epsilons(plan.budget, (0.0,))), {"noise/2": (0.0,)})


def case_private_parameter_selection(epsilon=2.0, delta=0.0, n=20, d=3, alpha=100.0, R=1.0,
                                     gamma=0.5, score_fraction=0.1):
    """:class:`~skdpsparse.model_selection.PrivateParameterSelection` end to end around
    :class:`~skdpsparse.linear_model.DPOutputPerturbationRegressor` (Laplace when δ = 0:
    the inner fits get δ = 0; Huber κ = 1, λ = ``alpha``, 1-sparse rows declared, no
    intercept, targets clipped to B = 100, CSR input), two settings (``label_bound``
    100 and 50: same clipped targets for the other rows) drawn at random per run, the
    mean absolute error clipped to 1 as score; statistic: ``best_estimator_.coef_[0]``.

    The pair is that of ``case_output_perturbation``: coordinate 0 of the inner
    minimizers is ∓κR/(λn) on D and D', 2κR/(λn) apart, the ℓ1 sensitivity of the
    Laplace noise to 1 %, and nothing else moves it. The release is the model of one
    of the ~1/γ runs, chosen by a noisy score that also depends on row 0. Claim:
    ``privacy_spent_`` (LT19, 3ε₁ = ε, δ = 0; each inner fit at (1 − f)ε₁,
    f = ``score_fraction``).

    Teeth: the bounding variant, the inner estimator's ``norm_bound`` 10R with the
    search's ε re-solved so that the released model's ``noise_scale_`` is the shipped
    one (the score noise then shrinks too). The halved noise is not expected to be
    refuted: the released model's own privacy loss is then 2(1 − f)ε₁ = 0.6ε, to which
    the choice among ~1/γ runs by a score at fε₁ adds little, against the claim 3ε₁ = ε;
    the test of the selection itself is ``case_random_stopping``.
    """
    from ...linear_model import DPOutputPerturbationRegressor
    from ...model_selection import PrivateParameterSelection

    params = dict(delta=delta, scoring="neg_mean_absolute_error", score_bound=1.0,
                  gamma=gamma, score_fraction=score_fraction)
    grid = {"label_bound": [100.0, 50.0]}
    data = linear_pair(n, d, R)

    def fit(data, eps, k, random_state):
        inner = DPOutputPerturbationRegressor(loss="huber", huber_threshold=1.0,
                                              fit_intercept=False, norm_bound=k * R,
                                              sparsity=1, alpha=alpha)
        return PrivateParameterSelection(inner, grid, epsilon=eps, random_state=random_state,
                                         **params).fit(*data)

    @functools.lru_cache(maxsize=None)
    def epsilon_for(variant):
        return replanned_epsilon(
            variant, lambda e, k: fit(data[0], e, k, 0).best_estimator_.noise_scale_, epsilon)

    def mechanism(data, rng, variant):
        return fit(data, epsilon_for(variant), variant.bound, rng).best_estimator_.coef_[0]

    search = fit(data[0], epsilon, 1.0, 0)
    claims = tuple(claimed_epsilons(search.privacy_spent_, (delta,)))
    if len(claims) != 1:
        raise ValueError("the search's guarantee must be stated at its own delta.")
    return Case(f"PrivateParameterSelection (output perturbation, "
                f"{'laplace' if delta == 0 else 'gaussian'})", mechanism, data,
                claims, {"bound x10": (delta,)})


#: name -> catalogue entry (builder with the CI defaults, CI size).
CATALOGUE = {
    "report_noisy_min": Entry(functools.partial(case_report_noisy_min, epsilon=2.0,
                                                delta=0.0),
                              runs=2000, variants=("correct", "noise/2"),
                              supports=("correct", "noise/2")),
    "random_stopping": Entry(functools.partial(case_random_stopping, epsilon=0.75,
                                               delta=0.0),
                             runs=8000, variants=("correct", "noise/2"),
                             supports=("correct", "noise/2")),
    "private_parameter_selection": Entry(
        functools.partial(case_private_parameter_selection, epsilon=2.0, delta=0.0),
        runs=300, variants=("correct", "bound x10"), slow=True),
}
