"""DPSparseMeanEstimator on a Spark DataFrame, thin: ``mapInArrow`` → CSR → the
core's ``partial`` → one part per partition, collected as the stage's results →
merge and release on the driver.

The parts travel as the rows of the mapped DataFrame (task results), never through a
Spark accumulator: a recomputed stage would add its rows to an accumulator twice.
The function shipped to the executors closes over a
:class:`~skdpsparse.distributed._core.BoundedSumPlan` and column names only: no
seed, key or estimator. Spark keeps no global row order (a shuffle may reorder rows),
so the noise key hashes the rows as a multiset
(:func:`~skdpsparse.distributed._digest.row_multiset_part`): the same seed draws
other noise than the in-memory or Dask fit, of the same distribution.
"""

import numpy as np
import scipy.sparse as sp

from ._core import BoundedSumPart, check_chunk, partial_bounded_sum
from ._digest import multiset_digest, row_multiset_part

__all__ = ["fit_sparse_mean_spark", "is_spark_dataframe"]


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
    """The function run by ``mapInArrow`` on each partition: public inputs only."""

    def run(batches):
        import pyarrow as pa

        sums = np.zeros(plan.n_features, dtype=np.int64)
        rows, total = 0, 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            chunk = check_chunk(_batch_to_chunk(batch, plan.n_features, indices, values,
                                                columns), plan.n_features)
            part = partial_bounded_sum(chunk, plan, 0)
            sums += part.sums
            rows += part.n_rows
            digest, _ = row_multiset_part(chunk)
            total = (total + digest) % 2**2048
        yield pa.RecordBatch.from_pydict({
            "sums": [sums.astype("<i8").tobytes()], "rows": [rows],
            "digest": [int(total).to_bytes(256, "little")]})

    return run


def fit_sparse_mean_spark(estimator, df, *, n_features=None, indices="indices",
                          values="values", columns=None):
    """DPSparseMeanEstimator.fit on a Spark DataFrame (list columns ``indices`` /
    ``values`` with ``n_features`` given, or numeric ``columns``)."""
    from ..utils import validate_params
    from ..base import release
    from ._core import resolve_sparse_mean, sparse_mean_attributes, sparse_mean_plan
    from ._sparse_mean import _refuse_l1_recovery

    validate_params(estimator, estimator._parameter_constraints)
    if columns is None and indices not in df.columns:
        columns = list(df.columns)  # one numeric column per feature
    if columns is not None:
        n_features = len(columns)
    if n_features is None or int(n_features) < 1:
        raise ValueError(f"n_features must be given for list columns, got {n_features!r}.")
    d = int(n_features)
    n = int(df.count())  # public under replacement neighbours
    if n < 1:
        raise ValueError("Found array with 0 sample(s) while a minimum of 1 is required.")
    method, s, _ = resolve_sparse_mean(estimator, n, d)
    _refuse_l1_recovery(method)
    plan = sparse_mean_plan(n, d, float(estimator.norm_bound), s)
    mapped = df.mapInArrow(_partition_parts(plan, indices, values, columns),
                           "sums binary, rows long, digest binary")
    sums = np.zeros(d, dtype=np.int64)
    rows, total = 0, 0
    for row in mapped.collect():  # one small row per partition: the task results
        sums += np.frombuffer(row["sums"], dtype="<i8")
        rows += int(row["rows"])
        total += int.from_bytes(row["digest"], "little")
    part = BoundedSumPart(sums, rows, None)
    attrs = {"n_features_in_": d}
    if columns is not None and all(isinstance(c, str) for c in columns):
        attrs["feature_names_in_"] = np.asarray(columns, dtype=object)
    attrs = sparse_mean_attributes(estimator, part, plan, (n, d), attrs,
                                   digests=[b"spark" + multiset_digest(total, (n, d))])
    return release(estimator, attrs)
