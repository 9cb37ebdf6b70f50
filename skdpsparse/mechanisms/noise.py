"""Laplace and Gaussian noise vectors drawn from a ``numpy.random.Generator``.

These are the only places noise is sampled; every mechanism calls them so that the
randomness policy (one Generator per fit, see :func:`skdpsparse.utils.check_generator`)
holds everywhere. The scale is decided by the caller from a stated sensitivity.
"""

import numpy as np


def _check_scale(scale, name):
    scale = float(scale)
    if not np.isfinite(scale) or scale < 0:
        raise ValueError(f"{name} must be non-negative and finite, got {scale}.")
    return scale


def laplace_noise(rng, scale, size):
    """Draw i.i.d. Laplace(0, ``scale``) noise (density exp(-|x|/b)/(2b), b = ``scale``).

    Parameters
    ----------
    rng : numpy.random.Generator
    scale : float
        The Laplace scale b; for ε-DP on a query of ℓ1 sensitivity Δ₁, b = Δ₁/ε
        (Dwork and Roth 2014, Thm 3.6; seed 002 Fact 2.3(a)).
    size : int or tuple of int

    Returns
    -------
    ndarray of float64
    """
    return rng.laplace(0.0, _check_scale(scale, "scale"), size=size)


def gaussian_noise(rng, sigma, size):
    """Draw i.i.d. N(0, σ²) noise, σ = ``sigma``.

    Parameters
    ----------
    rng : numpy.random.Generator
    sigma : float
        Standard deviation, calibrated by the caller (e.g. with
        :func:`skdpsparse.accounting.analytic_gaussian_sigma`).
    size : int or tuple of int

    Returns
    -------
    ndarray of float64
    """
    sigma = _check_scale(sigma, "sigma")
    return sigma * rng.standard_normal(size=size)


def add_noise_inplace(values, rng, kind, scale):
    """Add Laplace (``kind="laplace"``) or Gaussian noise to ``values`` in place.

    Avoids a d-length temporary for large d: noise is drawn in chunks. Gaussian noise
    is drawn into one reused chunk buffer (``standard_normal(out=...)``), scaled and
    added; the values equal those of :func:`gaussian_noise` for the same generator state.
    """
    values = np.asarray(values)
    if values.dtype != np.float64:
        raise TypeError("values must be a float64 array.")
    if kind not in ("laplace", "gaussian"):
        raise ValueError(f"kind must be 'laplace' or 'gaussian', got {kind!r}.")
    flat = values.reshape(-1)  # a copy if values is not contiguous: written back below
    if kind == "gaussian":
        sigma = _check_scale(scale, "sigma")
        chunk = 1 << 14  # a buffer that stays in cache
        buf = np.empty(min(chunk, flat.size))
        for start in range(0, flat.size, chunk):
            stop = min(start + chunk, flat.size)
            part = buf[: stop - start]
            rng.standard_normal(out=part)
            part *= sigma
            flat[start:stop] += part
    else:
        chunk = 1 << 20
        for start in range(0, flat.size, chunk):
            stop = min(start + chunk, flat.size)
            flat[start:stop] += laplace_noise(rng, scale, stop - start)
    if not np.may_share_memory(flat, values):
        values[...] = flat.reshape(values.shape)
    return values
