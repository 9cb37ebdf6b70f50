"""PrivateParameterSelection: tune a private estimator at the price of about one fit.

The private answer to "tune ε and s with GridSearchCV": a grid search pays for every
candidate, fold and refit (see :mod:`skdpsparse.ledger`); private selection with
random stopping (Liu and Talwar 2019; Ghazi et al. (2024 v2) Algorithm 5, Theorem 6.1) pays a
constant multiple of one run, whatever the number of runs.
"""

import copy
import time
from collections.abc import Callable, Mapping

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.model_selection import ParameterGrid
from sklearn.utils import get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .._privacy_spent import SELECTION_MARK, check_private_steps
from ..accounting import ZCDP, ApproxDP, PureDP, zcdp_to_epsilon
from ..ledger import _charges_suspended
from ..base import check_fit_params, release
from ..distributed import distributed_fit
from ..mechanisms.private_selection import (
    gamma_for_failure_prob,
    plan_random_stopping,
    random_stopping,
)
from ..utils import InstanceOf, Interval, Options, fit_random_source, validate_params
from ..utils._progress import VERBOSE_CONSTRAINT, Progress
from ._selection_scoring import resolve_scoring

__all__ = ["PrivateParameterSelection"]


def _names(params, leaf):
    return [k for k in params if k == leaf or k.endswith("__" + leaf)]


def _privacy_names(estimator):
    """(epsilon name, delta name or None, random_state names) of an estimator."""
    params = estimator.get_params(deep=True)
    eps = _names(params, "epsilon")
    if len(eps) != 1:
        raise ValueError(
            f"estimator must have exactly one 'epsilon' parameter (possibly nested, e.g. "
            f"'clf__epsilon'), the one private step whose budget is set per run; "
            f"{type(estimator).__name__} has {eps or 'none'}.")
    delta = eps[0][: -len("epsilon")] + "delta"
    return eps[0], (delta if delta in params else None), _names(params, "random_state")


def _verbose_names(estimator):
    """The ``verbose`` parameters of an estimator (nested ones too, e.g. a Pipeline's
    and its steps'): the runs are fitted with all of them False."""
    return _names(estimator.get_params(deep=True), "verbose")


def _owner(estimator, eps_name):
    """The (fitted) object whose parameter ``eps_name`` is, e.g. a Pipeline's step."""
    prefix = eps_name[: -len("epsilon")].removesuffix("__")
    return estimator.get_params(deep=True)[prefix] if prefix else estimator


def _within(spent, epsilon, delta):
    """True if the budget an inner fit reports is within (epsilon, delta)."""
    tol = 1 + 1e-9
    if isinstance(spent, PureDP):
        return spent.epsilon <= epsilon * tol
    if isinstance(spent, ApproxDP):
        return spent.epsilon <= epsilon * tol and spent.delta <= delta * tol
    if isinstance(spent, ZCDP):
        return delta > 0 and zcdp_to_epsilon(spent.rho, delta) <= epsilon * tol
    return False


def _best_has(attr):
    def check(self):
        obj = self.best_estimator_ if hasattr(self, "best_estimator_") else self.estimator
        getattr(obj, attr)  # raises AttributeError when missing
        return True
    return check


class PrivateParameterSelection(MetaEstimatorMixin, BaseEstimator):
    """Private hyperparameter selection by random stopping (Ghazi et al. 2024 v2 Algorithm 5).

    Each run draws a setting of ``param_grid`` uniformly at random, fits a clone of
    ``estimator`` on all of ``(X, y)`` with the per-run budget (its ``epsilon`` and
    ``delta`` are set to it), and scores it on the same data by a mean of per-example
    losses clipped into [0, B] plus Laplace noise. After each run the search stops with
    probability γ (at most K runs); the setting and model with the lowest noisy score
    so far are kept. Everything released — ``best_estimator_`` and ``best_params_`` —
    is (ε, δ)-DP in total.

    **Privacy guarantee.** Protected: one row (x, y), under replacement neighbours
    (n, ``param_grid``, the scorer and its declared range are public), the
    relation of the inner estimator's own guarantee. Each run is a pair (fit, score)
    of budget (ε₁, δ₁): the fit gets (1 − f)·ε₁ and δ₁, the score f·ε₁ (Laplace
    noise for the score's sensitivity: B/n for a mean of n per-example losses clipped
    into [0, B], (high − low)/k for a scikit-learn scorer on k disjoint chunks, each
    clipped into ``score_range``; :ref:`derivation_sensitivities`, "Selection
    scores"), f = ``score_fraction``. δ > 0: K = ⌈ln(2/δ)/γ⌉ runs at most, δ₁ = (δ/(4K))², and
    Liu–Talwar Thm 3.4 gives (3ε₁ + 3√(2δ₁), (√2/4 + 1/2)·δ) ≤ (ε, δ), with
    ε₁ = ε/6 as in Ghazi et al. (2024 v2), Theorem 6.1 (``budget_split="paper"``, total
    ε/2 + 3√2·δ/(4K)) or ε₁ = (ε − 3√(2δ₁))/3 (``"tight"``, total ε); both need δ ≤ ε/10. δ = 0:
    untruncated pure random stopping (LT19 Thm 3.2), ε₁ = ε/3, total 3ε₁ = ε.
    See :func:`~skdpsparse.mechanisms.private_selection.split_budget_for_random_stopping`.
    Drawing the setting uniformly makes every run the same mechanism, as LT19
    requires (cycling through the grid would not). Not released, because the
    guarantee does not cover them: the number of runs (given κ = k the choice is a
    best-of-k), the scores, and the inner fits' noise seeds (``random_state`` of
    ``best_estimator_`` is reset to None: the seed would reveal the noise).
    Derivation: :ref:`derivation_private_selection`. Assumptions: every inner fit is
    within the per-run budget under the same neighbouring relation (checked through
    its ``privacy_spent_`` before anything is released) and draws its noise from the
    256-bit seed it is given; a scorer that raises or warns on a chunk counts as its
    worst score, so no exception or warning depends on one row; the settings and
    the stopping coins are data-independent draws from a secret key
    (``random_state=None``). Not covered: the number of runs (which the fit's
    duration and this search's own ``verbose`` output also reveal; the runs are
    fitted with every ``verbose`` of ``estimator`` set to False, so that no inner
    progress line counts them), the noise when ``random_state`` is fixed, and any release of ``estimator`` made outside this search.

    Ledger: the search charges its total once (:func:`~skdpsparse.ledger.charge_budget`)
    and the inner fits, made in this thread with charging suspended, are not charged
    (they are part of that total). Each inner fit's own ``privacy_spent_`` must be
    within the per-run budget, else the search raises before releasing anything.

    Parameters
    ----------
    estimator : estimator object
        A private estimator with one ``epsilon`` parameter (nested names such as
        ``clf__epsilon`` in a Pipeline are found), optionally ``delta`` next to it, and
        a fitted ``privacy_spent_``. Every other step that is fit on the data must be
        stateless (``Normalizer``, ``FunctionTransformer``, ``HashingVectorizer``, a
        ``OneHotEncoder`` with declared categories, ...; the list is in
        :func:`skdpsparse.privacy_spent`): a step that learns from the data without
        a privacy guarantee (e.g. ``StandardScaler``, whose ``mean_`` would expose an
        outlier) is refused with a ``ValueError`` before any fit, for every setting
        of ``param_grid``. Its ``predict`` must be row-wise (prediction i depends on
        row i only; not checked).
    param_grid : dict or list of dicts
        As in ``GridSearchCV``; must not set the privacy parameters or a
        ``random_state`` (runs need fresh, secret noise).
    epsilon : float, default=1.0
        Total ε > 0.
    delta : float or None, default=1e-6
        Total δ in [0, 1), at most ε/10. ``0`` or ``None``: pure ε-DP (the inner
        estimator is then fit with ``delta=0``).
    scoring : str, scorer or callable, default="accuracy"
        What each run is judged by on the training data. Per-example losses, whose
        mean has sensitivity B/n: ``"accuracy"`` (the 0-1 loss, B = 1),
        ``"neg_mean_squared_error"`` and ``"neg_mean_absolute_error"`` (the error
        clipped to B = ``score_bound``), or a callable ``loss(y, y_pred)`` returning one
        loss per example (clipped to [0, ``score_bound``]; NaN counts as the bound).
        Or any scikit-learn scorer: a name from :func:`sklearn.metrics.get_scorer_names`
        (``"f1"``, ``"roc_auc"``, ``"r2"``, ...) or an object from
        :func:`sklearn.metrics.make_scorer` (e.g. ``make_scorer(f1_score)``), which is
        evaluated by subsample and aggregate: on ``score_chunks`` disjoint chunks of
        the rows, each chunk's score clipped into ``score_range``, sensitivity
        (high − low)/k (see :mod:`skdpsparse.model_selection._selection_scoring`).
        Everything is checked before the first fit.
    score_bound : float, default=1.0
        B of the error scorings and of a per-example callable; ignored otherwise.
    score_range : (float, float), default=(0.0, 1.0)
        (low, high) into which a scorer's chunk scores are clipped; the default is the
        range of accuracy, F1, precision, recall and ROC AUC. Set it for others, e.g.
        ``(-1.0, 1.0)`` for ``"r2"``. Ignored for per-example losses.
    score_chunks : "auto" or int, default="auto"
        k, the number of chunks of a scorer: ``"auto"`` takes as many as keep at least
        50 rows each, at most 1000 (from n only, which is public).
    gamma : "auto" or float, default="auto"
        Stopping probability γ in (0, 1]. ``"auto"``:
        :func:`~skdpsparse.mechanisms.private_selection.gamma_for_failure_prob`
        (``failure_prob``, success_prob=1/m) for m settings, so that each setting is
        drawn at least once with probability ≥ 1 − β/2. The expected number of fits
        is about 1/γ (≈ 2(m − 1)/β): set γ to trade runtime against that chance.
    failure_prob : float, default=0.1
        β in (0, 1), used by ``gamma="auto"``.
    budget_split : {"tight", "paper"}, default="tight"
        ε₁ per run as above; ``"paper"`` reproduces Theorem 6.1 (half of ε unused).
    score_fraction : float, default=0.5
        f in (0, 1), the share of each run's ε₁ spent on its score (1/2 in
        Algorithm 5).
    verbose : bool or int, default=0
        ``True``/``1`` (or more): one line per run, in the one progress format
        (:class:`~skdpsparse.utils._progress.Progress`): the run's index, the setting
        drawn (data-independent) and its fit time. No score is printed, not even a
        noisy one: only the selected run is covered by the guarantee (Liu and Talwar
        2019, Theorem 3.4), so every other run's private score would be an extra
        release. The lines do reveal the number of runs, which the guarantee does not
        cover either, as the fit's duration does: progress output is for the person
        running the search, never for publication.
    random_state : None, int or numpy.random.Generator, default=None
        ``None`` draws fresh noise; an int makes the noise (and the inner seeds)
        reproducible by anyone who knows it: for tests and reports only.

    Attributes
    ----------
    best_estimator_ : estimator
        The selected fitted clone (its own ``privacy_spent_`` is the per-run budget;
        :func:`skdpsparse.privacy_spent` of it is the selection's total, which covers
        the choice, until it is refit).
    best_params_ : dict
        The selected setting.
    privacy_spent_ : PureDP or ApproxDP
        The LT19 total, never above (``epsilon``, ``delta``).
    run_budget_ : PureDP or ApproxDP
        What each inner fit was given.
    score_noise_scale_ : float
        Laplace scale of the scores.
    gamma_ : float
    max_runs_ : int or None
        K (None when δ = 0: no truncation).
    n_candidates_ : int
    n_features_in_ : int
        Of ``best_estimator_``.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsparse.linear_model import DPOutputPerturbationRegressor
    >>> from skdpsparse.model_selection import PrivateParameterSelection
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(4000, 5)) / np.sqrt(5)
    >>> y = X @ np.ones(5) / 2 + 0.1 * rng.normal(size=4000)
    >>> search = PrivateParameterSelection(
    ...     DPOutputPerturbationRegressor(), {"alpha": [0.01, 1.0]}, epsilon=1.0,
    ...     scoring="neg_mean_squared_error", random_state=0).fit(X, y)
    >>> search.best_params_["alpha"] in (0.01, 1.0)  # chosen privately, from the grid
    True
    >>> spent = search.privacy_spent_
    >>> bool(spent.epsilon <= 1.0 and spent.delta <= 1e-6)
    True
    """

    _parameter_constraints = {
        "epsilon": [Interval("real", 0, None, closed="neither")],
        "delta": [Interval("real", 0, 1, closed="left"), None],
        "scoring": [InstanceOf(str, Callable, description="str or callable")],
        "score_bound": [Interval("real", 0, None, closed="neither")],
        "score_range": [InstanceOf(tuple, list, description="(low, high)")],
        "score_chunks": [Options("auto"), Interval("integer", 1, None, closed="left")],
        "verbose": VERBOSE_CONSTRAINT,
        "gamma": [Options("auto"), Interval("real", 0, 1, closed="right")],
        "failure_prob": [Interval("real", 0, 1, closed="neither")],
        "budget_split": [Options("tight", "paper")],
        "score_fraction": [Interval("real", 0, 1, closed="neither")],
        "param_grid": [InstanceOf(Mapping, list, tuple, description="dict or list of dicts")],
        # estimator is checked by _privacy_names; random_state by fit_random_source.
    }

    def __init__(self, estimator, param_grid, *, epsilon=1.0, delta=1e-6, scoring="accuracy",
                 score_bound=1.0, score_range=(0.0, 1.0), score_chunks="auto", gamma="auto",
                 failure_prob=0.1, budget_split="tight", score_fraction=0.5,
                 verbose=0, random_state=None):
        self.estimator = estimator
        self.param_grid = param_grid
        self.epsilon = epsilon
        self.delta = delta
        self.scoring = scoring
        self.score_bound = score_bound
        self.score_range = score_range
        self.score_chunks = score_chunks
        self.gamma = gamma
        self.failure_prob = failure_prob
        self.budget_split = budget_split
        self.score_fraction = score_fraction
        self.random_state = random_state
        self.verbose = verbose

    def _candidates(self):
        try:
            candidates = list(ParameterGrid(self.param_grid))
        except (TypeError, ValueError) as err:
            raise ValueError(f"The 'param_grid' parameter of {type(self).__name__} is "
                             f"invalid: {err}") from err
        plans = []
        for params in candidates:
            est = clone(self.estimator).set_params(**params)
            eps_name, delta_name, seed_names = _privacy_names(est)
            # Before any fit: every step that learns from the data must be private or
            # stateless, else its fitted state leaks (ValueError naming the step).
            check_private_steps(est)
            fixed = {eps_name, delta_name, *seed_names, "epsilon", "delta", "random_state"}
            clash = sorted(k for k in params if k in fixed or k.endswith(
                ("__epsilon", "__delta", "__random_state")))
            if clash:
                raise ValueError(f"The 'param_grid' parameter of {type(self).__name__} must "
                                 f"not set {clash}: the privacy parameters are set per run "
                                 "and runs need fresh, secret noise.")
            plans.append((params, eps_name, delta_name, seed_names))
        return plans

    def fit(self, X, y=None, **fit_params):
        """Select a setting privately and keep its fitted estimator.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Passed to the inner estimator, which validates it.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets; required (the scores compare predictions with them).
        **fit_params : dict
            Not supported: ``sample_weight`` (a weight changes the sensitivity the
            noise is calibrated to) and any other fit parameter raise
            :class:`~skdpsparse.exceptions.InvalidParameterError`.

        Returns
        -------
        self : PrivateParameterSelection
        """
        check_fit_params(self, fit_params)
        if (fitted := distributed_fit(self, X, y)) is not None:  # Dask or Spark input
            return fitted
        validate_params(self, self._parameter_constraints)
        if not hasattr(self.estimator, "get_params") or not hasattr(self.estimator, "fit"):
            raise ValueError(f"The 'estimator' parameter of {type(self).__name__} must be "
                             f"a scikit-learn estimator, got {self.estimator!r}.")
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the "
                             "target y is None.")
        scoring = resolve_scoring(
            self.scoring, score_bound=float(self.score_bound), score_range=self.score_range,
            score_chunks=self.score_chunks, y=y, owner=type(self).__name__)
        plans = self._candidates()
        delta = 0.0 if self.delta is None else float(self.delta)
        m = len(plans)
        gamma = (gamma_for_failure_prob(self.failure_prob, success_prob=1.0 / m)
                 if self.gamma == "auto" else float(self.gamma))
        plan = plan_random_stopping(
            float(self.epsilon), delta, gamma=gamma, split=self.budget_split,
            score_fraction=float(self.score_fraction))
        run_eps, run_delta = plan.fit_epsilon, plan.fit_delta
        n = np.asarray(y).shape[0]  # public; the inner estimator checks it against X
        rng = fit_random_source(self.random_state, self, X, y)
        progress = Progress(self.verbose, type(self).__name__)

        def draw(k):
            # One run of the (ε₁, δ₁)-DP mechanism: a data-independent draw of the
            # setting, a private fit, a Laplace score (composition).
            params, eps_name, delta_name, seed_names = plans[int(rng.integers(m))]
            est = clone(self.estimator).set_params(**params)
            est.set_params(**{eps_name: run_eps})
            if delta_name is not None:
                est.set_params(**{delta_name: run_delta})
            # 256-bit seeds: each run's key is as hard to search as the outer key.
            est.set_params(**{s: rng.secret_int() for s in seed_names})
            # Silent runs: an inner progress line per run would count them (κ).
            est.set_params(**{v: False for v in verbose_names})  # bool: Pipeline's too
            start = time.perf_counter()
            with _charges_suspended():  # charged once below, as part of the total
                est.fit(X, y)
            seconds = time.perf_counter() - start
            spent = getattr(_owner(est, eps_name), "privacy_spent_", None)
            if not _within(spent, run_eps, run_delta):
                raise ValueError(
                    f"{type(est).__name__} reported privacy_spent_={spent!r} for a run "
                    f"budget of (epsilon={run_eps:.4g}, delta={run_delta:.4g}); the "
                    "selection's guarantee needs every fit within it. Nothing was released.")
            score = scoring.private_loss(est, X, y, epsilon=plan.score_epsilon, rng=rng)
            progress.report("run", k + 1, None, f"{params} fitted in {seconds:.2f} s")
            return (params, est, seed_names), score

        verbose_names = _verbose_names(self.estimator)
        (params, best, seed_names), _, _ = random_stopping(draw, plan, rng)
        best.set_params(**{s: None for s in seed_names})  # the seed would reveal the noise
        given = self.estimator.get_params(deep=True)
        best.set_params(**{v: given[v] for v in verbose_names})  # as it was given
        total = plan.budget
        # Charges first; a refusal leaves the selection unfitted (an earlier fit too).
        release(self, dict(
            best_estimator_=best, best_params_=dict(params), privacy_spent_=total,
            run_budget_=PureDP(run_eps) if run_delta == 0 else ApproxDP(run_eps, run_delta),
            score_noise_scale_=scoring.sensitivity(n) / plan.score_epsilon, gamma_=gamma,
            max_runs_=plan.max_runs, n_candidates_=m))
        # The released model was chosen among runs: skdpsparse.privacy_spent reports
        # the selection's total for it (and for its private step) while it is not refit.
        owner = _owner(best, _privacy_names(best)[0])
        mark = (total, owner, getattr(owner, "privacy_spent_", None))
        for obj in {id(best): best, id(owner): owner}.values():
            setattr(obj, SELECTION_MARK, mark)
        return self

    # ---------------------------------------------------------------- delegation
    @available_if(_best_has("predict"))
    def predict(self, X):
        """``best_estimator_.predict(X)``."""
        check_is_fitted(self)
        return self.best_estimator_.predict(X)

    @available_if(_best_has("predict_proba"))
    def predict_proba(self, X):
        """``best_estimator_.predict_proba(X)``."""
        check_is_fitted(self)
        return self.best_estimator_.predict_proba(X)

    @available_if(_best_has("predict_log_proba"))
    def predict_log_proba(self, X):
        """``best_estimator_.predict_log_proba(X)``."""
        check_is_fitted(self)
        return self.best_estimator_.predict_log_proba(X)

    @available_if(_best_has("decision_function"))
    def decision_function(self, X):
        """``best_estimator_.decision_function(X)``."""
        check_is_fitted(self)
        return self.best_estimator_.decision_function(X)

    @available_if(_best_has("transform"))
    def transform(self, X):
        """``best_estimator_.transform(X)``."""
        check_is_fitted(self)
        return self.best_estimator_.transform(X)

    @available_if(_best_has("score"))
    def score(self, X, y=None):
        """``best_estimator_.score(X, y)`` (evaluating on held-out data is not private
        unless that data is public)."""
        check_is_fitted(self)
        return self.best_estimator_.score(X, y)

    @property
    def classes_(self):
        """Class labels of ``best_estimator_``."""
        _best_has("classes_")(self)
        return self.best_estimator_.classes_

    @property
    def n_features_in_(self):
        """Number of features seen by ``best_estimator_``."""
        if not hasattr(self, "best_estimator_"):
            raise AttributeError(f"{type(self).__name__} object has no attribute "
                                 "'n_features_in_' before fit.")
        return self.best_estimator_.n_features_in_

    @property
    def feature_names_in_(self):
        """Feature names seen by ``best_estimator_`` (string column names only)."""
        if not hasattr(self, "best_estimator_"):
            raise AttributeError(f"{type(self).__name__} object has no attribute "
                                 "'feature_names_in_' before fit.")
        return self.best_estimator_.feature_names_in_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        sub = get_tags(self.estimator)
        tags.estimator_type = sub.estimator_type
        tags.classifier_tags = copy.deepcopy(sub.classifier_tags)
        tags.regressor_tags = copy.deepcopy(sub.regressor_tags)
        tags.input_tags.sparse = sub.input_tags.sparse
        tags.target_tags.required = True
        return tags
