"""What the one-vs-rest private linear classifiers share: the declared label set and
the prediction methods on the released ``coef_`` / ``intercept_`` (post-processing)."""

import math
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.special import expit
from sklearn.utils.metaestimators import available_if

from ..accounting import ApproxDP, PureDP

#: The quantile that a bound declared ``"private"`` releases (rows above it are
#: scaled or clipped to it, never dropped).
BOUND_QUANTILE = 0.95


def row_l2_norms(X):
    """ℓ2 norm of every row of a dense or CSR matrix."""
    if sp.issparse(X):
        return np.sqrt(np.asarray(sp.csr_matrix(X).multiply(X).sum(axis=1)).ravel())
    return np.linalg.norm(np.asarray(X, dtype=np.float64), axis=1)


def far_bound_probability(n, epsilon, n_points):
    """An upper bound on the chance that :func:`private_bound` draws a grid point whose
    score is at least n − ⌈0.95n⌉ + 1 (every point above the largest value has that
    score): n_points·exp(−ε(n − ⌈0.95n⌉ + 1)/4) (the exponential mechanism with Δu = 2
    puts mass ∝ exp(−εu/4) on each point and at least exp(0) on the minimum). Public
    numbers only."""
    r = int(math.ceil(BOUND_QUANTILE * n))
    return n_points * math.exp(-float(epsilon) * (n - r + 1) / 4.0)


def private_bound(values, epsilon, rng):
    """An ε-DP upper bound at the 0.95-quantile of nonnegative ``values`` (one per row).

    The exponential mechanism (McSherry and Talwar 2007; Dwork and Roth 2014, Theorem
    3.10) over the positive points g_1 < ... < g_G of the public geometric grid
    (:func:`~skdpsparse.mechanisms.quantile.geometric_grid`: 2^-20 to 2^40, 8 points
    per octave), with r = ⌈0.95·n⌉ (public), C_k = #{v ≤ g_k}, C_0 = #{v < g_1} and
    the score

        u_k = max(r − C_k, 0) + max(C_{k−1} − r + 1, 0),

    which is 0 exactly at the smallest grid point with at least r values at or below
    it. Replacing one row moves every count by at most 1, so u moves by at most 2
    (Δu = 2): one draw is ε-DP. Unlike the plain score |C_k − r|, this one has a
    unique minimum when the quantile falls on an atom (ratings: 15 % of them are 5
    stars, and every grid point above 5 would tie, so the plain score draws bounds up
    to 2^40 uniformly among them).
    """
    from ..mechanisms.quantile import geometric_grid, rank_counts
    from ..mechanisms.sparse_exponential import exponential_mechanism

    grid = geometric_grid()
    grid = grid[grid > 0]
    values = np.asarray(values, dtype=np.float64).reshape(-1, 1)
    n = values.shape[0]
    r = int(math.ceil(BOUND_QUANTILE * n))
    far = far_bound_probability(n, epsilon, grid.size)
    if far > 0.01:  # n and ε only: the same warning on every dataset of n rows
        warnings.warn(
            f"A private bound (norm_bound or label_bound='private') drawn at "
            f"n*epsilon = {n * float(epsilon):.4g} may land octaves above the data "
            f"(probability up to {min(far, 1.0):.2g}; every grid point above the data "
            f"scores {n - r + 1}); declare the bound from public knowledge, or raise "
            f"bound_fraction.", UserWarning, stacklevel=3)
    at_or_below = rank_counts(values, grid)[0]
    below_first = rank_counts(values, grid[:1], strict=True)[0, 0]
    previous = np.concatenate([[below_first], at_or_below[:-1]])
    scores = (np.maximum(r - at_or_below, 0) + np.maximum(previous - r + 1, 0))
    return float(grid[exponential_mechanism(scores.astype(np.float64), 2.0, float(epsilon),
                                            rng)])


def compose_with_bounds(eps_bounds, budget):
    """ε_B-DP private bounds followed by a fit of guarantee ``budget``: their sum
    (basic composition, Dwork and Roth 2014, Theorem 3.16), without an event (the
    ledger then composes the bare budget, the safe side)."""
    if isinstance(budget, PureDP):
        return PureDP(eps_bounds) + PureDP(budget.epsilon)
    return ApproxDP(eps_bounds, 0.0) + ApproxDP(budget.epsilon, budget.delta)


def one_vs_rest_targets(y, classes):
    """±1 targets, one row per problem: ``classes[1]`` against the rest for two
    classes, each class against the rest otherwise (every label of ``y`` is one of
    ``classes``: :func:`declared_classes` checked it)."""
    positives = classes[1:] if classes.size == 2 else classes
    return np.where(np.asarray(y)[None, :] == positives[:, None], 1.0, -1.0)


class OneVsRestClassifierMixin:
    """Predictions from ``self._decision(X)``, the (n_samples, n_problems) margins."""

    def decision_function(self, X):
        """Margins: shape (n_samples,) for two classes, else (n_samples, n_classes).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray
        """
        scores = self._decision(X)
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def predict(self, X):
        """Predicted labels (the sign for two classes, else the largest margin).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        scores = self.decision_function(X)
        index = (scores > 0).astype(np.intp) if scores.ndim == 1 else scores.argmax(axis=1)
        return self.classes_[index]

    def _has_proba(self):
        return self.loss == "logistic"

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Class probabilities of the logistic model (``loss="logistic"`` only).

        Two classes: the sigmoid of the margin. More: the one-vs-rest sigmoids,
        normalized to sum to one (as scikit-learn's one-vs-rest logistic regression).
        A bounded domain caps the margins, hence how confident the probabilities can be.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        p = expit(self.decision_function(X))
        if p.ndim == 1:
            return np.column_stack([1.0 - p, p])
        return p / p.sum(axis=1, keepdims=True)

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        return np.log(self.predict_proba(X))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.poor_score = True  # noise by design
        return tags
