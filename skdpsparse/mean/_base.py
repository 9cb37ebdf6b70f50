"""What every private mean estimator shares: centering by the released mean and a
score for model selection. Both are post-processing of ``mean_`` (no privacy cost
beyond the fit's; scoring on held-out rows is not private in those rows)."""

import numpy as np
import scipy.sparse as sp
from sklearn.base import OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ..utils._data import check_fit_input


def _dense(mean):
    """``mean_`` as a 1-D ndarray (it is a (1, d) sparse array with output="sparse")."""
    return mean.toarray().ravel() if sp.issparse(mean) else mean


class PrivateMeanMixin(OneToOneFeatureMixin, TransformerMixin):
    """``transform`` (center dense X by ``mean_``) and ``score`` (minus the mean
    squared distance to ``mean_``) for estimators whose fit sets ``mean_``.

    ``transform`` keeps the columns, so ``get_feature_names_out`` returns the input's
    names (``feature_names_in_``, or ``x0, x1, ...``) and ``set_output`` /
    ``sklearn.set_config(transform_output="pandas")`` give a DataFrame with them."""

    def transform(self, X):
        """Center dense ``X`` by the private mean.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Sparse input is refused: centering would make it dense.

        Returns
        -------
        X_centered : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        X = check_fit_input(self, X, reset=False)
        if sp.issparse(X):
            raise ValueError(
                "Cannot center sparse matrices: transform subtracts mean_ and would make "
                "X dense. Convert to a dense array first if that is intended."
            )
        return X - _dense(self.mean_).astype(X.dtype, copy=False)

    def score(self, X, y=None):
        """Minus the mean squared ℓ2 distance of the rows of ``X`` to ``mean_``.

        Higher is better, so ``GridSearchCV`` can tune the privacy and accuracy
        parameters with it. Each fit spends its own budget: a grid search over k
        settings costs the sum of the k budgets (see the privacy ledger).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        score : float
        """
        check_is_fitted(self)
        X = check_fit_input(self, X, reset=False)
        mu = _dense(self.mean_)
        if sp.issparse(X):
            row_sq = np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel()
        else:
            row_sq = np.einsum("ij,ij->i", X, X, dtype=np.float64)
        cross = np.asarray(X @ mu, dtype=np.float64).ravel()
        return -float(np.mean(row_sq - 2.0 * cross + mu @ mu))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
