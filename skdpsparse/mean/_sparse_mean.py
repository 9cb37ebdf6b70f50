"""DPSparseMeanEstimator: private means of sparse vectors."""

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.utils import assert_all_finite

from ..mechanisms.projection import row_bounds
from ..mechanisms.sparse_mean import (
    METHODS, _block_offsets, _project_nonnegative, choose_method, one_hot_block_total,
    plan_sparse_mean, sparse_mean,
)
from .._kernels.projections import project_blocks_simplex_nb
from ..utils import InstanceOf, Interval, Options, fit_random_source, validate_params
from ..utils._params import keyword_only_since
from ..utils._progress import VERBOSE_CONSTRAINT, Progress
from ..base import check_fit_params, fit_input, release
from ..distributed import distributed_fit
from ._base import PrivateMeanMixin


#: The former positional order of the parameters (by position: a FutureWarning until 0.2).
_LEGACY_ORDER = ("epsilon", "delta", "sparsity", "norm_bound", "method", "calibration",
                 "recovery", "nonnegative", "output", "solver_max_iter", "solver_tol",
                 "random_state")


class DPSparseMeanEstimator(PrivateMeanMixin, BaseEstimator):
    """Differentially private mean of sparse vectors.

    The default thresholds the dense noisy mean at the noise level (post-processing:
    the coordinates the noise alone could explain are set to 0), which in the sparse
    regime beats both the dense release and the zero vector
    (:mod:`skdpsparse.mechanisms.sparse_mean`). Also implements the projection
    mechanism and Gaussian ℓ1-recovery of Ghazi, Guzmán, Kamath, Kumar and
    Manurangsi (2024 v1), "Differentially private optimization with sparse gradients"
    (Algorithms 1 and 2, Theorems 3.2–3.4), whose error grows with s·log d rather
    than d when rows are s-sparse.

    **Privacy guarantee.** Protected: one row of ``X``. Neighbouring datasets differ by
    replacing one row (n and d public). Every row is first scaled into {‖x‖₂ ≤ L, ‖x‖₁ ≤
    L√s} (contribution bounding; rows are never dropped), so the mean moves by at most
    2L/n in ℓ2 and 2L√s/n in ℓ1 (Ghazi et al. 2024 v1, proofs of Theorems 3.2 and 3.3).
    δ > 0: discrete Gaussian noise for Δ₂ = 2L/n with σ from the tight zCDP→(ε, δ)
    conversion (Canonne, Kamath and Steinke 2020, "The discrete Gaussian for
    differential privacy", Theorem 14; ``calibration="classic"``: the paper's σ where it
    suffices), (ε, δ)-DP; δ = 0: discrete Laplace noise for Δ₁ = 2L√s/n, ε-DP. With
    ``one_hot_blocks`` (threshold, projection) negative entries are first set to 0, so
    two rows differ by at most √2·L (⟨x, x'⟩ ≥ 0 for nonnegative rows) and the
    Gaussian noise is for Δ₂ = √2·L/n, whatever the data.
    ``"l1_recovery"`` releases noisy measurements of the bounded mean instead (Theorem
    3.4 there; its sensitivity in :mod:`skdpsparse.mechanisms.l1_recovery`).
    Thresholding, the projections, basis pursuit and the ``"auto"`` choice (public
    numbers only) are post-processing. The float sums' rounding is charged to the noise
    (derivation page "Sensitivities: the library's proofs", section "Bounded mean").
    Assumptions: ``norm_bound``, ``sparsity`` and every other parameter chosen without
    looking at ``X``; ``random_state=None`` (a seed makes the noise known to whoever
    knows it); the sparsity only matters for accuracy, never for privacy (denser rows
    are scaled into the ℓ1 bound). Not covered: add/remove neighbours with n secret;
    several rows of one person (user-level privacy); side channels such as the fit's
    running time (thresholding and the solver's iterations touch only the noisy
    release).

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy loss ε > 0.
    delta : float or None, default=1e-6
        δ in [0, 1). ``0`` or ``None`` gives pure ε-DP (Laplace noise).
    sparsity : int or None, default=None
        s, the number of nonzeros a row may have; ``None`` means s = d. Rows with more
        ℓ1 mass than L√s are scaled down (Ghazi et al. 2024 v1, Remark 2.1).
    norm_bound : float, default=1.0
        L, the ℓ2 bound of a row.
    method : {"auto", "threshold", "projection", "l1_recovery", "gaussian", "laplace"}, \
            default="auto"
        ``"threshold"``: the dense release (Gaussian for δ > 0, Laplace for δ = 0),
        hard-thresholded at λ = σ√(2 ln d) (Gaussian) or b ln d (Laplace), then
        projected onto the ℓ1 ball of radius L√s and the ℓ2 ball of radius L.
        ``"projection"``: Algorithm 1, Laplace noise of scale 2L√s/(nε) (δ = 0) or
        Gaussian noise for ℓ2 sensitivity 2L/n (δ > 0), then projection onto the ℓ1 ball
        of radius L√s and the ℓ2 ball of radius L. ``"l1_recovery"``: Algorithm 2 with a
        subsampled randomized Hadamard sensing operator (δ > 0 only; see
        :mod:`skdpsparse.mechanisms.l1_recovery` for why its guarantee needs no RIP
        event). ``"gaussian"`` / ``"laplace"``: the dense baselines, same noise, no
        projection. ``"auto"``: among threshold, the projection and ℓ1-recovery,
        the one with the smallest error bound (the thresholding oracle inequality,
        Theorems 3.3–3.4) for (n, d, s, ε, δ, L), chosen without looking at the data
        (:func:`~skdpsparse.mechanisms.sparse_mean.choose_method`); the projection
        when ``one_hot_blocks`` is declared.
    calibration : {"analytic", "classic"}, default="analytic"
        Gaussian noise from the analytic Gaussian mechanism (Balle and Wang 2018; valid
        for every ε) or the seed's classic σ = Δ₂√(2 ln(1.25/δ))/ε (valid for ε < 1).
    recovery : {"denoising", "exact"}, default="denoising"
        For ``l1_recovery``: the seed's exact basis pursuit (Az = b) or basis pursuit
        denoising (‖Az − b‖₂ ≤ σ√m, σ the public noise scale), which is more accurate
        and faster on noisy measurements. Both are post-processing.
    nonnegative : bool, default=False
        Rows are declared nonnegative (one-hot categoricals, counts, tf-idf): the
        projection (and the thresholding) then also projects onto the nonnegative part
        of the ℓ1 ball, {v ≥ 0, Σ_j v_j ≤ L√s}, which contains the mean of such rows,
        so the error can only go down
        (the capped-simplex projection of :mod:`skdpsparse.mechanisms.sparse_mean`;
        post-processing, no privacy cost). Rows with negative entries are not
        rejected or changed: only the accuracy of the release depends on the
        declaration. Ignored by ``"gaussian"``, ``"laplace"`` and ``"l1_recovery"``.
    one_hot_blocks : array-like of int or None, default=None
        Rows declared one-hot: the sizes of the consecutive column blocks, one per
        encoded field, each row holding exactly one nonzero (``block_value``) in every
        block, e.g. ``[len(c) for c in OneHotEncoder(categories=cats).categories]``
        (the declared categories are public, as a schema is). They must add up to
        the number of features. With ``"threshold"``, ``"projection"`` (and
        ``"auto"``, which then takes the projection): (1) negative entries of the
        rows are set to 0 before the bounds (contribution bounding, rows are never
        refused), so two rows differ by at most √2·L in ℓ2 instead of 2L and the
        Gaussian noise is √2 smaller (δ > 0; the Laplace noise of δ = 0 is
        unchanged); (2) the release is projected onto the product of the blocks'
        simplices {v_b ≥ 0, Σ_j v_bj = t} (post-processing; t from ``block_value``,
        L and s). Privacy holds whatever the data; a false declaration (rows with
        negative entries, or not one nonzero per block) only costs accuracy: the
        clipped negatives bias the mean and the projection pulls it towards the
        declared simplices. Ignored by ``"gaussian"``, ``"laplace"`` and
        ``"l1_recovery"``.
    block_value : float, default=1.0
        v, the value of a declared row's nonzero in every block: 1 for
        ``OneHotEncoder``'s output, 1/√k for k blocks after a row ``Normalizer``
        (both give the same bounded rows when L ≤ 1). Each block of the bounded mean
        then sums to t = min(v, L/√k, L√s/k). Used only with ``one_hot_blocks``.
    output : {"dense", "sparse"}, default="dense"
        ``"sparse"``: ``mean_`` is a ``scipy.sparse.csr_array`` of shape (1, d) holding
        only the nonzeros (for very large d with threshold or projection, whose
        outputs have few nonzeros).
    solver_max_iter : int, default=500
        Iterations of the basis-pursuit solver (``l1_recovery``); post-processing.
    solver_tol : float, default=1e-4
        Relative tolerance of the basis-pursuit solver.
    verbose : bool or int, default=0
        ``True``/``1`` (or more): progress lines in the one format of the package
        (``[DPSparseMeanEstimator] plan: ...``): the method chosen and n, d, s (public
        numbers) before the data are summed, then the budget spent once the mean is
        released, with the basis-pursuit iterations of ``l1_recovery`` (post-processing
        of the released measurements, printed only after the release). A fit the
        ledger refuses prints no ``done`` line.
    random_state : None, int or numpy.random.Generator, default=None
        ``None`` draws fresh noise from the operating system. A fixed seed makes the
        noise known to whoever knows the seed: use it for tests and reports only.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,) or csr_array of shape (1, n_features)
        The private mean (sparse with ``output="sparse"``).
    method_ : str
        The method that actually ran: ``method`` resolved by ``"auto"``, and
        ``"gaussian"`` when ``"l1_recovery"`` falls back to the dense release (below
        its threshold d ≥ m ln² m, Algorithm 2).
    sparsity_ : int
        The s used (``sparsity`` capped at the number of features).
    privacy_spent_ : PureDP or ApproxDP
        The guarantee of this fit.
    n_iter_ : int
        Basis-pursuit iterations; only set when the compressed-sensing branch of
        ``l1_recovery`` ran.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has string feature names.

    Examples
    --------
    >>> from skdpsparse.datasets import make_sparse_vectors
    >>> from skdpsparse.mean import DPSparseMeanEstimator
    >>> X, _ = make_sparse_vectors(2000, 5000, 5, random_state=0)
    >>> est = DPSparseMeanEstimator(epsilon=1.0, delta=1e-6, sparsity=5,
    ...                             random_state=0).fit(X)
    >>> est.method_, str(est.privacy_spent_)
    ('threshold', '(1, 1e-06)-DP')

    One-hot rows with declared categories (public, as a schema is): one nonzero per
    field, so every block of the released mean is on its simplex, for every draw.

    >>> import numpy as np
    >>> from sklearn.preprocessing import OneHotEncoder
    >>> categories = [["a", "b", "c"], ["x", "y"]]
    >>> rows = np.random.default_rng(0).choice(["a", "b", "c"], size=(500, 1))
    >>> rows = np.hstack([rows, np.where(rows == "a", "x", "y")])
    >>> X = OneHotEncoder(categories=categories).fit_transform(rows)
    >>> est = DPSparseMeanEstimator(sparsity=2, norm_bound=1.0, random_state=0,
    ...                             one_hot_blocks=[len(c) for c in categories]).fit(X)
    >>> est.method_, bool(np.isclose(est.mean_[:3].sum(), 1 / np.sqrt(2)))
    ('projection', True)
    """

    _parameter_constraints = {
        "epsilon": [Interval("real", 0, None, closed="neither")],
        "delta": [Interval("real", 0, 1, closed="left"), None],
        "sparsity": [Interval("integer", 1, None, closed="left"), None],
        "norm_bound": [Interval("real", 0, None, closed="neither")],
        "method": [Options("auto", *METHODS)],
        "calibration": [Options("analytic", "classic")],
        "recovery": [Options("denoising", "exact")],
        "nonnegative": [InstanceOf(bool, np.bool_, description="bool")],
        "one_hot_blocks": [InstanceOf(list, tuple, np.ndarray,
                                      description="array-like of int"), None],
        "block_value": [Interval("real", 0, None, closed="neither")],
        "output": [Options("dense", "sparse")],
        "solver_max_iter": [Interval("integer", 1, None, closed="left")],
        "solver_tol": [Interval("real", 0, None, closed="neither")],
        "verbose": VERBOSE_CONSTRAINT,
        # random_state is validated by fit_random_source.
    }

    @keyword_only_since("0.2", _LEGACY_ORDER)
    def __init__(self, *, epsilon=1.0, delta=1e-6, sparsity=None, norm_bound=1.0,
                 method="auto", calibration="analytic", recovery="denoising",
                 nonnegative=False, one_hot_blocks=None, block_value=1.0, output="dense",
                 solver_max_iter=500, solver_tol=1e-4, verbose=0, random_state=None):
        self.epsilon = epsilon
        self.delta = delta
        self.sparsity = sparsity
        self.norm_bound = norm_bound
        self.method = method
        self.calibration = calibration
        self.recovery = recovery
        self.nonnegative = nonnegative
        self.one_hot_blocks = one_hot_blocks
        self.block_value = block_value
        self.output = output
        self.solver_max_iter = solver_max_iter
        self.solver_tol = solver_tol
        self.verbose = verbose
        self.random_state = random_state

    def fit(self, X, y=None, **fit_params):
        """Compute the private mean of the rows of ``X``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Sparse input stays sparse (never densified).
        y : None
            Ignored.
        **fit_params : dict
            Not supported: ``sample_weight`` (a weight changes the sensitivity the
            noise is calibrated to) and any other fit parameter raise
            :class:`~skdpsparse.exceptions.InvalidParameterError`.

        Returns
        -------
        self : DPSparseMeanEstimator
        """
        check_fit_params(self, fit_params)
        if (fitted := distributed_fit(self, X, y)) is not None:  # Dask or Spark input
            return self._declared_structure(fitted)
        validate_params(self, self._parameter_constraints)
        # sets nothing: release() does, after charging. The finiteness check is left
        # to the exact-sum kernel where it runs (one pass over X fewer, below).
        X, input_attrs = fit_input(self, X, ensure_all_finite=False)
        plan = self._plan(*X.shape)  # public numbers only, before the data are read
        method, s = plan.method, self._sparsity(X.shape[1])
        # Public numbers only before the release (n, d, s and the method chosen from
        # them); anything computed from the data waits until the ledger has charged.
        progress = Progress(self.verbose, type(self).__name__)
        progress.report("plan", detail=f"method={method}, n={X.shape[0]}, d={X.shape[1]}, "
                        f"s={s}, epsilon={self.epsilon}, delta={self._delta()}",
                        seconds=False)
        if not (sp.issparse(X) and method != "l1_recovery"):
            # Sparse input of the other methods is checked by the exact sums'
            # kernel in its pass (bounded_fixed_sum raises on NaN or infinity).
            assert_all_finite(X, input_name="X")
        mean, info = sparse_mean(X, plan, fit_random_source(self.random_state, self, X))
        method = plan.method_run  # "gaussian" when l1_recovery fell back (Algorithm 2)
        if self.output == "sparse":
            mean = sp.csr_array(mean.reshape(1, -1))
        attrs = dict(input_attrs, mean_=mean, method_=method, sparsity_=s,
                     privacy_spent_=plan.budget)
        if "solver" in info:
            attrs["n_iter_"] = int(info["solver"]["n_iter"])
        release(self, attrs)  # charges first; a refused fit releases nothing
        recovery = (f", {self.n_iter_} basis-pursuit iterations" if "solver" in info
                    else "")
        progress.report("done", detail=f"released ({method}{recovery}), privacy spent "
                        f"{plan.budget}")
        return self

    def _delta(self):
        return 0.0 if self.delta is None else float(self.delta)

    def _sparsity(self, d):
        return d if self.sparsity is None else min(int(self.sparsity), d)

    def _plan(self, n, d):
        """The fit's :class:`~skdpsparse.mechanisms.sparse_mean.SparseMeanPlan` from
        (n, d) and the parameters: public numbers only."""
        s, delta = self._sparsity(d), self._delta()
        method = self.method
        if method == "auto":
            method = ("projection" if self.one_hot_blocks is not None else
                      choose_method(n, d, s, self.epsilon, delta, self.norm_bound,
                                    calibration=self.calibration))
        if delta == 0 and method in ("gaussian", "l1_recovery"):
            raise ValueError(f"method={method!r} needs delta > 0; got delta={self.delta!r}.")
        if delta > 0 and method == "laplace":
            raise ValueError("method='laplace' is the pure-DP baseline: it needs "
                             f"delta=0, got delta={self.delta!r}.")
        return plan_sparse_mean(
            n, d, method=method, epsilon=float(self.epsilon), delta=delta,
            norm_bound=float(self.norm_bound), sparsity=s, calibration=self.calibration,
            recovery=self.recovery, max_iter=self.solver_max_iter, tol=self.solver_tol,
            nonnegative=bool(self.nonnegative), one_hot_blocks=self.one_hot_blocks,
            block_value=float(self.block_value))

    def _declared_structure(self, fitted):
        """``nonnegative`` and ``one_hot_blocks`` on a fit that did not apply them
        itself (the distributed release, whose rows are not clipped to be
        nonnegative: its noise is for 2L/n): the same post-processing of the released
        ``mean_``."""
        if fitted.method_ not in ("projection", "threshold") or not (
                self.nonnegative or self.one_hot_blocks is not None):
            return fitted
        mean = fitted.mean_
        dense = np.array(mean.toarray().ravel() if sp.issparse(mean) else mean,
                         dtype=np.float64)
        s, L = fitted.sparsity_, float(self.norm_bound)
        if self.one_hot_blocks is not None:
            offsets = np.asarray(_block_offsets(self.one_hot_blocks, dense.size))
            project_blocks_simplex_nb(dense, offsets, one_hot_block_total(
                offsets.size - 1, L, s, float(self.block_value)))
        else:
            _project_nonnegative(dense, row_bounds(L, s)[1], L)
        dense = dense.astype(np.asarray(mean.data if sp.issparse(mean) else mean).dtype)
        fitted.mean_ = sp.csr_array(dense.reshape(1, -1)) if sp.issparse(mean) else dense
        return fitted
