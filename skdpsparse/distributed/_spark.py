"""DPSparseMeanEstimator on a Spark DataFrame, thin: ``mapInArrow`` → CSR → the
core's ``partial`` → one part per partition, collected as the stage's results →
merge and release on the driver.

The parts travel as the rows of the mapped DataFrame (task results), never through a
Spark accumulator: a recomputed stage would add its rows to an accumulator twice,
while a retried or recomputed task's result replaces the lost one. The function
shipped to the executors closes over a
:class:`~skdpsparse.distributed._core.BoundedSumPlan`, column names and (with
``row_order="partitions"``) the partitions' first row indices: public numbers only,
no seed, key or estimator. The noise is drawn once, on the driver.

The statistic is the in-memory one exactly: exact int64 sums of the same bounded,
rounded rows, whatever the partitioning, the order of the rows or a retried task.
When the fit's key is derived from a digest of the data
(:func:`~skdpsparse.distributed._core.key_needs_data`), that digest depends on the
rows' order, which Spark keeps only for some DataFrames:

``row_order="multiset"`` (default)
    The rows are hashed as a multiset
    (:func:`~skdpsparse.utils._digest.row_multiset_part`): the same key for
    every partitioning and shuffle, so the same seed gives the same release on any
    layout of the same rows, but other noise (of the same distribution) than the
    in-memory or Dask fit, whose digest is positional.
``row_order="partitions"``
    The rows are read in the DataFrame's order (partition index, then position in
    the partition), each partition's first row index taken from a count pass, and
    digested by position as in memory
    (:func:`~skdpsparse.utils._digest.chunk_digest`): the same seed gives the
    in-memory release of the matrix in that order, bit for bit. For a DataFrame whose
    order is deterministic (a local collection or a file scan, no shuffle since); a
    partition whose row count changed between the two passes fails the fit.

A key that is not derived from the data needs no digest: the rows are then not
hashed, and both orders give the in-memory release.

User-level units (``privacy_unit=<integer column>``, :func:`_fit_units`): U counted
in the JVM, one repartition by the unit column so that every unit's rows meet in one
partition, each unit's total bounded there
(:mod:`skdpsparse.distributed._units`), the partitions' exact sums as task results,
and a driver check that the partitions held U units in all (a split unit would be
bounded, and counted, more than once). The statistic is the in-memory units fit's;
the key hashes the (id, row) pairs as a multiset, or, with ``row_order="partitions"``,
by position in the DataFrame's order before the shuffle (the in-memory key).
"""

import pickle

import numpy as np
import scipy.sparse as sp

from ._core import BoundedSumPart, check_chunk, key_needs_data, partial_bounded_sum
from ..utils._digest import DigestPart, chunk_digest, merge_digests, multiset_digest, \
    row_multiset_part

__all__ = ["fit_sparse_mean_spark", "is_spark_dataframe"]

ROW_ORDERS = ("multiset", "partitions")

#: The schema of the one row each partition returns (its task result).
PART_SCHEMA = ("partition long, sums binary, rows long, digest binary, "
               "fragments binary")


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


def _partition_parts(plan, indices, values, columns, digest=None, first_rows=None,
                     counts=None):
    """The function run by ``mapInArrow`` on each partition: public inputs only.

    It yields one row: the partition's exact int64 sums, its row count and, with
    ``digest`` ("multiset" or "partitions"), its share of the data digest. With
    "partitions", ``first_rows`` (partition → index of its first row) and ``counts``
    (partition → rows) come from the count pass.
    """

    def run(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        partition = TaskContext.get().partitionId()
        positional = digest == "partitions"
        start = first_rows.get(partition, 0) if positional else 0
        expected = counts.get(partition, 0) if positional else None
        sums = np.zeros(plan.n_features, dtype=np.int64)
        rows, total, part_digest = 0, 0, DigestPart()
        for batch in batches:
            if batch.num_rows == 0:
                continue
            try:
                chunk = check_chunk(_batch_to_chunk(batch, plan.n_features, indices,
                                                    values, columns),
                                    plan.n_features, start + rows)
            except ValueError as exc:  # the driver re-raises it as a ValueError
                where = "" if positional else \
                    f" (rows counted from the start of Spark partition {partition})"
                raise ValueError(f"{exc}{where}") from None
            part = partial_bounded_sum(chunk, plan, start + rows, digest=False)
            if positional:
                if rows + part.n_rows > expected:
                    rows += part.n_rows
                    break  # refused below, without reading the rest
                part_digest = merge_digests(
                    part_digest, chunk_digest(chunk, start + rows, plan.n_rows),
                    plan.n_rows)
            elif digest == "multiset":
                total = (total + row_multiset_part(chunk)[0]) % 2**2048
            sums += part.sums
            rows += part.n_rows
        if positional and rows != expected:
            raise ValueError(
                f"Spark partition {partition} held {expected} rows when they were "
                "counted and other rows when they were read: the DataFrame's order is "
                "not deterministic (a shuffle since it was read?). Use "
                "row_order='multiset', or checkpoint the DataFrame first.")
        if positional:
            total = part_digest.total
        yield pa.RecordBatch.from_pydict({
            "partition": [partition], "sums": [sums.astype("<i8").tobytes()],
            "rows": [rows], "digest": [int(total).to_bytes(256, "little")],
            "fragments": [pickle.dumps(part_digest.fragments if positional else {})]})

    return run


def _partition_counts(df):
    """{partition index: rows} of ``df``, counted in the JVM (no Python worker)."""
    from pyspark.sql import functions as F

    counted = df.select(F.spark_partition_id().alias("p")).groupBy("p").count()
    return {int(r["p"]): int(r["count"]) for r in counted.collect()}


def _worker_error(exc):
    """The ValueError a Python worker raised (bad data: NaN, an index out of range),
    as a ValueError on the driver; None for any other failure."""
    marker = "\nValueError: "
    text = str(exc)
    if "PythonException" not in type(exc).__name__ or marker not in text:
        return None
    return ValueError(text.rsplit(marker, 1)[1].split("\n", 1)[0].strip())


def _collect(mapped):
    """The task results of ``mapped`` (one small row per partition), with a Python
    worker's ValueError (bad data) raised as a ValueError on the driver."""
    try:
        return mapped.collect()
    except Exception as exc:
        error = _worker_error(exc)
        if error is None:
            raise
        raise error from exc


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
                          values="values", columns=None, row_order="multiset",
                          privacy_unit=None):
    """DPSparseMeanEstimator.fit on a Spark DataFrame (list columns ``indices`` /
    ``values`` with ``n_features`` given, or numeric ``columns``); ``row_order`` as
    in the module's docstring; ``privacy_unit``: the name of an integer column of unit
    ids, for a user-level fit (:func:`_fit_units`)."""
    from ..utils import validate_params
    from ..base import release
    from ._core import resolve_sparse_mean, sparse_mean_attributes, sparse_mean_plan
    from ..utils._digest import kernel_tag
    from ._sparse_mean import _refuse_l1_recovery

    validate_params(estimator, estimator._parameter_constraints)
    if row_order not in ROW_ORDERS:
        raise ValueError(f"row_order must be one of {ROW_ORDERS}, got {row_order!r}.")
    if privacy_unit is not None:
        unit = _check_unit_column(df, privacy_unit, row_order)
        if columns is None and indices not in df.columns:
            columns = [c for c in df.columns if c != unit]
        columns, d = _check_columns(df, n_features, indices, values, columns)
        if columns is not None and unit in columns:
            raise ValueError(f"privacy_unit column {unit!r} is also a feature column.")
        return _fit_units(estimator, df, unit, d, indices, values, columns, row_order)
    columns, d = _check_columns(df, n_features, indices, values, columns)
    digest = row_order if key_needs_data(estimator) else None
    first_rows = counts = None
    if digest == "partitions":
        counts = _partition_counts(df)
        n = sum(counts.values())
        first_rows, start = {}, 0
        for p in sorted(counts):
            first_rows[p], start = start, start + counts[p]
    else:
        n = int(df.count())  # public under replacement neighbours
    if n < 1:
        raise ValueError("Found array with 0 sample(s) while a minimum of 1 is required.")
    method, s, _ = resolve_sparse_mean(estimator, n, d)
    _refuse_l1_recovery(method)
    plan = sparse_mean_plan(n, d, float(estimator.norm_bound), s)
    mapped = df.mapInArrow(_partition_parts(plan, indices, values, columns, digest,
                                            first_rows, counts), PART_SCHEMA)
    results = _collect(mapped)  # one small row per partition: the task results
    sums = np.zeros(d, dtype=np.int64)
    rows, total, merged = 0, 0, DigestPart()
    for row in results:  # integer (and modular) additions: the order does not matter
        sums += np.frombuffer(row["sums"], dtype="<i8")
        rows += int(row["rows"])
        if digest == "partitions":
            merged = merge_digests(merged, DigestPart(
                int.from_bytes(row["digest"], "little"), pickle.loads(row["fragments"]),
                int(row["rows"])), n)
        else:
            total += int.from_bytes(row["digest"], "little")
    attrs = {"n_features_in_": d}
    if columns is not None and all(isinstance(c, str) for c in columns):
        attrs["feature_names_in_"] = np.asarray(columns, dtype=object)
    if digest == "partitions":  # the in-memory digest of the matrix in this order
        part = BoundedSumPart(sums, rows, merged)
        attrs = sparse_mean_attributes(estimator, part, plan, (n, d), attrs,
                                       kernel=kernel_tag(columns is None, np.float64),
                                       method=method)
    else:
        part = BoundedSumPart(sums, rows, None)
        digests = () if digest is None else \
            [b"spark" + multiset_digest(total, (n, d))]
        attrs = sparse_mean_attributes(estimator, part, plan, (n, d), attrs,
                                       digests=digests, method=method)
    return release(estimator, attrs)


# ------------------------------------------------------------------ user-level units
#: The schema of the one row each partition of a user-level fit returns.
UNIT_PART_SCHEMA = "partition long, sums binary, units long, rows long, digest binary"

_INTEGER_TYPES = ("ByteType", "ShortType", "IntegerType", "LongType")


def _check_unit_column(df, privacy_unit, row_order):
    """The unit column's name, after checking it names an integer column."""
    if not isinstance(privacy_unit, str):
        raise ValueError("privacy_unit for a Spark DataFrame is the name of its column "
                         f"of unit ids, got {type(privacy_unit).__name__}.")
    if privacy_unit not in df.columns:
        raise ValueError(f"privacy_unit column {privacy_unit!r} is not in the "
                         f"DataFrame's columns {list(df.columns)}.")
    kind = type(df.schema[privacy_unit].dataType).__name__
    if kind not in _INTEGER_TYPES:
        raise ValueError(f"privacy_unit column {privacy_unit!r} must hold integer ids, "
                         f"got {df.schema[privacy_unit].dataType.simpleString()}.")
    return privacy_unit


def _by_unit(df, unit):
    """``df`` hash-partitioned by the unit column: every row of a unit in one
    partition. Spark's partitioner is Murmur3 of the id modulo the partition count
    (``spark.sql.shuffle.partitions``; adaptive execution may coalesce whole
    partitions, never split one): a public function of the id, nothing random."""
    return df.repartition(unit)


def _unit_partition_parts(plan, unit, indices, values, columns, digest):
    """The function run by ``mapInArrow`` on each partition of ``_by_unit(df)``:
    public inputs only (the plan of U units, column names).

    All the rows of the partition's units are here, so each unit's total
    (:func:`~skdpsparse.distributed._units.unit_totals`, exact saturating sums on the
    grid of L alone) is complete, and bounded here
    (:func:`~skdpsparse.distributed._units.bound_unit_totals`). It yields one row:
    the exact int64 sums of the bounded totals, the number of units and of rows, and
    (``digest``) the multiset digest share of the (id, row) pairs.
    """

    def run(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        from ._sparse_mean import _ids_and_rows
        from ._units import add_unit_totals, bound_unit_totals, unit_totals

        partition = TaskContext.get().partitionId()
        pieces, rows, total = [], 0, 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            ids = batch.column(batch.schema.get_field_index(unit))
            if ids.null_count:
                raise ValueError(f"privacy_unit column {unit!r} holds a null id (Spark "
                                 f"partition {partition} after the shuffle by unit).")
            ids = ids.to_numpy(zero_copy_only=False).astype(np.int64)
            try:
                chunk = check_chunk(_batch_to_chunk(batch, plan.n_features, indices,
                                                    values, columns),
                                    plan.n_features, rows)
            except ValueError as exc:  # the driver re-raises it as a ValueError
                raise ValueError(f"{exc} (rows counted from the start of Spark "
                                 f"partition {partition} after the shuffle by unit)"
                                 ) from None
            pieces.append(unit_totals(chunk, ids, plan.l2_bound, plan.l1_bound))
            if len(pieces) >= 16:  # bounded memory: repeated units collapse
                pieces = [add_unit_totals(pieces)]
            if digest:
                total = (total + row_multiset_part(_ids_and_rows(chunk, ids))[0]) \
                    % 2**2048
            rows += chunk.shape[0]
        ids, totals = add_unit_totals(pieces)
        part = bound_unit_totals(totals, plan)
        yield pa.RecordBatch.from_pydict({
            "partition": [partition], "sums": [part.sums.astype("<i8").tobytes()],
            "units": [len(ids)], "rows": [rows],
            "digest": [int(total).to_bytes(256, "little")]})

    return run


def _unit_statistic(df, unit, plan, indices, values, columns, digest):
    """(sums, units, rows, digest total) merged on the driver from the partitions of
    ``_by_unit(df, unit)`` (task results)."""
    mapped = _by_unit(df, unit).mapInArrow(
        _unit_partition_parts(plan, unit, indices, values, columns, digest),
        UNIT_PART_SCHEMA)
    results = _collect(mapped)  # one small row per partition: the task results
    sums = np.zeros(plan.n_features, dtype=np.int64)
    units = rows = total = 0
    for row in results:
        sums += np.frombuffer(row["sums"], dtype="<i8")
        units += int(row["units"])
        rows += int(row["rows"])
        total += int.from_bytes(row["digest"], "little")
    return sums, units, rows, total


def _unit_positional_digest(unit, n_features, indices, values, columns, first_rows,
                            counts, n_rows):
    """The function run by ``mapInArrow`` on each partition of the DataFrame in its
    own order (before any shuffle): the positional digest share of [ids | rows]
    (:func:`~skdpsparse.utils._digest.chunk_digest` at the partition's first row
    index), the in-memory units fit's digest; public inputs only. A partition whose
    row count differs from the count pass fails the fit (the order is not
    deterministic)."""

    def run(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        from ._sparse_mean import _ids_and_rows

        partition = TaskContext.get().partitionId()
        start = first_rows.get(partition, 0)
        expected = counts.get(partition, 0)
        rows, part_digest = 0, DigestPart()
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if rows + batch.num_rows > expected:
                rows += batch.num_rows
                break  # refused below, without reading the rest
            ids = batch.column(batch.schema.get_field_index(unit))
            if ids.null_count:
                raise ValueError(f"privacy_unit column {unit!r} holds a null id (Spark "
                                 f"partition {partition}).")
            ids = ids.to_numpy(zero_copy_only=False).astype(np.int64)
            chunk = check_chunk(_batch_to_chunk(batch, n_features, indices, values,
                                                columns), n_features, start + rows)
            part_digest = merge_digests(
                part_digest, chunk_digest(_ids_and_rows(chunk, ids), start + rows, n_rows),
                n_rows)
            rows += chunk.shape[0]
        if rows != expected:
            raise ValueError(
                f"Spark partition {partition} held {expected} rows when they were "
                "counted and other rows when they were read: the DataFrame's order is "
                "not deterministic (a shuffle since it was read?). Use "
                "row_order='multiset', or checkpoint the DataFrame first.")
        yield pa.RecordBatch.from_pydict({
            "partition": [partition], "sums": [b""], "rows": [rows],
            "digest": [int(part_digest.total).to_bytes(256, "little")],
            "fragments": [pickle.dumps(part_digest.fragments)]})

    return run


def _units_digest(df, unit, d, indices, values, columns):
    """The in-memory units fit's key digest of [ids | X] in the DataFrame's order
    (``row_order="partitions"``): a count pass in the JVM, then one digest pass over
    the unshuffled partitions, merged on the driver."""
    from ..utils._digest import final_digest

    counts = _partition_counts(df)
    n, first_rows, start = sum(counts.values()), {}, 0
    for p in sorted(counts):
        first_rows[p], start = start, start + counts[p]
    mapped = df.mapInArrow(_unit_positional_digest(unit, d, indices, values, columns,
                                                   first_rows, counts, n), PART_SCHEMA)
    results = _collect(mapped)  # one small row per partition: the task results
    merged = DigestPart()
    for row in results:
        merged = merge_digests(merged, DigestPart(
            int.from_bytes(row["digest"], "little"), pickle.loads(row["fragments"]),
            int(row["rows"])), n)
    return final_digest(merged, (n, d + 1), orientation="rows"), n


def _fit_units(estimator, df, unit, d, indices, values, columns, row_order="multiset"):
    """The user-level sparse mean on Spark: the same statistic and guarantee as
    :func:`~skdpsparse.distributed.fit_sparse_mean_units_in_memory`.

    1. U, the number of distinct ids, counted in the JVM (public, as in memory);
       it fixes the plan (F of U units, the noise scale) before any row is read.
    2. One shuffle by unit (:func:`_by_unit`), then per partition: each unit's total
       from all its rows, bounded, summed exactly (:func:`_unit_partition_parts`);
       the partitions' int64 sums come back as task results and are added.
    3. The driver checks that the partitions held U units in all (every unit in one
       partition: a unit split over two would be bounded twice and count twice), and
       draws the noise once.

    The key: a multiset digest of the (id, row) pairs (``[id | row]`` as in memory,
    hashed without an order), so the same seed gives the same release on every
    partitioning, but other noise (of the same distribution) than in memory, whose
    digest of ``[ids | X]`` is positional; or, with ``row_order="partitions"``, that
    positional digest of the DataFrame in its own order (:func:`_units_digest`, a
    count and a digest pass before the shuffle), so the same seed gives the
    in-memory units fit of the rows in that order, bit for bit.
    """
    from ..base import release
    from ._core import resolve_sparse_mean, sparse_mean_attributes, sparse_mean_plan
    from ..utils._digest import multiset_digest
    from ._sparse_mean import _refuse_l1_recovery

    n_units = int(df.select(unit).distinct().count())
    if n_units < 1:
        raise ValueError("Found array with 0 sample(s) while a minimum of 1 is required.")
    method, s, _ = resolve_sparse_mean(estimator, n_units, d)
    _refuse_l1_recovery(method)
    plan = sparse_mean_plan(n_units, d, float(estimator.norm_bound), s)
    digest = key_needs_data(estimator)
    positional = None
    if digest and row_order == "partitions":
        positional, n_rows = _units_digest(df, unit, d, indices, values, columns)
    sums, units, rows, total = _unit_statistic(df, unit, plan, indices, values, columns,
                                               digest and positional is None)
    if positional is not None and rows != n_rows:
        raise RuntimeError(f"the DataFrame held {n_rows} rows when digested and {rows} "
                           "after the shuffle by unit: it is not deterministic; nothing "
                           "was released.")
    if units != n_units:
        raise RuntimeError(
            f"the partitions after the shuffle by {unit!r} held {units} units, not the "
            f"{n_units} distinct ids counted: a unit's rows were not all in one "
            "partition (or the DataFrame is not deterministic); nothing was released.")
    attrs = {"n_features_in_": d}
    if columns is not None and all(isinstance(c, str) for c in columns):
        attrs["feature_names_in_"] = np.asarray(columns, dtype=object)
    digests = () if not digest else [positional] if positional is not None else \
        [b"spark-units" + multiset_digest(total, (rows, d + 1))]
    attrs = sparse_mean_attributes(estimator, BoundedSumPart(sums, n_units, None), plan,
                                   (n_units, d), attrs, digests=digests, method=method)
    attrs["privacy_unit_"] = unit
    return release(estimator, attrs)
