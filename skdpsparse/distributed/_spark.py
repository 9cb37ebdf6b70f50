"""DPSparseMeanEstimator on a Spark DataFrame, thin: ``mapInArrow`` → CSR → the
core's ``partial`` → one part per partition, collected as the stage's results →
merge and release on the driver.

The parts travel as the rows of the mapped DataFrame (task results), never through a
Spark accumulator: a recomputed stage would add its rows to an accumulator twice,
while a retried or recomputed task's result replaces the lost one. The function
shipped to the executors closes over a
:class:`~skdpsparse.distributed._core.BoundedSumPlan` and column names: public
numbers only, no seed, key or estimator. The noise is drawn once, on the driver.

The statistic is the in-memory one exactly: exact int64 sums of the same bounded,
rounded rows, whatever the partitioning, the order of the rows (Spark keeps none
after a shuffle) or a retried task. The sparse mean's noise is keyed by the seed,
the parameters and the exact statistic it is added to, never by a digest of the
rows (``DPSparseMeanEstimator._noise_keyed_by_statistic``), so the same seed gives
the in-memory release bit for bit, on every layout, and no row is hashed here.
"""

import numpy as np
import scipy.sparse as sp

from ._core import BoundedSumPart, check_chunk, partial_bounded_sum

__all__ = ["fit_sparse_mean_spark", "is_spark_dataframe"]

#: The schema of the one row each partition returns (its task result).
PART_SCHEMA = "partition long, sums binary, rows long"


def is_spark_dataframe(X):
    return (type(X).__module__ or "").startswith("pyspark.") and hasattr(X, "mapInArrow")


def _batch_to_chunk(batch, n_features, indices, values, columns):
    """One Arrow record batch as CSR (list layout) or dense float64 (columns)."""
    from .parquet import _list_parts

    if columns is not None:
        return np.column_stack([batch.column(batch.schema.get_field_index(c))
                                .to_numpy(zero_copy_only=False).astype(np.float64)
                                for c in columns])
    indptr, cols = _list_parts(batch.column(batch.schema.get_field_index(indices)),
                               f"indices column {indices!r}")
    indptr_v, data = _list_parts(batch.column(batch.schema.get_field_index(values)),
                                 f"values column {values!r}")
    if not np.array_equal(indptr, indptr_v):
        raise ValueError(f"the lists of {indices!r} and {values!r} differ in length.")
    if cols.size and (cols.min() < 0 or cols.max() >= n_features):
        raise ValueError(f"an index is outside [0, n_features={n_features}).")
    return sp.csr_matrix((np.asarray(data, dtype=np.float64), cols.astype(np.int64),
                          indptr), shape=(len(indptr) - 1, n_features))


def _partition_parts(plan, indices, values, columns):
    """The function run by ``mapInArrow`` on each partition: public inputs only.

    It yields one row, the partition's exact int64 sums and row count: a task
    result, which a retried task replaces."""

    def run(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        partition = TaskContext.get().partitionId()
        sums = np.zeros(plan.n_features, dtype=np.int64)
        rows = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            try:
                chunk = check_chunk(_batch_to_chunk(batch, plan.n_features, indices,
                                                    values, columns),
                                    plan.n_features, rows)
            except ValueError as exc:  # the driver re-raises it as a ValueError
                raise ValueError(f"{exc} (rows counted from the start of Spark "
                                 f"partition {partition})") from None
            part = partial_bounded_sum(chunk, plan, rows, digest=False)
            sums += part.sums
            rows += part.n_rows
        yield pa.RecordBatch.from_pydict({
            "partition": [partition], "sums": [sums.astype("<i8").tobytes()],
            "rows": [rows]})

    return run


def _worker_error(exc):
    """The ValueError a Python worker raised (bad data: NaN, an index out of range),
    as a ValueError on the driver; None for any other failure."""
    marker = "\nValueError: "
    text = str(exc)
    if "PythonException" not in type(exc).__name__ or marker not in text:
        return None
    return ValueError(text.rsplit(marker, 1)[1].split("\n", 1)[0].strip())


def _check_columns(df, n_features, indices, values, columns):
    """(columns, d) after checking the layout against the DataFrame's schema."""
    if columns is None and indices not in df.columns:
        columns = list(df.columns)  # one numeric column per feature
    if columns is not None:
        columns = list(columns)
        missing = [c for c in columns if c not in df.columns]
        if missing or not columns:
            raise ValueError(f"columns: {missing or 'none'} not in the DataFrame's "
                             f"columns {list(df.columns)}.")
        if n_features is not None and int(n_features) != len(columns):
            raise ValueError(f"n_features={n_features!r} differs from the "
                             f"{len(columns)} feature columns.")
        return columns, len(columns)
    if values not in df.columns:
        raise ValueError(f"the DataFrame has an indices column {indices!r} but no values "
                         f"column {values!r}.")
    if n_features is None or isinstance(n_features, bool) or int(n_features) < 1:
        raise ValueError("n_features must be given (a positive int) for a Spark "
                         f"DataFrame with list columns, got {n_features!r}: pass it to "
                         "fit_distributed(..., n_features=d).")
    return None, int(n_features)


def fit_sparse_mean_spark(estimator, df, *, n_features=None, indices="indices",
                          values="values", columns=None):
    """DPSparseMeanEstimator.fit on a Spark DataFrame (list columns ``indices`` /
    ``values`` with ``n_features`` given, or numeric ``columns``)."""
    from ..utils import validate_params
    from ..base import release
    from ._core import resolve_sparse_mean, sparse_mean_attributes, sparse_mean_plan
    from ._sparse_mean import _refuse_l1_recovery

    validate_params(estimator, estimator._parameter_constraints)
    if not getattr(estimator, "_noise_keyed_by_statistic", False):
        # Fail closed: this path digests no rows, so a key that needs them is refused.
        raise NotImplementedError(f"{type(estimator).__name__}: the Spark fit needs "
                                  "noise keyed by its statistic.")
    columns, d = _check_columns(df, n_features, indices, values, columns)
    n = int(df.count())  # public under replacement neighbours
    if n < 1:
        raise ValueError("Found array with 0 sample(s) while a minimum of 1 is required.")
    method, s, _ = resolve_sparse_mean(estimator, n, d)
    _refuse_l1_recovery(method)
    plan = sparse_mean_plan(n, d, float(estimator.norm_bound), s)
    mapped = df.mapInArrow(_partition_parts(plan, indices, values, columns), PART_SCHEMA)
    try:
        results = mapped.collect()  # one small row per partition: the task results
    except Exception as exc:
        error = _worker_error(exc)
        if error is None:
            raise
        raise error from exc
    sums = np.zeros(d, dtype=np.int64)
    for row in results:  # integer addition: the order does not matter
        sums += np.frombuffer(row["sums"], dtype="<i8")
    part = BoundedSumPart(sums, sum(int(row["rows"]) for row in results), None)
    attrs = {"n_features_in_": d}
    if columns is not None and all(isinstance(c, str) for c in columns):
        attrs["feature_names_in_"] = np.asarray(columns, dtype=object)
    attrs = sparse_mean_attributes(estimator, part, plan, (n, d), attrs, digests=(),
                                   method=method)
    return release(estimator, attrs)
