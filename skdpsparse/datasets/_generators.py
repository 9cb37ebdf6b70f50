"""Synthetic sparse, embedding-like data with an exactly known population.

All generators here share one model of a sparse row, the shape of the embedding tables
of Ghazi et al., *Differentially private optimization with sparse gradients*: the
``n_features`` columns are split into ``n_nonzeros`` disjoint, contiguous *fields*
(think categorical features, each one-hot encoded), and every row picks exactly one
column in every field, independently across fields and rows. A row therefore has
exactly ``n_nonzeros`` distinct nonzero columns, and the probability ``p_j`` that
column ``j`` is picked is known in closed form, so population quantities such as the
mean are exact rather than estimated.
"""

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from ..utils import check_generator
from ._validation import check_int, check_option, check_real, check_vector

__all__ = ["make_sparse_vectors", "make_sparse_regression", "make_sparse_classification"]

_COLUMN_DISTRIBUTIONS = ("uniform", "power_law")
_FEATURE_TAILS = ("light", "heavy")
_INT32_MAX = np.iinfo(np.int32).max
_CHUNK_ENTRIES = 2**18  # entries per block in the sampler; part of the seed -> output map


# --------------------------------------------------------------------------- model
def _power_law_rank_probabilities(field_size, exponent):
    """Probabilities of ranks ``0..field_size-1`` of the discretized power law.

    The rank is ``floor(Y)`` for ``Y`` on ``[0, m)`` with density proportional to
    ``(1 + y) ** -exponent``, so ``p_r = (F(r + 1) - F(r))`` with the closed-form CDF
    ``F``. Written with ``expm1``/``log1p`` so that the tail, where consecutive values
    of ``F`` nearly coincide, keeps full relative precision.
    """
    r1 = np.arange(1, field_size + 1, dtype=np.float64)  # r + 1
    step = np.log1p(1.0 / r1)  # log((r + 2) / (r + 1))
    log_top = np.log1p(float(field_size))  # log(m + 1)
    if exponent == 1.0:
        return step / log_top
    b = 1.0 - exponent
    return np.exp(b * np.log(r1)) * np.expm1(b * step) / np.expm1(b * log_top)


def _power_law_ranks(u, field_size, exponent):
    """Inverse-CDF sampling of the discretized power law, in place on ``u``."""
    log_top = np.log1p(float(field_size))
    if exponent == 1.0:
        u *= log_top
    else:
        b = 1.0 - exponent
        u *= np.expm1(b * log_top)
        np.log1p(u, out=u)
        u /= b
    np.expm1(u, out=u)
    ranks = u.astype(np.int64)  # u >= 0, so truncation is floor
    np.minimum(ranks, field_size - 1, out=ranks)  # guard the rounding at u -> 1
    return ranks


class _FieldModel:
    """The column model: field layout, column probabilities and the sampler.

    Fields ``0 .. rem-1`` have ``base + 1`` columns and the others ``base`` columns,
    where ``base, rem = divmod(n_features, n_nonzeros)``; fields are contiguous and in
    column order, so the columns a row picks are already sorted.
    """

    def __init__(self, n_features, n_nonzeros, column_distribution, exponent, rng):
        self.n_features = n_features
        self.n_nonzeros = n_nonzeros
        self.power_law = column_distribution == "power_law" and exponent != 0.0
        self.exponent = exponent
        base, rem = divmod(n_features, n_nonzeros)
        # (first field, number of fields, field size, first column) per size class.
        self.groups = []
        if rem:
            self.groups.append((0, rem, base + 1, 0))
        self.groups.append((rem, n_nonzeros - rem, base, rem * (base + 1)))
        self.probabilities = np.empty(n_features, dtype=np.float64)
        self.tables = []
        for _, k, m, first in self.groups:
            block = self.probabilities[first : first + k * m].reshape(k, m)
            if not self.power_law:
                block[:] = 1.0 / m
                self.tables.append(None)
                continue
            # Rank r of field f is column table[f, r]: a fixed random permutation per
            # field, so that the popular columns are spread over the field.
            perm = rng.permuted(np.tile(np.arange(m, dtype=np.int64), (k, 1)), axis=1)
            table = first + m * np.arange(k, dtype=np.int64)[:, None] + perm
            self.tables.append(table.ravel())
            self.probabilities[table] = _power_law_rank_probabilities(m, exponent)

    def field_blocks(self, vector):
        """Yield views ``(k, m)`` of ``vector`` (one row per field) by size class."""
        for _, k, m, first in self.groups:
            yield vector[first : first + k * m].reshape(k, m)

    def sample_columns(self, n_samples, rng, dtype):
        """Return the ``(n_samples, n_nonzeros)`` sorted column indices of the rows.

        Rows are drawn in blocks of about ``_CHUNK_ENTRIES`` entries so the temporaries
        stay in cache; the block size is a function of ``n_nonzeros`` only, so a seed
        still determines the output.
        """
        cols = np.empty((n_samples, self.n_nonzeros), dtype=dtype)
        chunk = max(1, _CHUNK_ENTRIES // self.n_nonzeros)
        plan = []
        for (f0, k, m, first), table in zip(self.groups, self.tables):
            starts = m * np.arange(k, dtype=np.int64)
            plan.append((f0, k, m, starts + first, starts,
                         None if table is None else table.astype(dtype)))
        for a in range(0, n_samples, chunk):
            b = min(n_samples, a + chunk)
            for f0, k, m, col_starts, rank_starts, table in plan:
                if table is None:
                    local = rng.integers(0, m, size=(b - a, k), dtype=np.int64)
                    local += col_starts
                    cols[a:b, f0 : f0 + k] = local
                else:
                    ranks = _power_law_ranks(rng.random((b - a, k)), m, self.exponent)
                    ranks += rank_starts
                    cols[a:b, f0 : f0 + k] = table[ranks]
        return cols


def _index_dtype(n_samples, n_features, n_nonzeros):
    if n_features <= _INT32_MAX and n_samples * n_nonzeros <= _INT32_MAX:
        return np.int32
    return np.int64


def _build_model(n_samples, n_features, n_nonzeros, column_distribution,
                 power_law_exponent, rng):
    n_samples = check_int(n_samples, "n_samples", min_value=1)
    n_features = check_int(n_features, "n_features", min_value=1)
    n_nonzeros = check_int(n_nonzeros, "n_nonzeros", min_value=1)
    if n_nonzeros > n_features:
        raise ValueError(
            f"n_nonzeros must be <= n_features, got n_nonzeros={n_nonzeros} > "
            f"n_features={n_features}."
        )
    check_option(column_distribution, "column_distribution", _COLUMN_DISTRIBUTIONS)
    exponent = check_real(power_law_exponent, "power_law_exponent", low=0.0)
    model = _FieldModel(n_features, n_nonzeros, column_distribution, exponent, rng)
    return n_samples, model


def _csr(cols, values, n_features):
    n_samples, n_nonzeros = cols.shape
    indptr = np.arange(0, n_samples * n_nonzeros + 1, n_nonzeros, dtype=cols.dtype)
    X = sp.csr_matrix((values, cols.ravel(), indptr), shape=(n_samples, n_features))
    # Columns are distinct and increasing in every row by construction.
    X.has_sorted_indices = True
    X.has_canonical_format = True
    return X


_SPARSE_ROW_DOC = """column_distribution : {"uniform", "power_law"}, default="uniform"
        How each field picks its column. ``"uniform"``: every column of the field
        equally likely. ``"power_law"``: a Zipf-like law; the column of rank ``r``
        (``r = 0`` the most popular) has probability proportional to
        ``(r + 2) ** (1 - a) - (r + 1) ** (1 - a)`` (``log((r + 2) / (r + 1))`` for
        ``a = 1``), with ``a = power_law_exponent``. This is the law of the integer
        part of a continuous power law with density ``~ (1 + y) ** -a`` on ``[0, m)``,
        hence ``p_r ~ (r + 1) ** -a`` for large ranks, and it can be sampled exactly in
        O(1) per entry by inverting its CDF. Ranks are mapped to columns by a random
        permutation per field, drawn once from ``random_state``, so the popular columns
        are spread over the field rather than packed at its start.
    power_law_exponent : float, default=1.0
        The exponent ``a >= 0`` of the power law (``0`` gives the uniform law; ``1`` is
        the classical Zipf exponent). Ignored when ``column_distribution="uniform"``."""


# --------------------------------------------------------------------------- public
def make_sparse_vectors(n_samples, n_features, n_nonzeros, *, column_distribution="uniform",
                        power_law_exponent=1.0, norm=1.0, random_state=None):
    """Sparse embedding-like vectors with a known population mean.

    The columns are split into ``n_nonzeros`` disjoint contiguous fields (with
    ``base, rem = divmod(n_features, n_nonzeros)``, the first ``rem`` fields have
    ``base + 1`` columns and the others ``base``). Each row picks one column in every
    field, independently, and puts the value ``norm / sqrt(n_nonzeros)`` there. Every
    row thus has exactly ``n_nonzeros`` distinct nonzero columns and ℓ2 norm ``norm``
    (up to rounding), and the population mean is
    ``true_mean[j] = p_j * norm / sqrt(n_nonzeros)``, with ``p_j`` the probability that
    column ``j`` is picked in its field.

    Parameters
    ----------
    n_samples : int
        Number of rows, at least 1.
    n_features : int
        Number of columns, at least ``n_nonzeros``.
    n_nonzeros : int
        Number of nonzero entries of every row (the number of fields), at least 1.
    {sparse_row_doc}
    norm : float, default=1.0
        The ℓ2 norm of every row, positive.
    random_state : None, int or numpy.random.Generator, default=None
        Source of randomness for the column permutations and the rows. An int gives
        the same output on every call.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, n_features), dtype float64
        In canonical format: indices sorted and distinct within every row.
    true_mean : ndarray of shape (n_features,), dtype float64
        The exact population mean ``E[x]`` of the distribution the rows are drawn
        from (not the sample mean of ``X``), up to floating-point rounding. It depends
        on the seed (through the permutations) but not on ``n_samples``.

    Examples
    --------
    >>> from skdpsparse.datasets import make_sparse_vectors
    >>> X, mu = make_sparse_vectors(1000, 64, 4, random_state=0)
    >>> X.shape, X.nnz
    ((1000, 64), 4000)
    >>> float(abs(mu.sum() - 2.0)) < 1e-12  # 4 fields, each of mass 1 / sqrt(4)
    True
    """
    rng = check_generator(random_state)
    n_samples, model = _build_model(n_samples, n_features, n_nonzeros, column_distribution,
                                    power_law_exponent, rng)
    norm = check_real(norm, "norm", low=0.0, low_inclusive=False)
    s = model.n_nonzeros
    value = norm / np.sqrt(s)
    dtype = _index_dtype(n_samples, model.n_features, s)
    cols = model.sample_columns(n_samples, rng, dtype)
    X = _csr(cols, np.full(n_samples * s, value), model.n_features)
    return X, model.probabilities * value


def _feature_values(n_entries, n_nonzeros, feature_tail, tail_parameter, rng):
    """Values of the nonzero entries: ``1/sqrt(s)`` or heavy-tailed magnitudes."""
    if feature_tail == "light":
        return np.full(n_entries, 1.0 / np.sqrt(n_nonzeros))
    values = np.abs(rng.standard_t(tail_parameter, size=n_entries))
    values *= np.sqrt((tail_parameter - 2.0) / tail_parameter / n_nonzeros)
    return values


def _check_features(feature_tail, tail_parameter):
    check_option(feature_tail, "feature_tail", _FEATURE_TAILS)
    return check_real(tail_parameter, "tail_parameter", low=2.0, low_inclusive=False)


_FEATURES_DOC = """feature_tail : {"light", "heavy"}, default="light"
        Values of the nonzero entries. ``"light"``: all equal to
        ``1 / sqrt(n_nonzeros)``, so every row has unit ℓ2 norm. ``"heavy"``:
        ``|T| * sqrt((nu - 2) / nu) / sqrt(n_nonzeros)`` with ``T`` Student-t with
        ``nu = tail_parameter`` degrees of freedom, i.i.d.; the magnitudes have unit
        second moment, so ``E ||x||^2 = 1`` as in the light case, but row norms are
        unbounded and only moments of order below ``nu`` are finite.
    tail_parameter : float, default=3.0
        Degrees of freedom ``nu > 2`` of the heavy-tailed magnitudes. Validated but
        unused when ``feature_tail="light"``."""


def make_sparse_regression(n_samples, n_features, n_nonzeros, *, noise=0.1,
                           feature_tail="light", tail_parameter=3.0, coef=None,
                           coef_norm=1.0, column_distribution="uniform",
                           power_law_exponent=1.0, random_state=None):
    """Sparse linear regression ``y = X @ coef + noise * N(0, 1)``.

    The rows of ``X`` follow the field model of :func:`make_sparse_vectors`; the
    values of their nonzero entries are set by ``feature_tail``. There is no intercept.

    Parameters
    ----------
    n_samples : int
        Number of rows, at least 1.
    n_features : int
        Number of columns, at least ``n_nonzeros``.
    n_nonzeros : int
        Number of nonzero entries of every row, at least 1.
    noise : float, default=0.1
        Standard deviation of the Gaussian noise added to the targets, >= 0.
    {features_doc}
    coef : array-like of shape (n_features,), default=None
        The true coefficients. ``None`` draws a Gaussian direction from
        ``random_state`` (before the rows, so it does not depend on ``n_samples``) and
        scales it to ℓ2 norm ``coef_norm``.
    coef_norm : float, default=1.0
        The ℓ2 norm of the drawn coefficients, >= 0; ignored when ``coef`` is given.
        Note that a unit-norm ``coef`` spread over all columns gives the signal
        ``X @ coef`` a standard deviation of only about ``coef_norm / sqrt(n_features)``
        with light features; raise ``coef_norm`` (e.g. to ``sqrt(n_features)``) for a
        signal of unit scale.
    {sparse_row_doc}
    random_state : None, int or numpy.random.Generator, default=None
        Source of randomness. An int gives the same output on every call.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, n_features), dtype float64
        Canonical CSR, exactly ``n_nonzeros`` distinct columns per row.
    y : ndarray of shape (n_samples,), dtype float64
        The targets.
    coef : ndarray of shape (n_features,), dtype float64
        The coefficients that generated ``y``.

    Examples
    --------
    >>> from skdpsparse.datasets import make_sparse_regression
    >>> X, y, coef = make_sparse_regression(200, 50, 5, noise=0.0, random_state=0)
    >>> bool(abs(X @ coef - y).max() < 1e-12)
    True
    """
    rng = check_generator(random_state)
    n_samples, model = _build_model(n_samples, n_features, n_nonzeros, column_distribution,
                                    power_law_exponent, rng)
    d, s = model.n_features, model.n_nonzeros
    noise = check_real(noise, "noise", low=0.0)
    tail_parameter = _check_features(feature_tail, tail_parameter)
    if coef is None:
        coef_norm = check_real(coef_norm, "coef_norm", low=0.0)
        coef = rng.standard_normal(d)
        coef *= coef_norm / np.linalg.norm(coef)
    else:
        coef = check_vector(coef, "coef", d)
    cols = model.sample_columns(n_samples, rng, _index_dtype(n_samples, d, s))
    X = _csr(cols, _feature_values(n_samples * s, s, feature_tail, tail_parameter, rng), d)
    y = X @ coef
    if noise > 0:
        y += noise * rng.standard_normal(n_samples)
    return X, y, coef


def make_sparse_classification(n_samples, n_features, n_nonzeros, *, separation=5.0,
                               feature_tail="light", tail_parameter=3.0, coef=None,
                               column_distribution="uniform", power_law_exponent=1.0,
                               random_state=None):
    """Sparse binary classification from a logistic model.

    ``P(y = 1 | x) = expit(x @ coef)`` exactly, with the rows of ``X`` from the field
    model of :func:`make_sparse_vectors`. Labels are noisy through the logistic link
    only; there is no intercept.

    Parameters
    ----------
    n_samples : int
        Number of rows, at least 1.
    n_features : int
        Number of columns, at least ``n_nonzeros``.
    n_nonzeros : int
        Number of nonzero entries of every row, at least 1.
    separation : float, default=5.0
        Population standard deviation of the logit ``x @ coef`` for the drawn
        coefficients, >= 0 (ignored when ``coef`` is given). Larger is easier: with a
        roughly Gaussian logit of standard deviation ``t`` the Bayes accuracy
        ``E[expit(|x @ coef|)]`` is about 0.84 for ``t = 3``, 0.89 for ``t = 5`` and
        0.93 for ``t = 8``; the default gives 0.85-0.90 with light features. Heavy
        features put more of the logit near zero, which lowers the accuracy when rows
        have few nonzeros (about 0.85 for ``n_nonzeros = 4``, 0.78 for 1).
    {features_doc}
    coef : array-like of shape (n_features,), default=None
        The true coefficients, used as given. ``None`` draws a Gaussian vector from
        ``random_state``, centers it within every field under the column probabilities
        (so ``E[x @ coef] = 0``, which balances the classes unless a few columns
        carry most of the mass, as with one power-law field) and scales
        it so that the logit has standard deviation ``separation`` exactly. It is drawn
        before the rows, so it does not depend on ``n_samples``. If every
        field has a single column all rows are equal, the logit is constant and the
        drawn ``coef`` is zero.
    {sparse_row_doc}
    random_state : None, int or numpy.random.Generator, default=None
        Source of randomness. An int gives the same output on every call.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, n_features), dtype float64
        Canonical CSR, exactly ``n_nonzeros`` distinct columns per row.
    y : ndarray of shape (n_samples,), dtype int64
        Labels in ``{{0, 1}}``.
    coef : ndarray of shape (n_features,), dtype float64
        The coefficients of the logistic model that generated ``y``; their norm is
        about ``separation * sqrt(n_features)`` with uniform columns, since a unit-norm
        row spread over the fields can only see a small part of ``coef``.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsparse.datasets import make_sparse_classification
    >>> X, y, coef = make_sparse_classification(5000, 100, 4, random_state=0)
    >>> bool(0.85 < np.mean((X @ coef > 0) == y) < 0.95)
    True
    """
    rng = check_generator(random_state)
    n_samples, model = _build_model(n_samples, n_features, n_nonzeros, column_distribution,
                                    power_law_exponent, rng)
    d, s = model.n_features, model.n_nonzeros
    tail_parameter = _check_features(feature_tail, tail_parameter)
    if coef is None:
        separation = check_real(separation, "separation", low=0.0)
        coef = rng.standard_normal(d)
        for c, p in zip(model.field_blocks(coef), model.field_blocks(model.probabilities)):
            c -= (c * p).sum(axis=1, keepdims=True)
        # Fields are independent and each contributes value * coef[J_f] with
        # E[value^2] = 1 / s, so Var(x @ coef) = sum_j p_j coef_j^2 / s after centering.
        std = np.sqrt(np.dot(model.probabilities, coef * coef) / s)
        coef = coef * (separation / std) if std > 0 else np.zeros(d)
    else:
        coef = check_vector(coef, "coef", d)
    cols = model.sample_columns(n_samples, rng, _index_dtype(n_samples, d, s))
    X = _csr(cols, _feature_values(n_samples * s, s, feature_tail, tail_parameter, rng), d)
    y = (rng.random(n_samples) < expit(X @ coef)).astype(np.int64)
    return X, y, coef


for _func in (make_sparse_vectors, make_sparse_regression, make_sparse_classification):
    if _func.__doc__ is not None:  # docstrings are stripped under python -OO
        _func.__doc__ = _func.__doc__.format(
            sparse_row_doc=_SPARSE_ROW_DOC, features_doc=_FEATURES_DOC)
del _func
