"""Audit cases of the bias-reduced gradient oracle and of private selection.

Builders of :class:`~skdpsparse.audit.AuditCase` for
:mod:`skdpsparse.mechanisms.bias_reduced` (seed 002 Algorithm 5) and
:mod:`skdpsparse.mechanisms.private_selection` (report-noisy-min, Liu–Talwar random
stopping) and for :class:`~skdpsparse.model_selection.PrivateParameterSelection`,
registered in the catalogue :data:`skdpsparse.audit.CASES` (``_audit_cases.py``).

What is audited, and what is not (because no audit of it can have teeth):

* The oracle, as a mechanism in its own right: one call at the top level on n = 2^{M+1}
  rows, where the batch is the whole dataset (no subsampling amplification). The
  release audited is the four private means (G⁺, G⁻_O, G⁻_E, G₀) of
  :meth:`~skdpsparse.mechanisms.bias_reduced.BiasReducedOracle.estimates`, of which
  𝒢(x) is a post-processing.
* Not the estimators :class:`~skdpsparse.linear_model.DPBiasReducedSGDRegressor` /
  ``Classifier`` end to end. Before the projections, the debiasing term cancels any
  one row exactly: G⁺ − ½(G⁻_O + G⁻_E) moves by g/m − ½·(2g/m) = 0 when the row's
  gradient moves by g, so 𝒢(x) shows the row only through G₀ (it is the sampled index
  with probability 1/n) and the projections' residue; the estimator charges all three
  means on B per step (Lemma 6.3, 3ε/32 each) and the whole filter budget ε/2 whatever
  the steps spent. With the noise halved the release stays far below that charge (n = 2,
  one step: at most the 1/2-subsampled G₀, against ε_t = 7ε/32 + ε/2), and the bounding
  variant cannot reach it: the estimator scales the rows of X itself (its ``_bounded``,
  which :func:`~skdpsparse.audit.inflated_bounds` does not patch), after which the
  gradient rows lie within the oracle's bounds (L = sup|ℓ'|·√(R² + c²) is attained,
  never exceeded).
* Random stopping with two settings whose scores move by Δ in opposite directions: its
  release is a best-of-K report-noisy-min, whose privacy loss is at most 2ε₁ (4ε₁ with
  the noise halved) against Liu–Talwar's 3ε₁; the halved noise exceeds the claim only
  on outcomes of small probability, and is refuted (by the likelihood ratio of the
  selected setting *and* its score, which LT19's guarantee covers) by about 10 % with
  4000 runs of the mechanism, by about 20 % with 10⁴.
  :class:`PrivateParameterSelection` releases the setting only and costs ~1/γ inner
  fits per search: the same test there needs far more than CI can run, so its case is
  audited through its released estimator, with the bounding variant of the inner fits
  as teeth.
"""

import functools
import math

import numpy as np
from scipy import optimize

from .audit import claimed_epsilons, gaussian_epsilon

__all__ = [
    "case_bias_reduced_oracle",
    "case_private_parameter_selection",
    "case_random_stopping",
    "case_report_noisy_min",
]


def _audit_case(*args):
    from ._audit_cases import AuditCase  # the catalogue imports this module
    return AuditCase(*args)


def _curve_delta():
    from ._audit_cases import CURVE_DELTA
    return CURVE_DELTA


# ------------------------------------------------------------- bias-reduced oracle
def _oracle_rows(n, d, L, seed=0):
    """Gradient rows (n, d): rows 1..n-1 one entry ±L/2 on columns 1..d-1; row 0 is
    -10L·e₀ in D and +10L·e₀ in D' (column 0 touched by no other row; bounding must
    scale it to ∓L·e₀)."""
    rng = np.random.default_rng(seed)
    G = np.zeros((n, d))
    G[np.arange(1, n), rng.integers(1, d, n - 1)] = rng.choice([-0.5, 0.5], n - 1) * L
    G0, G1 = G.copy(), G.copy()
    G0[0, 0], G1[0, 0] = -10.0 * L, 10.0 * L
    return G0, G1


def _gradient_rows(G):
    """``gradient_rows(rows, x)`` of the oracle on fixed rows: the dense array's rows,
    or (CSR ``G``) the CSR parts of the rows, as the linear models give them."""
    if isinstance(G, np.ndarray):
        return lambda rows, x: G[rows]

    def rows_of(rows, x):
        sub = G[np.asarray(rows)]
        return (sub.indptr.astype(np.int64), sub.indices.astype(np.int64),
                sub.data.astype(np.float64))
    return rows_of


def _amplified(budget, q):
    """Amplification by subsampling (Balle, Barthe and Gaboardi 2018, Thm 9; replacement
    neighbours), as :func:`~.mechanisms.bias_reduced.step_privacy` uses it: a mechanism
    run on the row with probability q is (ln(1 + q(e^ε − 1)), qδ)-DP."""
    from .accounting import ApproxDP
    return ApproxDP(math.log1p(q * math.expm1(budget.epsilon)), q * budget.delta)


def case_bias_reduced_oracle(epsilon=5.0, delta=1e-5, n=32, d=2, L=1.0, sparse=False):
    """:class:`~.mechanisms.bias_reduced.BiasReducedOracle` (projection mechanism,
    analytic calibration) at budget (4ε, 4δ), so each of its four means at (ε, δ); one
    call at the top level N = M on n = 2^{M+1} rows, where the batch B is the whole
    dataset and O, E a random partition of it. Gradient rows are dense (bounded by
    :func:`~.mechanisms.projection.bounded_mean`) or, ``sparse=True``, CSR parts (the
    oracle's own bounding kernel); see :func:`_oracle_rows` for the pair.

    Claim, from the budgets the four :func:`~.mechanisms.projection.projection_mechanism`
    calls report (each ApproxDP(ε, δ)), composed over the means the row enters: G⁺ on B
    (always), one of G⁻_O, G⁻_E (O and E partition B independently of the data:
    parallel composition), and G₀, whose index is the row with probability 1/n
    (amplification by subsampling, as in :func:`~.mechanisms.bias_reduced.step_privacy`).
    Basic composition gives (2ε + ln(1 + (e^ε − 1)/n), 2δ + δ/n). Lemma 6.3 charges the
    three means on B as (3ε, 3δ) (no parallel composition): this claim is below that.
    At CURVE_DELTA: the same composition of each mean's exact analytic-Gaussian curve
    (:func:`~.audit.gaussian_epsilon` of its σ and ℓ2 sensitivity 2L/m), with the δ
    split 2δ_a + δ_b/n = CURVE_DELTA that gives the smallest ε.

    Statistic: the log-likelihood ratio of coordinate 0 of the four means as if
    unprojected Gaussians (G⁺: ±L/m; the half holding the row: ±2L/m, the half unknown;
    G₀: ±L with probability 1/n). Both broken variants must be refuted at CURVE_DELTA
    (for CSR rows the halved noise only: :func:`~.audit.inflated_bounds` does not reach
    the oracle's CSR bounding kernel, but row 0 at 10L checks that it bounds).
    """
    import scipy.sparse as sp

    from .mechanisms.bias_reduced import BiasReducedOracle, tgeom_max_level
    from .mechanisms.projection import mean_noise

    M = tgeom_max_level(n)
    if 1 << (M + 1) != n:
        raise ValueError(f"n must be a power of 2 (the top batch 2^(M+1) = n); got {n}.")
    sigma = {}
    for m in (n, n // 2, 1):
        kind, sigma[m], budget = mean_noise(m, epsilon=epsilon, delta=delta, norm_bound=L,
                                            sparsity=1)
    a_b = L / n / sigma[n]            # half the shift of G⁺ in its noise units
    a_h = 2.0 * L / n / sigma[n // 2]  # of the half that holds the row
    a_i = L / sigma[1]                 # of G₀ when it holds the row
    q = 1.0 / n
    x0 = np.zeros(d)

    def mechanism(G, rng):
        oracle = BiasReducedOracle(_gradient_rows(G), n, d, epsilon=4 * epsilon,
                                   delta=4 * delta, norm_bound=L, sparsity=1, rng=rng)
        g_b, g_o, g_e, g_i = oracle.estimates(x0, M)
        z_b, z_o, z_e = g_b[0] / sigma[n], g_o[0] / sigma[n // 2], g_e[0] / sigma[n // 2]
        z_i = g_i[0] / sigma[1]
        return (2.0 * a_b * z_b
                + np.logaddexp(a_h * z_o, a_h * z_e) - np.logaddexp(-a_h * z_o, -a_h * z_e)
                + math.log1p(q * math.expm1(a_i * z_i - a_i * a_i / 2))
                - math.log1p(q * math.expm1(-a_i * z_i - a_i * a_i / 2)))

    data = _oracle_rows(n, d, L)
    if sparse:
        data = tuple(sp.csr_matrix(G) for G in data)
    # The row enters B, one half, and G₀ with probability 1/n.
    claim = budget + budget + _amplified(budget, q)
    curve_delta = _curve_delta()

    def eps_mean(dlt):  # every mean: σ_m/(2L/m) is the same for all m
        return gaussian_epsilon(sigma[n], 2.0 * L / n, dlt)

    def composed(u):  # u of CURVE_DELTA to the two means on B, (1 − u) to G₀ (δ_b/n)
        d_b = (1.0 - u) * curve_delta * n
        g0 = math.log1p(q * math.expm1(eps_mean(d_b)))
        return 2.0 * eps_mean(u * curve_delta / 2) + g0

    lowest = max(0.5, 1.0 - 0.999 / (curve_delta * n))  # δ_b < 1
    best = optimize.minimize_scalar(composed, bounds=(lowest, 1.0 - 1e-9), method="bounded",
                                    options={"xatol": 1e-6})
    claims = ((claim.delta, claim.epsilon), (curve_delta, float(best.fun)))
    detect = {"noise/2": (curve_delta,)}
    if not sparse:
        detect["bound x10"] = (curve_delta,)
    fmt = "CSR" if sparse else "dense"
    return _audit_case(f"BiasReducedOracle ({kind}, {fmt}, n={n})", mechanism, data, claims,
                       detect)


# ------------------------------------------------------------- private selection
def case_report_noisy_min(epsilon=2.0, delta=0.0, sensitivity=0.1):
    """:func:`~.mechanisms.private_selection.report_noisy_min` on two scores of
    sensitivity Δ, non-monotone (Lap(2Δ/ε)): equal in D, moved by (+Δ, −Δ) in D'.
    Statistic: the index released. Claim: ε-DP as documented (δ = 0).

    With the noise halved (Lap(Δ/ε), the monotone scale seed 002 Algorithm 7 uses) the
    index 0 has probability 1/2 on D and e^{−2ε}(1 + ε)/2 on D', a ratio
    e^{2ε}/(1 + ε) > e^ε (the function's notes); as shipped, e^ε/(1 + ε/2) < e^ε.
    """
    from .accounting import PureDP
    from .mechanisms.private_selection import report_noisy_min

    if delta != 0:
        raise ValueError("report_noisy_min is pure DP: delta must be 0.")

    def mechanism(scores, rng):
        return float(report_noisy_min(scores, sensitivity=sensitivity, epsilon=epsilon,
                                      rng=rng))

    data = (np.array([0.0, 0.0]), np.array([sensitivity, -sensitivity]))
    return _audit_case("report_noisy_min (laplace 2D/eps)", mechanism, data,
                       tuple(claimed_epsilons(PureDP(epsilon), (0.0,))),
                       {"noise/2": (0.0,)})


def _laplace_cdf_and_log_pdf(x, b):
    """F(x) and log f(x) of Laplace(0, b)."""
    cdf = 0.5 * math.exp(x / b) if x < 0 else 1.0 - 0.5 * math.exp(-x / b)
    return cdf, -abs(x) / b - math.log(2.0 * b)


def _random_stopping_log_density(setting, value, scores, b, gamma):
    """log density of (selected setting, its score) under untruncated random stopping
    that draws one of two settings uniformly per run and scores it with Lap(b):

    P(j, v) = Σ_k γ(1−γ)^{k−1} (k/2) f(v − s_j) u(v)^{k−1} = γ f(v − s_j) / (2(1 − (1−γ)u)²)

    with u(v) = 1 − (F(v − s₀) + F(v − s₁))/2, the chance that a run scores above v."""
    F0, _ = _laplace_cdf_and_log_pdf(value - scores[0], b)
    F1, _ = _laplace_cdf_and_log_pdf(value - scores[1], b)
    _, log_f = _laplace_cdf_and_log_pdf(value - scores[setting], b)
    u = 1.0 - 0.5 * (F0 + F1)
    return math.log(gamma / 2.0) + log_f - 2.0 * math.log(1.0 - (1.0 - gamma) * u)


def case_random_stopping(epsilon=0.75, delta=0.0, gamma=0.03, sensitivity=0.1, gap=-0.75):
    """:func:`~.mechanisms.private_selection.random_stopping_selection` (untruncated,
    pure runs) of two settings: each run draws one uniformly and scores it with
    :func:`~.mechanisms.private_selection.noisy_score` at ε₁ = ``epsilon`` (Lap(Δ/ε₁));
    the release is LT19's output, the selected setting and its score. Scores:
    (0, ``gap``·Δ) in D, (Δ, (``gap`` − 1)·Δ) in D' (opposite moves by Δ). Claim:
    :func:`~.mechanisms.private_selection.random_stopping_budget` of a PureDP(ε₁) run,
    3ε₁. Statistic: the exact log-likelihood ratio of (setting, score) (see
    :func:`_random_stopping_log_density`).

    The release is a best-of-K report-noisy-min: its privacy loss is at most 2ε₁ as
    shipped and 4ε₁ with the noise halved, against the claim 3ε₁ (Liu–Talwar's bound is
    for every run mechanism, this one does not reach it). The halved noise is refuted
    only through outcomes of small probability; the defaults (ε₁ = 0.75, γ = 0.03, gap
    −0.75Δ) maximize the expected ε_lb/claim of the exact distributions: ≈ 1.13 with
    5000 runs per dataset, ≈ 1.22 with 10⁴, below 1 with 10³.
    """
    from .accounting import PureDP
    from .mechanisms.private_selection import (
        noisy_score, random_stopping_budget, random_stopping_selection)

    if delta != 0:
        raise ValueError("this case audits the untruncated, pure-DP random stopping.")
    s0 = (0.0, gap * sensitivity)
    s1 = (sensitivity, (gap - 1.0) * sensitivity)
    b = sensitivity / epsilon

    def mechanism(scores, rng):
        def draw(k):
            j = int(rng.random() < 0.5)  # the setting, uniformly
            return j, noisy_score(scores[j], sensitivity=sensitivity, epsilon=epsilon,
                                  rng=rng)

        j, v, _ = random_stopping_selection(draw, gamma=gamma, max_runs=None, rng=rng)
        return (_random_stopping_log_density(j, v, s1, b, gamma)
                - _random_stopping_log_density(j, v, s0, b, gamma))

    budget = random_stopping_budget(PureDP(epsilon), gamma=gamma)
    return _audit_case("random_stopping_selection (pure)", mechanism,
                       (np.array(s0), np.array(s1)),
                       tuple(claimed_epsilons(budget, (0.0,))), {"noise/2": (0.0,)})


def case_private_parameter_selection(epsilon=2.0, delta=0.0, n=20, d=3, alpha=100.0, R=1.0,
                                     gamma=0.5, score_fraction=0.1):
    """:class:`~.model_selection.PrivateParameterSelection` end to end around
    :class:`~.linear_model.DPOutputPerturbationRegressor` (Laplace when δ = 0: the
    inner fits get δ = 0; Huber κ = 1, λ = ``alpha``, 1-sparse rows declared, no
    intercept, targets clipped to B = 100, CSR input), two settings (``label_bound``
    100 and 50: same clipped targets for the other rows) drawn at random per run, the
    mean absolute error clipped to 1 as score; statistic: ``best_estimator_.coef_[0]``.

    The pair is that of ``case_output_perturbation``: coordinate 0 of the inner
    minimizers is ∓κR/(λn) on D and D', 2κR/(λn) apart, the ℓ1 sensitivity of the
    Laplace noise to 1 %, and nothing else moves it. The release is the model of one
    of the ~1/γ runs, chosen by a noisy score that also depends on row 0. Claim:
    ``privacy_spent_`` (LT19, 3ε₁ = ε, δ = 0; each inner fit at (1 − f)ε₁,
    f = ``score_fraction``).

    Teeth: the bounding variant, rows bounded at 10R inside the inner fits while their
    noise is for R (the search passes the inner guarantee on unchanged). The halved
    noise (inner and score noise) is not expected to be refuted: the released model's
    own privacy loss is then 2(1 − f)ε₁ = 0.6ε (Laplace), to which the choice among
    ~1/γ runs by a score at fε₁ (2fε₁ halved) adds little, against the claim 3ε₁ = ε;
    the test of the selection itself is ``case_random_stopping`` (the estimator releases
    no score and costs ~1/γ inner fits per search: that test is out of CI's reach).
    """
    from ._audit_cases import _linear_pair
    from .linear_model import DPOutputPerturbationRegressor
    from .model_selection import PrivateParameterSelection

    inner = DPOutputPerturbationRegressor(loss="huber", huber_threshold=1.0,
                                          fit_intercept=False, norm_bound=R, sparsity=1,
                                          alpha=alpha)
    params = dict(epsilon=epsilon, delta=delta, scoring="neg_mean_absolute_error",
                  score_bound=1.0, gamma=gamma, score_fraction=score_fraction)
    grid = {"label_bound": [100.0, 50.0]}

    def mechanism(data, rng):
        search = PrivateParameterSelection(inner, grid, random_state=rng, **params)
        return search.fit(*data).best_estimator_.coef_[0]

    data = _linear_pair(n, d, R)
    search = PrivateParameterSelection(inner, grid, random_state=0, **params).fit(*data[0])
    claims = tuple(claimed_epsilons(search.privacy_spent_, (delta,)))
    if len(claims) != 1:
        raise ValueError("the search's guarantee must be stated at its own delta.")
    return _audit_case(f"PrivateParameterSelection (output perturbation, "
                       f"{'laplace' if delta == 0 else 'gaussian'})", mechanism, data,
                       claims, {"bound x10": (delta,)})


#: name -> builder, merged into :data:`skdpsparse.audit.CASES` (CI-size defaults).
SELECTION_CASES = {
    "bias_reduced_oracle": functools.partial(case_bias_reduced_oracle, epsilon=5.0,
                                             delta=1e-5),
    "bias_reduced_oracle_csr": functools.partial(case_bias_reduced_oracle, epsilon=5.0,
                                                 delta=1e-5, sparse=True),
    "report_noisy_min": functools.partial(case_report_noisy_min, epsilon=2.0, delta=0.0),
    "random_stopping": functools.partial(case_random_stopping, epsilon=0.75, delta=0.0),
    "private_parameter_selection": functools.partial(case_private_parameter_selection,
                                                     epsilon=2.0, delta=0.0),
}
