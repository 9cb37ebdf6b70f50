"""DPHeavyTailedMean: private means of heavy-tailed vectors (seed 004, Section 4)."""

import numpy as np
from sklearn.base import BaseEstimator

from .._kernels.heavy_tailed_scaled import consecutive_groups
from ..accounting import approx_dp_to_zcdp
from ..mechanisms.heavy_tailed import (
    n_groups_for,
    private_cwme,
    private_noise_smoothing_mean,
    truncation_for,
)
from ..utils import InstanceOf, Interval, Options, fit_random_source, validate_params
from ..utils._data import fit_input, release
from ._base import PrivateMeanMixin


def check_center(center, n_features):
    """``center`` as a finite float64 vector of length ``n_features``."""
    arr = np.asarray(center, dtype=np.float64) if center is not None else np.zeros(1)
    if arr.ndim == 0 or arr.shape == (1,):
        arr = np.full(n_features, float(arr.reshape(-1)[0]))
    if arr.shape != (n_features,):
        raise ValueError(f"center must be a float or have shape ({n_features},), "
                         f"got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise ValueError("center must be finite.")
    return arr


class DPHeavyTailedMean(PrivateMeanMixin, BaseEstimator):
    """Differentially private mean of heavy-tailed vectors.

    Implements the estimators of Kamath, Liu and Zhang, "Improved Rates for
    Differentially Private Stochastic Convex Optimization with Heavy-Tailed Data"
    (seed 004): the coordinate-wise trimmed median of means (Algorithm 3, CDPCWME /
    DPCWME of Theorem 4.1) and the noise-smoothing mean of Holland (Algorithm 4,
    CDPNSME). They need no bound on the norm of a row, only a bound on a moment of
    each coordinate: rows are never rejected or rescaled for being large; each
    coordinate is clipped (cwme) or soft-truncated (noise_smoothing) at a scale τ,
    which is what bounds one row's influence.

    Privacy unit: one row (replacement neighbours; n and d public). The sensitivities
    are derived in :mod:`skdpsparse.mechanisms.heavy_tailed` (for cwme: a change of
    6τ/⌊n/m⌋ per coordinate for odd m and 3τ/⌊n/m⌋ for even m, a half and a quarter
    of the seed's bound; for noise_smoothing: 2S_c·τ/n, which corrects a too-small
    constant in the seed for c < 0.756).

    Parameters
    ----------
    epsilon : float, default=1.0
        ε > 0.
    delta : float or None, default=1e-6
        δ in [0, 1). With δ > 0 the Gaussian mechanism runs under ρ-zCDP with ρ the
        largest value whose tight zCDP→(ε, δ) conversion meets (ε, δ). ``0`` or
        ``None``: pure ε-DP with Laplace noise (``method="cwme"`` only).
    moment : float, default=2
        k > 1: every coordinate has a bounded k-th central moment (k ≥ 2 for
        ``noise_smoothing``). Enters only the automatic truncation.
    moment_bound : float, default=1.0
        The bound M on E|x_j − μ_j|^k (on E|x_j|^k for noise_smoothing, which shrinks
        towards 0). The guarantees of Theorem 4.1 are for M = 1; the automatic τ is
        multiplied by M^{1/k}. Enters only the automatic truncation.
    method : {"cwme", "noise_smoothing"}, default="cwme"
        ``"cwme"``: clip every coordinate into [c_j − 3τ, c_j + 3τ], average in m
        groups, take the coordinate-wise median, add noise. ``"noise_smoothing"``:
        (τ/n)Σ_i ψ_c(x_ij/τ) with ψ_c(a) = E φ(a(1 + N)), N ~ N(0, c), in closed
        form, plus Gaussian noise (δ > 0 only).
    truncation : "auto" or float, default="auto"
        τ. ``"auto"``: Corollary 4.2, τ = (√ρ n/√d)^{1/k} (δ > 0) or (εn/d)^{1/k}
        (δ = 0), times M^{1/k}; for noise_smoothing the k = 2 balance
        τ = (√ρ n/√d)^{1/2}·M^{1/k} (:func:`~skdpsparse.mechanisms.heavy_tailed.truncation_for`).
        It depends on (n, d, ε, δ, k, M) only, never on the data. Corollary 4.2's τ
        is chosen for the rate, not for the constant: on moderate n it is often far
        larger than the practical optimum (tune it with ``score``, paying for each fit).
    failure_prob : float, default=0.1
        β in (0, 1) of Theorem 4.1, which sets the number of groups.
    n_groups : "auto" or int, default="auto"
        m for cwme. ``"auto"``: ⌈4 log(2d/β)⌉ (Algorithm 3) rounded up to an even
        number, which halves the sensitivity while keeping m ≥ 4 log(2d/β); at most n.
    center : float or array-like of shape (n_features,), default=0.0
        Centre c of the clipping intervals of cwme, to be chosen without looking at
        the data (Theorem 4.1 needs |μ_j − c_j| ≤ 3τ for accuracy, not for privacy).
    smoothing_variance : float, default=1.0
        c ≥ 0, the variance of the multiplicative noise of noise_smoothing.
    shuffle : bool, default=True
        Assign the rows of cwme to groups by a random permutation (drawn from
        ``random_state``), so that sorted data does not bias the group means. The
        groups keep the sizes of the consecutive split: the sensitivity holds for
        every assignment, hence for the mixture (Rényi divergence and the ε-DP
        likelihood ratio are jointly quasi-convex). ``False``: consecutive rows.
    random_state : None, int or numpy.random.Generator, default=None
        ``None`` draws fresh noise from the operating system. A fixed seed makes the
        noise known to whoever knows the seed: use it for tests and reports only.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,)
        The private mean.
    truncation_ : float
        The τ used.
    n_groups_ : int
        The number of groups used (cwme only).
    noise_scale_ : float
        σ of the Gaussian noise or b of the Laplace noise, per coordinate.
    privacy_spent_ : ZCDP or PureDP
        ``ZCDP(ρ)`` for δ > 0, ``PureDP(ε)`` for δ = 0.
    approx_dp_spent_ : ApproxDP or PureDP
        The (ε, δ)-DP guarantee that ``privacy_spent_`` implies at the requested δ
        (never above the request).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has string feature names.

    Examples
    --------
    >>> from skdpsparse.datasets import make_heavy_tailed
    >>> from skdpsparse.mean import DPHeavyTailedMean
    >>> X, mu = make_heavy_tailed(20000, 5, random_state=0)
    >>> est = DPHeavyTailedMean(epsilon=1.0, truncation=3.0, random_state=0).fit(X)
    >>> bool(abs(est.mean_ - mu).max() < 0.5)
    True
    """

    _parameter_constraints = {
        "epsilon": [Interval("real", 0, None, closed="neither")],
        "delta": [Interval("real", 0, 1, closed="left"), None],
        "moment": [Interval("real", 1, None, closed="neither")],
        "moment_bound": [Interval("real", 0, None, closed="neither")],
        "method": [Options("cwme", "noise_smoothing")],
        "truncation": [Options("auto"), Interval("real", 0, None, closed="neither")],
        "failure_prob": [Interval("real", 0, 1, closed="neither")],
        "n_groups": [Options("auto"), Interval("integer", 1, None, closed="left")],
        "smoothing_variance": [Interval("real", 0, None, closed="left")],
        "shuffle": [InstanceOf(bool, np.bool_, description="bool")],
        # center is checked against n_features in fit; random_state by fit_random_source.
    }

    def __init__(self, epsilon=1.0, delta=1e-6, moment=2, moment_bound=1.0, method="cwme",
                 truncation="auto", failure_prob=0.1, n_groups="auto", center=0.0,
                 smoothing_variance=1.0, shuffle=True, random_state=None):
        self.epsilon = epsilon
        self.delta = delta
        self.moment = moment
        self.moment_bound = moment_bound
        self.method = method
        self.truncation = truncation
        self.failure_prob = failure_prob
        self.n_groups = n_groups
        self.center = center
        self.smoothing_variance = smoothing_variance
        self.shuffle = shuffle
        self.random_state = random_state

    def _resolve_truncation(self, n, d, delta):
        if self.truncation != "auto":
            return float(self.truncation)
        if self.method == "noise_smoothing":
            return truncation_for("cdpnsme", n, d, self.moment,
                                  rho=approx_dp_to_zcdp(self.epsilon, delta),
                                  moment_bound=self.moment_bound)
        if delta > 0:
            return truncation_for("cdpcwme", n, d, self.moment,
                                  rho=approx_dp_to_zcdp(self.epsilon, delta),
                                  moment_bound=self.moment_bound)
        return truncation_for("dpcwme", n, d, self.moment, epsilon=self.epsilon,
                              moment_bound=self.moment_bound)

    def fit(self, X, y=None):
        """Compute the private mean of the rows of ``X``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Sparse input stays sparse (implicit zeros are clipped like explicit ones).
        y : None
            Ignored.

        Returns
        -------
        self : DPHeavyTailedMean
        """
        validate_params(self, self._parameter_constraints)
        # Finiteness is checked by the compiled pass itself (a non-finite entry makes
        # its column NaN, and the mechanism raises before releasing anything): one read
        # of X instead of two.
        X, input_attrs = fit_input(self, X, ensure_all_finite=False)  # sets nothing
        n, d = X.shape
        delta = 0.0 if self.delta is None else float(self.delta)
        if self.method == "noise_smoothing":
            if delta == 0:
                raise ValueError("method='noise_smoothing' is a Gaussian (zCDP) mechanism: "
                                 f"delta must be positive, got delta={self.delta!r}.")
            if self.moment < 2:
                raise ValueError("method='noise_smoothing' needs a bound on a moment of "
                                 f"order k >= 2, got moment={self.moment!r}.")
        rng = fit_random_source(self.random_state, self, X)
        tau = self._resolve_truncation(n, d, delta)
        if self.method == "cwme":
            center = check_center(self.center, d)
            if self.n_groups == "auto":
                m = n_groups_for(d, self.failure_prob, n, even=True)
            else:
                m = min(int(self.n_groups), n)
            groups = rng.permutation(consecutive_groups(n, m)) if self.shuffle else None
            mean, budget, info = private_cwme(
                X, tau=tau, n_groups=m, epsilon=float(self.epsilon), delta=delta, rng=rng,
                center=center, groups=groups)
        else:
            mean, budget, info = private_noise_smoothing_mean(
                X, tau=tau, epsilon=float(self.epsilon), delta=delta, rng=rng,
                smoothing_variance=float(self.smoothing_variance))
        attrs = dict(input_attrs, mean_=mean, truncation_=tau,
                     noise_scale_=float(info["scale"]), privacy_spent_=budget,
                     approx_dp_spent_=info.get("approx_dp", budget))
        if self.method == "cwme":
            attrs["n_groups_"] = int(info["n_groups"])
        return release(self, attrs)  # charges first; a refused fit releases nothing
