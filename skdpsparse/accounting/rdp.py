"""Rényi differential privacy (RDP) curves, their composition and conversion to (ε, δ).

An :class:`RdpCurve` holds RDP bounds ε(α) at a fixed grid of orders α. Curves of the
same grid compose by addition (Mironov 2017, Prop. 1). Everything is vectorised over
orders and computed in log space.

All curves take ``noise_multiplier`` = noise standard deviation (or Laplace scale) divided
by the sensitivity under the neighbouring relation in use.

References
----------
.. [M17] I. Mironov. Rényi differential privacy. CSF 2017. arXiv:1702.07476.
.. [MTZ19] I. Mironov, K. Talwar, L. Zhang. Rényi differential privacy of the sampled
   Gaussian mechanism. arXiv:1908.10530.
.. [WBK19] Y.-X. Wang, B. Balle, S. Kasiviswanathan. Subsampled Rényi differential
   privacy and analytical moments accountant. AISTATS 2019. arXiv:1808.00087 (v2).
.. [BBGHS20] B. Balle, G. Barthe, M. Gaboardi, J. Hsu, T. Sato. Hypothesis testing
   interpretations and Rényi differential privacy. AISTATS 2020. arXiv:1905.09982.
.. [CKS20] C. Canonne, G. Kamath, T. Steinke. The discrete Gaussian for differential
   privacy. NeurIPS 2020. arXiv:2004.00010.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, log_ndtr, logsumexp

from .budget import _TINY_EPSILON, ApproxDP, _delta, _eps_at_order, _positive

__all__ = [
    "DEFAULT_ORDERS",
    "RdpCurve",
    "gaussian_rdp",
    "laplace_rdp",
    "poisson_subsampled_gaussian_rdp",
    "rdp_to_epsilon",
    "subsampled_without_replacement_gaussian_rdp",
]

#: The order grid of ``dp_accounting.rdp.rdp_privacy_accountant.DEFAULT_RDP_ORDERS``
#: (dp_accounting 0.6.0): 1.1, 1.2, ..., 10.9, 11, 12, ..., 63, 128, 256, 512, 1024, so
#: that numbers are comparable with that library.
DEFAULT_ORDERS = np.array(
    [1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024],
    dtype=float,
)
DEFAULT_ORDERS.setflags(write=False)

# [WBK19] Thm 27 needs forward differences up to order α+1; above this order we use the
# plain Thm 9 bound, as dp_accounting does, so both agree on every order.
_WOR_MAX_TIGHT_ORDER = 256


# ----------------------------------------------------------------------------- helpers
def _check_sample_sizes(sample_size, population_size):
    """Integers with 0 ≤ sample_size ≤ population_size ≥ 1 (sampling without
    replacement), else a TypeError or ValueError naming them."""
    for name, v in (("sample_size", sample_size), ("population_size", population_size)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
            raise TypeError(f"{name} must be an int, got {v!r}")
    if population_size < 1 or not 0 <= sample_size <= population_size:
        raise ValueError(
            "need 0 <= sample_size <= population_size and population_size >= 1, got "
            f"sample_size={sample_size!r}, population_size={population_size!r}"
        )


def _orders(orders, *, allow_one=True):
    a = np.array(orders, dtype=float)
    if a.ndim != 1 or a.size == 0:
        raise ValueError("orders must be a non-empty 1-D sequence")
    if not (np.all(np.isfinite(a)) and np.all(a >= 1 if allow_one else a > 1)):
        bound = ">= 1" if allow_one else "> 1"
        raise ValueError(f"Rényi orders must be finite and {bound}, got {orders!r}")
    return a


def _rate(value, name):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    if not 0 <= value <= 1:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    return float(value)


def _log_comb(n, k):
    """log |C(n, k)| for real n (generalised binomial coefficient)."""
    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


def _ragged(alphas, first):
    """Flattened pairs (α, k) for k = first, ..., α of each integer α, and the start of
    each α's segment (every α ≥ first)."""
    counts = alphas.astype(np.int64) - first + 1
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    k = np.arange(counts.sum()) - np.repeat(starts, counts) + first
    return np.repeat(alphas, counts), k.astype(float), starts


def _segment_logsumexp(values, starts):
    """logsumexp of each segment values[starts[i]:starts[i+1]]."""
    top = np.maximum.reduceat(values, starts)
    top = np.where(np.isfinite(top), top, 0.0)
    reps = np.diff(np.append(starts, values.size))
    return top + np.log(np.add.reduceat(np.exp(values - np.repeat(top, reps)), starts))


def _monotone_envelope(orders, eps):
    """ε(α) ← min_{α' ≥ α} ε(α'): valid since the Rényi divergence is non-decreasing in α
    (van Erven & Harremoës 2014, Thm 3); tightens bounds that are loose at low orders."""
    idx = np.argsort(orders, kind="stable")
    out = np.empty_like(eps)
    out[idx] = np.minimum.accumulate(eps[idx][::-1])[::-1]
    return out


def _interpolate_cgf(orders, int_orders, int_log_a):
    """RDP at fractional orders from bounds on the CGF log A(α) = (α−1)ε(α) at integers.

    The CGF is convex in α (Hölder), so its chord between ⌊α⌋ and ⌈α⌉ bounds it from
    above ([WBK19] Cor. 10); log A(1) = 0.
    """
    table = dict(zip(int_orders.tolist(), int_log_a.tolist()))
    table[1.0] = 0.0
    lo, hi = np.floor(orders), np.ceil(orders)
    t = orders - lo
    f_lo = np.array([table[v] for v in lo.tolist()])
    f_hi = np.array([table[v] for v in hi.tolist()])
    return ((1 - t) * f_lo + t * f_hi) / (orders - 1)


# ------------------------------------------------------------------------------ curves
@dataclass(frozen=True, eq=False)
class RdpCurve:
    """RDP bounds ε(α) at a grid of orders α: the mechanism is (α, ε(α))-RDP for each.

    Parameters
    ----------
    orders : array-like of float
        Rényi orders, finite and ≥ 1. Stored as a read-only array.
    epsilons : array-like of float
        Non-negative RDP bounds (``inf`` allowed: no bound at that order).

    Notes
    -----
    ``c1 + c2`` is composition (orders must match), ``k * c`` is k-fold composition
    ([M17]_ Prop. 1).

    Examples
    --------
    1000 steps of DP-SGD with Poisson sampling rate 0.01 and noise multiplier 1:

    >>> curve = 1000 * poisson_subsampled_gaussian_rdp(0.01, 1.0)
    >>> eps, order = curve.to_epsilon(1e-5)
    >>> round(eps, 3), order
    (2.101, 7.8)
    >>> print(curve.to_approx_dp(1e-5))
    (2.10137, 1e-05)-DP
    """

    orders: np.ndarray
    epsilons: np.ndarray

    def __post_init__(self):
        orders = _orders(self.orders)
        eps = np.array(self.epsilons, dtype=float).reshape(-1)
        if eps.shape != orders.shape:
            raise ValueError(
                f"epsilons must have the shape of orders {orders.shape}, got {eps.shape}"
            )
        if np.any(np.isnan(eps)) or np.any(eps < 0):
            raise ValueError("epsilons must be non-negative (inf allowed), got NaN or < 0")
        for name, arr in (("orders", orders), ("epsilons", eps)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    def __repr__(self):
        with np.printoptions(threshold=6, edgeitems=2, precision=6):
            return f"RdpCurve(orders={self.orders!r}, epsilons={self.epsilons!r})"

    def __eq__(self, other):
        if not isinstance(other, RdpCurve):
            return NotImplemented
        return np.array_equal(self.orders, other.orders) and np.array_equal(
            self.epsilons, other.epsilons
        )

    def __hash__(self):
        return hash((self.orders.tobytes(), self.epsilons.tobytes()))

    def __add__(self, other):
        if not isinstance(other, RdpCurve):
            return NotImplemented
        if not np.array_equal(self.orders, other.orders):
            raise ValueError("cannot compose RDP curves on different orders")
        return RdpCurve(self.orders, self.epsilons + other.epsilons)

    def __radd__(self, other):
        # Lets ``sum(curves)`` start from 0.
        if isinstance(other, numbers.Integral) and not isinstance(other, bool) and other == 0:
            return self
        return NotImplemented

    def __mul__(self, k):
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral):
            raise TypeError(f"an RDP curve can only be multiplied by an int, got {k!r}")
        if k < 0:
            raise ValueError(f"an RDP curve can only be multiplied by k >= 0, got {k!r}")
        if k == 0:  # nothing released: also avoids 0 * inf
            return RdpCurve(self.orders, np.zeros_like(self.epsilons))
        return RdpCurve(self.orders, int(k) * self.epsilons)

    __rmul__ = __mul__

    def to_epsilon(self, delta):
        """Smallest ε over the orders with (ε, δ)-DP; see :func:`rdp_to_epsilon`.

        Returns
        -------
        epsilon : float
        best_order : float
        """
        return rdp_to_epsilon(self.orders, self.epsilons, delta)

    def to_approx_dp(self, delta):
        """The (ε, δ)-DP guarantee at ``delta``.

        An ε of 0 is reported as the smallest positive float (budgets require ε > 0).

        Returns
        -------
        ApproxDP

        Raises
        ------
        ValueError
            If no order gives a finite ε.
        """
        eps, _ = self.to_epsilon(delta)
        if not math.isfinite(eps):
            raise ValueError(f"the RDP curve gives no finite epsilon at delta={delta!r}")
        return ApproxDP(max(eps, _TINY_EPSILON), delta)


def rdp_to_epsilon(orders, rdp, delta):
    """Convert RDP bounds at several orders to (ε, δ)-DP.

    ε = min_α rdp(α) + log((α−1)/α) − (log δ + log α)/(α−1), clamped at 0
    ([BBGHS20]_ Thm 21, [CKS20]_ Prop. 12), over orders α > 1 with a finite bound. An
    order also gives ε = 0 when δ ≥ √(1 − exp(−rdp(α))): the total variation distance is
    at most √(1 − e^{−KL}) (Bretagnolle–Huber) and KL ≤ D_α. This is dp_accounting's
    ``compute_epsilon`` rule, so the results agree.

    Parameters
    ----------
    orders, rdp : array-like of float
        Orders (≥ 1) and non-negative RDP bounds, same length.
    delta : float
        In (0, 1): finitely many orders give no pure DP guarantee.

    Returns
    -------
    epsilon : float
        ``inf`` if no order qualifies.
    best_order : float
        The minimising order (``nan`` if none).
    """
    delta = _delta(delta, allow_zero=False)
    orders = _orders(orders)
    rdp = np.array(rdp, dtype=float).reshape(-1)
    if rdp.shape != orders.shape:
        raise ValueError("orders and rdp must have the same length")
    if np.any(np.isnan(rdp)) or np.any(rdp < 0):
        raise ValueError("rdp must be non-negative (inf allowed)")
    usable = (orders > 1) & np.isfinite(rdp)
    if not usable.any():
        return math.inf, math.nan
    eps = np.full(orders.shape, np.inf)
    a, r = orders[usable], rdp[usable]
    eps[usable] = np.where(delta**2 + np.expm1(-r) > 0, 0.0, _eps_at_order(a, r, math.log(delta)))
    i = int(np.argmin(eps))
    return max(0.0, float(eps[i])), float(orders[i])


def gaussian_rdp(noise_multiplier, orders=DEFAULT_ORDERS):
    """Gaussian mechanism: ε(α) = α / (2σ²) ([M17]_ Prop. 7).

    Parameters
    ----------
    noise_multiplier : float
        σ = noise std / ℓ2 sensitivity, positive.
    orders : array-like of float, default=DEFAULT_ORDERS

    Returns
    -------
    RdpCurve
    """
    sigma = _positive(noise_multiplier, "noise_multiplier")
    a = _orders(orders)
    return RdpCurve(a, a / sigma / sigma / 2.0)


def _expm1_minus_x(x):
    """e^x − 1 − x without cancellation (Taylor series for |x| < 1/2)."""
    x = np.asarray(x, dtype=float)
    small = np.abs(x) < 0.5
    xs = np.where(small, x, 0.0)
    series = np.zeros_like(xs)
    for k in range(25, 1, -1):  # Horner: Σ_{k=2}^{25} x^k / k!
        series = (series + 1.0 / math.factorial(k)) * xs
    series *= xs
    return np.where(small, series, np.expm1(np.where(small, 0.0, x)) - x)


def laplace_rdp(noise_multiplier, orders=DEFAULT_ORDERS):
    """Laplace mechanism with scale b = noise_multiplier · Δ₁ ([M17]_ Prop. 6, Table II).

    With ε₀ = 1/b and a = α − 1,
    ε(α) = (1/a) log[ α/(2α−1) e^{aε₀} + a/(2α−1) e^{−αε₀} ] and ε(1) = ε₀ + e^{−ε₀} − 1.
    Evaluated as ε₀ + log1p(a/(2α−1)·expm1(−(2α−1)ε₀))/a when aε₀ > 1 (no overflow for
    large α) and otherwise as log1p((α h(aε₀) + a h(−αε₀))/(2α−1))/a with
    h(x) = eˣ − 1 − x ≥ 0, which has no cancellation for small ε₀ or α → 1.

    Parameters
    ----------
    noise_multiplier : float
        b / Δ₁, positive.
    orders : array-like of float, default=DEFAULT_ORDERS

    Returns
    -------
    RdpCurve
    """
    eps0 = 1.0 / _positive(noise_multiplier, "noise_multiplier")
    alpha = _orders(orders)
    a = alpha - 1.0
    big = a * eps0 > 1.0
    safe_a = np.where(a > 0, a, 1.0)
    large = eps0 + np.log1p(a / (2 * alpha - 1) * np.expm1(-(2 * alpha - 1) * eps0)) / safe_a
    arg = (alpha * _expm1_minus_x(np.where(big, 0.0, a * eps0)) + a * _expm1_minus_x(-alpha * eps0))
    small = np.log1p(arg / (2 * alpha - 1)) / safe_a
    at_one = _expm1_minus_x(-eps0)  # the α → 1 limit (KL divergence)
    return RdpCurve(alpha, np.where(a == 0, at_one, np.where(big, large, small)))


# ------------------------------------------------------------------ sampled Gaussians
def _log_expm1(x):
    """log(e^x − 1) for x > 0, without overflow."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(x > 30, x + np.log1p(-np.exp(-np.maximum(x, 30))),
                        np.log(np.expm1(np.minimum(x, 30))))


def _poisson_log_a_int(q, sigma, alphas):
    """log A_α for integer α: A_α = Σ_k C(α,k)(1−q)^{α−k} q^k e^{(k²−k)/(2σ²)} ([MTZ19] §3.2).

    Since the binomial weights sum to 1, A_α − 1 = Σ_{k≥2} C(α,k)(1−q)^{α−k} q^k
    (e^{(k²−k)/(2σ²)} − 1), a sum of positive terms: no cancellation when A_α ≈ 1.
    """
    al, k, starts = _ragged(alphas, 2)
    terms = (_log_comb(al, k) + k * math.log(q) + (al - k) * math.log1p(-q)
             + _log_expm1((k * k - k) / (2 * sigma * sigma)))
    return np.logaddexp(0.0, _segment_logsumexp(terms, starts))


def _poisson_log_a_frac(q, sigma, alphas, max_terms=8192):
    """log A_α for fractional α by the two series of [MTZ19] §3.3 (split at z₀).

    Terms are added in absolute value (generalised binomials alternate in sign for
    k > α), as dp_accounting does: an upper bound on A_α. A series counts as converged
    once its last terms decrease and are below e^{−36} of the sum; a tail bound K·t_K is
    added. Orders that do not converge within ``max_terms`` get ``nan``.
    """
    z0 = sigma * sigma * math.log(1 / q - 1) + 0.5
    out = np.full(alphas.shape, np.nan)
    todo = np.arange(alphas.size)
    n_terms = 128
    while todo.size and n_terms <= max_terms:
        al = alphas[todo][:, None]
        k = np.arange(n_terms, dtype=float)
        j = al - k
        log_c = _log_comb(al, k)
        t0 = (log_c + k * math.log(q) + j * math.log1p(-q) + (k * k - k) / (2 * sigma * sigma)
              + log_ndtr((z0 - k) / sigma))
        t1 = (log_c + j * math.log(q) + k * math.log1p(-q) + (j * j - j) / (2 * sigma * sigma)
              + log_ndtr((j - z0) / sigma))
        total = np.logaddexp(logsumexp(t0, axis=1), logsumexp(t1, axis=1))
        last = np.maximum(t0[:, -1], t1[:, -1])
        done = ((t0[:, -1] < t0[:, -2]) & (t1[:, -1] < t1[:, -2]) & (last < total - 36.0))
        out[todo[done]] = np.logaddexp(total[done], last[done] + math.log(n_terms))
        todo = todo[~done]
        n_terms *= 8
    return out


def poisson_subsampled_gaussian_rdp(sampling_rate, noise_multiplier, orders=DEFAULT_ORDERS):
    """Poisson-subsampled Gaussian mechanism ([MTZ19]_), add/remove-one neighbours.

    ε(α) = log(A_α)/(α−1) with A_α = E_{z∼μ₀}[((1−q) + q μ₁(z)/μ₀(z))^α], μ₀ = N(0, σ²),
    μ₁ = N(1, σ²): the exact binomial expansion for integer α (§3.2). Fractional orders
    take the smallest of three valid upper bounds: the series of §3.3 as dp_accounting
    sums it (|terms|; binding in common settings, but up to 1e4 times too large for
    large σ or q), the chord of the convex CGF between ⌊α⌋ and ⌈α⌉, and the mixture
    bound log(1 − q + q e^{α(α−1)/(2σ²)})/(α−1). A series that does not converge
    (small σ, large q, α near 1) is simply left out. Finally ε(α) is lowered to
    min_{α' ≥ α} ε(α') (RDP is non-decreasing in α).

    Parameters
    ----------
    sampling_rate : float
        q in [0, 1]; q = 0 gives zeros, q = 1 the plain Gaussian.
    noise_multiplier : float
        σ = noise std / ℓ2 sensitivity, positive.
    orders : array-like of float, default=DEFAULT_ORDERS
        All > 1.

    Returns
    -------
    RdpCurve
    """
    q = _rate(sampling_rate, "sampling_rate")
    sigma = _positive(noise_multiplier, "noise_multiplier")
    alphas = _orders(orders, allow_one=False)
    if q == 0:
        return RdpCurve(alphas, np.zeros_like(alphas))
    if q == 1:
        return gaussian_rdp(sigma, alphas)
    is_int = alphas == np.floor(alphas)
    rdp = np.empty_like(alphas)
    if is_int.any():
        rdp[is_int] = _poisson_log_a_int(q, sigma, alphas[is_int]) / (alphas[is_int] - 1)
    if (~is_int).any():
        # Three valid bounds, the smallest kept: the |terms| series; the chord of the
        # convex CGF through the exact integer orders ([WBK19] Cor. 10); and, by convexity
        # of x ↦ x^α, A_α ≤ 1 − q + q e^{α(α−1)/(2σ²)} (never above the plain Gaussian).
        a = alphas[~is_int]
        ints = np.union1d(np.floor(a), np.ceil(a))
        ints = ints[ints >= 2]
        chord = _interpolate_cgf(a, ints, _poisson_log_a_int(q, sigma, ints))
        series = _poisson_log_a_frac(q, sigma, a) / (a - 1)
        x = a * (a - 1) / (2 * sigma * sigma)
        mixture = np.where(  # log(1 − q + q eˣ), without overflow or cancellation
            x < 1, np.log1p(q * np.expm1(np.minimum(x, 1))),
            np.logaddexp(math.log1p(-q), math.log(q) + x)) / (a - 1)
        rdp[~is_int] = np.fmin(np.fmin(series, chord), mixture)  # fmin: nan = not converged
    return RdpCurve(alphas, _monotone_envelope(alphas, np.maximum(rdp, 0.0)))


def _log_central_moments(sigma, l_max):
    """log B(l) for even l = 2, 4, ..., l_max, where B(l) = E_q[(p/q − 1)^l] for
    p = N(1, σ²), q = N(0, σ²): the l-th forward difference at 0 of i ↦ e^{i(i−1)/(2σ²)}.

    The alternating sum Σ_i (−1)^{l−i} C(l,i) e^{i(i−1)/(2σ²)} is used when it loses at
    most three digits to cancellation; otherwise B(l) = E[(e^Y − 1)^l] with
    Y ∼ N(−s²/2, s²), s = 1/σ, by the trapezoid rule in log space over a window of ±12 s
    around the two modes of the (log-concave on each side of 0) integrand.
    Returns an array indexed by l (odd entries unused).
    """
    out = np.full(l_max + 1, np.nan)
    ls = np.arange(2, l_max + 1, 2, dtype=float)
    i = np.arange(l_max + 1, dtype=float)
    lt = _log_comb(ls[:, None], i) + (i * i - i) / (2 * sigma * sigma)
    lt = np.where(i <= ls[:, None], lt, -np.inf)
    even = (i % 2 == 0)
    pos, neg = logsumexp(np.where(even, lt, -np.inf), axis=1), logsumexp(
        np.where(even, -np.inf, lt), axis=1)
    gap = neg - pos
    direct = gap < math.log1p(-1e-3)
    out[ls[direct].astype(int)] = pos[direct] + np.log(-np.expm1(gap[direct]))
    lq = ls[~direct]
    if lq.size:
        out[lq.astype(int)] = _log_moments_by_quadrature(sigma, lq)
    return out


def _log_moments_by_quadrature(sigma, ls):
    s = 1.0 / sigma
    mu = -0.5 * s * s
    lc = ls[:, None]

    def log_f(y):  # log of φ(y; μ, s) (e^y − 1)^l
        with np.errstate(divide="ignore"):
            return (lc * np.log(np.abs(np.expm1(y))) - (y - mu) ** 2 / (2 * s * s)
                    - math.log(s * math.sqrt(2 * math.pi)))

    def bisect(grad, lo, hi):  # root of a decreasing function, vectorised
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            up = grad(mid) > 0
            lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
        return 0.5 * (lo + hi)

    # Modes: d/dy log f = l e^y/(e^y − 1) − (y − μ)/s², decreasing on each side of 0.
    def grad(y):
        return ls * np.exp(y) / np.expm1(y) - (y - mu) / (s * s)

    y_pos = bisect(grad, np.full_like(ls, 1e-300), 2 * abs(mu) + 2 * ls * s * s + 1)
    y_neg = bisect(grad, mu - 2 - np.log(2 * ls) - s * s, np.full_like(ls, -1e-300))
    # Step: an eighth of the narrower mode's width 1/√(−(log f)''); as (log f)'' ≤ −1/s²,
    # the window ±12 s around the modes leaves out less than e^{−72} of the mass.
    def width(y):
        return 1.0 / np.sqrt(ls * np.exp(y) / np.expm1(y) ** 2 + 1.0 / (s * s))

    lo, hi = y_neg - 12 * s, y_pos + 12 * s
    step = np.minimum(width(y_pos), width(y_neg)) / 8
    n = int(np.max(np.ceil((hi - lo) / step))) + 1
    step = (hi - lo) / (n - 1)
    y = lo[:, None] + step[:, None] * np.arange(n)
    return logsumexp(log_f(y), axis=1) + np.log(step)


def _wor_log_a_int(gamma, sigma, alphas, moments_bound=True):
    """Upper bound on log A_α (integer α ≥ 2) for sampling m = γn of n without replacement.

    [WBK19] Thm 9 for the Gaussian (ε(j) = j/(2σ²), ε(∞) = ∞):
    A_α ≤ 1 + γ² C(α,2) min{4(e^{ε(2)} − 1), 2e^{ε(2)}} + Σ_{j≥3} γ^j C(α,j) 2e^{(j−1)ε(j)},
    and for α ≤ 256 the term j ≥ 3 is also capped by 4 √(B(2⌊j/2⌋) B(2⌈j/2⌉)) (the
    strengthened bound, [WBK19] arXiv v2 Thm 27), with B from :func:`_log_central_moments`.
    ``moments_bound=False`` keeps Thm 9 alone, which needs nothing of the base mechanism
    but its RDP curve ε(j) = j/(2σ²) at integer orders.
    """
    al, j, starts = _ragged(alphas, 2)
    e2 = 1.0 / sigma / sigma  # ε(2)
    gen = np.where(j == 2, min(math.log(4) + float(_log_expm1(e2)), e2 + math.log(2)),
                   math.log(2) + j * (j - 1) / (2 * sigma * sigma))  # 2 e^{(j−1)ε(j)}
    use_tight = (al <= _WOR_MAX_TIGHT_ORDER) & (j >= 3) & bool(moments_bound)
    if use_tight.any():
        jt = j[use_tight].astype(np.int64)
        lb = _log_central_moments(sigma, 2 * int(math.ceil(jt.max() / 2)))
        tight = math.log(4) + 0.5 * (lb[2 * (jt // 2)] + lb[2 * ((jt + 1) // 2)])
        gen[use_tight] = np.minimum(gen[use_tight], tight)
    terms = j * math.log(gamma) + _log_comb(al, j) + gen
    return np.logaddexp(0.0, _segment_logsumexp(terms, starts))


def subsampled_without_replacement_gaussian_rdp(
    sample_size, population_size, noise_multiplier, orders=DEFAULT_ORDERS, *,
    moments_bound=True,
):
    """Gaussian mechanism on a uniformly random subset of fixed size, replace-one
    neighbours ([WBK19]_ Thm 9, strengthened by Thm 27 of arXiv:1808.00087v2 for α ≤ 256).

    Integer orders use the bound of :func:`_wor_log_a_int`. Fractional orders use the
    chord of the convex CGF (α−1)ε(α) between ⌊α⌋ and ⌈α⌉ ([WBK19] Cor. 10), a valid
    upper bound; this is also what dp_accounting's ``SampledWithoutReplacementDpEvent``
    computes. The result is capped by the plain Gaussian's α/(2σ²), which the Thm 9
    bound exceeds for large σ at α > 256; elsewhere both libraries agree at every order.

    Parameters
    ----------
    sample_size : int
        m, with 0 ≤ m ≤ n; m = 0 gives zeros, m = n the plain Gaussian.
    population_size : int
        n ≥ 1, public.
    noise_multiplier : float
        σ = noise std / ℓ2 sensitivity under replace-one, positive.
    orders : array-like of float, default=DEFAULT_ORDERS
        All > 1.
    moments_bound : bool, default=True
        Use the strengthened bound of Thm 27, whose central moments are those of the
        continuous Gaussian mechanism. ``False`` uses Thm 9 alone, valid for *any* base
        mechanism whose RDP is at most α/(2σ²) at every integer order (a discrete
        Gaussian: Canonne, Kamath and Steinke 2020, Theorem 14; or a
        composition of Gaussian mechanisms whose ρ add up to 1/(2σ²)).

    Returns
    -------
    RdpCurve
    """
    _check_sample_sizes(sample_size, population_size)
    sigma = _positive(noise_multiplier, "noise_multiplier")
    alphas = _orders(orders, allow_one=False)
    if sample_size == 0:
        return RdpCurve(alphas, np.zeros_like(alphas))
    if sample_size == population_size:
        return gaussian_rdp(sigma, alphas)
    gamma = sample_size / population_size
    ints = np.union1d(np.floor(alphas), np.ceil(alphas))
    ints = ints[ints >= 2]
    log_a = _wor_log_a_int(gamma, sigma, ints, moments_bound)
    rdp = _interpolate_cgf(alphas, ints, log_a)  # exact at integer orders (t = 0)
    # Rényi divergence is jointly quasi-convex (van Erven & Harremoës 2014, Thm 13), so
    # subsampling never exceeds the base mechanism's α/(2σ²); Thm 9 alone can (large σ).
    rdp = np.clip(rdp, 0.0, alphas / sigma / sigma / 2.0)
    return RdpCurve(alphas, _monotone_envelope(alphas, rdp))
