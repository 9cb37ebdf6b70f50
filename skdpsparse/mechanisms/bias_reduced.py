"""Bias-reduced private SGD with sparse gradients (Ghazi, Guzmán, Kamath, Kumar and
Manurangsi 2024, "Differentially private optimization with sparse gradients",
Sections 6-7, and the later version's Sections 5-6).

* :class:`BiasReducedOracle` — Algorithm 5, the subsampled bias-reduced gradient
  estimator. With N ~ TGeom(M) (Definition 6.1), a batch B of 2^{N+1} rows drawn
  without replacement and split into halves O and E, and one row I,

      𝒢(x) = (G⁺(∇F_B) − ½(G⁻(∇F_O) + G⁻(∇F_E)))/p_N + G₀(∇f_I),

  each G a private sparse mean (the projection mechanism, Ghazi et al. 2024, Algorithm 1, or
  Gaussian ℓ1-recovery, Algorithm 2 — the mechanism of the paper's later version) at a
  quarter of the oracle's budget. Its expectation telescopes to that of the
  mechanism on the largest batch (proof of Lemma 6.4), so its bias is the bias of
  a batch of 2^{M+1} ≈ n rows, while a call costs O(log n) rows on average.
* :func:`bias_reduced_sgd` — Algorithm 6: projected SGD with that oracle, the average
  iterate (convex) or a uniformly random one (nonconvex), stopped by a privacy
  filter. By default each step is accounted by its exact RDP curve
  (:func:`step_rdp`: the record enters two of the three batch means, each part
  amplified by subsampling without replacement) under a Rényi filter at one order
  (:class:`~skdpsparse.accounting.filters.RenyiFilter`, Feldman and Zrnic 2021),
  and the gain is spent on less noise per mean at the paper's run length
  (:func:`plan_renyi_filter`). ``accounting="paper"`` keeps the paper's per-step
  cost (Lemma 6.3) under the (ε, δ) filter of
  :class:`~skdpsparse.accounting.filters.ApproxDPFilter`. Proofs:
  ``doc/derivations/bias_reduced_accounting.rst``.
* :func:`boost_noisy_min` (Algorithm 7) and :func:`boost_random_stopping` (the later
  version's Algorithm 5) — several runs and a private choice among them.

Privacy unit: one example, replacement neighbours, n public. The gradient rows are
bounded into {‖g‖₂ ≤ L, ‖g‖₁ ≤ L√s} inside every mean (contribution bounding), so the
sensitivities hold for every input, whatever the caller's derivation of L and s.
"""

import functools
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .. import _kernels
from .._kernels.bias_reduced import bias_reduced_step, csr_gradient_rows, dense_gradient_rows
from .._kernels.sparse_rows import csr_bounded_column_sum_rows
from ..accounting import (ApproxDP, approx_dp_to_zcdp,
                          subsampled_without_replacement_discrete_gaussian_rdp,
                          subsampled_without_replacement_gaussian_rdp)
from ..accounting.rdp import RdpCurve
from ..accounting.filters import ApproxDPFilter, RenyiFilter, renyi_budget
from .projection import bounded_mean, projection_mechanism, row_bounds
from ..utils._progress import Progress
from ..utils._random import as_random_source
from .sparse_mean import private_sparse_mean

__all__ = [
    "ACCOUNTINGS",
    "MECHANISMS",
    "BiasReducedSGDPlan",
    "RenyiFilterPlan",
    "bias_reduced_design",
    "bias_reduced_linear_fit",
    "bias_reduced_oracle_epsilon",
    "bounded_rows",
    "mean_rho",
    "plan_bias_reduced_sgd",
    "plan_renyi_filter",
    "renyi_filter_feasible",
    "renyi_filter_privacy",
    "step_rdp",
    "tgeom_max_level",
    "tgeom_pmf",
    "sample_tgeom",
    "step_privacy",
    "algorithm6_filter",
    "algorithm6_privacy",
    "theorem_learning_rate",
    "BiasReducedOracle",
    "bias_reduced_sgd",
    "boost_noisy_min",
    "boost_random_stopping",
    "noisy_min_runs",
    "linear_gradient_rows",
    "linear_objective",
]

MECHANISMS = ("projection", "l1_recovery")
ACCOUNTINGS = ("renyi_filter", "paper")
# Orders the Rényi filter chooses its one order α from (before the run, from public
# numbers only: the choice is part of the mechanism, not a function of the data).
_FILTER_ORDERS = tuple(np.concatenate([np.linspace(1.25, 10.0, 36), np.arange(11.0, 64.0),
                                       [64.0, 80.0, 96.0, 128.0, 160.0, 192.0, 256.0]]))

# Below this dimension the four mean mechanisms of a step run in the calling thread:
# a thread hand-off costs more than a noise vector of this size.
_THREADED_MIN_DIM = 1 << 16


# ------------------------------------------------------------------------ TGeom(M)
def tgeom_max_level(n):
    """M = ⌊log₂ n⌋ − 1 of Algorithm 5 (so that the largest batch, 2^{M+1}, is ≤ n).

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it).
    """
    n = int(n)
    if n < 2:
        raise ValueError(f"the bias-reduced estimator needs n >= 2 samples; got {n} sample.")
    return n.bit_length() - 2


def tgeom_pmf(M):
    """p_k = C_M/2^k on k = 0..M, C_M = [2(1 − 2^{−(M+1)})]^{−1} (Definition 6.1).

    >>> tgeom_pmf(2).round(4)
    array([0.5714, 0.2857, 0.1429])

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it).
    """
    k = np.arange(int(M) + 1, dtype=np.float64)
    c_m = 1.0 / (2.0 * (1.0 - 2.0 ** -(M + 1)))
    return c_m * 2.0 ** -k


def sample_tgeom(M, rng, size=None):
    """Draws of N ~ TGeom(M), exactly: a Geometric(1/2) count of leading one-bits,
    P[G = k] = 2^{−(k+1)}, redrawn while G > M, so P[N = k] ∝ 2^{−k} on 0..M.

    **Privacy guarantee.** None needed: the draws are independent of the data (exact
    coins from the key), which is what makes each step's cost predictable for the
    filter.
    """
    rng = as_random_source(rng)
    count = 1 if size is None else int(np.prod(size))
    out = np.empty(count, dtype=np.int64)
    for i in range(count):
        while True:
            bits = rng.integers(2, size=int(M) + 1)
            zeros = np.flatnonzero(bits == 0)
            if zeros.size:  # the first zero ends the run of ones; G ≤ M
                out[i] = zeros[0]
                break
    return int(out[0]) if size is None else out.reshape(size)


# ---------------------------------------------------------------------- accounting
# e^x − 1 ≤ 2x holds for x ≤ 1.2564 (the root of e^x = 1 + 2x): the range in which
# Lemma 6.3's linearisation ln(1 + q(e^x − 1)) ≤ 2qx is valid.
_LINEAR_AMPLIFICATION_MAX = 1.2564


def step_privacy(level, n, epsilon, delta):
    """(ε_t, δ_t) of one step of Algorithm 6 at N_t = ``level`` (Ghazi et al. 2024, Lemma 6.3).

    The oracle runs at (ε/8, δ/4), so its four mechanisms at (ε/32, δ/16). The three
    on B (2^{N+1} of n rows, without replacement) are (3ε/32, 3δ/16)-DP together and,
    by amplification by subsampling (Balle, Barthe and Gaboardi 2018, Thm 9;
    replacement neighbours), (ln(1 + q(e^{3ε/32} − 1)), q·3δ/16)-DP with
    q = 2^{N+1}/n; G₀ likewise with q = 1/n. Lemma 6.3 bounds ln(1 + q(e^x − 1)) by
    2qx, giving ε_t = (3·2^{N+1} + 1)ε/(16n) and δ_t = (3·2^{N+1} + 1)δ/(16n). The
    seed states it for ε ≤ 1; the bound holds whenever 3ε/32 ≤ 1.2564 (ε ≤ 13.4),
    and beyond that for large q only. This returns the larger of the linearised and
    the exact amplified value: always a valid bound, and the seed's number whenever
    the seed's is one.

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). What it states: Ghazi et al. 2024, Lemma 6.3's (ε_t, δ_t) of a step at
    level N (amplification by subsampling: Balle, Barthe and Gaboardi 2018, "Privacy
    amplification by subsampling: tight analyses via couplings and divergences", Theorem
    9), valid for ε ≤ 13.4.
    """
    q = 2.0 ** (int(level) + 1) / n
    seed_eps = (3.0 * 2.0 ** (int(level) + 1) + 1.0) * epsilon / (16.0 * n)
    exact_eps = math.log1p(q * math.expm1(3.0 * epsilon / 32.0)) \
        + math.log1p(math.expm1(epsilon / 32.0) / n)
    delta_t = (3.0 * 2.0 ** (int(level) + 1) + 1.0) * delta / (16.0 * n)
    return max(seed_eps, exact_eps), delta_t


def mean_rho(epsilon, delta):
    """ρ₀: every one of the four means of a step is ρ₀-zCDP (module docstring).

    The oracle runs at (ε/8, δ/4) and each mean at (ε/32, δ/16): a discrete Gaussian
    mechanism whose σ comes from
    :func:`~skdpsparse.accounting.discrete.discrete_gaussian_sigma` at that (ε, δ),
    i.e. σ ≥ Δ/√(2ρ₀) with ρ₀ = :func:`~skdpsparse.accounting.approx_dp_to_zcdp`
    (ε/32, δ/16) (``calibration="classic"``, and ℓ1-recovery's halved δ, only make σ
    larger), the grid rounding charged in the noise (:mod:`.noise`). By Canonne,
    Kamath and Steinke 2020 (Theorem 14) the mean is then (α, αρ₀)-RDP at every α > 1.

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). What it states: each of the four means of a step is ρ₀-zCDP under
    replacement neighbours (Canonne, Kamath and Steinke 2020, Theorem 14).
    """
    return approx_dp_to_zcdp(float(epsilon) / 32.0, float(delta) / 16.0)


def _multiplier(rho):
    """The largest float z with 1/(2z²) ≥ ρ: the Gaussian curve α/(2z²) bounds αρ."""
    z = 1.0 / math.sqrt(2.0 * rho)
    while 1.0 / (2.0 * z * z) < rho:
        z = math.nextafter(z, 0.0)
    return z


def _subsampled_part_rdp(sample_size, n, noise_multiplier, orders=_FILTER_ORDERS):
    """RDP of discrete Gaussian means on m of n rows drawn without replacement: the
    pointwise minimum of two valid bounds (replace-one neighbours).

    (a) Wang, Balle and Kasiviswanathan 2019 ("Subsampled Rényi differential privacy
    and analytical moments accountant", Theorem 9) from the base curve α/(2z²) alone
    (:func:`~skdpsparse.accounting.subsampled_without_replacement_gaussian_rdp` with
    ``moments_bound=False``); (b) the same expansion with the exact supremum of the
    Gaussian's ternary moments
    (:func:`~skdpsparse.accounting.subsampled_without_replacement_discrete_gaussian_rdp`),
    about a quarter of (a) in its leading term. Each is an RDP bound at every order,
    so their minimum is one.

    **Privacy guarantee.** None needed: public numbers in and out. What it states: a
    release of independent discrete Gaussian means (each N_ℤ(0, N_k²) per coordinate
    on an integer-rounded query) of a batch of m rows drawn uniformly without
    replacement, as an *ordered* tuple independent of the data, whose integer queries
    on two batches that differ in one row (in one position) are at most 1/z apart
    after dividing each coordinate by its N_k, is (α, ε(α))-RDP. Hypotheses of (b),
    checked for :func:`step_rdp` in :ref:`derivation_bias_reduced_accounting`: the
    noise is the discrete Gaussian of the grid mechanism (never Laplace: the
    estimator requires δ > 0), the centres are integer vectors (the grid rounds the
    query; the rounding is charged in N), the means of one step share the batch
    but not their noise, and the batch is drawn without replacement, never
    Poisson. ``sample_size`` must be 1 ≤ m ≤ n.
    """
    z = float(noise_multiplier)
    generic = subsampled_without_replacement_gaussian_rdp(int(sample_size), int(n), z,
                                                          orders, moments_bound=False)
    ternary = subsampled_without_replacement_discrete_gaussian_rdp(int(sample_size), int(n),
                                                                    z, orders)
    return RdpCurve(generic.orders, np.minimum(generic.epsilons, ternary.epsilons))


def step_rdp(level, n, rho, orders=_FILTER_ORDERS):
    """RDP curve of one step of Algorithm 6 at N = ``level``, accounted exactly.

    **Claim.** For replace-one neighbours and every α > 1, one step is
    (α, ε_B(α) + ε_I(α))-RDP, where ε_B is the curve of three discrete Gaussian means
    of which a record enters two (z = 1/√(4ρ₀)) amplified by sampling m = 2^{N+1} of n
    rows without replacement, and ε_I that of one mean (z = 1/√(2ρ₀)) amplified by
    sampling 1 of n, both by ``_subsampled_part_rdp`` (the smaller of Wang, Balle
    and Kasiviswanathan 2019, "Subsampled Rényi differential privacy and analytical
    moments accountant", Theorem 9, and their expansion with the Gaussian's exact
    ternary moments).

    *Proof.* The step releases (G⁺(B), G⁻(O), G⁻(E)) and G₀(I) with B, I drawn
    independently of each other and of the data, and N drawn before, independently
    of everything (it costs nothing and may be treated as released).

    1. B is an ordered tuple of m distinct rows, uniform among all such tuples
       (``choice(n, m, replace=False)`` returns them shuffled); O and E are its first
       and second halves, so the triple is a function of the ordered tuple. A record
       of B is in B and in exactly one of O, E: it enters two of the three means, not
       three as Ghazi et al. 2024 Lemma 6.3 charges. Each mean is the discrete
       Gaussian grid mechanism with Δ/σ ≤ √(2ρ₀) (:func:`mean_rho`), so after dividing
       each mean's coordinates by its own integer scale N_k the integer queries of two
       tuples that differ in one position are at most √(2·2ρ₀) = 1/z apart.
    2. Wang, Balle and Kasiviswanathan's expansion writes the output law as
       (1 − γ)·r + γ·p, γ = m/n, where p and r are mixtures over the tuples that hold
       the differing row, resp. another row, in the same position; its proof uses
       only this coupling and joint convexity, so it holds for uniform ordered tuples
       as for subsets, and every component of the mixtures is a product of discrete
       Gaussians with integer centres pairwise within 1/z. (a) Their Theorem 9 needs
       only the components' RDP α·2ρ₀ (Canonne, Kamath and Steinke 2020, "The
       discrete Gaussian for differential privacy", Theorem 14, and composition);
       (b) the ternary bound needs the integer-order mixed moments of three such
       products, which per coordinate equal the continuous Gaussian's (integer
       centres on ℤ at any scale N_k: completing the square shifts the lattice sum by
       an integer), hence those of a unit Gaussian with means pairwise within 1/z,
       whose supremum
       :func:`~skdpsparse.accounting.subsampled_without_replacement_discrete_gaussian_rdp`
       bounds. Fractional orders: the chord of the convex CGF (their Corollary 10).
    3. G₀ on one uniform row I is the same with m = 1 and z = 1/√(2ρ₀).
    4. The two parts compose (Mironov 2017, "Rényi differential privacy",
       Proposition 1). ∎

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). What it states: one step at level N is (α, ε_B(α) + ε_I(α))-RDP under
    replace-one neighbours (the proof is in :ref:`derivation_bias_reduced_accounting`).

    Parameters
    ----------
    level : int
        N, 0 ≤ N ≤ M.
    n : int
    rho : float
        ρ₀ of each mean (:func:`mean_rho`).
    orders : array-like of float

    Returns
    -------
    RdpCurve
    """
    m = 1 << (int(level) + 1)
    n = int(n)
    if not 2 <= m <= n:
        raise ValueError(f"level {level} needs 2 <= 2^(level+1) <= n={n}")
    rho = float(rho)
    batch = _subsampled_part_rdp(m, n, _multiplier(2.0 * rho), orders)
    single = _subsampled_part_rdp(1, n, _multiplier(rho), orders)
    return batch + single


class RenyiFilterPlan(NamedTuple):
    """The Rényi-filter accounting of a run, fixed from public numbers before it.

    The oracle runs at ``oracle_epsilon`` (δ/4): its four means are ρ₀-zCDP,
    ρ₀ = :func:`mean_rho` (4·``oracle_epsilon``, δ), where the paper's accounting
    runs it at ε/8. ``costs[N]`` is the RDP at ``order`` of a step at level N
    (:func:`step_rdp`); the filter admits steps while their sum stays ≤ ``budget``;
    ``expected_steps`` = budget / E_N[cost], the run length to expect (it only sets
    the step size and the noise, never the guarantee).

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). The plan (oracle budget, order, RDP budget, per-level costs) is fixed
    from n, ε and δ before the run, as the Rényi filter requires (Feldman and Zrnic
    2021, "Individual privacy accounting via a Rényi filter", Theorem 3.1;
    :ref:`derivation_bias_reduced_accounting`).
    """

    oracle_epsilon: float
    order: float
    budget: float
    costs: np.ndarray
    expected_steps: float


def _filter_at(n, epsilon, delta, oracle_epsilon, orders):
    M = tgeom_max_level(n)
    rho = mean_rho(4.0 * oracle_epsilon, delta)
    costs = np.stack([step_rdp(level, n, rho, orders).epsilons for level in range(M + 1)])
    expected = tgeom_pmf(M) @ costs
    budgets = np.array([renyi_budget(a, epsilon, delta) for a in orders])
    steps = np.where(budgets > 0, budgets / np.maximum(expected, 1e-300), 0.0)
    k = int(np.argmax(steps))
    col = costs[:, k].copy()
    col.setflags(write=False)
    return RenyiFilterPlan(float(oracle_epsilon), float(orders[k]), float(budgets[k]), col,
                           float(steps[k]))


@functools.lru_cache(maxsize=64)
def plan_renyi_filter(n, epsilon, delta, target_steps=None):
    """Oracle budget, order α, RDP budget B and per-level costs of the default accounting.

    For a given oracle budget, α maximizes B(α)/E_N[ε_N(α)] (the expected number of
    steps) over a fixed grid of orders, with B(α) =
    :func:`~skdpsparse.accounting.filters.renyi_budget` (α, ε, δ), the largest
    (α, B)-RDP that converts to (ε, δ), and N ~ TGeom(M). The oracle budget is then
    the largest (to within 2 %) at which the expected number of steps is still at
    least ``target_steps`` (default τ = n/ln(2/δ), the run length of Ghazi et al.
    2024, Theorems 6.7–6.8, about what the paper's filter admits): exact accounting
    buys less noise per step at the paper's run length (and run time), not a longer
    run. It is never below the paper's ε/8. Only n, ε, δ enter: the choice is part
    of the mechanism.

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). Choosing the order and the oracle budget from n, ε and δ only keeps the
    filter's costs predictable (:ref:`derivation_bias_reduced_accounting`).

    Returns
    -------
    RenyiFilterPlan
    """
    n = int(n)
    epsilon, delta = float(epsilon), float(delta)
    tau = n / math.log(2.0 / delta) if target_steps is None else float(target_steps)
    tau = max(tau, 1.0)
    orders = np.asarray(_FILTER_ORDERS)
    lo = _filter_at(n, epsilon, delta, epsilon / 8.0, orders)  # the paper's oracle budget
    if not lo.expected_steps > 0:
        raise ValueError(f"no order converts a positive RDP budget to (epsilon={epsilon}, "
                         f"delta={delta})")
    if lo.expected_steps <= tau:
        return lo
    # Expected steps fall as the oracle budget grows: double, then bisect in log scale.
    hi_eps = 2.0 * lo.oracle_epsilon
    while True:
        hi = _filter_at(n, epsilon, delta, hi_eps, orders)
        if hi.expected_steps < tau:
            break
        lo, hi_eps = hi, 2.0 * hi_eps
    while hi_eps / lo.oracle_epsilon > 1.02:
        mid_eps = math.sqrt(hi_eps * lo.oracle_epsilon)
        mid = _filter_at(n, epsilon, delta, mid_eps, orders)
        if mid.expected_steps >= tau:
            lo = mid
        else:
            hi_eps = mid_eps
    return lo


def algorithm6_filter(epsilon, delta):
    """The filter of Lemma 6.3: budget (ε/2, δ/2) with δ′ = δ″ = δ/4 (Theorem A.4).

    Its test on Σ_{s<t} is Algorithm 6's while-condition divided by ε:
    √(2 ln(4/δ) Σ a_s²) + (ε/2) Σ a_s² ≤ 1/2 and Σ a_s ≤ 1/4, a_s = ε_s/ε.

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). The (ε, δ) filter of Whitehouse, Ramdas, Rogers and Wu 2023,
    "Fully-adaptive composition in differential privacy" (Theorem A.4 of Ghazi et al.
    2024) at (ε/2, δ/2).
    """
    return ApproxDPFilter(epsilon / 2.0, delta / 2.0, delta_prime=delta / 4.0)


def algorithm6_privacy(n, epsilon, delta, max_iter=None):
    """Guarantee of a run of Algorithm 6: the filter's plus one step (Lemma 6.3).

    The loop runs the step after the last one the filter admits (its while-condition
    tests Σ_{s<t}, not Σ_{s≤t}), which costs at most (ε_t, δ_t) at the largest level
    M by basic composition: (ε/2 + ε_max, δ/2 + δ_max) ≤ (3ε/4, 3δ/4) for ε ≤ 13.4.
    With an iteration cap k the filter admits at most k − 1 steps, which may give less
    (:meth:`ApproxDPFilter.guarantee`).

    >>> print(algorithm6_privacy(100_000, 1.0, 1e-6))
    (0.622881, 6.22881e-07)-DP

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). What it states: a run with ``accounting="paper"`` is within the filter's
    (ε/2, δ/2) plus the one step it may overshoot by (Ghazi et al. 2024, Lemma 6.3), at
    most (3ε/4, 3δ/4) for ε ≤ 13.4.
    """
    eps_max, delta_max = step_privacy(tgeom_max_level(n), n, epsilon, delta)
    caps = {} if max_iter is None else {"max_steps": max(int(max_iter) - 1, 0),
                                        "max_step": (eps_max, delta_max)}
    admitted = algorithm6_filter(epsilon, delta).guarantee(**caps)
    return admitted + ApproxDP(eps_max, delta_max)


def renyi_filter_feasible(n, epsilon, delta):
    """Whether some order of the grid (1.25 … 256) converts a positive RDP budget to
    (ε, δ): false only for very small ε (about ε < ln(1/δ)/256); then
    :func:`bias_reduced_sgd` falls back to the paper's accounting.

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it).
    """
    return any(renyi_budget(a, epsilon, delta) > 0 for a in _FILTER_ORDERS)


def renyi_filter_privacy(n, epsilon, delta, max_iter=None):
    """Guarantee of a run with the default accounting: its Rényi filter's budget.

    (α, B)-RDP converted at δ (:meth:`~skdpsparse.accounting.filters.RenyiFilter.
    guarantee`), at most (ε, δ); with an iteration cap k, the filter's B is also at
    most k times the costliest step, which may give less.

    >>> print(renyi_filter_privacy(100_000, 1.0, 1e-6))
    (1, 1e-06)-DP

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). What it states: a run of :func:`bias_reduced_sgd` with the default
    accounting is (α, B)-RDP by the Rényi filter (Feldman and Zrnic 2021, Theorem 3.1),
    converted at δ, at most (ε, δ).
    """
    plan = plan_renyi_filter(int(n), float(epsilon), float(delta))
    budget = plan.budget
    if max_iter is not None:
        budget = min(budget, int(max_iter) * float(np.max(plan.costs)))
    return RenyiFilter(plan.order, budget).guarantee(delta)


def theorem_learning_rate(n, dim, *, epsilon, delta, gradient_bound, sparsity, convex,
                          radius=None, smoothness=None, suboptimality=None):
    """η of Theorem 6.7 (convex) or 6.8 (nonconvex), absolute constants set to 1.

    τ = n/ln(2/δ) (C′ = 1), ν² = L² ln(n) √(s ln(d/s) ln(1/δ))/ε (Lemma 6.4, with
    ln(d/s) ≥ 1); convex: η = D/(ν√τ); nonconvex: η = √(Γ/(Hτν²)) (the seed's "Ht" is
    τ). All from public quantities.

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). η does not enter the guarantee (the step is post-processing of the
    private gradient estimate).
    """
    s = min(float(sparsity), float(dim))
    L = float(gradient_bound)
    tau = n / math.log(2.0 / delta)
    nu = L * math.sqrt(math.log(n) * math.sqrt(
        s * max(math.log(dim / s), 1.0) * math.log(1.0 / delta)) / epsilon)
    if convex:
        if radius is None or not math.isfinite(radius):
            raise ValueError("learning_rate='auto' with a convex loss needs the radius D "
                             "of the domain (Theorem 6.7's η = D/(ν√τ)).")
        return float(radius) / (nu * math.sqrt(tau))
    return math.sqrt(float(suboptimality) / (float(smoothness) * tau * nu * nu))


# ------------------------------------------------------------ linear-model oracles
def linear_gradient_rows(X, y, loss_code, loss_param):
    """``gradient_rows(rows, θ)`` for a linear model: rows ℓ'(⟨θ, x_i⟩, y_i)·x_i.

    Sparse ``X`` (canonical CSR) gives CSR parts ``(indptr, indices, data)`` with the
    batch rows' pattern and data scaled by ℓ'_i; dense ``X`` a dense array. The
    intercept, if any, is a constant column of ``X``.

    **Privacy guarantee.** None: it reads the data and returns non-private per-example
    gradients; :class:`BiasReducedOracle` bounds them and adds the noise. Never release
    its output.
    """
    y = np.asarray(y, dtype=np.float64)
    if sp.issparse(X):
        indptr, indices, data = X.indptr, X.indices, X.data

        def rows_of(rows, theta):
            return csr_gradient_rows(indptr, indices, data, y, theta, loss_code, loss_param,
                                     np.asarray(rows, dtype=np.int64))
    else:
        X = np.ascontiguousarray(X)

        def rows_of(rows, theta):
            return dense_gradient_rows(X, y, theta, loss_code, loss_param,
                                       np.asarray(rows, dtype=np.int64))
    return rows_of


def linear_objective(X, y, loss_code, loss_param, theta):
    """F_S(θ) and ∇F_S(θ) of the mean loss of a linear model (no separate intercept).

    **Privacy guarantee.** None: it reads the data and returns the non-private objective
    and gradient; :func:`boost_noisy_min` and :func:`boost_random_stopping` release them
    only through noisy selection. Never release its output.
    """
    y = np.asarray(y, dtype=np.float64)
    if sp.issparse(X):
        loss, grad, _ = _kernels.csr_loss_gradient(X.indptr, X.indices, X.data, y, theta, 0.0,
                                                   loss_code, loss_param)
    else:
        loss, grad, _ = _kernels.dense_loss_gradient(np.ascontiguousarray(X), y, theta, 0.0,
                                                     loss_code, loss_param)
    return float(loss), grad


# -------------------------------------------------------------------- Algorithm 5
def _child_generators(rng, k):
    return as_random_source(rng).spawn(k)


def _head(rows, h):
    """The first h rows of CSR parts or of an array."""
    if not isinstance(rows, tuple):
        return rows[:h]
    indptr, indices, data = rows
    return indptr[: h + 1], indices[: indptr[h]], data[: indptr[h]]


def _tail(rows, h):
    """The rows from h on, of CSR parts or of an array."""
    if not isinstance(rows, tuple):
        return rows[h:]
    indptr, indices, data = rows
    return indptr[h:] - indptr[h], indices[indptr[h]:], data[indptr[h]:]


class BiasReducedOracle:
    """Ghazi et al. (2024) Algorithm 5 on one dataset, at oracle budget (ε, δ).

    **Privacy guarantee.** Protected: one row, under replacement neighbours (n public).
    One call at level N releases four discrete Gaussian means of rows bounded into {‖g‖₂
    ≤ L, ‖g‖₁ ≤ L√s} (the projection mechanism or Gaussian ℓ1-recovery, Ghazi et al.
    2024, Algorithms 1 and 2), each ρ₀-zCDP (:func:`mean_rho`); a replaced row reaches
    at most two of them, on random batches, so the call is (α, :func:`step_rdp`)-RDP
    (:ref:`derivation_bias_reduced_accounting`). Assumptions: ``gradient_rows`` returns
    per-example gradients that depend on their own row only; the rows are bounded inside
    the mechanisms; the level, the batches and the noise come from a secret key. Not
    covered: any number of calls without an accountant (:func:`bias_reduced_sgd` runs
    them under a filter).

    Parameters
    ----------
    gradient_rows : callable
        ``gradient_rows(rows, x)`` → the per-example gradients of the examples
        ``rows`` at ``x``, one row per index, in order: CSR parts
        ``(indptr, indices, data)`` (kept sparse; a tuple, as building a SciPy matrix
        per call costs more than the call's arithmetic at small d) or a 2-D array.
    n : int
        Number of examples (public).
    dim : int
        Length of x.
    epsilon, delta : float
        The oracle's budget; each of its four mechanisms runs at (ε/4, δ/4).
    norm_bound, sparsity : float
        L and s of the gradient rows (scaled into {‖g‖₂ ≤ L, ‖g‖₁ ≤ L√s} in each mean).
    rng : RandomSource or numpy.random.Generator
        Draws the batches; four child generators (one per mechanism role, spawned
        from it) draw the noise, so results do not depend on thread scheduling.
    mechanism : {"projection", "l1_recovery"}
    calibration : {"analytic", "classic"}
    n_threads : int or None
        Threads for the four means of a call (default: up to 4 CPUs, from d ≥ 2¹⁶).
    mechanism_options : dict or None
        Passed to :func:`~skdpsparse.mechanisms.sparse_mean.private_sparse_mean` for
        ``"l1_recovery"`` (``recovery``, ``max_iter``, ``tol``).
    """

    def __init__(self, gradient_rows, n, dim, *, epsilon, delta, norm_bound, sparsity, rng,
                 mechanism="projection", calibration="analytic", n_threads=None,
                 mechanism_options=None):
        if mechanism not in MECHANISMS:
            raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}.")
        if not delta > 0:
            raise ValueError("the bias-reduced estimator needs delta > 0.")
        self.gradient_rows = gradient_rows
        self.n, self.dim = int(n), int(dim)
        self.M = tgeom_max_level(self.n)
        self.pmf = tgeom_pmf(self.M)
        self.epsilon, self.delta = float(epsilon), float(delta)
        self.norm_bound, self.sparsity = float(norm_bound), float(sparsity)
        self.mechanism, self.calibration = mechanism, calibration
        self.options = dict(mechanism_options or {})
        self.rng = as_random_source(rng)
        self._rngs = _child_generators(self.rng, 4)
        if n_threads is None:
            n_threads = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                            else (os.cpu_count() or 1))
        # Threads pay off for the projection mechanism's dense noise and projections;
        # ℓ1-recovery's basis pursuit is a long solve of its own, kept serial.
        threaded = self.dim >= _THREADED_MIN_DIM and mechanism == "projection"
        self.n_threads = int(n_threads) if threaded else 1
        self._buffers = [np.zeros(self.dim) for _ in range(4)]

    def _projection(self, mean, m, rng):
        """The projection mechanism (Algorithm 1) at (ε/4, δ/4) on the mean of m rows
        (its σ is a cached root find per batch size, so a call costs a noise draw and
        two projections)."""
        return projection_mechanism(mean, m, epsilon=self.epsilon / 4,
                                    delta=self.delta / 4, norm_bound=self.norm_bound,
                                    sparsity=self.sparsity, rng=rng,
                                    calibration=self.calibration)[0]

    def _mean_estimate(self, role, rows):
        """One mechanism call (role 0: B, 1: O, 2: E, 3: I) on the rows given."""
        rng = self._rngs[role]
        if self.mechanism == "l1_recovery":
            if isinstance(rows, tuple):
                indptr, indices, data = rows
                rows = sp.csr_matrix((data, indices, indptr),
                                     shape=(indptr.shape[0] - 1, self.dim))
            z, _, _ = private_sparse_mean(
                rows, "l1_recovery", epsilon=self.epsilon / 4, delta=self.delta / 4,
                norm_bound=self.norm_bound, sparsity=self.sparsity, rng=rng,
                calibration=self.calibration, **self.options)
            return z
        if not isinstance(rows, tuple):
            mean = bounded_mean(rows, self.norm_bound, self.sparsity)
            return self._projection(mean, rows.shape[0], rng)
        # Sparse rows: sum the bounded rows into a zeroed buffer kept between calls
        # (no d-length allocation), then zero the touched entries again. Dividing the
        # data and both bounds by m leaves each row's bounding scale unchanged, so the
        # buffer holds the bounded mean exactly.
        indptr, indices, data = rows
        m = indptr.shape[0] - 1
        buf = self._buffers[role]
        l2_bound, l1_bound = row_bounds(self.norm_bound, self.sparsity)
        csr_bounded_column_sum_rows(indptr, indices, data / m, 0, m, l2_bound / m,
                                    l1_bound / m, buf)
        try:
            return self._projection(buf, m, rng)
        finally:
            buf[indices] = 0.0

    def draw_level(self):
        """N ~ TGeom(M), the batch-size parameter of one call."""
        return sample_tgeom(self.M, self.rng)

    def estimates(self, x, level, pool=None):
        """The four private means (G⁺, G⁻_O, G⁻_E, G₀) at ``x`` for N = ``level``."""
        m = 1 << (int(level) + 1)
        batch = self.rng.choice(self.n, size=m, replace=False)  # shuffled: O, E halves
        single = self.rng.integers(self.n, size=1)
        rows_b = self.gradient_rows(batch, x)
        jobs = [(0, rows_b), (1, _head(rows_b, m // 2)), (2, _tail(rows_b, m // 2)),
                (3, self.gradient_rows(single, x))]
        if pool is None:
            return [self._mean_estimate(r, rows) for r, rows in jobs]
        return list(pool.map(lambda job: self._mean_estimate(*job), jobs))

    def __call__(self, x, level=None):
        """𝒢(x) of Algorithm 5 (``level=None`` draws N ~ TGeom(M))."""
        level = self.draw_level() if level is None else int(level)
        g_b, g_o, g_e, g_i = self.estimates(x, level)
        return (g_b - 0.5 * (g_o + g_e)) / self.pmf[level] + g_i


# -------------------------------------------------------------------- Algorithm 6
def bias_reduced_sgd(gradient_rows, n, dim, *, epsilon, delta, norm_bound, sparsity,
                     learning_rate, rng, radius=None, convex=True, mechanism="projection",
                     calibration="analytic", max_iter=None, x0=None, n_threads=None,
                     mechanism_options=None, accounting="renyi_filter", verbose=0,
                     name="bias-reduced SGD"):
    """Algorithm 6 of Ghazi et al. 2024: projected SGD with :class:`BiasReducedOracle`,
    (ε, δ)-DP.

    Step t draws N_t ~ TGeom(M), calls the oracle and steps
    x^{t+1} = Π_𝒳(x^t − η𝒢(x^t)) with 𝒳 the ℓ2 ball of radius D (or ℝᵈ). Released:
    x̄ = mean of x⁰..x^T (convex) or x^{t̂}, t̂ ~ Unif{0..T} (nonconvex), T the number
    of steps taken. When the loop stops depends on ``accounting``:

    * ``"renyi_filter"`` (default): the oracle runs at the budget of
      :func:`plan_renyi_filter` (δ/4), and step t runs iff its exact RDP at the
      plan's order (:func:`step_rdp` at the drawn N_t) still fits in the plan's RDP
      budget (:class:`~skdpsparse.accounting.filters.RenyiFilter`); the first step
      that does not fit ends the run. Every run is (α, B)-RDP, hence (ε, δ)-DP.
      When no order of the grid reaches (ε, δ) (:func:`renyi_filter_feasible`,
      tiny ε) the run uses ``"paper"``; ``info["accounting"]`` says which.
    * ``"paper"``: the oracle runs at (ε/8, δ/4) and the loop continues while the
      filter of :func:`algorithm6_filter` admits the steps *before* the current one
      (the paper's while-condition on Σ_{s=0}^{t−1}): step t runs iff steps 0..t−1
      fit in (ε/2, δ/2), so the last step may overshoot the filter by one, which
      Lemma 6.3 pays for.

    **Privacy guarantee.** Protected: one row, under replacement neighbours (n public).
    One run is (ε, δ)-DP: with ``accounting="renyi_filter"`` its steps, each of the RDP
    of :func:`step_rdp` at a data-independent level, stop by a Rényi filter (Feldman and
    Zrnic 2021, Theorem 3.1) converted at δ (:func:`renyi_filter_privacy`;
    :ref:`derivation_bias_reduced_accounting`); with ``"paper"`` by the filter of
    Whitehouse, Ramdas, Rogers and Wu 2023 under Ghazi et al. 2024, Lemma 6.3
    (:func:`algorithm6_privacy`). The iterates are post-processing. Assumptions: as for
    :class:`BiasReducedOracle`; ``max_iter`` and ``x0`` are public. Not covered: the
    noise when the key is known; the run's duration.

    Parameters
    ----------
    gradient_rows, n, dim, norm_bound, sparsity, mechanism, calibration, n_threads,
    mechanism_options
        As for :class:`BiasReducedOracle`.
    epsilon, delta : float
        The run's budget (ε, δ), δ > 0.
    learning_rate : float
        η.
    rng : RandomSource or numpy.random.Generator
    radius : float or None
        D, or ``None`` for ℝᵈ.
    convex : bool
        Average iterate (True) or a uniformly random iterate (False).
    max_iter : int or None
        Optional cap on T (the filter's guarantee still holds; it may be smaller).
    x0 : ndarray or None
        Initial point (default 0).
    accounting : {"renyi_filter", "paper"}, default="renyi_filter"
        See above.
    verbose : bool or int, default=0
        Progress lines in the one format (:class:`~skdpsparse.utils._progress.
        Progress`): the step count, N_t and the filter's state (all data-independent:
        N_t is drawn before the step and the filter's costs depend on N_t and the
        public n, ε, δ only), every 1000 steps at ``1``, every step at ``2``.
    name : str, default="bias-reduced SGD"
        The name in brackets at the head of the progress lines.

    Returns
    -------
    x : ndarray of shape (dim,)
    info : dict
        ``n_iter`` (T), ``privacy`` (:func:`algorithm6_privacy` or
        :func:`renyi_filter_privacy`, never above (ε, δ)), ``oracle_epsilon``.
    """
    if accounting not in ACCOUNTINGS:
        raise ValueError(f"accounting must be one of {ACCOUNTINGS}, got {accounting!r}.")
    rng = as_random_source(rng)
    renyi = accounting == "renyi_filter" and renyi_filter_feasible(n, epsilon, delta)
    plan = plan_renyi_filter(int(n), float(epsilon), float(delta)) if renyi else None
    oracle_epsilon = plan.oracle_epsilon if renyi else epsilon / 8
    oracle = BiasReducedOracle(gradient_rows, n, dim, epsilon=oracle_epsilon, delta=delta / 4,
                               norm_bound=norm_bound, sparsity=sparsity, rng=rng,
                               mechanism=mechanism, calibration=calibration,
                               n_threads=n_threads, mechanism_options=mechanism_options)
    filt = RenyiFilter(plan.order, plan.budget) if renyi else algorithm6_filter(epsilon, delta)
    D = math.inf if radius is None else float(radius)
    x = np.zeros(dim) if x0 is None else np.array(x0, dtype=np.float64, copy=True)
    if math.isfinite(D):
        _kernels.project_l2_ball(x, D, out=x)
    total = x.copy()  # Σ_{s≤t} x^s (convex) ...
    chosen = x.copy()  # ... or the reservoir sample x^{t̂} (nonconvex)
    eta = float(learning_rate)
    t, previous = 0, None
    progress = Progress(verbose, name)
    pool = ThreadPoolExecutor(max_workers=oracle.n_threads) if oracle.n_threads > 1 else None
    try:
        while True:
            if max_iter is not None and t >= max_iter:
                break
            if renyi:
                # N_t is drawn independently of the data before the step: its cost is
                # predictable, as the Rényi filter requires; a step that does not fit
                # ends the run (it is not run).
                level = oracle.draw_level()
                if not filt.try_spend(plan.costs[level]):
                    break
            else:
                # The paper's while-condition: steps 0..t−1 within the filter
                # (previous = step t−1).
                if previous is not None and not filt.try_spend(*previous):
                    break
                level = oracle.draw_level()
            g_b, g_o, g_e, g_i = oracle.estimates(x, level, pool)
            bias_reduced_step(x, g_b, g_o, g_e, g_i, 1.0 / oracle.pmf[level], eta, D, total)
            if not renyi:
                previous = step_privacy(level, n, epsilon, delta)
            t += 1
            if not convex and rng.bernoulli(Fraction(1, t + 1)):  # keep x^t w.p. 1/(t+1)
                chosen[:] = x
            progress.report("step", t, None, f"N={level}, {filt!r}",
                            level=1 if t % 1000 == 0 else 2)
    finally:
        if pool is not None:
            pool.shutdown()
    out = total / (t + 1) if convex else chosen
    privacy = (renyi_filter_privacy(n, epsilon, delta, max_iter) if renyi
               else algorithm6_privacy(n, epsilon, delta, max_iter))
    return out, {"n_iter": t, "privacy": privacy, "oracle_epsilon": oracle_epsilon,
                 "accounting": "renyi_filter" if renyi else "paper"}


# ----------------------------------------------------------------------- boosting
def noisy_min_runs(failure_prob):
    """K = ⌈log₂(2/β)⌉ parallel runs of Ghazi et al. 2024, Theorem 7.1.

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it).
    """
    return max(1, math.ceil(math.log2(2.0 / float(failure_prob))))


def boost_noisy_min(run, score, *, epsilon, delta, n_runs, sensitivity, rng):
    """Ghazi et al. (2024) Algorithm 7: K runs at (ε/(K+1), δ/(K+1)), report-noisy-min choice.

    **Privacy guarantee.** Protected: what each run protects (one row, replacement
    neighbours). (ε, δ)-DP in total: K runs at (ε/(K+1), δ/(K+1)) and one
    report-noisy-min at ε/(K+1) over their scores (:func:`~skdpsparse.mechanisms.
    private_selection.report_noisy_min`, at the non-monotone scale 2Δ/ε), by basic
    composition (Dwork and Roth 2014, Theorem 3.16; Ghazi et al. 2024, Theorem 7.1).
    Assumptions: ``run(ε, δ)`` is (ε, δ)-DP and ``score`` has sensitivity at most
    ``sensitivity`` for every candidate; the noise comes from a secret key. Not covered:
    the unselected runs and the scores (never returned).

    Parameters
    ----------
    run : callable
        ``run(epsilon, delta)`` → (x, info) of one run of Algorithm 6.
    score : callable
        ``score(x)`` → F_S(x) (convex) or ‖∇F_S(x)‖₂ (nonconvex), non-private.
    epsilon, delta : float
    n_runs : int
        K.
    sensitivity : float
        Of the score: B/n (convex) or 2L/n (nonconvex).
    rng : RandomSource or numpy.random.Generator

    Returns
    -------
    x, info, budget
        The selected run's output and info, and the total: the K runs' guarantees plus
        the ε/(K+1)-DP selection (:func:`~.private_selection.report_noisy_min`), by
        basic composition, ≤ (ε, Kδ/(K+1)).
    """
    from .private_selection import report_noisy_min

    K = int(n_runs)
    runs = [run(epsilon / (K + 1), delta / (K + 1)) for _ in range(K)]
    k = report_noisy_min([score(x) for x, _ in runs], sensitivity=sensitivity,
                         epsilon=epsilon / (K + 1), rng=rng)
    total = sum((info["privacy"] for _, info in runs), ApproxDP(epsilon / (K + 1), 0.0))
    return runs[k][0], runs[k][1], total


def boost_random_stopping(run, score, *, epsilon, delta, gamma, sensitivity, rng):
    """Ghazi et al. (2024 v2) Algorithm 5: runs at (ε/12, (δ/(4K))²) until a γ-coin stops them.

    Each run is scored privately, F_S(x_k) or ‖∇F_S(x_k)‖₂ plus Laplace noise at ε/12
    (λ = 12B/(nε) or 24L/(nε)); the best so far is returned when the coin falls (at
    most K = ⌈ln(2/δ)/γ⌉ runs). Total by Liu and Talwar's Theorem 3.4 on the pair
    (run, score): ≤ (ε, δ) when δ ≤ ε/10. The number of runs is not returned.

    **Privacy guarantee.** Protected: what each run protects (one row, replacement
    neighbours). (ε, δ)-DP in total for δ ≤ ε/10: pairs (run, Laplace score) at (ε/6,
    (δ/(4K))²) with random stopping (Liu and Talwar 2019, "Private selection from
    private candidates", Theorem 3.4; Ghazi et al. 2024 v2, Theorem 6.1;
    :ref:`derivation_private_selection`). Assumptions: as for :func:`boost_noisy_min`;
    the stopping coins are independent of the data. Not covered: the number of runs (not
    returned), the unselected runs and the scores.

    Returns
    -------
    x, info, budget
    """
    from .private_selection import (
        noisy_score, random_stopping_budget, random_stopping_selection,
        split_budget_for_random_stopping)

    plan = split_budget_for_random_stopping(epsilon, delta, gamma=gamma)
    runs = []

    def draw_candidate(k):
        x, info = run(plan["run_epsilon"], plan["run_delta"])
        runs.append(info["privacy"])
        return (x, info), noisy_score(score(x), sensitivity=sensitivity,
                                      epsilon=plan["score_epsilon"], rng=rng)

    (x, info), _, _ = random_stopping_selection(draw_candidate, gamma=gamma,
                                                max_runs=plan["max_runs"], rng=rng)
    # Every run has the same guarantee (same public parameters); pair it with its score.
    pair = runs[0] + ApproxDP(plan["score_epsilon"], 0.0)
    total = random_stopping_budget(pair, gamma=gamma, delta2=plan["delta2"])
    return x, info, total


# ------------------------------------------------ a linear model's fit: plan, then run
# max |ℓ''| of the sigmoid loss 1/(1 + e^t): attained where σ(t) = 1/2 ± 1/(2√3).
_SIGMOID_CURVATURE = 1.0 / (6.0 * math.sqrt(3.0))


@dataclass(frozen=True)
class BiasReducedSGDPlan:
    """Everything one private fit of a linear model by bias-reduced SGD will use, fixed
    from public numbers before the data are read (:func:`plan_bias_reduced_sgd`).

    Attributes
    ----------
    n, n_features : int
        Rows and features of ``X`` (public).
    intercept_scaling : float
        c, the value of the intercept's constant column (0: no intercept).
    row_l2, row_l1 : float
        Each row x is scaled into {‖x‖₂ ≤ R, ‖x‖₁ ≤ √s R} (contribution bounding).
    sparsity : int
        s, the declared nonzeros per row (``n_features`` when undeclared).
    feature_l2 : float
        √(R² + c²), the bound on the norm of a row with its intercept column.
    gradient_bound, gradient_sparsity : float
        L = ``deriv_bound``·√(R² + c²) bounds ‖ℓ'(x̄)‖₂ and s′ = ((√s R + c)/√(R² + c²))²
        its ‖·‖₁ as L√s′: the norm bound and the sparsity of every private mean.
    radius : float or None
        D, the domain's ℓ2 ball (None: ℝᵖ).
    convex : bool
    epsilon, delta : float
        The budget of this problem (the whole fit's, or one one-vs-rest part).
    run_epsilon, run_delta : float
        The budget of each run of Algorithm 6: ``(epsilon, delta)`` without boosting,
        (ε/(K+1), δ/(K+1)) with ``"noisy_min"``, the split of
        :func:`~skdpsparse.mechanisms.private_selection.split_budget_for_random_stopping`
        with ``"random_stopping"``.
    learning_rate : float
        η of every run: the declared one, or Theorem 6.7/6.8's at the run's budget
        (:func:`theorem_learning_rate`; with the Rényi filter at the ε whose ε/8 is the
        oracle budget of :func:`plan_renyi_filter`).
    boosting : {None, "noisy_min", "random_stopping"}
    n_runs : int or None
        K of ``"noisy_min"``.
    gamma : float or None
        The stopping probability of ``"random_stopping"``.
    score_sensitivity : float or None
        Of the boosting score: B/n, B = ``loss_range(D·√(R² + c²))`` (convex; Ghazi et
        al. 2024, Theorem 7.1) or 2L/n (‖∇F_S‖₂, nonconvex); None without boosting.
    mechanism, calibration, accounting : str
    max_iter : int or None
        Passed to :func:`bias_reduced_sgd`.

    **Privacy guarantee.** None needed: public numbers only (no data enter). The
    guarantee is that of the run (:func:`bias_reduced_sgd`, boosted by
    :func:`boost_noisy_min` or :func:`boost_random_stopping`) at these numbers.
    """

    n: int
    n_features: int
    intercept_scaling: float
    row_l2: float
    row_l1: float
    sparsity: int
    feature_l2: float
    gradient_bound: float
    gradient_sparsity: float
    radius: float | None
    convex: bool
    epsilon: float
    delta: float
    run_epsilon: float
    run_delta: float
    learning_rate: float
    boosting: str | None
    n_runs: int | None
    gamma: float | None
    score_sensitivity: float | None
    mechanism: str
    calibration: str
    accounting: str
    max_iter: int | None

    @property
    def dim(self):
        """p, the coefficients of the run: the features and the intercept's column."""
        return self.n_features + (self.intercept_scaling > 0)


def bias_reduced_oracle_epsilon(n, epsilon, delta, accounting):
    """ε′, the ε whose ε′/8 the oracle of a run at (ε, δ) spends: ε itself with the
    paper's accounting (or when the Rényi filter is infeasible), else 8 times the oracle
    budget of :func:`plan_renyi_filter`.

    **Privacy guarantee.** None needed: a function of public numbers only.
    """
    if accounting == "renyi_filter" and renyi_filter_feasible(n, epsilon, delta):
        return 8.0 * plan_renyi_filter(n, epsilon, delta).oracle_epsilon
    return epsilon


def plan_bias_reduced_sgd(n, n_features, *, epsilon, delta, norm_bound, sparsity,
                          intercept_scaling, deriv_bound, convex, loss_range=None,
                          radius=None, learning_rate="auto", boosting=None, n_runs="auto",
                          failure_prob=0.1, mechanism="projection", calibration="analytic",
                          accounting="renyi_filter", max_iter=None):
    """The plan of a linear model's fit by bias-reduced SGD, from public numbers only.

    Parameters
    ----------
    n, n_features : int
    epsilon, delta : float
        This problem's budget.
    norm_bound : float
        R, the ℓ2 bound rows are scaled into.
    sparsity : int or None
        s (None: every feature).
    intercept_scaling : float
        c (0: no intercept).
    deriv_bound : float
        A bound on |ℓ'| in the margin (1 for the logistic and smoothed hinge losses,
        1/4 for the sigmoid, κ for Huber, D√(R² + c²) + Y for the squared loss on the
        ball).
    convex : bool
    loss_range : callable, optional
        ``loss_range(a)``: the range of ℓ over margins in [−a, a] (boosting with a
        convex loss).
    radius, learning_rate, boosting, n_runs, failure_prob, mechanism, calibration, \
accounting, max_iter
        As the estimators' parameters.

    Returns
    -------
    BiasReducedSGDPlan

    Raises
    ------
    ValueError
        Boosting a convex loss without a radius (its score's sensitivity B/n needs a
        bounded domain).

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it).
    """
    n, d = int(n), int(n_features)
    c = float(intercept_scaling)
    R = float(norm_bound)
    s = d if sparsity is None else min(int(sparsity), d)
    feat_l2 = math.hypot(R, c)
    s_grad = ((math.sqrt(s) * R + c) / feat_l2) ** 2          # ‖ℓ'(x, c)‖₁ ≤ L√s′
    L = float(deriv_bound) * feat_l2                           # ‖ℓ'(x, c)‖₂ ≤ L
    D = None if radius is None else float(radius)
    p = d + (c > 0)
    run_eps, run_delta, K, gamma, sensitivity = float(epsilon), float(delta), None, None, None
    if boosting is not None:
        if convex:
            if D is None:
                raise ValueError("boosting with a convex loss scores F_S, whose "
                                 "sensitivity B/n needs a bounded domain: set radius.")
            sensitivity = loss_range(D * feat_l2) / n          # Ghazi et al. 2024 Thm 7.1: B/n
        else:
            sensitivity = 2.0 * L / n                          # ‖∇F_S‖₂ moves by ≤ 2L/n
        if boosting == "noisy_min":
            K = noisy_min_runs(failure_prob) if n_runs == "auto" else int(n_runs)
            run_eps, run_delta = run_eps / (K + 1), run_delta / (K + 1)
        else:
            from .private_selection import (gamma_for_failure_prob,
                                            split_budget_for_random_stopping)

            gamma = gamma_for_failure_prob(float(failure_prob))
            split = split_budget_for_random_stopping(float(epsilon), float(delta),
                                                     gamma=gamma)
            run_eps, run_delta = split["run_epsilon"], split["run_delta"]
    if learning_rate != "auto":
        eta = float(learning_rate)
    else:
        eta = theorem_learning_rate(
            n, p, epsilon=bias_reduced_oracle_epsilon(n, run_eps, run_delta, accounting),
            delta=run_delta, gradient_bound=L, sparsity=s_grad, convex=convex, radius=D,
            smoothness=_SIGMOID_CURVATURE * feat_l2**2, suboptimality=0.5)
    return BiasReducedSGDPlan(
        n=n, n_features=d, intercept_scaling=c, row_l2=R, row_l1=math.sqrt(s) * R,
        sparsity=s, feature_l2=feat_l2, gradient_bound=L, gradient_sparsity=s_grad,
        radius=D, convex=bool(convex), epsilon=float(epsilon), delta=float(delta),
        run_epsilon=run_eps, run_delta=run_delta, learning_rate=eta, boosting=boosting,
        n_runs=K, gamma=gamma, score_sensitivity=sensitivity, mechanism=mechanism,
        calibration=calibration, accounting=accounting, max_iter=max_iter)


def bounded_rows(X, row_l2, row_l1):
    """The rows of ``X`` scaled into {‖x‖₂ ≤ ``row_l2``, ‖x‖₁ ≤ ``row_l1``} (a copy;
    sparse stays sparse): the contribution bounding of a bias-reduced fit, and what
    ``predict`` applies to new rows.

    **Privacy guarantee.** None: the data, bounded, not private.
    """
    if sp.issparse(X):
        scales = _kernels.csr_bounding_scales(X.indptr, X.data, row_l2, row_l1)
        data = _kernels.csr_scale_rows(X.indptr, X.data, scales)
        return sp.csr_matrix((data, X.indices.copy(), X.indptr.copy()), shape=X.shape)
    X = np.asarray(X)
    return _kernels.dense_scale_rows(X, _kernels.dense_bounding_scales(X, row_l2, row_l1))


def bias_reduced_design(X, plan):
    """The rows of ``X`` bounded as ``plan`` says, with the intercept's column c.

    **Privacy guarantee.** None: the data, bounded, not private; the fit's key is
    derived from it and the targets (:func:`~skdpsparse.utils.fit_random_source`).
    """
    X = bounded_rows(X, plan.row_l2, plan.row_l1)
    c = plan.intercept_scaling
    if c > 0:
        ones = np.full((X.shape[0], 1), c, dtype=X.dtype)
        X = sp.hstack([X, ones], format="csr") if sp.issparse(X) else np.hstack([X, ones])
    return X


def bias_reduced_linear_fit(design, targets, loss_code, loss_param, plan, rng, *,
                            verbose=0, name="bias-reduced SGD"):
    """Run ``plan`` on the bounded rows ``design`` (:func:`bias_reduced_design`): one run
    of Algorithm 6, or its boosting.

    Returns
    -------
    coef : ndarray of shape (n_features,)
    intercept : float
    info : dict
        The selected run's (:func:`bias_reduced_sgd`), with ``"learning_rate"``.
    budget : ApproxDP
        What the fit spent.

    **Privacy guarantee.** Protected: one row, replacement neighbours (n public).
    (``plan.epsilon``, ``plan.delta``)-DP: one run of :func:`bias_reduced_sgd` at that
    budget, or :func:`boost_noisy_min` / :func:`boost_random_stopping` of runs at
    (``plan.run_epsilon``, ``plan.run_delta``) scored with sensitivity
    ``plan.score_sensitivity``. Assumptions: ``deriv_bound`` of the plan bounds |ℓ'| of
    the loss ``loss_code``, and ``design`` holds the bounded rows; ``rng`` is a secret
    key.
    """
    d, c = plan.n_features, plan.intercept_scaling
    rows = linear_gradient_rows(design, targets, loss_code, loss_param)

    def run(eps, delta):
        # The boosting passes the run budget the plan was made for (same public split).
        assert (eps, delta) == (plan.run_epsilon, plan.run_delta), (eps, delta)
        theta, info = bias_reduced_sgd(
            rows, plan.n, plan.dim, epsilon=eps, delta=delta, norm_bound=plan.gradient_bound,
            sparsity=plan.gradient_sparsity, learning_rate=plan.learning_rate, rng=rng,
            radius=plan.radius, convex=plan.convex, mechanism=plan.mechanism,
            calibration=plan.calibration, max_iter=plan.max_iter, accounting=plan.accounting,
            verbose=verbose, name=name)
        info["learning_rate"] = plan.learning_rate
        return theta, info

    if plan.convex:
        def score(theta):
            return linear_objective(design, targets, loss_code, loss_param, theta)[0]
    else:
        def score(theta):
            return float(np.linalg.norm(linear_objective(design, targets, loss_code,
                                                         loss_param, theta)[1]))
    if plan.boosting is None:
        theta, info = run(plan.epsilon, plan.delta)
        budget = info["privacy"]
    elif plan.boosting == "noisy_min":
        theta, info, budget = boost_noisy_min(
            run, score, epsilon=plan.epsilon, delta=plan.delta, n_runs=plan.n_runs,
            sensitivity=plan.score_sensitivity, rng=rng)
    else:
        theta, info, budget = boost_random_stopping(
            run, score, epsilon=plan.epsilon, delta=plan.delta, gamma=plan.gamma,
            sensitivity=plan.score_sensitivity, rng=rng)
    coef, intercept = theta[:d], (c * theta[d] if c > 0 else 0.0)
    return coef, float(intercept), info, budget
