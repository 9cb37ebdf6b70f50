"""The sparse exponential mechanism (Ghazi et al. 2024 v1, Section 5.1, Algorithm 4, Theorem 5.5).

Pure ε-DP empirical risk minimization for convex losses with sparse gradients that
need not be smooth (e.g. the hinge loss): the exponential mechanism run over a net of
sparse vectors of the ball 𝒳 = {‖θ‖₂ ≤ D}, by exact enumeration.

The net
-------
𝒩_τ = τℤᵖ ∩ 𝒳, every point of 𝒳 whose coordinates are multiples of τ. A point of
𝒩_τ has at most ⌊D²/τ²⌋ nonzeros (each is ≥ τ in absolute value), so 𝒩_τ consists of
D²/τ²-sparse vectors, and it is a τ-net in ℓ∞ of 𝒳 that stays inside 𝒳: rounding the
coordinates of any θ ∈ 𝒳 towards zero to multiples of τ shrinks every |θ_j| (so stays
in the ball) and moves each by less than τ. This is the proof of Lemma 5.3 done on the
grid: with x* the ERM solution and x_τ its rounding, convexity and ‖∇F_S‖₁ ≤ L₁ give
F_S(x_τ) − F_S(x*) ≤ L₁·τ. (The seed normalizes D = 1, hence 1/τ²-sparse.)

The mechanism
-------------
P[θ̂ = θ] ∝ exp(−ε·u(S, θ)/(2Δ_u)) over θ ∈ 𝒩_τ, with score u(S, θ) = Σᵢ f(θ, zᵢ)
= n·F_S(θ) and Δ_u ≥ sup_θ |f(θ, z) − f(θ, z')| its sensitivity under replacement
(McSherry and Talwar 2007; Dwork and Roth 2014, Thm 3.10). (Algorithm 4 prints the
weight as exp{−(B/εn)F_S(x)}, the constant inverted: with Δ_u = B it is
exp{−εn·F_S/(2B)}, which is what its utility bound, Theorem 5.5, uses.) With
probability ≥ 1 − β the excess risk is at most (2Δ_u/(εn))·(ln|𝒩_τ| + ln(1/β)) + L₁τ.

Score sensitivity (derivation). Rows are scaled into {‖x‖₂ ≤ R, ‖x‖₁ ≤ R√s} and the
intercept is a constant feature c, so every margin is |⟨θ, x̄⟩| ≤ A := D·G₂ with
G₂ = √(R² + c²). For a classification loss of the signed margin t ∈ [−A, A],
f(θ, z) − f(θ, z') ≤ ℓ(−A) − ℓ(A): A for the logistic loss (log(1+e^A) −
log(1+e^{−A}) = A), (1 + A) − (1 − A)₊ for the hinge, likewise for the smoothed
hinge. For regression with |y| ≤ B the residual is |r| ≤ A + B and the loss ≥ 0, so
Δ_u = ℓ(A + B). Sparsity does not enter privacy, only the accuracy term L₁ = Λ·G₁.

Feasibility: |𝒩_τ| = Σⱼ C(p, j)·cⱼ with cⱼ the number of vectors of (ℤ∖0)ʲ of squared
norm ≤ ⌊D²/τ²⌋, and scoring costs |𝒩_τ| × (rows touched by a support) loss
evaluations. :func:`sparse_net_size` counts it exactly; the mechanism refuses nets
above ``max_size`` (default 10⁶). With D = 1 and p parameters (d features + the
intercept):

==========  ==========================  =======================
τ           net points                  ≤ 10⁶ (runs) for
==========  ==========================  =======================
1           2p + 1                      p ≤ 499 999
1/√2        2p² + 1                     p ≤ 707
1/√3        (4/3)p³ + O(p²)             p ≤ 91
1/2         (2/3)p⁴ + O(p³)             p ≤ 35
1/√5        (4/15)p⁵ + O(p⁴)            p ≤ 22
1/√6        (4/45)p⁶ + O(p⁵)            p ≤ 16
==========  ==========================  =======================

Only tiny p (or coarse τ) is practical: the mechanism is exponential in 1/τ², as the
seed says; it is here as the pure-DP method for nonsmooth losses and as a reference.
"""

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from .. import _kernels
from .._kernels.erm_passes import csc_net_loss_sums
from ..accounting import PureDP
from ..utils._random import as_random_source
from .output_perturbation import BETA, CLASSIFICATION_LOSSES, bound_inputs

__all__ = [
    "SparseExponentialPlan",
    "choose_tau",
    "enumerate_net",
    "exponential_mechanism",
    "net_scores",
    "plan_sparse_exponential",
    "score_sensitivity",
    "sparse_exponential",
    "sparse_exponential_mechanism",
    "sparse_net_size",
]

#: Default cap on the number of net points.
MAX_NET_SIZE = 10**6


def _max_sq(tau, radius):
    """Q = the largest integer with τ²Q ≤ D² (the squared-norm budget in grid units).

    A relative slack of 1e-9 keeps τ = D/√q from losing the points of norm exactly D
    to rounding (they may then exceed D by a few ulps; privacy does not depend on it).
    """
    limit = (radius / tau) ** 2 * (1.0 + 1e-9)
    return int(math.floor(limit))


class _NetCounter:
    """|τℤᵖ ∩ B(0, D)| for Q = ⌊D²/τ²⌋ = 0, 1, 2, ..., one Q at a time (exact ints).

    exact[j][q] = #{k ∈ (ℤ∖0)ʲ : Σk² = q} obeys exact[j][q] = Σ_{a≥1, a²≤q}
    2·exact[j−1][q − a²]; only j ≤ min(p, q) matters. The net size at budget Q is
    Σⱼ C(p, j)·Σ_{q≤Q} exact[j][q].
    """

    def __init__(self, n_params):
        self.p = n_params
        self.q = 0
        self.exact = [[1]]  # exact[j] is the list over q = 0..self.q
        self.cum = [1]
        self.size = 1

    def step(self):
        """Advance to Q + 1 and return the net size there."""
        q = self.q = self.q + 1
        if q <= self.p:
            self.exact.append([0] * q)
            self.cum.append(0)
        for j in range(1, len(self.exact)):
            prev = self.exact[j - 1]
            total = 0
            a = 1
            while a * a <= q:
                total += 2 * prev[q - a * a]
                a += 1
            self.exact[j].append(total)
            self.cum[j] += total
        self.exact[0].append(0)
        self.size = sum(math.comb(self.p, j) * c for j, c in enumerate(self.cum))
        return self.size


def _nonzero_vectors(j, q_max):
    """All k ∈ (ℤ∖0)ʲ with Σk² ≤ Q, in lexicographic order (depth-first, pruned)."""
    if j == 0:
        return [()]
    out = []
    m = math.isqrt(q_max)
    for k in range(-m, m + 1):
        rest = q_max - k * k
        if k == 0 or rest < j - 1:  # the other j - 1 entries need at least 1 each
            continue
        out.extend((k,) + tail for tail in _nonzero_vectors(j - 1, rest))
    return out


def sparse_net_size(n_params, tau, radius):
    """|𝒩_τ| = |τℤᵖ ∩ {‖θ‖₂ ≤ D}|, exactly.

    **Privacy guarantee.** None needed: a count that depends on public numbers only.

    Parameters
    ----------
    n_params : int
        p.
    tau : float
        Grid step τ > 0.
    radius : float
        D > 0.

    Returns
    -------
    int
    """
    counter = _NetCounter(n_params)
    for _ in range(_max_sq(tau, radius)):
        counter.step()
    return counter.size


def enumerate_net(n_params, tau, radius, max_size=MAX_NET_SIZE):
    """The net as blocks (supports, values), one block per support size j ≥ 1.

    **Privacy guarantee.** None needed: the net is a function of public numbers only
    (the number of parameters, τ, D).

    Returns
    -------
    blocks : list of (ndarray (C_j, j) int64, ndarray (m_j, j) float64)
        Every θ of the net with j nonzeros is θ[supports[a]] = values[v] for one (a, v);
        the zero vector (j = 0) comes first in the flat order and is not in a block.

    Raises
    ------
    ValueError
        If |𝒩_τ| > ``max_size``.
    """
    size = sparse_net_size(n_params, tau, radius)
    if size > max_size:
        raise ValueError(
            f"The sparse exponential mechanism's net has {size:.3g} points for "
            f"p={n_params} parameters, tau={tau:g}, radius={radius:g}, above "
            f"max_net_size={max_size:.3g}: enumeration is exponential in 1/tau^2. Use a "
            "larger tau, fewer features, or raise max_net_size.")
    q_max = _max_sq(tau, radius)
    blocks = []
    for j in range(1, min(n_params, q_max) + 1):
        vals = _nonzero_vectors(j, q_max)
        if not vals:
            break
        supports = np.array(list(itertools.combinations(range(n_params), j)),
                            dtype=np.int64).reshape(-1, j)
        blocks.append((supports, tau * np.array(vals, dtype=np.float64).reshape(-1, j)))
    return blocks


def decode(index, blocks, n_params):
    """The net point with flat index ``index`` (0 is the zero vector)."""
    theta = np.zeros(n_params)
    index = int(index)
    if index == 0:
        return theta
    index -= 1
    for supports, values in blocks:
        size = supports.shape[0] * values.shape[0]
        if index < size:
            a, v = divmod(index, values.shape[0])
            theta[supports[a]] = values[v]
            return theta
        index -= size
    raise IndexError("index beyond the net")


def net_scores(X_aug, y, blocks, code, param):
    """u(S, θ) = Σᵢ ℓ(⟨θ, x̄ᵢ⟩, yᵢ) for every net point, in the flat order of :func:`decode`.

    **Privacy guarantee.** None: it reads the data and returns non-private scores, one
    per net point. It is the score of :func:`sparse_exponential_mechanism`, whose
    exponential mechanism makes the release private; never release its output.

    Parameters
    ----------
    X_aug : sparse matrix or ndarray of shape (n, p)
        Bounded rows with the intercept column appended.
    y : ndarray of shape (n,)
    blocks : from :func:`enumerate_net`
    code, param : int, float

    Returns
    -------
    ndarray of shape (|𝒩_τ|,)
    """
    Xc = sp.csc_matrix(X_aug)
    Xc.sum_duplicates()
    n = Xc.shape[0]
    y = np.ascontiguousarray(y, dtype=np.float64)
    zero = float(np.sum(_kernels.per_example_losses(np.zeros(n), y, code, param)))
    parts = [np.array([zero])]
    for supports, values in blocks:
        parts.append(csc_net_loss_sums(Xc.indptr, Xc.indices, Xc.data, n, supports,
                                       values, y, code, param).ravel())
    return np.concatenate(parts)


#: Binary digits kept of each scaled score; the rounding costs 2^{1-b} of ε (below).
_SCORE_BITS = 40
_EXPONENT_CAP = (1 << 61) - 1


def exponential_mechanism(scores, sensitivity, epsilon, rng, size=None):
    """Draw i with P[i] ∝ exp(−ε·scores[i]/(2Δ)) (smaller score is better), exactly.

    The scores are scaled and rounded up on a grid, u_i = ⌈c·sᵢ·2^b⌉ with
    c = (ε − 2^{1−b})/(2Δ) and b = 40, in exact rational arithmetic (a float is a
    dyadic rational), then capped at min_j u_j + 2⁶¹ − 1 (a minimum of Δ-sensitive
    quantities, so still Δ-sensitive). Each uᵢ moves by at most cΔ·2^b + 1 between
    neighbours, so the mechanism with weights exp(−uᵢ/2^b) is the exponential
    mechanism for a score of sensitivity cΔ + 2^{−b}: (2cΔ + 2^{1−b}) = ε-DP
    (McSherry and Talwar 2007; Dwork and Roth 2014, Theorem 3.10). The index is drawn
    by rejection from the uniform proposal with exact coins
    (:meth:`~skdpsparse.utils.RandomSource.categorical_exp`), so no index has
    probability zero on one input and positive on its neighbour, as an inverse CDF on
    a 53-bit uniform would give. ``size`` > 1 draws are ``size`` runs of the mechanism:
    they cost ``size``·ε by composition.

    Timing: the rejection sampler makes n / Σᵢ exp(−uᵢ/2^b) proposals on average, a
    function of the scores; the running time is a side channel that the guarantee
    does not cover (as for every fit, see the user guide's "What the guarantee does not
    cover").

    **Privacy guarantee.** Protected: whatever one neighbour changes in the scores,
    provided each moves by at most ``sensitivity`` (the caller's relation). ε-DP
    (McSherry and Talwar 2007; Dwork and Roth 2014, Theorem 3.10), with the rounding of
    the scores to the grid charged in the scale, so the exact draw keeps the guarantee.
    Assumptions: the sensitivity bound holds for every pair of neighbours; the scores
    are finite; the coins come from a secret key. Not covered: a wrong sensitivity.

    Returns
    -------
    int or ndarray of int
    """
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    if scores.size == 0 or not np.all(np.isfinite(scores)):
        raise ValueError("scores must be non-empty and finite.")
    margin = Fraction(1, 2 ** (_SCORE_BITS - 1))
    if not Fraction(float(epsilon)) > margin:
        raise ValueError(f"epsilon must exceed 2^-39, got {epsilon!r}.")
    c = (Fraction(float(epsilon)) - margin) / (2 * Fraction(float(sensitivity)))
    scale = c * 2**_SCORE_BITS
    if np.all(np.abs(scores) < 2.0**53) and np.all(scores == np.rint(scores)):
        # Integer scores (counts, ranks): the same ⌈scale·s⌉ on Python ints, one
        # integer division per score instead of a Fraction per score.
        ints = scores.astype(np.int64).astype(object)
        scaled = (-((-scale.numerator * ints) // scale.denominator)).tolist()
    else:
        scaled = [math.ceil(scale * Fraction(s)) for s in scores.tolist()]
    low = min(scaled)
    exponents = np.array([min(u - low, _EXPONENT_CAP) for u in scaled], dtype=np.int64)
    idx = as_random_source(rng).categorical_exp(exponents, _SCORE_BITS,
                                                1 if size is None else int(np.prod(size)))
    return int(idx[0]) if size is None else idx.reshape(size)


def _loss_at(loss, loss_param, t):
    code = _kernels.LOSS_CODES[loss]
    if loss in CLASSIFICATION_LOSSES:
        return _kernels.loss_value(code, t, 1.0, loss_param)  # ℓ(t) with y = 1, z = t
    return _kernels.loss_value(code, t, 0.0, loss_param)  # ℓ(r) with y = 0, z = r


def score_sensitivity(loss, loss_param, *, feature_l2, radius, label_bound):
    """Δ_u of the module doc: ℓ(−A) − ℓ(A) (classification) or ℓ(A + B) (regression).

    **Privacy guarantee.** None needed: a function of public numbers (the loss, the
    declared bounds and D). What it guarantees: Δ_u bounds |f(θ, z) − f(θ, z′)| for
    every θ of the ball and every pair of rows scaled and clipped into the declared
    bounds (derivation in the module docstring).
    """
    a = float(radius) * feature_l2
    if loss in CLASSIFICATION_LOSSES:
        return _loss_at(loss, loss_param, -a) - _loss_at(loss, loss_param, a)
    return _loss_at(loss, loss_param, a + label_bound)


def _derivative_bound(loss, loss_param, a, label_bound):
    if loss in CLASSIFICATION_LOSSES:
        return 1.0
    return float(loss_param) if loss == "huber" else a + label_bound


def choose_tau(n, n_params, epsilon, *, sensitivity, lipschitz_l1, radius,
               max_size=MAX_NET_SIZE, beta=BETA):
    """τ = D/√q (q = 1, 2, ...) minimizing the bound of the module doc under the size cap.

    The bound (2Δ_u/(εn))(ln|𝒩_τ| + ln(1/β)) + L₁τ is Theorem 5.5's trade-off with
    the exact net size; only public numbers enter.

    **Privacy guarantee.** None needed: a function of public numbers only (n, the number
    of parameters, ε, the declared constants); choosing τ from the data would not be
    covered.
    """
    best, best_tau = math.inf, None
    counter = _NetCounter(n_params)
    scale = 2.0 * sensitivity / (epsilon * n)
    for q in range(1, 10**6):
        size = counter.step()
        privacy_term = scale * (math.log(size) + math.log(1 / beta))
        if size > max_size or privacy_term >= best:  # the bound only grows from here
            break
        tau = radius / math.sqrt(q)
        if privacy_term + lipschitz_l1 * tau < best:
            best, best_tau = privacy_term + lipschitz_l1 * tau, tau
    if best_tau is None:
        raise ValueError(
            f"Even tau=radius gives a net above max_net_size={max_size:.3g} for "
            f"p={n_params} parameters.")
    return best_tau


@dataclass(frozen=True)
class SparseExponentialPlan:
    """Everything :func:`sparse_exponential` runs with, fixed before the data are read
    (built by :func:`plan_sparse_exponential` from n, d, K and the declared bounds).

    **Privacy guarantee.** A plan is public (no field depends on the data).
    ``budget`` = ε-DP is the guarantee of :func:`sparse_exponential` run with it, for
    one row (x, y) replaced (n, d and the bounds public): for each of the K problems
    the exponential mechanism at ``epsilon_each`` = ε/K over the public net 𝒩_τ with
    the score n·F_S(θ) of sensitivity ``score_sensitivity`` (McSherry and Talwar
    2007, "Mechanism design via differential privacy"; Dwork and Roth 2014, Theorem
    3.10), composed over the K problems (Dwork and Roth 2014, Theorem 3.16). A plan
    whose ``score_sensitivity`` is below :func:`score_sensitivity` of its bounds, or
    whose ``epsilon_each`` exceeds ε/K, is not covered by ``budget``.

    Attributes
    ----------
    loss : str
    loss_param : float
    n_samples, n_features, n_problems : int
        n, d and K.
    n_params : int
        p = d (+ 1 with an intercept column).
    sparsity : float
        s (rows scaled into ‖x‖₁ ≤ √s·R).
    norm_bound, intercept_scaling, label_bound, radius : float
        R, c, B and D.
    tau : float
        The net's step.
    net_size : int
        |𝒩_τ|.
    score_sensitivity : float
        Δ_u.
    epsilon_each : float
        ε/K.
    budget : PureDP
    """

    loss: str
    loss_param: float
    n_samples: int
    n_features: int
    n_problems: int
    n_params: int
    sparsity: float
    norm_bound: float
    intercept_scaling: float
    label_bound: float
    radius: float
    tau: float
    net_size: int
    score_sensitivity: float
    epsilon_each: float
    budget: PureDP


def plan_sparse_exponential(n_samples, n_features, n_problems=1, *, loss, loss_param=1.0,
                            epsilon, radius, tau="auto", norm_bound=1.0, sparsity=None,
                            intercept_scaling=1.0, label_bound=1.0,
                            max_net_size=MAX_NET_SIZE):
    """The net, score sensitivity and guarantee of Ghazi et al. (2024 v1) Algorithm 4
    for K linear problems, from public numbers (arguments as
    :func:`sparse_exponential_mechanism`).

    **Privacy guarantee.** Public numbers in, a public plan out; what the plan
    guarantees is its ``budget``, ε-DP (:class:`SparseExponentialPlan`): Δ_u from
    :func:`score_sensitivity` for rows scaled into {‖x‖₂ ≤ R, ‖x‖₁ ≤ √s·R} with the
    intercept column c and targets clipped into [−B, B], ε/K per problem; τ from
    :func:`choose_tau` (public numbers only) when ``"auto"``.

    Returns
    -------
    SparseExponentialPlan

    Raises
    ------
    ValueError
        Without ``radius``, or when the net has more than ``max_net_size`` points.

    Examples
    --------
    τ = D: the net is 0 and ±D·e_j (2p + 1 points); the hinge loss's Δ_u is
    (1 + A) − (1 − A)₊ = 2 with A = D·R = 1.

    >>> from skdpsparse.mechanisms.sparse_exponential import plan_sparse_exponential
    >>> plan = plan_sparse_exponential(200, 3, loss="hinge", epsilon=1.0, radius=1.0,
    ...                                tau=1.0, intercept_scaling=0.0)
    >>> plan.net_size, plan.score_sensitivity, plan.budget
    (7, 2.0, PureDP(epsilon=1.0))
    """
    if radius is None:
        raise ValueError("The sparse exponential mechanism needs a bounded domain: set "
                         "radius (the l2 ball the net covers).")
    n, d, K = int(n_samples), int(n_features), int(n_problems)
    s = d if sparsity is None else min(float(sparsity), d)
    c = float(intercept_scaling)
    p = d + (c > 0)
    g2 = math.hypot(norm_bound, c)
    g1 = math.sqrt(s) * norm_bound + c
    delta_u = score_sensitivity(loss, loss_param, feature_l2=g2, radius=radius,
                                label_bound=label_bound)
    eps_k = epsilon / K  # basic composition over the K one-vs-rest problems
    if isinstance(tau, str) and tau == "auto":
        lip1 = _derivative_bound(loss, loss_param, radius * g2, label_bound) * g1
        tau = choose_tau(n, p, eps_k, sensitivity=delta_u, lipschitz_l1=lip1,
                         radius=radius, max_size=max_net_size)
    size = sparse_net_size(p, float(tau), float(radius))
    if size > max_net_size:  # the message of enumerate_net, before the data are read
        enumerate_net(p, float(tau), float(radius), max_net_size)
    return SparseExponentialPlan(
        loss=loss, loss_param=float(loss_param), n_samples=n, n_features=d, n_problems=K,
        n_params=p, sparsity=s, norm_bound=float(norm_bound), intercept_scaling=c,
        label_bound=float(label_bound), radius=float(radius), tau=float(tau),
        net_size=int(size), score_sensitivity=delta_u, epsilon_each=eps_k,
        budget=PureDP(epsilon))


def sparse_exponential(X, targets, plan, rng):
    """Run a :class:`SparseExponentialPlan`: bound the rows and targets, then one
    exponential-mechanism draw over the net per problem.

    **Privacy guarantee.** ``plan.budget`` (ε-DP) for one row (x, y) replaced (n, d and
    the bounds public), for a plan from :func:`plan_sparse_exponential`
    (:class:`SparseExponentialPlan`). Assumptions: the draw is exact from a secret
    key. Not covered: the noise when the key is known; the running time, which is
    that of scoring the whole net.

    Returns
    -------
    ndarray of shape (K, p)

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsparse.mechanisms.sparse_exponential import (plan_sparse_exponential,
    ...                                                       sparse_exponential)
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 3))
    >>> plan = plan_sparse_exponential(200, 3, loss="hinge", epsilon=1.0, radius=1.0,
    ...                                tau=1.0, intercept_scaling=0.0)
    >>> theta = sparse_exponential(X, np.sign(X[:, 0]), plan, rng)
    >>> theta.shape, int(np.abs(theta).sum()) <= 1  # a point of the net
    ((1, 3), True)
    """
    n, d = X.shape
    targets = np.atleast_2d(targets)
    K, p = plan.n_problems, plan.n_params
    if (n, d) != (plan.n_samples, plan.n_features) or targets.shape[0] != K:
        raise ValueError(f"X of shape {X.shape} and {targets.shape[0]} target rows do not "
                         f"match the plan ({plan.n_samples}, {plan.n_features}; {K} "
                         "problems).")
    Xb, yb = bound_inputs(X, targets, plan.loss, norm_bound=plan.norm_bound,
                          sparsity=plan.sparsity, label_bound=plan.label_bound)
    blocks = enumerate_net(p, plan.tau, plan.radius, plan.net_size)
    c = plan.intercept_scaling
    if c > 0:
        Xb = sp.hstack([sp.csr_matrix(Xb), np.full((n, 1), c)], format="csr")
    code = _kernels.LOSS_CODES[plan.loss]
    theta = np.empty((K, p))
    for k in range(K):
        scores = net_scores(Xb, yb[k], blocks, code, plan.loss_param)
        theta[k] = decode(exponential_mechanism(scores, plan.score_sensitivity,
                                                plan.epsilon_each, rng), blocks, p)
    return theta


def sparse_exponential_mechanism(X, targets, *, loss, loss_param=1.0, epsilon, radius,
                                 tau="auto", norm_bound=1.0, sparsity=None,
                                 intercept_scaling=1.0, label_bound=1.0, rng,
                                 max_net_size=MAX_NET_SIZE):
    """Ghazi et al. (2024 v1) Algorithm 4 for K linear problems (ε/K each, basic composition).

    **Privacy guarantee.** Protected: one row (x, y), under replacement neighbours (n, d
    and the bounds public). ε-DP in total: for each of the K problems the exponential
    mechanism at ε/K over the public net 𝒩_τ with the score n·F_S(θ) of sensitivity Δ_u
    (McSherry and Talwar 2007, "Mechanism design via differential privacy"; Dwork and
    Roth 2014, Theorem 3.10; :func:`exponential_mechanism`), composed over the K
    problems (Dwork and Roth 2014, Theorem 3.16). Assumptions: every row is scaled into
    {‖x‖₂ ≤ R, ‖x‖₁ ≤ √s·R} and every target clipped into [−B, B] before scoring, so Δ_u
    (:func:`score_sensitivity`) bounds every replacement; τ and the net depend on public
    numbers only; the draw is exact (no float inverse CDF) from a secret key. Not
    covered: the noise when the key is known, and the running time, which is that of
    scoring the whole net.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n, d)
    targets : ndarray of shape (K, n)
        ±1 labels (classification losses) or targets, one row per problem.
    loss : {"hinge", "logistic", "smoothed_hinge", "squared", "huber"}
    loss_param : float
    epsilon : float
        Total ε; ε-DP.
    radius : float
        D of 𝒳 (required: the net covers a bounded set).
    tau : float or "auto"
        Grid step, or :func:`choose_tau`.
    norm_bound, sparsity, intercept_scaling, label_bound
        As in :mod:`~skdpsparse.mechanisms.output_perturbation`.
    rng : numpy.random.Generator
    max_net_size : int

    Returns
    -------
    theta : ndarray of shape (K, p)
    budget : PureDP
    info : dict
        ``tau``, ``net_size``, ``score_sensitivity``.
    """
    n, d = X.shape
    plan = plan_sparse_exponential(
        n, d, np.atleast_2d(targets).shape[0], loss=loss, loss_param=loss_param,
        epsilon=epsilon, radius=radius, tau=tau, norm_bound=norm_bound, sparsity=sparsity,
        intercept_scaling=intercept_scaling, label_bound=label_bound,
        max_net_size=max_net_size)
    theta = sparse_exponential(X, targets, plan, rng)
    return theta, plan.budget, {"tau": plan.tau, "net_size": plan.net_size,
                                "score_sensitivity": plan.score_sensitivity}
