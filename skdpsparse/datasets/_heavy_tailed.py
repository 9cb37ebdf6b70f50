"""Dense heavy-tailed vectors whose central moments are known exactly.

The private mean estimators for heavy-tailed data (Kamath, Liu and Zhang, *Improved
rates for differentially private stochastic convex optimization with heavy-tailed
data*) assume a bound on the k-th central moment of every coordinate,
``E|X_j - mu_j|^k <= B``, and take ``B`` as a hyperparameter. The generators here draw
each coordinate as ``mu_j + scale * Z`` with ``Z`` symmetric about zero, so that
:func:`central_moment_bound` gives that ``B`` exactly.
"""

import math

import numpy as np
from scipy.special import gammaln

from ..utils import check_generator
from ._validation import check_int, check_option, check_real, check_vector

__all__ = ["make_heavy_tailed", "central_moment_bound"]

_DISTRIBUTIONS = ("student_t", "pareto", "lognormal")


def central_moment_bound(distribution, tail_parameter, k, scale=1.0):
    """Exact k-th absolute central moment ``E|X_j - mu_j|^k`` of one coordinate.

    For the distributions of :func:`make_heavy_tailed`, where
    ``X_j - mu_j = scale * Z`` with ``Z`` symmetric about zero:

    * ``"student_t"`` (``nu = tail_parameter`` degrees of freedom):
      ``E|Z|^k = nu^(k/2) Gamma((k+1)/2) Gamma((nu-k)/2) / (sqrt(pi) Gamma(nu/2))``
      for ``k < nu``;
    * ``"pareto"`` (random sign times Lomax, i.e. Pareto II, of shape
      ``a = tail_parameter``, numpy's ``Generator.pareto``):
      ``E|Z|^k = Gamma(k+1) Gamma(a-k) / Gamma(a)`` for ``k < a``;
    * ``"lognormal"`` (random sign times ``exp(sigma * N(0, 1))`` with
      ``sigma = tail_parameter``): ``E|Z|^k = exp(k^2 sigma^2 / 2)``, finite for all k.

    The result is multiplied by ``scale ** k``.

    Parameters
    ----------
    distribution : {"student_t", "pareto", "lognormal"}
        The law of the coordinates.
    tail_parameter : float
        Degrees of freedom (``"student_t"``), shape (``"pareto"``) or log-scale
        (``"lognormal"``); positive.
    k : float
        Order of the moment, positive (not necessarily an integer).
    scale : float, default=1.0
        The scale of the coordinates, positive.

    Returns
    -------
    float
        The moment; ``inf`` when ``k >= tail_parameter`` for ``"student_t"`` and
        ``"pareto"`` (the moment does not exist) or when it overflows a float.

    Examples
    --------
    >>> from skdpsparse.datasets import central_moment_bound
    >>> round(central_moment_bound("student_t", 3.0, 2), 12)  # variance nu / (nu - 2)
    3.0
    >>> central_moment_bound("pareto", 3.0, 3)
    inf
    """
    check_option(distribution, "distribution", _DISTRIBUTIONS)
    tail_parameter = check_real(tail_parameter, "tail_parameter", low=0.0, low_inclusive=False)
    k = check_real(k, "k", low=0.0, low_inclusive=False)
    scale = check_real(scale, "scale", low=0.0, low_inclusive=False)
    if distribution == "lognormal":
        log_moment = 0.5 * (k * tail_parameter) ** 2
    elif k >= tail_parameter:
        return math.inf
    elif distribution == "student_t":
        nu = tail_parameter
        log_moment = (0.5 * k * math.log(nu) + gammaln(0.5 * (k + 1.0))
                      + gammaln(0.5 * (nu - k)) - 0.5 * math.log(math.pi) - gammaln(0.5 * nu))
    else:  # pareto
        a = tail_parameter
        log_moment = gammaln(k + 1.0) + gammaln(a - k) - gammaln(a)
    log_moment += k * math.log(scale)
    return math.exp(log_moment) if log_moment < 709.0 else math.inf


def make_heavy_tailed(n_samples, n_features, *, distribution="student_t", tail_parameter=3.0,
                      loc=None, scale=1.0, random_state=None):
    """Dense i.i.d. vectors with heavy-tailed, symmetric coordinates around ``loc``.

    Every entry is ``X[i, j] = loc[j] + scale * Z[i, j]`` with ``Z`` i.i.d. and
    symmetric about zero, so ``loc`` is the exact population mean (and the median of
    every coordinate):

    * ``"student_t"``: ``Z`` is Student-t with ``tail_parameter`` degrees of freedom;
      moments of order ``k < tail_parameter`` are finite.
    * ``"pareto"``: ``Z = sign * L``, a fair random sign times a Lomax (Pareto II)
      variable of shape ``tail_parameter`` (numpy's ``Generator.pareto``), whose
      density is ``a / (1 + |z|) ** (a + 1) / 2``; moments of order ``k < a`` are finite.
    * ``"lognormal"``: ``Z = sign * exp(tail_parameter * N(0, 1))``; all moments are
      finite but grow like ``exp(k^2 sigma^2 / 2)``.

    :func:`central_moment_bound` gives ``E|X_j - loc_j|^k`` exactly.

    Parameters
    ----------
    n_samples : int
        Number of rows, at least 1.
    n_features : int
        Number of columns, at least 1.
    distribution : {"student_t", "pareto", "lognormal"}, default="student_t"
        The law of ``Z``.
    tail_parameter : float, default=3.0
        Degrees of freedom (``"student_t"``) or shape (``"pareto"``), which must be
        > 1 so that the mean exists; log-scale ``sigma > 0`` for ``"lognormal"``.
    loc : array-like of shape (n_features,) or float, default=None
        The population mean. ``None`` draws a fixed random direction of ℓ2 norm exactly
        1 from ``random_state`` (before the samples, so it does not depend on
        ``n_samples``). A float is broadcast to every coordinate.
    scale : float, default=1.0
        Multiplies ``Z``, positive.
    random_state : None, int or numpy.random.Generator, default=None
        Source of randomness. An int gives the same output on every call.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), dtype float64
        The samples.
    true_mean : ndarray of shape (n_features,), dtype float64
        The exact population mean, ``loc``.

    Examples
    --------
    >>> from skdpsparse.datasets import make_heavy_tailed
    >>> X, mu = make_heavy_tailed(1000, 5, distribution="pareto", random_state=0)
    >>> X.shape, round(float((mu ** 2).sum()), 12)
    ((1000, 5), 1.0)
    """
    rng = check_generator(random_state)
    n_samples = check_int(n_samples, "n_samples", min_value=1)
    n_features = check_int(n_features, "n_features", min_value=1)
    check_option(distribution, "distribution", _DISTRIBUTIONS)
    if distribution == "lognormal":
        tail_parameter = check_real(tail_parameter, "tail_parameter", low=0.0,
                                    low_inclusive=False)
    else:
        tail_parameter = check_real(tail_parameter, "tail_parameter", low=1.0,
                                    low_inclusive=False)
    scale = check_real(scale, "scale", low=0.0, low_inclusive=False)
    if loc is None:
        loc = rng.standard_normal(n_features)
        loc /= np.linalg.norm(loc)
    else:
        loc = check_vector(loc, "loc", n_features, allow_scalar=True)

    shape = (n_samples, n_features)
    if distribution == "student_t":
        X = rng.standard_t(tail_parameter, size=shape)
    else:
        if distribution == "pareto":
            X = rng.pareto(tail_parameter, size=shape)
        else:
            X = rng.lognormal(0.0, tail_parameter, size=shape)
        negative = rng.random(shape) < 0.5
        np.negative(X, out=X, where=negative)
    if scale != 1.0:
        X *= scale
    X += loc
    return X, loc.copy()
