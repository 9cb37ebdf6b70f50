"""Noisy projected SGD with fresh and noise-only steps, and its privacy (Arora et al. 2020).

Arora, Marinov and Ullah 2020, "Private Stochastic Convex Optimization: Efficient
Algorithms for Non-smooth Objectives" (arXiv:2002.09609), Algorithm 1
(noisy online stochastic mirror descent with Φ = ½‖·‖², i.e. noisy projected SGD),
as this module runs it:

* draw y_t uniformly from [n] *with replacement*; if y_t is fresh (not in the set F_t
  of indices used so far) take Π_W(θ_t − η(∇f(θ_t, z_{y_t}) + ξ_t)), otherwise the
  noise-only step Π_W(θ_t − ηξ_t);
* stop when |F_t| reaches k = ⌈n/2⌉; the stopping time τ depends on the index
  sequence only, and E τ = Σ_{j<k} n/(n−j) ≈ n ln 2;
* output the average of the iterates θ_t of the fresh steps (θ_t is the point at
  which the fresh loss is evaluated).

The index sequence and F are secret: they live in local variables of
:func:`noisy_projected_sgd` and are never returned.

Plan, then run: :func:`plan_noisy_sgd` computes L, σ, η and the budget of K runs from
public numbers into a frozen :class:`NoisySGDPlan`; :func:`noisy_sgd` runs it (K calls
of :func:`noisy_projected_sgd`). The estimators of :mod:`skdpsparse.linear_model` are
validate → plan → run → release.

ξ_t is exact discrete Gaussian noise on a grid (:func:`~skdpsparse.mechanisms.noise.
grid_noise`): the compiled loop rounds the step's gradient to γℤ^p and adds integer
noise of scale N, so a step releases the integer vector V_t = round(g_t/γ) + Y_t
(fresh) or V_t = Y_t (stale) and moves by −ηγV_t. N is planned for sensitivity L (a
lower bound on the true 2L, which only charges the rounding more): N ≥ σ/γ +
σ⌈√p⌉/L, so two gradients at ℓ2 distance ≤ 2L round to integer vectors at distance
≤ 2L/γ + √p ≤ 2L·N/σ.

Linear models
-------------
f(θ, z) = ℓ(⟨w, x̃⟩ + b, y) with θ = (w, b), x̃ = x·min(1, R_x/‖x‖₂) (every row scaled
into the ball of radius R_x = ``norm_bound``; contribution bounding, never rejection)
and W = {‖θ‖₂ ≤ D}, D = ``radius``. With G = √(R_x² + 1) (intercept) or R_x, the
gradient ℓ'·(x̃, 1) has norm ≤ L = Λ·G, Λ = sup|ℓ'| (:func:`lipschitz_constant`):
Λ = 1 for logistic, hinge and smoothed hinge; κ for Huber with threshold κ; and for
the squared loss, which is not Lipschitz on ℝᵖ, Λ = D·G + B on W once the targets are
clipped to [−B, B] (|z − y| ≤ ‖θ‖‖(x̃, 1)‖ + |y|). So any two rows' gradients at the
same θ ∈ W are at ℓ2 distance ≤ 2L: the replace-one sensitivity of one step.

Privacy (replace-one neighbours, n public)
------------------------------------------
*Provable* (``noise_calibration="provable"``, the default of the estimators).

**Theorem.** Let z = σ/(2L). One run of :func:`noisy_projected_sgd` is ρ-zCDP with
ρ = (2L)²/(2σ²) = 1/(2z²), whatever n, η, D and the stopping time; K runs on the
same rows (one versus rest) are Kρ-zCDP, hence (ε, δ)-DP for
ε = :func:`~skdpsparse.accounting.zcdp_to_epsilon` (Kρ, δ).

*Proof.* Fix neighbours S, S′ that differ in row i*, and an order α > 1.

1. *The output is a post-processing of the integer releases.* Fix the index sequence
   π = (y_1, y_2, ...), which is drawn independently of the data. Then the pattern of
   fresh and stale steps, τ, and the row used at each fresh step are fixed, and
   θ_{t+1} = Π_W(θ_t − ηγV_t) makes every iterate, hence the output, a deterministic
   function of (π, V_1, ..., V_τ). By the data-processing inequality for Rényi
   divergence (van Erven and Harremoës 2014, "Rényi divergence and Kullback-Leibler
   divergence", IEEE Trans. Inf. Theory 60(7), Theorem 9) it suffices to bound the
   divergence of the sequence V = (V_1, ..., V_τ).
2. *Each row influences exactly one step's gradient* (parallel composition). Row i*
   is fresh at most once: at the first t* with y_{t*} = i*, if t* ≤ τ. Given
   V_{<t}, θ_t is fixed, and for t ≠ t* the law of V_t is the same under S and S′
   (a stale step uses no row; a fresh one uses row y_t ≠ i*): divergence 0. At t*,
   given V_{<t*}, V_{t*} is the discrete Gaussian mechanism N_ℤ(0, N²)^p added to
   the integer query round(∇f(θ_{t*}, z_{i*})/γ), whose two values are at ℓ2
   distance ≤ 2L·N/σ (above); by Canonne, Kamath and Steinke 2020 ("The discrete
   Gaussian for differential privacy", NeurIPS, Theorem 14, the multivariate
   discrete Gaussian) its divergence is ≤ α(2L)²/(2σ²). The adaptive composition
   of Rényi DP (Mironov 2017, "Rényi differential privacy", CSF, Proposition 1)
   adds the per-step bounds given the past: D_α(M_π(S) ‖ M_π(S′)) ≤ α(2L)²/(2σ²),
   and 0 if i* is never fresh.
3. *The random index sequence.* M(S) = Σ_π P(π)·M_π(S) and M(S′) = Σ_π P(π)·M_π(S′)
   are mixtures with the same weights. Rényi divergence is jointly quasi-convex
   (van Erven and Harremoës 2014, Theorem 13): for α > 1, e^{(α−1)D_α(P‖Q)} =
   ∫p^α q^{1−α}, the map (p, q) ↦ p^α q^{1−α} is jointly convex (the perspective of
   t ↦ t^α), so by Jensen's inequality the mixtures' integral is at most the
   P(π)-average of the components', and D_α(M(S) ‖ M(S′)) ≤ sup_π D_α(M_π(S) ‖
   M_π(S′)) ≤ α(2L)²/(2σ²). That is ρ-zCDP (Bun and Steinke 2016, "Concentrated
   differential privacy: simplifications, extensions, and lower bounds", TCC,
   Definition 1.1) with ρ = (2L)²/(2σ²).
4. K one-versus-rest runs with independent randomness compose to Kρ-zCDP (Bun and
   Steinke 2016, Lemma 2.3), and ρ-zCDP implies (ε, δ)-DP with the tight conversion
   of Canonne, Kamath and Steinke 2020 (Corollary 13). ∎

Calibration (:func:`provable_noise_std`): σ = discrete_gaussian_sigma(2L√K, ε, δ),
the smallest σ with K(2L)²/(2σ²) at most the largest ρ that converts to (ε, δ)
(:func:`~skdpsparse.accounting.discrete.discrete_gaussian_sigma`); the budget carries
``DiscreteGaussianEvent(z, count=K)`` (:func:`provable_privacy`), so a ledger
composes such fits in ρ. No amplification by the random choice of rows is claimed,
so σ does not shrink with n (the error still does: ~n/2 averaged fresh steps with
η ∝ 1/√n), and the random τ costs no δ. For every valid ε the calibration exists:
it never refuses a target.

*Paper* (``noise_calibration="paper"``; **unproven as run here**). Arora et al.
2020, Theorem 6: with σ = 8L√log(1/δ)/(√n ε), n ≥ 16 and ε ≤ 1/(2√n), the output is
(4ε(√log(1/δ′) + 2), δ + δ′ + 2e^{−n/16})-DP. Our reading of the proof makes two
corrections: the per-step δ is halved, σ = 8L√log(2/δ)/(√n ε) (τ ≤ 2n steps at δ/n
each would spend 2δ), and the condition ε ≤ 1/(2√n), the strictest of the three
the paper states, is enforced; the paper's Theorem 5 has 8τε̃²/n² where 4τε̃²/n² is
written, which does not change the statement: 4ε√log(1/δ′) + 16ε² ≤
4ε(√log(1/δ′) + 2) for ε ≤ 1/2. Targets (ε̄, δ̄) are met with Remark 1: δ = δ′ =
δ̄/3, ε = ε̄/(8√log(1/δ′)). The proof's per-step lemma treats the set F_t of seen
indices as fixed in each step.

*RDP* (``noise_calibration="rdp"``; **unproven**). Conditional on the pattern of
fresh and stale steps, stale steps are post-processing and the j-th fresh step uses
a uniformly random unseen row: if the differing row is unseen it is chosen with
probability 1/(n − j + 1) ≤ 2/n. Each fresh step is then treated as a Gaussian
mechanism on a sample of 1 out of m_j = n − j + 1 rows (replace-one sensitivity 2L,
noise multiplier z), composed over the k = ⌈n/2⌉ fresh steps: :func:`noisy_sgd_rdp`
with the smaller of :func:`~skdpsparse.accounting.subsampled_without_replacement_gaussian_rdp`
([WBK19]) and
:func:`~skdpsparse.accounting.subsampled_without_replacement_discrete_gaussian_rdp`
(the same expansion with the exact ternary moments; its hypotheses, a discrete
Gaussian on an integer query whose values for any two rows are within N/z, hold for
the modelled step), the m_j grouped into a few buckets that each use their smallest
m. Only ``"rdp"`` models the steps as sampled without replacement: the default
``"provable"`` claims no amplification, so nothing changes there.

*Why both are unproven.* Whether the differing row is still unseen at step t is
decided by the same secret index sequence for all steps: it is hidden state shared
across steps, correlated with the earlier outputs, not a fresh independent
subsample per step. The adaptive-composition theorems behind both analyses need
each step's amplification to hold given the past outputs, which this does not
show; neither the paper's proof nor ours closes the gap (numerical checks on small
n find the true divergence well below the RDP curve, so the claims are probably
true, but that is not a proof). Both are kept as options that report what they
compute; an unproven (ε, δ) carries no privacy event, so a ledger adds it up by
basic composition. :func:`noisy_sgd_privacy` reports the smallest of the three ε
for a given σ (the provable one is valid for every σ).

Why the noise is added eagerly (O(p) per step)
----------------------------------------------
The lazy noise of :mod:`skdpsparse.mechanisms.cyclic_sgd` (add a coordinate's noise
when it is next read, as one draw for the whole interval) does not apply here, for
two reasons. The projection onto W after every step scales θ by min(1, D/‖θ_t −
ηγV_t‖), and that norm depends on every coordinate of the step's noise, which a lazy
run does not know. And the output is the average of the fresh iterates, so an
interval of k steps between two reads of a coordinate contributes both the sum of
its k noise draws and a weighted sum of them (each draw weighted by the fresh steps
after it); drawing that pair jointly with the law of the eager run's discrete
Gaussians has no known exact sampler. Dropping the projection or the averaging
would change the algorithm and its error bound (Arora et al. 2020, Theorem 4), so
the noisy SGD stays O(p) per step.

References
----------
.. [AMU20] R. Arora, T. V. Marinov, E. Ullah. Private stochastic convex optimization:
   efficient algorithms for non-smooth objectives. arXiv:2002.09609 (Arora et al. 2020).
.. [BS16] M. Bun, T. Steinke. Concentrated differential privacy: simplifications,
   extensions, and lower bounds. TCC 2016. arXiv:1605.02065.
.. [CKS20] C. Canonne, G. Kamath, T. Steinke. The discrete Gaussian for differential
   privacy. NeurIPS 2020. arXiv:2004.00010.
.. [EH14] T. van Erven, P. Harremoës. Rényi divergence and Kullback-Leibler
   divergence. IEEE Transactions on Information Theory 60(7), 2014. arXiv:1206.2459.
.. [M17] I. Mironov. Rényi differential privacy. CSF 2017. arXiv:1702.07476.
.. [WBK19] Y.-X. Wang, B. Balle, S. Kasiviswanathan. Subsampled Rényi differential
   privacy and analytical moments accountant. AISTATS 2019.
"""

import functools
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .._kernels.linear_losses import LOSS_CODES
from .._kernels.noisy_sgd import csr_noisy_sgd_block, dense_noisy_sgd_block
from ..accounting import (
    ApproxDP,
    DiscreteGaussianEvent,
    RdpCurve,
    calibrate_noise_multiplier,
    subsampled_without_replacement_discrete_gaussian_rdp,
    subsampled_without_replacement_gaussian_rdp,
    with_event,
    zcdp_to_epsilon,
)
from ..accounting.discrete import discrete_gaussian_sigma
from ..utils._data import as_canonical_csr
from ..utils._progress import Progress
from ..utils._random import as_random_source
from .noise import grid_noise

__all__ = [
    "ACCOUNTINGS",
    "CLASSIFICATION_LOSSES",
    "REGRESSION_LOSSES",
    "NoisySGDPrivacy",
    "NoisySGDResult",
    "lipschitz_constant",
    "noisy_projected_sgd",
    "noisy_sgd_privacy",
    "noisy_sgd_rdp",
    "paper_epsilon",
    "paper_noise_std",
    "paper_regime",
    "paper_step_size",
    "provable_epsilon",
    "provable_noise_std",
    "provable_privacy",
    "rdp_noise_multiplier",
    "remark1_split",
]

CLASSIFICATION_LOSSES = ("logistic", "hinge", "smoothed_hinge")
REGRESSION_LOSSES = ("squared", "huber")
# Buckets of the fresh-step sampling rates in the RDP bound: with 4, the calibrated noise
# multiplier is within 1% of the one with 16 buckets for n ≥ 1000 (4% at n = 30), at a
# quarter of the cost.
_RATE_BUCKETS = 4
# Noise entries drawn per block of steps (8 MB of float64).
_NOISE_BLOCK = 1 << 20


def _n_fresh(n):
    """k = ⌈n/2⌉: |F_τ| at the stopping time (|F| grows by at most one per step)."""
    return (int(n) + 1) // 2


# -------------------------------------------------------------------- constants
def lipschitz_constant(loss, norm_bound, fit_intercept, *, radius=None, label_bound=None,
                       loss_param=1.0):
    """L with ‖∇_θ f(θ, z)‖₂ ≤ L for every record and every θ ∈ W (module docstring).

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). What it guarantees: ‖∇_θ f(θ, z)‖₂ ≤ L for every row scaled into the
    declared bounds and every θ ∈ W (:ref:`derivation_sensitivities`, "Per-example
    gradients of the linear losses"), the sensitivity 2L the noise is calibrated to.

    Parameters
    ----------
    loss : {"logistic", "hinge", "smoothed_hinge", "huber", "squared"}
    norm_bound : float
        R_x: rows are scaled into ‖x‖₂ ≤ R_x.
    fit_intercept : bool
        With an intercept the gradient is ℓ'·(x̃, 1): G = √(R_x² + 1).
    radius : float, optional
        D; needed for the squared loss only.
    label_bound : float, optional
        B (targets clipped to [−B, B]); needed for the squared loss only.
    loss_param : float, default=1.0
        Huber threshold κ (|ℓ'| ≤ κ); ignored otherwise.

    Returns
    -------
    float
    """
    g = math.hypot(norm_bound, 1.0) if fit_intercept else float(norm_bound)
    if loss in CLASSIFICATION_LOSSES:
        return g
    if loss == "huber":
        return float(loss_param) * g
    if loss == "squared":
        if radius is None or label_bound is None:
            raise ValueError("the squared loss is Lipschitz only on a bounded domain with "
                             "bounded labels: give radius and label_bound")
        return (float(radius) * g + float(label_bound)) * g
    raise ValueError(f"unknown or unsupported loss {loss!r}")


def remark1_split(epsilon, delta):
    """Arora et al. 2020, Remark 1: a target (ε̄, δ̄) as Theorem 6's (ε, δ, δ′).

    δ = δ′ = δ̄/3 and ε = ε̄/(8√log(1/δ′)) (Arora et al. 2020 Remark 1).

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it).

    Returns
    -------
    epsilon, delta, delta_prime : float
    """
    d = float(delta) / 3.0
    return float(epsilon) / (8.0 * math.sqrt(math.log(1.0 / d))), d, d


def paper_noise_std(n, epsilon, delta, lipschitz):
    """σ of Arora et al. 2020 Theorem 6 for the target (ε̄, δ̄) = (``epsilon``, ``delta``).

    σ = 8L√log(2/δ)/(√n ε) with (ε, δ) from :func:`remark1_split`: Theorem 6's
    σ = 8L√log(1/δ)/(√n ε) with the per-step δ halved (module docstring, "Paper"),
    so that the τ ≤ 2n steps spend δ, not 2δ.

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). σ of Arora, Marinov and Ullah (2020), Theorem 6, whose guarantee is
    **unproven** as run here (module docstring, "Paper").
    """
    eps, d, _ = remark1_split(epsilon, delta)
    return 8.0 * lipschitz * math.sqrt(math.log(2.0 / d)) / (math.sqrt(n) * eps)


def paper_step_size(n, radius, lipschitz, noise_std, dim):
    """η = D/(√n (L + σ√p)) of Arora et al. 2020 Theorems 4 and 6, p = dim θ.

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). η does not enter the guarantee (the step is post-processing of the noisy
    gradient).
    """
    return float(radius) / (math.sqrt(n) * (lipschitz + noise_std * math.sqrt(dim)))


def paper_regime(n, epsilon_step, delta):
    """Whether Theorem 6 (with Remark 1's split of ``delta``) applies.

    n ≥ 16, ε ≤ 1/(2√n) (the strictest of the paper's conditions) and 2e^{−n/16} ≤ δ̄/3, so that
    δ + δ′ + 2e^{−n/16} ≤ δ̄.

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it).
    """
    return (n >= 16 and epsilon_step <= 0.5 / math.sqrt(n)
            and 2.0 * math.exp(-n / 16.0) <= float(delta) / 3.0)


def paper_epsilon(n, noise_multiplier, delta):
    """ε of Arora et al. 2020 Theorem 6 for a run with noise multiplier z = σ/(2L), at total δ̄
    (unproven as run here: module docstring, "Paper").

    The run is Theorem 6's algorithm for ε = 4√log(2/δ)/(√n z) (σ = 8L√log(2/δ)/(√n ε)
    solved for ε) and δ = δ′ = δ̄/3; the statement is then
    ε_total = 4ε(√log(1/δ′) + 2) with δ + δ′ + 2e^{−n/16} ≤ δ̄. Outside the theorem's
    regime (:func:`paper_regime`) the statement says nothing: ``inf``.

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). Arora, Marinov and Ullah (2020), Theorem 6, as run here, is **unproven**
    (module docstring, "Paper"); ``inf`` outside its regime.

    Returns
    -------
    float
    """
    d = float(delta) / 3.0
    eps = 4.0 * math.sqrt(math.log(2.0 / d)) / (math.sqrt(n) * float(noise_multiplier))
    if not paper_regime(n, eps, delta):
        return math.inf
    return 4.0 * eps * (math.sqrt(math.log(1.0 / d)) + 2.0)


def _one_of(m, noise_multiplier):
    """RDP of one fresh step modelled as the grid's discrete Gaussian on 1 of m rows
    drawn uniformly (replace-one): the pointwise minimum of [WBK19] Theorem 27 (the
    generic curve used before) and the same expansion with the Gaussian's exact
    ternary moments
    (:func:`~skdpsparse.accounting.subsampled_without_replacement_discrete_gaussian_rdp`),
    whose hypotheses the modelled step meets: the release is the integer vector
    round(g/γ) + Y with Y ~ N_ℤ(0, N²)^p (integer centres), any two rows' integer
    queries are within 2L·N/σ = N/z (module docstring), and the modelled sample is one
    row drawn uniformly without replacement from the m unseen ones. Each curve bounds
    the modelled step at every order, so their minimum does; what stays unproven is the
    model itself (the seen set is shared hidden state, module docstring)."""
    a = subsampled_without_replacement_gaussian_rdp(1, int(m), noise_multiplier)
    b = subsampled_without_replacement_discrete_gaussian_rdp(1, int(m), noise_multiplier,
                                                             a.orders)
    return RdpCurve(a.orders, np.minimum(a.epsilons, b.epsilons))


@functools.lru_cache(maxsize=512)
def _fresh_rdp(n, noise_multiplier):
    k = _n_fresh(n)
    # The j-th fresh step samples 1 of m_j = n − j + 1 unseen records, m_j ∈ [n−k+1, n].
    edges = np.unique(np.linspace(n - k + 1, n + 1, min(_RATE_BUCKETS, k) + 1).astype(int))
    return sum((int(b - a) * _one_of(a, noise_multiplier)
                for a, b in zip(edges[:-1], edges[1:])))


def noisy_sgd_rdp(n, noise_multiplier):
    """RDP curve of one run on n records by the subsampling analysis (module
    docstring, "RDP"; unproven: it treats the set of seen rows as fixed in each step).

    Σ_j ε_{WOR}(α; 1 of m_j, z) over the k = ⌈n/2⌉ fresh steps, m_j = n − j + 1,
    each m_j rounded down to the smallest m of its bucket (a larger sampling rate, so
    an upper bound). ε_{WOR} is the smaller of [WBK19] Theorem 27 and the exact
    ternary-moment bound for the discrete Gaussian
    (:func:`~skdpsparse.accounting.subsampled_without_replacement_discrete_gaussian_rdp`).
    Stale steps cost nothing.

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). The curve is **unproven** for :func:`noisy_projected_sgd`: the
    subsampling analysis treats the set of seen rows as fixed in each step, although it
    is hidden state shared across steps.

    Parameters
    ----------
    n : int
    noise_multiplier : float
        z = σ/(2L) (replace-one sensitivity 2L of one gradient).

    Returns
    -------
    RdpCurve
    """
    return _fresh_rdp(int(n), float(noise_multiplier))


@functools.lru_cache(maxsize=256)
def rdp_noise_multiplier(n, epsilon, delta, n_runs=1):
    """Smallest z whose ``n_runs``-fold :func:`noisy_sgd_rdp` meets (ε, δ) (rtol 1e-3;
    an unproven accounting, module docstring).

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). The z it returns meets (ε, δ) under the **unproven** accounting of
    :func:`noisy_sgd_rdp` only.
    """
    return calibrate_noise_multiplier(
        lambda z: int(n_runs) * noisy_sgd_rdp(n, z), float(epsilon), float(delta), rtol=1e-3)


# -------------------------------------------------------------- the provable bound
def _n_runs(n_runs):
    k = int(n_runs)
    if k != n_runs or k < 1:
        raise ValueError(f"n_runs must be a positive int, got {n_runs!r}")
    return k


def provable_epsilon(noise_multiplier, delta, n_runs=1):
    """ε at δ of ``n_runs`` runs with noise multiplier z = σ/(2L) (module docstring,
    "Provable").

    The runs are ρ-zCDP with ρ = n_runs/(2z²) (the theorem of the module docstring:
    Canonne, Kamath and Steinke 2020, Theorem 14, per run; Bun and Steinke 2016,
    Lemma 2.3, over runs), converted by the tight conversion of Canonne, Kamath and
    Steinke 2020, Corollary 13.

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). What it states: ``n_runs`` runs of :func:`noisy_projected_sgd` with σ =
    2Lz are ρ = n_runs/(2z²)-zCDP (Canonne, Kamath and Steinke 2020, Theorem 14, per
    run; Bun and Steinke 2016, Lemma 2.3, over runs), converted by Canonne, Kamath and
    Steinke 2020, Corollary 13 (:ref:`derivation_noisy_mirror_descent`).

    Returns
    -------
    float
    """
    z = float(noise_multiplier)
    if not (0 < z < math.inf):
        raise ValueError(f"noise_multiplier must be positive and finite, got {noise_multiplier!r}")
    return zcdp_to_epsilon(_n_runs(n_runs) / (2.0 * z * z), float(delta))


def provable_noise_std(epsilon, delta, lipschitz, n_runs=1):
    """σ with which ``n_runs`` runs are (ε, δ)-DP by the provable bound.

    K runs are K(2L)²/(2σ²) = (2L√K)²/(2σ²)-zCDP, so σ is the discrete Gaussian's
    σ for ℓ2 sensitivity 2L√K at (ε, δ)
    (:func:`~skdpsparse.accounting.discrete.discrete_gaussian_sigma`: the largest ρ
    whose tight conversion is (ε, δ), Canonne, Kamath and Steinke 2020, Theorem 14
    and Corollary 13), rounded up by the last ulps needed for
    :func:`provable_epsilon` at σ/(2L) to be at most ε in floating point. Defined for
    every ε > 0 and δ in (0, 1): it never refuses a target.

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). What it guarantees: with this σ, ``n_runs`` runs of
    :func:`noisy_projected_sgd` are (ε, δ)-DP by :func:`provable_epsilon` (checked in
    floating point).

    Parameters
    ----------
    epsilon, delta : float
        The target of all ``n_runs`` runs together.
    lipschitz : float
        L, the bound on every per-example gradient (:func:`lipschitz_constant`).
    n_runs : int, default=1
        K (one-versus-rest runs on the same rows).

    Returns
    -------
    float
    """
    k = _n_runs(n_runs)
    lip = float(lipschitz)
    if not (0 < lip < math.inf):
        raise ValueError(f"lipschitz must be positive and finite, got {lipschitz!r}")
    sigma = discrete_gaussian_sigma(2.0 * lip * math.sqrt(k), float(epsilon), float(delta))
    while provable_epsilon(sigma / (2.0 * lip), delta, k) > float(epsilon):
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def provable_privacy(noise_multiplier, delta, n_runs=1):
    """The provable budget of ``n_runs`` runs, carrying the privacy event it ran.

    ``ApproxDP(provable_epsilon(z, δ, K), δ)`` with
    ``DiscreteGaussianEvent(z, count=K)``: each run has the Rényi-divergence bound of
    one discrete Gaussian release of multiplier z = σ/(2L) (module docstring), so an
    accountant may compose the runs, and other fits, in ρ.

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). The budget of :func:`provable_epsilon`, with the
    ``DiscreteGaussianEvent`` that lets an accountant compose the runs in ρ.

    Returns
    -------
    ApproxDP
    """
    k = _n_runs(n_runs)
    eps = provable_epsilon(noise_multiplier, delta, k)
    return with_event(ApproxDP(max(eps, float(np.finfo(float).tiny)), float(delta)),
                      DiscreteGaussianEvent(float(noise_multiplier), count=k))


# -------------------------------------------------------------- all three, for a given σ
ACCOUNTINGS = ("provable", "paper", "rdp")


class NoisySGDPrivacy(NamedTuple):
    """The guarantee of ``n_runs`` runs and where it comes from.

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). It states the (ε, δ) of runs of :func:`noisy_projected_sgd` and which
    accounting gave it; only ``"provable"`` is proven
    (:ref:`derivation_noisy_mirror_descent`).
    """

    budget: ApproxDP
    accounting: str  # "provable", "paper" or "rdp": whichever gave the smallest ε
    epsilon_paper: float  # inf outside Theorem 6's regime; nan when not computed
    epsilon_rdp: float  # nan when not computed
    epsilon_provable: float = math.nan  # nan when not computed

    @property
    def epsilons(self):
        """The computed ε of each accounting, by name."""
        return {name: eps for name, eps in (
            ("provable", self.epsilon_provable), ("paper", self.epsilon_paper),
            ("rdp", self.epsilon_rdp)) if not math.isnan(eps)}


def noisy_sgd_privacy(n, noise_multiplier, delta, n_runs=1, accountings=ACCOUNTINGS):
    """(ε, δ) of ``n_runs`` runs on the same n records, each with noise multiplier z.

    ε is the smallest among ``accountings`` (module docstring): ``"provable"``, ρ =
    n_runs/(2z²) converted at δ̄ (:func:`provable_epsilon`); ``"paper"``, Theorem 6
    per run at δ̄/n_runs, composed basically (ε and δ add); ``"rdp"``, the
    ``n_runs``-fold composed curve of :func:`noisy_sgd_rdp` converted at δ̄. The
    last two are unproven (module docstring, "Why both are unproven"). When the
    provable ε is the smallest, the budget carries its event
    (:func:`provable_privacy`); an unproven ε carries none.

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it). Of the accountings it compares only ``"provable"``
    (:func:`provable_epsilon`) is proven; ``"paper"`` and ``"rdp"`` are unproven (module
    docstring, "Why both are unproven"), and a budget they give carries no privacy
    event.

    Returns
    -------
    NoisySGDPrivacy
    """
    accountings = tuple(accountings)
    unknown = set(accountings) - set(ACCOUNTINGS)
    if unknown or not accountings:
        raise ValueError(f"accountings must be a non-empty subset of {ACCOUNTINGS}, "
                         f"got {accountings!r}")
    k = _n_runs(n_runs)
    eps = dict.fromkeys(ACCOUNTINGS, math.nan)
    if "provable" in accountings:
        eps["provable"] = provable_epsilon(noise_multiplier, delta, k)
    if "paper" in accountings:
        eps["paper"] = k * paper_epsilon(n, noise_multiplier, float(delta) / k)
    if "rdp" in accountings:
        eps["rdp"] = (k * noisy_sgd_rdp(n, noise_multiplier)).to_epsilon(delta)[0]
    which = min(accountings, key=lambda name: eps[name])  # ties: the first, "provable"
    if not math.isfinite(eps[which]):
        raise ValueError(f"no finite epsilon for noise multiplier {noise_multiplier!r}")
    if which == "provable":
        budget = provable_privacy(noise_multiplier, delta, k)
    else:
        budget = ApproxDP(max(eps[which], float(np.finfo(float).tiny)), float(delta))
    return NoisySGDPrivacy(budget, which, eps["paper"], eps["rdp"], eps["provable"])


# -------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class NoisySGDPlan:
    """Everything :func:`noisy_sgd` runs with, fixed before the data are read (built
    by :func:`plan_noisy_sgd` from n, d, K and the declared bounds only).

    **Privacy guarantee.** A plan is public (no field depends on the data).
    ``budget`` is the guarantee of :func:`noisy_sgd` run with it, for one row
    replaced (n public): with ``accounting == "provable"``, K runs of discrete
    Gaussian noise σ = 2Lz on one gradient of sensitivity 2L each are
    K/(2z²)-zCDP (the theorem of this module: Canonne, Kamath and Steinke 2020,
    "The discrete Gaussian for differential privacy", Theorem 14, per run; Bun and
    Steinke 2016, Lemma 2.3, over runs), converted by their Corollary 13, with
    ``DiscreteGaussianEvent(z, count=K)``; with ``"paper"`` or ``"rdp"`` the
    **unproven** accountings of the module docstring, without an event. A plan whose
    ``noise_std`` is below 2L·``noise_multiplier``, or whose ``lipschitz`` is below
    :func:`lipschitz_constant` of its bounds, is not covered by its ``budget``.

    Attributes
    ----------
    loss : str
    loss_param : float
    norm_bound, radius : float
        R_x and D.
    fit_intercept : bool
    label_bound : float or None
        B (targets clipped to [−B, B]; the squared loss).
    n_samples, n_features, n_runs : int
        n, d and K (one-versus-rest runs on the same rows).
    lipschitz : float
        L (:func:`lipschitz_constant`): every per-example gradient has norm ≤ L.
    noise_std : float
        σ of the discrete Gaussian noise of every step.
    noise_multiplier : float
        z = σ/(2L).
    step_size : float
        η.
    calibration : {"provable", "paper", "rdp"}
        How σ was chosen.
    accounting : str
        The accounting whose ε ``budget`` reports (the smallest).
    epsilons : dict
        The ε of each accounting computed.
    budget : ApproxDP (with its event when provable)
    rows_needed : float
        n from which the excess-risk bound beats the zero model (:func:`rows_needed`).
    """

    loss: str
    loss_param: float
    norm_bound: float
    radius: float
    fit_intercept: bool
    label_bound: float | None
    n_samples: int
    n_features: int
    n_runs: int
    lipschitz: float
    noise_std: float
    noise_multiplier: float
    step_size: float
    calibration: str
    accounting: str
    epsilons: dict = field(compare=False)
    budget: ApproxDP
    rows_needed: float

    @property
    def dim(self):
        """p = d (+ 1 with an intercept)."""
        return self.n_features + 1 if self.fit_intercept else self.n_features


def rows_needed(lipschitz, noise_std, dim):
    """n from which the theorem's error bound is below the zero model's (a warning).

    With η = D/(√n (L + σ√p)), Arora et al. 2020 (Theorem 4) bound the excess risk by
    a term of order D(L + σ√p)/√n; θ = 0 ∈ W is within D·L of the optimum on W (the
    loss is L-Lipschitz). The bound says nothing better than the zero model below
    n = (1 + σ√p/L)².

    **Privacy guarantee.** None needed: a function of public numbers only (no data
    enters it).
    """
    return (1.0 + float(noise_std) * math.sqrt(dim) / float(lipschitz)) ** 2


def plan_noisy_sgd(n_samples, n_features, *, loss, epsilon, delta, norm_bound=1.0,
                   radius=1.0, fit_intercept=True, loss_param=1.0, label_bound=None,
                   n_runs=1, noise_calibration="provable", learning_rate="paper"):
    """Noise, step size and guarantee of K runs of noisy projected SGD, from public
    numbers (Arora, Marinov and Ullah 2020, Algorithm 1; module docstring).

    **Privacy guarantee.** Public numbers in, a public plan out; what the plan
    guarantees is its ``budget`` (:class:`NoisySGDPlan`). ``"provable"``: σ =
    :func:`provable_noise_std` (ε̄, δ̄, L, K), so the K runs are (ε̄, δ̄)-DP by the
    theorem of the module docstring. ``"paper"``: σ of Arora et al. 2020, Theorem 6
    with Remark 1, each run at (ε̄/K, δ̄/K); ``"rdp"``: z from
    :func:`rdp_noise_multiplier`; both **unproven**, and the reported budget is the
    smallest ε of the three accountings at that σ (:func:`noisy_sgd_privacy`). A
    ``"paper"`` noise certified above ε̄ by every accounting is refused.

    Parameters
    ----------
    n_samples, n_features : int
    loss : str
        One of :data:`CLASSIFICATION_LOSSES` or :data:`REGRESSION_LOSSES`.
    epsilon, delta : float
        The target (ε̄, δ̄) of all K runs together.
    norm_bound, radius : float
        R_x and D.
    fit_intercept : bool
    loss_param : float
        Smoothed-hinge width or Huber threshold.
    label_bound : float or None
        B (the squared loss needs it).
    n_runs : int
        K.
    noise_calibration : {"provable", "paper", "rdp"}
    learning_rate : "paper" or float
        η; ``"paper"`` is :func:`paper_step_size`.

    Returns
    -------
    NoisySGDPlan

    Examples
    --------
    >>> from skdpsparse.mechanisms.noisy_sgd import plan_noisy_sgd
    >>> plan = plan_noisy_sgd(10_000, 5, loss="logistic", epsilon=1.0, delta=1e-6)
    >>> plan.accounting, round(plan.noise_std / plan.lipschitz, 2)  # σ/L at ε = 1
    ('provable', 9.06)
    """
    n, d, K = int(n_samples), int(n_features), _n_runs(n_runs)
    eps, dlt = float(epsilon), float(delta)
    dim = d + 1 if fit_intercept else d
    lip = lipschitz_constant(loss, float(norm_bound), fit_intercept, radius=float(radius),
                             label_bound=label_bound, loss_param=loss_param)
    if noise_calibration == "provable":
        # K runs, each (2L)²/(2σ²)-zCDP, compose in ρ (module docstring).
        sigma = provable_noise_std(eps, dlt, lip, K)
        z = sigma / (2.0 * lip)
        budget, accounting = provable_privacy(z, dlt, K), "provable"
        accounts = {"provable": budget.epsilon}
    elif noise_calibration in ("paper", "rdp"):
        if noise_calibration == "paper":
            # K one-vs-rest runs share (ε̄, δ̄) by basic composition: ε̄/K, δ̄/K each
            # (Arora et al. 2020, Theorem 6 and Remark 1).
            sigma = paper_noise_std(n, eps / K, dlt / K, lip)
            z = sigma / (2.0 * lip)
        else:
            z = rdp_noise_multiplier(n, eps, dlt, K)  # sensitivity 2L
            sigma = 2.0 * lip * z
        privacy = noisy_sgd_privacy(n, z, dlt, K)
        budget, accounting, accounts = privacy.budget, privacy.accounting, privacy.epsilons
        if budget.epsilon > eps * (1.0 + 1e-9):
            raise ValueError(
                f"epsilon={epsilon!r}: with noise_calibration='paper' the noise "
                f"of Arora et al. 2020 Theorem 6 is certified only to epsilon="
                f"{budget.epsilon:.4g} for n={n} (outside the theorem's regime "
                "eps <= 1/(2 sqrt(n)), and no other accounting gives less); use the "
                "default noise_calibration='provable' or a smaller epsilon.")
    else:
        raise ValueError("noise_calibration must be 'provable', 'paper' or 'rdp', got "
                         f"{noise_calibration!r}")
    if isinstance(learning_rate, str) and learning_rate == "paper":
        eta = paper_step_size(n, float(radius), lip, sigma, dim)
    else:
        eta = float(learning_rate)
    return NoisySGDPlan(
        loss=loss, loss_param=float(loss_param), norm_bound=float(norm_bound),
        radius=float(radius), fit_intercept=bool(fit_intercept),
        label_bound=None if label_bound is None else float(label_bound), n_samples=n,
        n_features=d, n_runs=K, lipschitz=lip, noise_std=sigma, noise_multiplier=z,
        step_size=eta, calibration=noise_calibration, accounting=accounting,
        epsilons=accounts, budget=budget, rows_needed=rows_needed(lip, sigma, dim))


# -------------------------------------------------------------------- the run
class NoisySGDResult(NamedTuple):
    """One run: the released average of fresh iterates, and public facts about it.

    **Privacy guarantee.** The fields are the release of :func:`noisy_projected_sgd`
    (``coef`` and ``intercept``, private at the caller's accounting) and public facts
    (the stopping time and the count of fresh examples, fixed by the data-independent
    index sequence). ``last_iterate`` is covered by the same analysis but is kept for
    tests only.
    """

    coef: np.ndarray  # average of the fresh-step iterates, w part
    intercept: float  # its b part (0 without an intercept)
    n_steps: int  # τ, the stopping time (data-independent)
    n_fresh: int  # |F_τ| = ⌈n/2⌉
    last_iterate: np.ndarray  # θ_{τ+1} = (w, b); covered by the analysis, for tests


def noisy_projected_sgd(X, y, *, loss, noise_std, step_size, radius, norm_bound,
                        fit_intercept=True, loss_param=1.0, label_bound=None, rng,
                        verbose=0, name="noisy SGD"):
    """Run Arora et al. 2020 Algorithm 1 once on a linear model (module docstring).

    **Privacy guarantee.** Protected: one row (x, y), under replacement neighbours (n
    public). One run is (2L)²/(2σ²)-zCDP: for a fixed index sequence each row enters at
    most one noisy gradient step, so the run is a post-processing of one discrete
    Gaussian mechanism of sensitivity 2L (Canonne, Kamath and Steinke 2020, "The
    discrete Gaussian for differential privacy", Theorem 14), and the random sequence is
    a data-independent mixture (van Erven and Harremoës 2014, Theorem 13, joint
    quasi-convexity); derivation: :ref:`derivation_noisy_mirror_descent`. Assumptions:
    ``noise_std`` is σ for that bound (:func:`provable_noise_std`); rows are scaled into
    ‖x‖₂ ≤ R_x and targets clipped (``label_bound``) inside this function, so the
    gradient bound L of :func:`lipschitz_constant` holds for every row; the indices and
    the noise come from a secret key; the index sequence and the set of seen rows are
    never returned. Not covered: σ from :func:`paper_noise_std` or
    :func:`rdp_noise_multiplier` (unproven accountings), and the run's duration.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, d)
        Float32 or float64; sparse input is used as CSR, never densified.
    y : ndarray of shape (n,)
        ±1 labels (classification losses) or targets.
    loss : str
        One of :data:`CLASSIFICATION_LOSSES` or :data:`REGRESSION_LOSSES`.
    noise_std : float
        σ of the discrete Gaussian noise ξ_t, decided by the caller
        (:func:`provable_noise_std`, :func:`paper_noise_std` or
        2L·:func:`rdp_noise_multiplier`).
    step_size : float
        η (:func:`paper_step_size`).
    radius, norm_bound : float
        D (W = ℓ2 ball of radius D in (w, b)) and R_x (row scaling).
    fit_intercept : bool, default=True
    loss_param : float, default=1.0
        Smoothed-hinge width or Huber threshold.
    label_bound : float or None, default=None
        Clip targets to [−B, B] first (the squared loss needs it for its L).
    rng : numpy.random.Generator
        Draws the indices and, through :func:`~skdpsparse.mechanisms.noise.grid_noise`,
        the noise, block by block.
    verbose : bool or int, default=0
        ≥ 1 prints a line about every tenth of the fresh steps, in the one progress
        format (:class:`~skdpsparse.utils._progress.Progress`): the step count and
        the fresh examples seen so far, both functions of the data-independent index
        sequence only.
    name : str
        The name in brackets at the head of the progress lines.

    Returns
    -------
    NoisySGDResult
    """
    for key, v in (("noise_std", noise_std), ("step_size", step_size), ("radius", radius),
                   ("norm_bound", norm_bound)):
        if not (0 < float(v) < math.inf):
            raise ValueError(f"{key} must be positive and finite, got {v!r}")
    if loss not in CLASSIFICATION_LOSSES + REGRESSION_LOSSES:
        raise ValueError(f"unknown or unsupported loss {loss!r}")
    code = LOSS_CODES[loss]
    y = np.asarray(y, dtype=np.float64)
    if label_bound is not None:
        y = np.clip(y, -float(label_bound), float(label_bound))
    sparse = sp.issparse(X)
    if sparse:
        X = as_canonical_csr(X)
    else:
        X = np.ascontiguousarray(X)
    n, d = X.shape
    dim = d + 1 if fit_intercept else d
    lip = lipschitz_constant(loss, norm_bound, fit_intercept, radius=radius,
                             label_bound=label_bound, loss_param=loss_param)
    target = _n_fresh(n)
    theta = np.zeros(dim)  # θ_1 = Π_W(0) = argmin_W ½‖·‖² (Algorithm 1)
    fresh_sum = np.zeros(dim)
    seen = np.zeros(n, dtype=np.bool_)  # F_t: secret, never leaves this function
    block = int(min(4096, max(1, _NOISE_BLOCK // dim)))
    noise = np.empty((block, dim))
    n_seen = n_steps = 0
    next_report, progress = target / 10.0, Progress(verbose, name)
    while n_seen < target:
        rows = rng.integers(0, n, size=block)  # with replacement (Algorithm 1)
        # ξ_t, §1.3, in grid units; L: the smallest sensitivity a gradient is charged.
        noise[...], spacing = grid_noise((block, dim), rng, "gaussian", noise_std,
                                         sensitivity=lip)
        args = (y, theta, fresh_sum, seen, n_seen, target, rows, noise, float(step_size),
                float(radius), float(norm_bound), code, float(loss_param),
                bool(fit_intercept), spacing)
        if sparse:
            used, n_seen = csr_noisy_sgd_block(X.indptr, X.indices, X.data, d, *args)
        else:
            used, n_seen = dense_noisy_sgd_block(X, *args)
        n_steps += int(used)
        if progress and (n_seen >= next_report or n_seen >= target):
            progress.report("step", n_steps, None, f"{n_seen}/{target} fresh examples")
            next_report = (math.floor(10.0 * n_seen / target) + 1) * target / 10.0
    del rows, seen  # the index sequence and F are never released
    avg = fresh_sum / target
    return NoisySGDResult(avg[:d].copy(), float(avg[d]) if fit_intercept else 0.0,
                          n_steps, int(n_seen), theta)


def noisy_sgd(X, targets, plan, rng, *, verbose=0, name="noisy SGD"):
    """Run a :class:`NoisySGDPlan`: one run of :func:`noisy_projected_sgd` per row of
    ``targets`` (K = ``plan.n_runs``), each with the plan's σ, η and bounds.

    **Privacy guarantee.** ``plan.budget`` for one row (x, y) replaced (n public), for
    a plan from :func:`plan_noisy_sgd` (:class:`NoisySGDPlan`): provable with
    ``plan.accounting == "provable"``, unproven otherwise. Assumptions: ``rng``
    secret; the K runs draw from it in turn (independent noise and indices). Not
    covered: the run's duration.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, d)
    targets : ndarray of shape (K, n)
        ±1 per one-vs-rest problem, or the regression targets (K = 1).
    plan : NoisySGDPlan
    rng : RandomSource or numpy.random.Generator
    verbose : int, default=0
    name : str
        The name at the head of the progress lines.

    Returns
    -------
    coef : ndarray of shape (K, d)
    intercept : ndarray of shape (K,)
    n_iter : ndarray of int64 of shape (K,)
    """
    targets = np.atleast_2d(targets)
    K, d = plan.n_runs, plan.n_features
    if X.shape != (plan.n_samples, d) or targets.shape != (K, plan.n_samples):
        raise ValueError(f"X of shape {X.shape} and targets of shape {targets.shape} do "
                         f"not match the plan ({plan.n_samples} rows, {d} features, "
                         f"{K} runs).")
    coef, intercept, n_iter = np.zeros((K, d)), np.zeros(K), np.zeros(K, dtype=np.int64)
    progress = Progress(verbose, name)
    for k in range(K):
        if K > 1:
            progress.report("run", k + 1, K, "one versus rest")
        run = noisy_projected_sgd(
            X, targets[k], loss=plan.loss, noise_std=plan.noise_std,
            step_size=plan.step_size, radius=plan.radius, norm_bound=plan.norm_bound,
            fit_intercept=plan.fit_intercept, loss_param=plan.loss_param,
            label_bound=plan.label_bound, rng=rng, verbose=verbose, name=name)
        coef[k], intercept[k], n_iter[k] = run.coef, run.intercept, run.n_steps
    progress.report("done", detail=f"sigma={plan.noise_std:.4g}, eta={plan.step_size:.4g}, "
                    f"privacy spent {plan.budget} ({plan.accounting} accounting)")
    return coef, intercept, n_iter
