"""A matrix-free compressed-sensing operator: the subsampled randomized Hadamard transform.

Ghazi et al. (2024), Section 3.1 and Algorithm 2, measure the mean with a dense Gaussian
matrix
:math:`A \\sim \\mathcal N(0, 1/m)^{m\\times d}`, which cannot be stored at
:math:`d = 10^7`. :class:`SubsampledHadamardSensing` replaces it by

.. math:: A = \\sqrt{d_{pad}/m}\\; P_\\Omega\\, H\\, D \\quad \\text{restricted to the first } d
   \\text{ columns},

where :math:`d_{pad} = 2^{\\lceil \\log_2 d \\rceil}`, :math:`D` is a diagonal of independent
uniform signs, :math:`H` is the orthonormal Walsh–Hadamard matrix of size :math:`d_{pad}`
and :math:`P_\\Omega` keeps :math:`m` distinct rows drawn uniformly without replacement.
Every entry of :math:`A` is :math:`\\pm 1/\\sqrt m` (the Gaussian matrix's variance), so
:math:`\\mathbb E\\, A^T A = I_d`, and on the padded space

.. math:: A A^T = (d_{pad}/m)\\, I_m ,

which makes the projection onto :math:`\\{z : Az = b\\}` closed form (the basis-pursuit
solver of :mod:`skdpsparse._solvers.basis_pursuit` relies on it).

Restricted isometry. :math:`P_\\Omega H` is a randomly subsampled bounded orthonormal
system; with :math:`m \\gtrsim s \\log^2 s \\log d` rows it is an :math:`s`-restricted
isometry with high probability (Rudelson and Vershynin, "On sparse reconstruction from
Fourier and Gaussian measurements", CPAM 2008; the bound improved by Haviv and Regev,
"The restricted isometry property of subsampled Fourier matrices", GAFA seminar notes
2017). The random signs :math:`D` make the transform of any fixed vector spread out
(Ailon and Chazelle 2009), which the uniform sampling of rows then preserves. These
are the guarantees accuracy rests on; **privacy does not**: the mechanism scales each
example's measurement vector to a fixed ℓ2 norm (:meth:`clipped_measurement_sum`),
which bounds the sensitivity for every draw of :math:`A`.

Cost. :meth:`matvec` and :meth:`rmatvec` take one fast Walsh–Hadamard transform of
length :math:`d_{pad}` (:math:`O(d \\log d)`); a vector with few nonzeros is measured
entry-wise in :math:`O(m)` per 12 nonzeros without a transform. Memory: the signs
(one byte per padded coordinate), :math:`\\Omega`, and one reusable work buffer of
:math:`d_{pad}` float64 allocated on first use (134 MB at :math:`d = 10^7`).
"""

import math
import numbers

import numpy as np
import scipy.sparse as sp

from .._kernels.fwht import fwht_scatter, fwht_signed
from .._kernels.srht_measurements import (
    GROUP_BITS,
    csr_clipped_measurement_sum,
    dense_clipped_measurement_sum,
    sparse_measure,
)
from ..utils._random import check_generator

__all__ = ["SubsampledHadamardSensing"]


def _next_pow2(n):
    return 1 << max(int(n) - 1, 0).bit_length()


class SubsampledHadamardSensing:
    """Subsampled randomized Hadamard sensing matrix :math:`A \\in \\mathbb R^{m\\times d}`.

    **Privacy guarantee.** None needed for the operator: it is drawn from ``rng``
    alone, independently of the data, and may be published (privacy does not rest on
    A being secret). Its one method that reads data, :meth:`clipped_measurement_sum`,
    releases nothing itself: it returns Σᵢ clip(A sᵢxᵢ), which replacing one row
    changes by at most 2·``clip`` in ℓ2 for every draw of A (each term is scaled to
    norm at most ``clip``; a term whose measurement overflows contributes nothing),
    for a caller to add noise to, and a count ``n_clipped`` that depends on the data
    and must not be released. Assumptions: ``clip`` finite (``inf`` disables the
    bound); each ``row_scales`` entry public or a function of its own row only.
    Not covered: the floating-point error of the scaling and of the n-term sum (the
    bound 2·``clip`` is in exact arithmetic; a caller adding noise charges the
    rest), and the errors raised on invalid input (the caller validates first).

    Parameters
    ----------
    n_features : int
        d, the dimension of the measured vectors (at most 2**33).
    n_measurements : int
        m, the number of measurements, ``1 <= m <= d_pad``.
    rng : numpy.random.Generator, int or None
        Draws the signs :math:`D` (first, ``d_pad`` of them) and then the rows
        :math:`\\Omega`. Data-independent: the operator may be published.

    Attributes
    ----------
    n_features, n_measurements : int
    d_pad : int
        Smallest power of two ``>= n_features``.
    signs : ndarray of shape (d_pad,), int8
        The diagonal of :math:`D` (±1).
    omega : ndarray of shape (m,), int64
        The selected Hadamard rows, sorted increasingly (row order of :math:`A`
        is irrelevant to both the RIP and the privacy analysis; sorted rows make the
        gathers cache-friendly).
    gram_scale : float
        ``d_pad / m``: :math:`A_{pad} A_{pad}^T = ` ``gram_scale`` :math:`\\cdot I_m` for
        the operator extended to all ``d_pad`` columns.
    entry_scale : float
        ``1/sqrt(m)``, the magnitude of every entry.

    Notes
    -----
    Not thread-safe: :meth:`matvec`, :meth:`rmatvec` and :meth:`project_affine`
    share one work buffer.

    Examples
    --------
    >>> import numpy as np
    >>> op = SubsampledHadamardSensing(1000, 64, np.random.default_rng(0))
    >>> op.d_pad, op.gram_scale
    (1024, 16.0)
    >>> z = np.zeros(1000); z[[3, 500]] = [1.0, -2.0]
    >>> y = op.matvec(z)
    >>> bool(np.allclose(y, op.toarray() @ z))
    True
    """

    def __init__(self, n_features, n_measurements, rng):
        d = _check_int(n_features, "n_features", 1)
        d_pad = _next_pow2(d)
        if d_pad > 2**33:
            raise ValueError(f"n_features = {d} is above the supported 2**33.")
        m = _check_int(n_measurements, "n_measurements", 1)
        if m > d_pad:
            raise ValueError(
                f"n_measurements = {m} exceeds the {d_pad} rows of the padded transform.")
        rng = check_generator(rng)
        signs = rng.integers(0, 2, size=d_pad, dtype=np.int8)
        signs *= 2
        signs -= 1
        self.n_features = d
        self.n_measurements = m
        self.d_pad = d_pad
        self.signs = signs
        self.omega = np.sort(rng.choice(d_pad, size=m, replace=False)).astype(np.int64)
        self.gram_scale = d_pad / m
        self.entry_scale = 1.0 / math.sqrt(m)
        # Factor between the orthonormal transform H and A: A = sqrt(d_pad/m) P H D.
        self._scale = math.sqrt(d_pad / m)
        self._buf = None

    # ---------------------------------------------------------------- basics
    @property
    def shape(self):
        """``(m, d)``."""
        return (self.n_measurements, self.n_features)

    def __repr__(self):
        return (f"{type(self).__name__}(n_features={self.n_features}, "
                f"n_measurements={self.n_measurements}, d_pad={self.d_pad})")

    def _buffer(self):
        if self._buf is None:
            self._buf = np.empty(self.d_pad, dtype=np.float64)
        return self._buf

    def release_buffer(self):
        """Free the work buffer (it is re-allocated on the next transform)."""
        self._buf = None

    def toarray(self):
        """The explicit dense :math:`m \\times d` matrix, from the entry formula.

        :math:`A_{jk} = D_k (-1)^{\\operatorname{popcount}(\\omega_j \\& k)}/\\sqrt m`.
        For tests and small problems only (refuses more than 5·10⁷ entries).
        """
        m, d = self.shape
        if m * d > 5 * 10**7:
            raise ValueError(f"refusing to build a dense {m} x {d} matrix.")
        k = np.arange(d, dtype=np.int64)
        parity = np.bitwise_count(self.omega[:, None] & k[None, :]) & 1
        return (1.0 - 2.0 * parity) * (self.signs[:d] * self.entry_scale)

    # ---------------------------------------------------------------- products
    def matvec(self, z, out=None):
        """:math:`A z` for ``z`` of length d (dense array), via one transform.

        Returns
        -------
        out : ndarray of shape (m,), float64
        """
        z = self._check_vector(z, self.n_features, "z")
        buf = fwht_signed(self._buffer(), z, self.signs)
        return self._gather(buf, out)

    def matvec_padded(self, v, out=None):
        """:math:`A_{pad} v` for ``v`` of length ``d_pad`` (all padded columns)."""
        v = self._check_vector(v, self.d_pad, "v")
        buf = fwht_signed(self._buffer(), v, self.signs)
        return self._gather(buf, out)

    def _gather(self, buf, out):
        if out is None:
            out = np.empty(self.n_measurements)
        np.take(buf, self.omega, out=out)
        out *= self._scale
        return out

    def matvec_sparse(self, indices, values, out=None):
        """:math:`A z` for a sparse ``z`` given by ``indices`` (< d) and ``values``,
        without a transform: about ``m * ceil(nnz/12)`` table look-ups."""
        indices = np.asarray(indices)
        if indices.dtype.kind not in "iu":
            raise ValueError("indices must be integers.")
        values = np.asarray(values, dtype=np.float64)
        if indices.shape != values.shape or indices.ndim != 1:
            raise ValueError("indices and values must be 1-D of the same length.")
        if len(indices) and (indices.min() < 0 or indices.max() >= self.n_features):
            raise ValueError(f"indices must lie in [0, {self.n_features}).")
        if out is None:
            out = np.empty(self.n_measurements)
        return sparse_measure(indices, values, self.signs, self.omega, self.entry_scale,
                              out)

    def sparse_matvec_is_cheaper(self, nnz):
        """Whether :meth:`matvec_sparse` with ``nnz`` nonzeros beats :meth:`matvec`.

        Cost model calibrated on one x86-64 machine (d = 10⁷, m = 32 000): about
        1.7 ns per measurement and group of 12 nonzeros, against about 0.33 ns per
        entry and level of the transform (0.13 s at ``d_pad = 2**24``).
        """
        groups = -(-int(nnz) // GROUP_BITS)
        sparse_cost = 1.7 * self.n_measurements * groups
        dense_cost = 0.33 * self.d_pad * max(1, self.d_pad.bit_length() - 1) + 1e4
        return sparse_cost < dense_cost

    def adjoint_transform(self, y):
        """The unsigned, unscaled adjoint: :math:`t = H P_\\Omega^T y` (length ``d_pad``).

        :math:`A^T y = ` ``coef * signs[:d] * t[:d]`` with ``coef = sqrt(d_pad/m)``
        (returned as second value). ``t`` is the operator's work buffer: valid until
        the next product. Lets a solver fuse the signs and scale into its own pass.

        Returns
        -------
        t : ndarray of shape (d_pad,)
        coef : float
        """
        y = self._check_vector(y, self.n_measurements, "y")
        buf = fwht_scatter(self._buffer(), self.omega, y)
        return buf, self._scale

    def rmatvec(self, y, out=None):
        """:math:`A^T y` (length d).

        Returns
        -------
        out : ndarray of shape (d,), float64
        """
        t, coef = self.adjoint_transform(y)
        d = self.n_features
        if out is None:
            out = np.empty(d)
        np.multiply(t[:d], self.signs[:d], out=out)
        out *= coef
        return out

    def rmatvec_padded(self, y, out=None):
        """:math:`A_{pad}^T y` (length ``d_pad``, padded coordinates included)."""
        t, coef = self.adjoint_transform(y)
        if out is None:
            out = np.empty(self.d_pad)
        np.multiply(t, self.signs, out=out)
        out *= coef
        return out

    def project_affine(self, v, b, out=None):
        """Euclidean projection of a padded vector onto :math:`\\{v : A_{pad} v = b\\}`.

        :math:`P(v) = v - A_{pad}^T (A_{pad} v - b) / ` ``gram_scale``, exact because
        :math:`A_{pad} A_{pad}^T = ` ``gram_scale`` :math:`I`.

        Parameters
        ----------
        v : ndarray of shape (d_pad,)
        b : ndarray of shape (m,)
        out : ndarray of shape (d_pad,) or None
            May be ``v`` itself.

        Returns
        -------
        out : ndarray of shape (d_pad,)
        """
        v = self._check_vector(v, self.d_pad, "v")
        b = self._check_vector(b, self.n_measurements, "b")
        r = self.matvec_padded(v)
        r -= b
        r /= self.gram_scale
        t, coef = self.adjoint_transform(r)
        if out is None:
            out = np.empty(self.d_pad)
        # out = v - coef * signs * t, without a d_pad-sized temporary besides t.
        np.multiply(t, self.signs, out=t)
        t *= coef
        np.subtract(v, t, out=out)
        return out

    # ---------------------------------------------------------------- privacy step
    def clipped_measurement_sum(self, X, row_scales, clip):
        """:math:`\\sum_i \\operatorname{clip}(A\\, (s_i x_i))`, each term scaled to ℓ2 norm
        at most ``clip``.

        Parameters
        ----------
        X : ndarray or scipy.sparse matrix of shape (n, d)
            Rows to measure; float32 or float64. Sparse input is used as CSR
            (duplicates add up).
        row_scales : array-like of shape (n,)
            Factor applied to each row before measuring (contribution bounding),
            finite and ``>= 0``.
        clip : float
            ℓ2 bound on each row's measurement vector, ``> 0`` (``inf`` disables it).
            Replacing one row changes the sum by at most ``2 * clip`` in ℓ2 norm for
            every draw of the operator.

        Returns
        -------
        total : ndarray of shape (m,), float64
        n_clipped : int
            How many rows the clipping scaled down. Depends on the data: for
            diagnostics only, never to be released.
        """
        clip = float(clip)
        if not clip > 0:
            raise ValueError(f"clip must be > 0, got {clip}.")
        if sp.issparse(X):
            X = sp.csr_matrix(X)
            n, d = X.shape
            data = X.data
            if data.dtype != np.float32 and data.dtype != np.float64:
                data = data.astype(np.float64)
        else:
            X = np.asarray(X)
            if X.ndim != 2:
                raise ValueError(f"X must be 2-D, got shape {X.shape}.")
            if X.dtype != np.float32 and X.dtype != np.float64:
                X = X.astype(np.float64)
            n, d = X.shape
            data = X
        if d != self.n_features:
            raise ValueError(f"X has {d} columns, the operator {self.n_features}.")
        if not np.isfinite(data).all():
            raise ValueError("X contains NaN or infinite values.")
        row_scales = np.asarray(row_scales, dtype=np.float64)
        if row_scales.shape != (n,):
            raise ValueError(f"row_scales must have shape ({n},), got {row_scales.shape}.")
        if not (np.isfinite(row_scales).all() and (row_scales >= 0).all()):
            raise ValueError("row_scales must be finite and >= 0.")
        if n == 0:
            return np.zeros(self.n_measurements), 0
        if sp.issparse(X):
            return csr_clipped_measurement_sum(
                X.indptr, X.indices, data, row_scales, self.signs, self.omega,
                self.entry_scale, clip)
        return dense_clipped_measurement_sum(
            np.ascontiguousarray(X), row_scales, self.signs, self.omega,
            self.entry_scale, clip)

    # ---------------------------------------------------------------- helpers
    @staticmethod
    def _check_vector(v, length, name):
        v = np.asarray(v)
        if v.dtype != np.float64:
            v = v.astype(np.float64)
        if v.shape != (length,):
            raise ValueError(f"{name} must have shape ({length},), got {v.shape}.")
        return v


def _check_int(value, name, low):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {value!r}.")
    value = int(value)
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}.")
    return value
