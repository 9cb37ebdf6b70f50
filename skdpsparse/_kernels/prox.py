"""Proximal maps of the usual regularizers, elementwise on 1-D arrays.

Convention: for a function :math:`h` and step :math:`t \\ge 0`,

.. math:: \\operatorname{prox}_{t h}(v) = \\arg\\min_x \\; t\\,h(x) + \\tfrac12 \\|x - v\\|_2^2 .

Each public function is a thin wrapper (input coercion, ``out=None``, argument
checks) around an ``@njit`` core of the same name with suffix ``_nb`` that takes
``out`` explicitly and can be called from other compiled code. Outputs keep the
input's float dtype unless ``out`` says otherwise; arithmetic is in float64. ``out``
may be the input itself for an in-place update.
"""

import math

import numpy as np
from numba import njit

from ._common import as_float_vector, check_nonnegative, prepare_out

__all__ = [
    "soft_threshold",
    "prox_l1",
    "prox_l2_squared",
    "prox_elastic_net",
    "soft_threshold_nb",
    "prox_l2_squared_nb",
    "prox_elastic_net_nb",
]


@njit(cache=True)
def soft_threshold_nb(v, t, out):
    """Compiled core of :func:`soft_threshold`; writes into ``out`` and returns it."""
    for i in range(v.shape[0]):
        x = np.float64(v[i])
        a = abs(x) - t
        out[i] = math.copysign(a, x) if a > 0.0 else 0.0
    return out


@njit(cache=True)
def prox_l2_squared_nb(v, t, out):
    """Compiled core of :func:`prox_l2_squared`; writes into ``out`` and returns it."""
    c = 1.0 / (1.0 + t)
    for i in range(v.shape[0]):
        out[i] = np.float64(v[i]) * c
    return out


@njit(cache=True)
def prox_elastic_net_nb(v, t, alpha, l1_ratio, out):
    """Compiled core of :func:`prox_elastic_net`; writes into ``out`` and returns it."""
    thresh = t * alpha * l1_ratio
    c = 1.0 / (1.0 + t * alpha * (1.0 - l1_ratio))
    for i in range(v.shape[0]):
        x = np.float64(v[i])
        a = abs(x) - thresh
        out[i] = math.copysign(a * c, x) if a > 0.0 else 0.0
    return out


def soft_threshold(v, t, out=None):
    """Soft-thresholding ``sign(v) * max(|v| - t, 0)``.

    Parameters
    ----------
    v : array-like of shape (n,)
    t : float
        Threshold, ``t >= 0``.
    out : ndarray of shape (n,), optional
        Where to write the result; may be ``v`` itself.

    Returns
    -------
    ndarray of shape (n,)
        Same dtype as ``v`` (float32 or float64) unless ``out`` is given.
    """
    v = as_float_vector(v)
    t = check_nonnegative(t, "t")
    return soft_threshold_nb(v, t, prepare_out(out, v))


def prox_l1(v, t, out=None):
    """Proximal map of :math:`t\\|x\\|_1`, i.e. soft-thresholding at ``t``.

    Parameters
    ----------
    v : array-like of shape (n,)
    t : float
        Step times penalty weight, ``t >= 0``.
    out : ndarray of shape (n,), optional
        Where to write the result; may be ``v`` itself.

    Returns
    -------
    ndarray of shape (n,)
    """
    return soft_threshold(v, t, out=out)


def prox_l2_squared(v, t, out=None):
    """Proximal map of :math:`\\tfrac{t}{2}\\|x\\|_2^2`, which is ``v / (1 + t)``.

    The penalty carries the factor 1/2 (ridge convention), so ``t`` is the step
    times the ridge weight: :math:`\\arg\\min_x \\tfrac t2\\|x\\|^2 + \\tfrac12\\|x-v\\|^2`.

    Parameters
    ----------
    v : array-like of shape (n,)
    t : float
        Finite, ``t >= 0``.
    out : ndarray of shape (n,), optional
        Where to write the result; may be ``v`` itself.

    Returns
    -------
    ndarray of shape (n,)
    """
    v = as_float_vector(v)
    t = check_nonnegative(t, "t", allow_inf=False)
    return prox_l2_squared_nb(v, t, prepare_out(out, v))


def prox_elastic_net(v, t, alpha, l1_ratio, out=None):
    """Proximal map of ``t`` times scikit-learn's elastic-net penalty.

    The penalty is :math:`\\alpha\\,(\\rho\\|x\\|_1 + \\tfrac{1-\\rho}{2}\\|x\\|_2^2)`
    with :math:`\\rho` = ``l1_ratio``, as in :class:`sklearn.linear_model.ElasticNet`.
    Coordinatewise optimality gives
    :math:`x = \\operatorname{soft}(v, t\\alpha\\rho) / (1 + t\\alpha(1-\\rho))`.

    Parameters
    ----------
    v : array-like of shape (n,)
    t : float
        Step size, finite and ``>= 0``.
    alpha : float
        Penalty weight, finite and ``>= 0``.
    l1_ratio : float
        In ``[0, 1]``; 1 is the lasso, 0 is ridge.
    out : ndarray of shape (n,), optional
        Where to write the result; may be ``v`` itself.

    Returns
    -------
    ndarray of shape (n,)
    """
    v = as_float_vector(v)
    t = check_nonnegative(t, "t", allow_inf=False)
    alpha = check_nonnegative(alpha, "alpha", allow_inf=False)
    l1_ratio = float(l1_ratio)
    if not 0.0 <= l1_ratio <= 1.0:
        raise ValueError(f"l1_ratio must be in [0, 1], got {l1_ratio}.")
    return prox_elastic_net_nb(v, t, alpha, l1_ratio, prepare_out(out, v))
