"""Privacy filters: fully adaptive composition with a stopping rule.

A *filter* (Rogers, Roth, Ullman and Vadhan 2016) runs mechanisms whose privacy
parameters (ε_t, δ_t) may themselves be chosen adaptively, and stops before a fixed
budget would be exceeded; the whole transcript is then DP at that budget. This module
has the (ε, δ)-DP filter of Whitehouse, Ramdas, Rogers and Wu (ICML 2023), as stated in
Ghazi et al. 2024, Theorem A.4: with δ = δ′ + δ″ (δ′ > 0, δ″ ≥ 0),

    ε_{[0:t]} = √(2 ln(1/δ′) Σ_{s≤t} ε_s²) + ½ Σ_{s≤t} ε_s²,    δ_{[0:t]} = Σ_{s≤t} δ_s,

and the algorithm stops at the first t at which running step t + 1 would make
ε_{[0:t+1]} > ε or δ_{[0:t+1]} > δ″. (ε_{[0:t]} is the ε of ρ = Σ ε_s²/2 zCDP
converted at δ′: ρ + 2√(ρ ln(1/δ′)), which is why it matches advanced composition
with its constants.) The requirement is that (ε_t, δ_t) be *predictable*: fixed before
step t looks at the data, possibly from earlier outputs and public randomness.

It also has the Rényi filter of Feldman and Zrnic (2021), :class:`RenyiFilter`: at one
order α fixed in advance, steps whose RDP ε_t(α) is predictable are admitted while
Σ_{s≤t} ε_s(α) ≤ B; the whole transcript is then (α, B)-RDP, and (ε, δ)-DP by the
conversion of :func:`~skdpsparse.accounting.rdp.rdp_to_epsilon`. It accounts for
each step by its exact RDP curve (subsampled Gaussians included), where the (ε, δ)
filter needs each step as an (ε_t, δ_t) pair and pays advanced composition's
constants.

No data enters this module, only numbers. It is what decides when the bias-reduced
SGD of Ghazi, Guzmán, Kamath, Kumar and Manurangsi (2024, "Differentially private
optimization with sparse gradients", Algorithm 6) stops; see
:mod:`skdpsparse.mechanisms.bias_reduced`.

References
----------
.. [WRRW23] J. Whitehouse, A. Ramdas, R. Rogers, Z. S. Wu. Fully-adaptive composition
   in differential privacy. ICML 2023. arXiv:2203.05481.
.. [FZ21] V. Feldman, T. Zrnic. Individual privacy accounting via a Rényi filter.
   NeurIPS 2021. arXiv:2008.11193.
.. [RRUV16] R. Rogers, A. Roth, J. Ullman, S. Vadhan. Privacy odometers and filters:
   pay-as-you-go composition. NeurIPS 2016.
"""

from __future__ import annotations

import math

from .budget import ApproxDP, _delta, _nonnegative, _positive

__all__ = ["ApproxDPFilter", "RenyiFilter", "filter_epsilon", "renyi_budget"]


def filter_epsilon(sum_sq, delta_prime):
    """ε_{[0:t]} of Ghazi et al. 2024, Theorem A.4: √(2 ln(1/δ′) S) + S/2 with S = Σ ε_s².

    Parameters
    ----------
    sum_sq : float
        S ≥ 0, the sum of the squared per-step ε's.
    delta_prime : float
        δ′ in (0, 1), the part of δ that pays for the ε-composition.

    Returns
    -------
    float
    """
    S = _nonnegative(sum_sq, "sum_sq")
    dp = _delta(delta_prime, "delta_prime", allow_zero=False)
    return math.sqrt(2.0 * math.log(1.0 / dp) * S) + 0.5 * S


class ApproxDPFilter:
    """The (ε, δ)-DP filter of [WRRW23]_ (Ghazi et al. 2024, Theorem A.4).

    Call :meth:`try_spend` (or :meth:`spend`) with each step's (ε_t, δ_t) *before*
    running that step; it records the step and returns True iff the composition
    including it stays within the budget: ε_{[0:t]} ≤ ε and Σ δ_s ≤ δ″. Once a step is
    refused the filter is *closed*: every later request is refused too (the theorem's
    stopping time is the first refusal), so the steps it admitted are exactly
    ``A_{0:T}`` of Theorem A.4, which is (ε, δ′ + δ″)-DP.

    Parameters
    ----------
    epsilon : float
        The ε budget, > 0.
    delta : float
        The total δ = δ′ + δ″, in (0, 1).
    delta_prime : float, optional
        δ′ in (0, δ]; default δ/2 (Ghazi et al. 2024, Lemma 6.3, uses δ′ = δ″).

    Attributes
    ----------
    n_admitted : int
        Steps admitted so far.
    sum_sq : float
        Σ ε_s² over the admitted steps.
    delta_sum : float
        Σ δ_s over the admitted steps.

    Examples
    --------
    >>> f = ApproxDPFilter(1.0, 1e-6)
    >>> steps = 0
    >>> while f.try_spend(0.05, 0.0):
    ...     steps += 1
    >>> steps, f.epsilon_spent() <= 1.0, f.try_spend(1e-9, 0.0)
    (13, True, False)
    """

    __slots__ = ("epsilon", "delta", "delta_prime", "delta_second", "n_admitted",
                 "sum_sq", "delta_sum", "closed")

    def __init__(self, epsilon, delta, *, delta_prime=None):
        self.epsilon = _positive(epsilon, "epsilon")
        self.delta = _delta(delta, "delta", allow_zero=False)
        dp = self.delta / 2.0 if delta_prime is None else _positive(delta_prime, "delta_prime")
        if dp > self.delta:
            raise ValueError(f"delta_prime must be in (0, delta], got {delta_prime!r} "
                             f"with delta={delta!r}.")
        self.delta_prime = dp
        self.delta_second = self.delta - dp  # δ″, what the per-step δ's may add up to
        self.n_admitted = 0
        self.sum_sq = 0.0
        self.delta_sum = 0.0
        self.closed = False

    def epsilon_spent(self):
        """ε_{[0:t]} of the admitted steps (0 before any)."""
        return filter_epsilon(self.sum_sq, self.delta_prime)

    def admits(self, epsilon_step, delta_step):
        """Whether a step with (ε_t, δ_t) would be admitted now (records nothing)."""
        eps_t = _nonnegative(epsilon_step, "epsilon_step")
        delta_t = _nonnegative(delta_step, "delta_step")
        if self.closed:
            return False
        eps_next = filter_epsilon(self.sum_sq + eps_t * eps_t, self.delta_prime)
        return eps_next <= self.epsilon and self.delta_sum + delta_t <= self.delta_second

    def try_spend(self, epsilon_step, delta_step):
        """Admit and record the step if :meth:`admits`; else close the filter.

        Returns
        -------
        bool
            True iff the step may run.
        """
        if not self.admits(epsilon_step, delta_step):
            self.closed = True
            return False
        self.sum_sq += float(epsilon_step) ** 2
        self.delta_sum += float(delta_step)
        self.n_admitted += 1
        return True

    def spend(self, epsilon_step, delta_step):
        """:meth:`try_spend` that raises ``ValueError`` on a refused step."""
        if not self.try_spend(epsilon_step, delta_step):
            raise ValueError(f"the filter's budget ({self.epsilon:g}, {self.delta:g}) "
                             "does not admit this step.")

    def guarantee(self, *, max_steps=None, max_step=None):
        """The (ε, δ)-DP guarantee of every run of this filter, as an ``ApproxDP``.

        It is the budget (ε, δ′ + δ″): a filter's guarantee holds for the stopping rule,
        not for the realized ε_{[0:T]} (that would be an ex-post "odometer" value, which
        is not a DP guarantee of the run). With ``max_steps`` k and ``max_step``
        (ε_max, δ_max) bounding every step that can be admitted, the run is also within
        ε_{[0:k]} at ε_s = ε_max for all s and δ″ ≤ k δ_max; the smaller of the two is
        returned (stopping earlier than the filter keeps its guarantee: later steps are
        steps of cost 0).

        Parameters
        ----------
        max_steps : int, optional
            An a-priori cap on the number of admitted steps.
        max_step : tuple of float, optional
            (ε_max, δ_max), needed with ``max_steps``.

        Returns
        -------
        ApproxDP
        """
        eps, delta_second = self.epsilon, self.delta_second
        if max_steps is not None:
            if max_step is None:
                raise ValueError("max_steps needs max_step=(epsilon_max, delta_max).")
            k = int(max_steps)
            eps_max, delta_max = (float(v) for v in max_step)
            eps = min(eps, filter_epsilon(k * eps_max**2, self.delta_prime))
            delta_second = min(delta_second, k * delta_max)
        # ApproxDP needs ε > 0; a run with no step spends nothing but δ′ is still paid.
        return ApproxDP(max(eps, float.fromhex("0x1p-1022")), self.delta_prime + delta_second)

    def __repr__(self):
        return (f"ApproxDPFilter(epsilon={self.epsilon!r}, delta={self.delta!r}, "
                f"delta_prime={self.delta_prime!r}; admitted {self.n_admitted}, "
                f"epsilon_spent={self.epsilon_spent():.6g}, delta_sum={self.delta_sum:.6g})")


def renyi_budget(order, epsilon, delta):
    """The largest B such that (α, B)-RDP implies (ε, δ)-DP by the conversion of
    :func:`~skdpsparse.accounting.rdp.rdp_to_epsilon` (Balle et al. 2020, Theorem 21;
    Canonne, Kamath and Steinke 2020, Proposition 12), at the single order α:

        B = ε − log((α−1)/α) + (log δ + log α)/(α − 1),

    rounded down so that the conversion of B never exceeds ε. 0 when no positive B
    converts to (ε, δ) at this order.

    Parameters
    ----------
    order : float
        α > 1.
    epsilon : float
        > 0.
    delta : float
        In (0, 1).

    Returns
    -------
    float
    """
    from .rdp import rdp_to_epsilon  # rdp imports budget; keep this module light

    a = float(order)
    if not (a > 1.0 and math.isfinite(a)):
        raise ValueError(f"order must be a finite float > 1, got {order!r}.")
    eps = _positive(epsilon, "epsilon")
    d = _delta(delta, "delta", allow_zero=False)
    b = eps - math.log((a - 1.0) / a) + (math.log(d) + math.log(a)) / (a - 1.0)
    if not b > 0.0:
        return 0.0
    while b > 0.0 and rdp_to_epsilon([a], [b], d)[0] > eps:  # float rounding only
        b = math.nextafter(b, 0.0)
    return b


class RenyiFilter:
    """The Rényi filter of [FZ21]_ at one order α, fixed before the run.

    Call :meth:`try_spend` with each step's RDP ε_t(α) *before* running that step; it
    records the step and returns True iff Σ_{s≤t} ε_s(α) ≤ B. Once a step is refused
    the filter is closed (the run stops there). Every run is then (α, B)-RDP.

    **Theorem** ([FZ21]_, Theorem 3.1, the Rényi filter). Let mechanisms A_1, A_2, ...
    be chosen adaptively, A_t being (α, ρ_t)-RDP with ρ_t a function of the outputs
    before step t (and of public randomness), and let the run stop at a time T with
    Σ_{t≤T} ρ_t ≤ B on every path. Then the transcript is (α, B)-RDP.

    *Proof sketch* (discrete outputs; the general case is the same with densities).
    Fix neighbours S, S′ with per-step conditional laws p_t, q_t. Under S′ the process
    M_t = Π_{s≤t} (p_s/q_s)^α · e^{−(α−1)Σ_{s≤t} ρ_s} is a supermartingale: given the
    past, ρ_t is fixed and E_{q_t}[(p_t/q_t)^α] = e^{(α−1)D_α(p_t‖q_t)} ≤
    e^{(α−1)ρ_t}. Steps after T output a constant (ratio 1, cost 0). Optional
    stopping (T is bounded: each step costs at least a positive amount here, so
    T ≤ B/min ρ_t) gives E[M_T] ≤ 1, hence e^{(α−1)D_α} = E_{S′}[Π (p/q)^α] =
    E[M_T e^{(α−1)Σρ}] ≤ e^{(α−1)B}. ∎

    Parameters
    ----------
    order : float
        α > 1.
    budget : float
        B ≥ 0 (:func:`renyi_budget` for a target (ε, δ)).

    Examples
    --------
    >>> f = RenyiFilter(20.0, renyi_budget(20.0, 1.0, 1e-6))
    >>> steps = 0
    >>> while f.try_spend(0.01):
    ...     steps += 1
    >>> steps, f.spent <= f.budget, f.try_spend(0.0)
    (48, True, False)
    """

    __slots__ = ("order", "budget", "spent", "n_admitted", "closed")

    def __init__(self, order, budget):
        a = float(order)
        if not (a > 1.0 and math.isfinite(a)):
            raise ValueError(f"order must be a finite float > 1, got {order!r}.")
        self.order = a
        self.budget = _nonnegative(budget, "budget")
        self.spent = 0.0
        self.n_admitted = 0
        self.closed = False

    def admits(self, rdp_step):
        """Whether a step of RDP ``rdp_step`` at :attr:`order` would be admitted now."""
        r = _nonnegative(rdp_step, "rdp_step")
        return not self.closed and self.spent + r <= self.budget

    def try_spend(self, rdp_step):
        """Admit and record the step if :meth:`admits`; else close the filter.

        Returns
        -------
        bool
            True iff the step may run.
        """
        if not self.admits(rdp_step):
            self.closed = True
            return False
        self.spent += float(rdp_step)
        self.n_admitted += 1
        return True

    def guarantee(self, delta):
        """The (ε, δ)-DP guarantee of every run: (α, B)-RDP converted at ``delta``.

        It is the budget's, not the realized Σ ε_t(α) (an ex-post value is not a DP
        guarantee of the run: the stopping rule is part of the mechanism).

        Returns
        -------
        ApproxDP
        """
        from .rdp import rdp_to_epsilon

        eps = rdp_to_epsilon([self.order], [self.budget], delta)[0]
        return ApproxDP(max(eps, float.fromhex("0x1p-1022")), float(delta))

    def __repr__(self):
        return (f"RenyiFilter(order={self.order!r}, budget={self.budget!r}; admitted "
                f"{self.n_admitted}, spent={self.spent:.6g})")
