"""Noisy projected SGD with fresh and noise-only steps, and its privacy (seed 001).

Arora, Marinov and Ullah, "Private Stochastic Convex Optimization: Efficient
Algorithms for Non-smooth Objectives" (arXiv 2002.09609; seed 001), Algorithm 1
(noisy OSMD with Φ = ½‖·‖², i.e. noisy projected SGD), as reconstructed in
``../shared/papers/recovered/osmd_and_private_selection.md`` (below: "notes"):

* draw y_t uniformly from [n] *with replacement*; if y_t is fresh (not in the set F_t
  of indices seen so far) take Π_W(θ_t − η(∇f(θ_t, z_{y_t}) + ξ_t)), otherwise the
  noise-only step Π_W(θ_t − ηξ_t); ξ_t ~ N(0, σ²I) (notes §1.2, §1.3);
* stop when |F_t| reaches ⌈n/2⌉ (notes §1.2 "stopping edge case", §1.4); the stopping
  time τ depends on the index sequence only, and E τ = Σ_{j<⌈n/2⌉} n/(n−j) ≈ n ln 2;
* output the average of the iterates θ_t of the fresh steps (notes §1.2 "Output [D]").

The index sequence and F are secret: they live in local variables of
:func:`noisy_projected_sgd` and are never returned.

Linear models
-------------
f(θ, z) = ℓ(⟨w, x̃⟩ + b, y) with θ = (w, b), x̃ = x·min(1, R_x/‖x‖₂) (every row scaled
into the ball of radius R_x = ``norm_bound``; contribution bounding, never rejection)
and W = {‖θ‖₂ ≤ D}, D = ``radius``. With G = √(R_x² + 1) (intercept) or R_x, the
gradient ℓ'·(x̃, 1) has norm ≤ L = Λ·G, Λ = sup|ℓ'| (:func:`lipschitz_constant`):
Λ = 1 for logistic, hinge and smoothed hinge; κ for Huber with threshold κ; and for
the squared loss, which is not Lipschitz on ℝᵖ, Λ = D·G + B on W once the targets are
clipped to [−B, B] (|z − y| ≤ ‖θ‖‖(x̃, 1)‖ + |y|).

Privacy (replace-one neighbours, n public)
------------------------------------------
*Paper.* Seed 001 Theorem 6 (notes §1.6): with σ = 8L√log(1/δ)/(√n ε), n ≥ 16 and
ε ≤ 1/(2√n), the output is (4ε(√log(1/δ′) + 2), δ + δ′ + 2e^{−n/16})-DP. Two caveats
of notes §1.8 are applied: the per-step δ is halved, σ = 8L√log(2/δ)/(√n ε)
(item 4: τ ≤ 2n steps at δ/n each spend 2δ otherwise), and the condition
ε ≤ 1/(2√n) of the statement, the strictest of the three in the paper, is enforced
(item 5). Item 3 (Theorem 5's last term is 8τε̃²/n², not 4) does not change the
statement: it then reads 4ε√log(1/δ′) + 16ε² ≤ 4ε(√log(1/δ′) + 2) for ε ≤ 1/2.
Targets (ε̄, δ̄) are met with Remark 1: δ = δ′ = δ̄/3, ε = ε̄/(8√log(1/δ′)).

*RDP.* Conditional on the pattern of fresh and stale steps (which is independent of
the data and may be public), stale steps are post-processing and the j-th fresh step
uses a uniformly random unseen point: if the differing record ρ is unseen it is
chosen with probability 1/(n − j + 1) ≤ 2/n (notes §1.2, last bullet; §1.7). Each
fresh step is then a Gaussian mechanism on a sample of 1 out of m_j = n − j + 1
records (replace-one sensitivity 2L, noise multiplier z = σ/(2L)), composed over the
k = ⌈n/2⌉ fresh steps; :func:`noisy_sgd_rdp` bounds it with
:func:`~skdpsparse.accounting.subsampled_without_replacement_gaussian_rdp` ([WBK19]),
grouping the m_j into a few buckets that each use their smallest m (largest rate).
The number of accounted steps is exactly k, so the random τ needs no tail bound and
adds nothing to δ. Caveat: like the paper's own proof (its per-step lemma fixes F),
this treats F_t as fixed in each step although it is hidden state shared across
steps; neither analysis is more rigorous than the other on that point.

References
----------
.. [AMU20] R. Arora, T. V. Marinov, E. Ullah. Private stochastic convex optimization:
   efficient algorithms for non-smooth objectives. arXiv:2002.09609 (seed 001).
.. [WBK19] Y.-X. Wang, B. Balle, S. Kasiviswanathan. Subsampled Rényi differential
   privacy and analytical moments accountant. AISTATS 2019.
"""

import functools
import math
import time
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .._kernels.linear_losses import LOSS_CODES
from .._kernels.noisy_sgd import csr_noisy_sgd_block, dense_noisy_sgd_block
from ..accounting import (
    ApproxDP,
    calibrate_noise_multiplier,
    subsampled_without_replacement_gaussian_rdp,
)
from ..utils._data import as_canonical_csr
from ..utils._random import as_random_source
from .noise import grid_noise

__all__ = [
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
    """Seed 001 Remark 1: a target (ε̄, δ̄) as Theorem 6's (ε, δ, δ′).

    δ = δ′ = δ̄/3 and ε = ε̄/(8√log(1/δ′)) (notes §1.6, Remark 1).

    Returns
    -------
    epsilon, delta, delta_prime : float
    """
    d = float(delta) / 3.0
    return float(epsilon) / (8.0 * math.sqrt(math.log(1.0 / d))), d, d


def paper_noise_std(n, epsilon, delta, lipschitz):
    """σ of seed 001 Theorem 6 for the target (ε̄, δ̄) = (``epsilon``, ``delta``).

    σ = 8L√log(2/δ)/(√n ε) with (ε, δ) from :func:`remark1_split`: Theorem 6's
    σ = 8L√log(1/δ)/(√n ε) (notes §1.3) with the per-step δ halved (notes §1.8 item 4),
    so that the τ ≤ 2n steps spend δ, not 2δ.
    """
    eps, d, _ = remark1_split(epsilon, delta)
    return 8.0 * lipschitz * math.sqrt(math.log(2.0 / d)) / (math.sqrt(n) * eps)


def paper_step_size(n, radius, lipschitz, noise_std, dim):
    """η = D/(√n (L + σ√p)) of seed 001 Theorems 4 and 6 (notes §1.3), p = dim θ."""
    return float(radius) / (math.sqrt(n) * (lipschitz + noise_std * math.sqrt(dim)))


def paper_regime(n, epsilon_step, delta):
    """Whether Theorem 6 (with Remark 1's split of ``delta``) applies.

    n ≥ 16, ε ≤ 1/(2√n) (notes §1.8 item 5) and 2e^{−n/16} ≤ δ̄/3, so that
    δ + δ′ + 2e^{−n/16} ≤ δ̄.
    """
    return (n >= 16 and epsilon_step <= 0.5 / math.sqrt(n)
            and 2.0 * math.exp(-n / 16.0) <= float(delta) / 3.0)


def paper_epsilon(n, noise_multiplier, delta):
    """ε of seed 001 Theorem 6 for a run with noise multiplier z = σ/(2L), at total δ̄.

    The run is Theorem 6's algorithm for ε = 4√log(2/δ)/(√n z) (σ = 8L√log(2/δ)/(√n ε)
    solved for ε) and δ = δ′ = δ̄/3; the statement is then
    ε_total = 4ε(√log(1/δ′) + 2) with δ + δ′ + 2e^{−n/16} ≤ δ̄. Outside the theorem's
    regime (:func:`paper_regime`) the statement says nothing: ``inf``.

    Returns
    -------
    float
    """
    d = float(delta) / 3.0
    eps = 4.0 * math.sqrt(math.log(2.0 / d)) / (math.sqrt(n) * float(noise_multiplier))
    if not paper_regime(n, eps, delta):
        return math.inf
    return 4.0 * eps * (math.sqrt(math.log(1.0 / d)) + 2.0)


@functools.lru_cache(maxsize=512)
def _fresh_rdp(n, noise_multiplier):
    k = _n_fresh(n)
    # The j-th fresh step samples 1 of m_j = n − j + 1 unseen records, m_j ∈ [n−k+1, n].
    edges = np.unique(np.linspace(n - k + 1, n + 1, min(_RATE_BUCKETS, k) + 1).astype(int))
    return sum((int(b - a) * subsampled_without_replacement_gaussian_rdp(
        1, int(a), noise_multiplier) for a, b in zip(edges[:-1], edges[1:])))


def noisy_sgd_rdp(n, noise_multiplier):
    """RDP curve of one run on n records (module docstring, "RDP").

    Σ_j ε_{WOR}(α; 1 of m_j, z) over the k = ⌈n/2⌉ fresh steps, m_j = n − j + 1,
    each m_j rounded down to the smallest m of its bucket (a larger sampling rate, so
    an upper bound). Stale steps cost nothing.

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
    """Smallest z whose ``n_runs``-fold :func:`noisy_sgd_rdp` meets (ε, δ) (rtol 1e-3)."""
    return calibrate_noise_multiplier(
        lambda z: int(n_runs) * noisy_sgd_rdp(n, z), float(epsilon), float(delta), rtol=1e-3)


class NoisySGDPrivacy(NamedTuple):
    """The guarantee of ``n_runs`` runs and where it comes from."""

    budget: ApproxDP
    accounting: str  # "paper" or "rdp": whichever gave the smaller ε
    epsilon_paper: float  # inf outside Theorem 6's regime
    epsilon_rdp: float


def noisy_sgd_privacy(n, noise_multiplier, delta, n_runs=1):
    """(ε, δ) of ``n_runs`` runs on the same n records, each with noise multiplier z.

    ε = min(paper, RDP): the paper's ε is Theorem 6 per run at δ̄/n_runs, composed
    basically (ε and δ add); the RDP ε converts the ``n_runs``-fold composed curve at δ̄.

    Returns
    -------
    NoisySGDPrivacy
    """
    eps_paper = int(n_runs) * paper_epsilon(n, noise_multiplier, float(delta) / n_runs)
    eps_rdp, _ = (int(n_runs) * noisy_sgd_rdp(n, noise_multiplier)).to_epsilon(delta)
    which = "paper" if eps_paper <= eps_rdp else "rdp"
    eps = min(eps_paper, eps_rdp)
    if not math.isfinite(eps):
        raise ValueError(f"no finite epsilon for noise multiplier {noise_multiplier!r}")
    return NoisySGDPrivacy(ApproxDP(max(eps, float(np.finfo(float).tiny)), float(delta)),
                           which, eps_paper, eps_rdp)


# -------------------------------------------------------------------- the run
class NoisySGDResult(NamedTuple):
    """One run: the released average of fresh iterates, and public facts about it."""

    coef: np.ndarray  # average of the fresh-step iterates, w part
    intercept: float  # its b part (0 without an intercept)
    n_steps: int  # τ, the stopping time (data-independent)
    n_fresh: int  # |F_τ| = ⌈n/2⌉
    last_iterate: np.ndarray  # θ_{τ+1} = (w, b); covered by the analysis, for tests


def noisy_projected_sgd(X, y, *, loss, noise_std, step_size, radius, norm_bound,
                        fit_intercept=True, loss_param=1.0, label_bound=None, rng,
                        verbose=0, name="noisy SGD"):
    """Run seed 001 Algorithm 1 once on a linear model (module docstring).

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, d)
        Float32 or float64; sparse input is used as CSR, never densified.
    y : ndarray of shape (n,)
        ±1 labels (classification losses) or targets.
    loss : str
        One of :data:`CLASSIFICATION_LOSSES` or :data:`REGRESSION_LOSSES`.
    noise_std : float
        σ of ξ_t ~ N(0, σ²I), decided by the caller (:func:`paper_noise_std` or
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
    verbose : int, default=0
        ≥ 1 prints progress about every tenth of the fresh steps.
    name : str
        Prefix of the progress lines.

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
    theta = np.zeros(dim)  # θ_1 = Π_W(0) = argmin_W ½‖·‖² (notes §1.2)
    fresh_sum = np.zeros(dim)
    seen = np.zeros(n, dtype=np.bool_)  # F_t: secret, never leaves this function
    block = int(min(4096, max(1, _NOISE_BLOCK // dim)))
    noise = np.empty((block, dim))
    n_seen = n_steps = 0
    next_report, start = target / 10.0, time.perf_counter()
    while n_seen < target:
        rows = rng.integers(0, n, size=block)  # with replacement (notes §1.2)
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
        if verbose and (n_seen >= next_report or n_seen >= target):
            print(f"[{name}] step {n_steps}: {n_seen}/{target} fresh examples "
                  f"({time.perf_counter() - start:.2f} s)")
            next_report = (math.floor(10.0 * n_seen / target) + 1) * target / 10.0
    del rows, seen  # the index sequence and F are never released
    avg = fresh_sum / target
    return NoisySGDResult(avg[:d].copy(), float(avg[d]) if fit_intercept else 0.0,
                          n_steps, int(n_seen), theta)
