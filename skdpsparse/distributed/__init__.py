"""Fits past one machine: decomposable estimators on Dask collections.

``fit_distributed(estimator, X)`` fits ``estimator`` on a ``dask.array`` (dense or
scipy.sparse chunks) or a ``dask.dataframe`` (numeric columns) without pulling the
data into one process: every chunk's bounded statistic is computed on the workers
(:mod:`skdpsparse.distributed._core`), the exact integer sums are merged as task
results, and the noise is drawn once, on the driver, with the plan and sensitivity of
the in-memory fit. The fitted attributes are eager NumPy arrays, charged to the
active ledgers through :func:`skdpsparse.base.release` (a refused fit releases
nothing). The user guide's "Larger than memory" page gives the design and its limits.

Importing this package does not import dask; ``fit_distributed`` does (the
``skdpsparse[dask]`` extra).
"""

from ._core import fit_sparse_mean_in_memory
from ._sparse_mean import fit_sparse_mean_units_in_memory
from ._units import bound_unit_totals, unit_totals

__all__ = ["bound_unit_totals", "distributed_fit", "fit_distributed", "fit_sparse_mean_in_memory",
           "fit_sparse_mean_units_in_memory", "is_distributed_input", "unit_totals"]

#: Estimators whose fit is a sequence of small noisy steps, each depending on the
#: previous noisy iterate: there is no statistic to sum chunk by chunk.
_SEQUENTIAL = {
    "DPNoisySGDClassifier", "DPNoisySGDRegressor",
    "DPBiasReducedSGDClassifier", "DPBiasReducedSGDRegressor",
}


def is_distributed_input(X):
    """True for a Dask collection or a Spark DataFrame (checked without importing
    either)."""
    root = (type(X).__module__ or "").split(".")[0]
    return ((root in ("dask", "dask_expr") and hasattr(X, "__dask_graph__"))
            or (root == "pyspark" and hasattr(X, "mapInArrow")))


def distributed_fit(estimator, X, y=None):
    """Every estimator's first step in ``fit``: fit on a Dask collection or a Spark
    DataFrame without pulling it into memory.

    Returns the fitted estimator when ``X`` is such a collection (through
    :func:`fit_distributed`, which refuses, with the reason, the estimators whose
    statistic does not decompose), and None for in-memory data, which the caller then
    fits itself. Checked before scikit-learn's validation, which would compute the
    whole collection. It lives here, not in :mod:`skdpsparse.base`, so that the
    estimators depend on this package and this package on the base's release step,
    never the other way round.
    """
    if not is_distributed_input(X):
        return None
    return fit_distributed(estimator, X, y)


def fit_distributed(estimator, X, y=None, *, privacy_unit=None, n_features=None,
                    row_order=None):
    """Fit ``estimator`` on the Dask collection ``X``; returns the fitted estimator.

    **Privacy guarantee.** Exactly the in-memory fit's (``estimator.fit`` on the same
    rows, its ``privacy_spent_``, for the same protected unit and neighbouring
    relation, and the theorems its docstring cites), because the release is computed
    from the same statistic: the workers return exact integer sums of bounded rows
    (sparse mean, heavy-tailed mean, every pass of output perturbation's certified
    solver; :mod:`skdpsparse.distributed._core`,
    :class:`~skdpsparse._solvers.erm.FixedPointObjective`) or, for ℓ1-recovery,
    a float sum of measurement vectors each of norm ≤ 1.5L whatever the order, or, for
    cyclic SGD, each step's float sum of clipped gradients (each of norm ≤ C whatever
    the order; the rows visited in the collection's order, which the guarantee allows:
    it holds for every fixed order); the
    noise is drawn once, on the driver, from a key no worker sees, with the plan and
    sensitivity of the in-memory fit; partial results travel as task results only
    (a retried or recomputed task replaces its result, never adds to it); every chunk
    rejects NaN/inf as the in-memory validation does; and the row count n, public
    under replacement neighbours, is read from the collection's metadata. With
    ``privacy_unit``, the protected unit is all the rows of one unit (user-level
    privacy): each unit's rows are summed after one shuffle by a public function of
    the id, and the unit's total scaled into the row bounds, so a unit spread over
    every partition moves the sum by at most L (``tests/distributed``). Not covered:
    which rows a worker holds, the timing and memory of tasks (the engine's
    scheduling depends on the data's layout, not on the noise), the noise when
    ``random_state`` is fixed, and a wide data matrix (at most 256 rows) or more
    than 256 one-vs-rest problems, whose digest differs from the in-memory one so
    that a fixed seed draws other noise (same distribution).

    Parameters
    ----------
    estimator : DPSparseMeanEstimator, DPHeavyTailedMean, DPHeavyTailedRegressor, \
            DPOutputPerturbation* or DPCyclicSGD
        The decomposable estimators supported so far (the heavy-tailed mean with
        ``method="private_clip"``, the default, its interval stated or located,
        ``"cwme"`` with ``shuffle=False`` and ``"noise_smoothing"``; the
        heavy-tailed regressor, in the collection's row order;
        output perturbation with declared bounds and
        ``method="output_perturbation"``; cyclic SGD with ``shuffle=False``, two
        classes or a regression, and batches of at least 10⁴ rows; see the user
        guide).
    X : dask.array.Array of shape (n_samples, n_features), dask.dataframe.DataFrame \
            or pyspark.sql.DataFrame
        Dense or scipy.sparse chunks; numeric columns. A Spark DataFrame (sparse mean
        only) has list columns ``indices`` and ``values`` (give ``n_features``) or
        one numeric column per feature.
    y : dask.array.Array of shape (n_samples,) or dask Series, optional
        Labels or targets of output perturbation and cyclic SGD, aligned with ``X``'s
        rows (rechunked to its row chunks); ignored by the means.
    privacy_unit : dask.array.Array of shape (n_samples,) or str, optional
        One privacy-unit id (an integer) per row: the guarantee then covers all of a
        unit's rows (user-level privacy). Each unit's rows are summed, the unit's total
        scaled into the row bounds, and n is the number of units. For a Spark
        DataFrame (sparse mean only): the name of its integer column of unit ids
        (not a feature); ``privacy_unit_`` is then that name.
    n_features : int, optional
        d of a Spark DataFrame with list columns (public: never read from the data).
    row_order : {"multiset", "partitions"}, optional
        Spark only: how the rows are digested when the noise key is derived from the
        data. ``"multiset"`` (the default) hashes them without an order: the same
        seed gives the same release for every partitioning, but other noise than in
        memory. ``"partitions"`` reads them in the DataFrame's order (partition, then
        position), which must be deterministic (no shuffle since the data was read):
        the same seed then gives the in-memory release of the matrix in that order
        (with ``privacy_unit``: of the in-memory units fit, the rows digested in that
        order before the shuffle by unit, one more pass).

    Returns
    -------
    estimator
        Fitted, with the attributes of an in-memory fit (NumPy arrays, not lazy
        collections).
    """
    name = type(estimator).__name__
    spark = (type(X).__module__ or "").startswith("pyspark")
    if row_order is not None and not spark:
        raise ValueError("row_order applies to a Spark DataFrame only: a Dask "
                         "collection has a row order (its chunks').")
    if name in _SEQUENTIAL:
        raise ValueError(
            f"{name} cannot fit a Dask collection: it takes many small noisy steps, each "
            "from the previous noisy iterate, so no statistic of the data decomposes "
            "into per-chunk sums (one all-reduce per step of a small batch would cost a "
            "round trip per example batch). Fit it in memory on a sample, or use "
            "DPCyclicSGD with large batches or DPOutputPerturbation*.")
    if name == "DPHeavyTailedRegressor" and not spark:
        if privacy_unit is not None:
            raise NotImplementedError("privacy_unit is supported by "
                                      "DPSparseMeanEstimator only so far.")
        from ._heavy_tailed_sco import fit_heavy_tailed_regressor_distributed

        return fit_heavy_tailed_regressor_distributed(estimator, X, y)
    if name == "DPSparseMeanEstimator" and spark:
        from ._spark import fit_sparse_mean_spark

        return fit_sparse_mean_spark(estimator, X, n_features=n_features,
                                     row_order=row_order or "multiset",
                                     privacy_unit=privacy_unit)
    if spark:
        raise NotImplementedError(f"{name} has no Spark fit: a Spark DataFrame is "
                                  "supported by DPSparseMeanEstimator only (the other "
                                  "decomposable fits take Dask collections).")
    if name == "DPSparseMeanEstimator":
        from ._sparse_mean import fit_sparse_mean_distributed  # imports dask

        return fit_sparse_mean_distributed(estimator, X, privacy_unit=privacy_unit)
    if name in ("DPOutputPerturbationClassifier", "DPOutputPerturbationRegressor"):
        if privacy_unit is not None:
            raise NotImplementedError("privacy_unit is supported by "
                                      "DPSparseMeanEstimator only so far.")
        from ._output_perturbation import fit_output_perturbation_distributed

        return fit_output_perturbation_distributed(estimator, X, y)
    if name == "DPCyclicSGD":
        if privacy_unit is not None:
            raise NotImplementedError("privacy_unit is supported by "
                                      "DPSparseMeanEstimator only so far.")
        from ._cyclic_sgd import fit_cyclic_sgd_distributed  # imports dask

        return fit_cyclic_sgd_distributed(estimator, X, y)
    if name == "DPHeavyTailedMean":
        if privacy_unit is not None:
            raise NotImplementedError("privacy_unit is supported by "
                                      "DPSparseMeanEstimator only so far.")
        from ._heavy_tailed import fit_heavy_tailed_distributed  # imports dask

        return fit_heavy_tailed_distributed(estimator, X)
    raise NotImplementedError(
        f"{name} has no distributed fit yet (issue 20): only DPSparseMeanEstimator, "
        "DPHeavyTailedMean, DPHeavyTailedRegressor, DPOutputPerturbation* and "
        "DPCyclicSGD (large batches) do. "
        "Fit it in memory for now.")
