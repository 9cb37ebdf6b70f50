"""Input validation shared by the estimators (thin wrappers over scikit-learn's)."""

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
        # Duplicate entries would corrupt row norms, hence contribution bounds.
        X_out = X_out.copy()
        X_out.sum_duplicates()
        out = X_out if y is None else (X_out, out[1])
    return out
