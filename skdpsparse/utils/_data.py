"""Input validation shared by the estimators (thin wrappers over scikit-learn's).

The fit-time steps that touch the estimator (reading the data without setting
anything, and the release after the charge) are in :mod:`skdpsparse.base`.
"""

import numpy as np
from sklearn.utils.validation import validate_data


def check_fit_input(estimator, X, y=None, *, reset=True, accept_sparse=True, **kwargs):
    """Validate ``X`` (and ``y``) the house way; sparse input becomes canonical CSR.

    NaN or infinite values raise ``ValueError`` (malformed data, not a privacy
    question); float32 is kept, other dtypes become float64.
    """
    common = dict(
        accept_sparse="csr" if accept_sparse else False,
        dtype=[np.float64, np.float32],
        ensure_all_finite=True,
        reset=reset,
    )
    common.update(kwargs)
    if y is None:
        out = validate_data(estimator, X, **common)
        X_out = out
    else:
        out = validate_data(estimator, X, y, **common)
        X_out = out[0]
    if hasattr(X_out, "has_canonical_format") and not X_out.has_canonical_format:
        X_out = as_canonical_csr(X_out)
        out = X_out if y is None else (X_out, out[1])
    return out


def check_supervised_input(estimator, X, y, *, reset=True, **kwargs):
    """:func:`check_fit_input` for estimators that need ``y`` (a missing ``y`` raises
    scikit-learn's "requires y to be passed" error); returns ``(X, y)``."""
    if y is None:
        validate_data(estimator, X, None, reset=reset)  # raises the standard message
    return check_fit_input(estimator, X, y, reset=reset, **kwargs)


def as_canonical_csr(X):
    """``X`` as CSR without duplicate entries (copying only when needed).

    Duplicate entries would make row norms, and so every contribution bound and
    sensitivity computed from them, wrong.
    """
    import scipy.sparse as sp

    if not (sp.issparse(X) and X.format == "csr"):
        X = sp.csr_matrix(X)
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    return X
