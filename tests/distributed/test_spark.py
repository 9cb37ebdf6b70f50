"""DPSparseMeanEstimator on a Spark DataFrame (one local[2] session for the module).

What the Spark path must keep of the in-memory guarantee (issue 20):

* ``mapInArrow`` → CSR → the core's ``partial``: the merged statistic is the
  in-memory one, bit for bit, for every partitioning and row order (exact int64
  sums: the summation bound is zero);
* so the same seed gives the in-memory release, bit for bit, when the rows are
  digested in the DataFrame's order (``row_order="partitions"``), and the same
  release for every partitioning with the default multiset digest;
* the noise is drawn once, on the driver: the function shipped to the executors
  holds no seed, key or estimator, and a Python worker whose ``RandomSource`` raises
  on creation never trips it (a broken variant that draws there does);
* the parts come back as task results, never through an accumulator, and a task
  that fails after computing its part and is retried changes nothing;
* NaN and infinity in a partition are refused with the in-memory message, and
  nothing is released.

Skipped, with the reason, without PySpark or a Java runtime.
"""

import os
import shutil
import sys
import threading

import numpy as np
import pytest

from skdpsparse.distributed import _core, _spark, fit_distributed, fit_sparse_mean_in_memory
from skdpsparse.mean import DPSparseMeanEstimator
from skdpsparse.utils import RandomSource

from dist_data import sparse_rows

pyspark = pytest.importorskip("pyspark", reason="PySpark (about 800 MB) is not installed")
if shutil.which("java") is None:
    pytest.skip("PySpark needs a Java runtime >= 17 and none is on PATH",
                allow_module_level=True)

pytestmark = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:FutureWarning")

SEED = 918273645546372819  # distinctive, to be looked for in what is shipped


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers' Python: ours
    # local[2, 2]: two threads, and a failed task is tried twice, as on a cluster
    # (plain local[2] never retries; more attempts only slow the bad-data tests).
    # Small Arrow batches: several per partition, each its own CSR chunk.
    session = (SparkSession.builder.master("local[2,2]").appName("skdpsparse-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.pyspark.python", sys.executable)
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "300")
               .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    session.sparkContext.setLogLevel("OFF")  # the retried task's trace is expected
    yield session
    session.stop()


@pytest.fixture
def by_value():
    """Functions of this module shipped to the Python workers by value (they cannot
    import a test module)."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def _rows(X):
    return [(X.indices[a:b].tolist(), X.data[a:b].tolist())
            for a, b in zip(X.indptr[:-1], X.indptr[1:])]


def _ordered(spark, X, partitions=3):
    """The rows of X in order, in ``partitions`` partitions (no shuffle)."""
    rdd = spark.sparkContext.parallelize(_rows(X), partitions)
    return spark.createDataFrame(rdd, "indices array<int>, values array<double>")


def _shuffled(spark, X, partitions=3):
    return _ordered(spark, X, 2).repartition(partitions)  # Spark keeps no row order


def _est(**kw):
    kw.setdefault("sparsity", 6)
    kw.setdefault("random_state", SEED)
    return DPSparseMeanEstimator(**kw)


def _captured_part(monkeypatch):
    seen = []
    original = _core.sparse_mean_attributes

    def capture(estimator, part, plan, *args, **kwargs):
        seen.append((part, plan))
        return original(estimator, part, plan, *args, **kwargs)

    monkeypatch.setattr(_core, "sparse_mean_attributes", capture)
    return seen


# ------------------------------------------------------------- the same statistic
def test_same_statistic_and_same_seed_same_release_as_in_memory(spark, monkeypatch):
    # The merged part is partial_bounded_sum of the in-memory matrix bit for bit (exact
    # int64 sums: the summation bound is zero) in any partitioning and row order; with
    # the rows digested in the DataFrame's order the key is the in-memory one too.
    X = sparse_rows(n=2500, d=300)
    reference = _est().fit(X).mean_
    np.testing.assert_array_equal(fit_sparse_mean_in_memory(_est(), X).mean_, reference)
    seen = _captured_part(monkeypatch)
    for partitions in (1, 7):
        est = fit_distributed(_est(), _ordered(spark, X, partitions), n_features=300,
                              row_order="partitions")
        np.testing.assert_array_equal(est.mean_, reference)
    fit_distributed(_est(), _shuffled(spark, X, 4), n_features=300)  # multiset digest
    assert len(seen) == 3
    for part, plan in seen:
        assert part.n_rows == plan.n_rows == X.shape[0]
        np.testing.assert_array_equal(part.sums, _core.partial_bounded_sum(X, plan, 0).sums)
    other = fit_distributed(_est(random_state=SEED + 1), _ordered(spark, X, 3),
                            n_features=300, row_order="partitions")
    assert not np.array_equal(other.mean_, reference)  # the seed does key the noise


def test_numeric_columns_give_the_dense_in_memory_release(spark):
    X = sparse_rows(n=600, d=12, nnz=3).toarray()
    names = [f"f{j}" for j in range(12)]
    rdd = spark.sparkContext.parallelize([tuple(map(float, r)) for r in X], 3)
    frame = spark.createDataFrame(rdd, ", ".join(f"{c} double" for c in names))
    est = fit_distributed(_est(sparsity=3), frame, row_order="partitions")
    np.testing.assert_array_equal(est.mean_, _est(sparsity=3).fit(X).mean_)
    assert list(est.feature_names_in_) == names and est.n_features_in_ == 12
    by_fit = _est(sparsity=3).fit(frame)  # the estimator's own fit routes here
    assert list(by_fit.feature_names_in_) == names and by_fit.mean_.shape == (12,)


def test_multiset_release_is_the_same_for_every_partitioning(spark):
    X = sparse_rows(n=600, d=100)
    a = fit_distributed(_est(), _shuffled(spark, X, 2), n_features=100)
    b = fit_distributed(_est(), _shuffled(spark, X, 5), n_features=100)
    np.testing.assert_array_equal(a.mean_, b.mean_)


def test_parquet_files_read_by_spark_give_the_in_memory_statistic(spark, tmp_path,
                                                                  monkeypatch):
    # The realistic input: Parquet files of list columns (int64 indices, as pyarrow
    # writes them), several row groups, read by Spark's own reader.
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    X = sparse_rows(n=1500, d=300)
    for name, rows in (("a", slice(0, 1000)), ("b", slice(1000, 1500))):
        part = _rows(X[rows])
        pq.write_table(pa.table({"indices": [r[0] for r in part],
                                 "values": [r[1] for r in part]}),
                       tmp_path / f"{name}.parquet", row_group_size=256)
    seen = _captured_part(monkeypatch)
    fit_distributed(_est(), spark.read.parquet(str(tmp_path)), n_features=300)
    (part, plan), = seen
    np.testing.assert_array_equal(part.sums, _core.partial_bounded_sum(X, plan, 0).sums)


# ------------------------------------------------------ the noise, on the driver
def _spy_map_in_arrow(monkeypatch, frame):
    shipped = []
    cls = type(frame)
    original = cls.mapInArrow

    def spy(self, func, schema, *args, **kwargs):
        shipped.append((func, schema))
        return original(self, func, schema, *args, **kwargs)

    monkeypatch.setattr(cls, "mapInArrow", spy)
    return shipped


def test_one_map_in_arrow_ships_public_numbers_only(spark, monkeypatch):
    from pyspark import cloudpickle

    frame = _shuffled(spark, sparse_rows(n=600, d=100))
    shipped = _spy_map_in_arrow(monkeypatch, frame)
    for row_order in ("multiset", "partitions"):
        fit_distributed(_est(), frame, n_features=100, row_order=row_order)
    assert [schema for _, schema in shipped] == [_spark.PART_SCHEMA] * 2
    for func, _ in shipped:
        blob = cloudpickle.dumps(func)
        for forbidden in (b"RandomSource", b"random_state", b"DPSparseMeanEstimator",
                          b"add_noise", b"add_discrete_noise", b"fit_random_source",
                          SEED.to_bytes(8, "little"), str(SEED).encode()):
            assert forbidden not in blob, forbidden
        assert b"partial_bounded_sum" in blob


def _with_tripwire(run_parts):
    """``_partition_parts`` whose function first makes RandomSource raise in the
    Python worker that runs it."""

    def parts(*args):
        run = run_parts(*args)

        def tripped(batches):
            from skdpsparse.utils import RandomSource as Source

            def tripwire(self, *a, **k):
                raise AssertionError("noise drawn on a worker")

            Source.__init__ = tripwire
            yield from run(batches)

        return tripped

    return parts


def _drawing_on_the_worker(run_parts):
    """A broken variant: the worker draws its own noise."""

    def parts(*args):
        run = run_parts(*args)

        def drawing(batches):
            from skdpsparse.utils import RandomSource as Source

            Source(bytes(32))
            yield from run(batches)

        return drawing

    return parts


def test_the_noise_is_drawn_once_on_the_driver(spark, monkeypatch, by_value):
    calls = []
    original = RandomSource.add_discrete_noise

    def spy(self, *args, **kwargs):
        calls.append(threading.get_ident())
        return original(self, *args, **kwargs)

    X = sparse_rows(n=600, d=100)
    frame = _shuffled(spark, X)
    monkeypatch.setattr(RandomSource, "add_discrete_noise", spy)
    monkeypatch.setattr(_spark, "_partition_parts",
                        _with_tripwire(_spark._partition_parts))
    est = fit_distributed(_est(), frame, n_features=100)
    assert calls == [threading.get_ident()]
    monkeypatch.setattr(_spark, "_partition_parts",
                        _with_tripwire(_drawing_on_the_worker(_spark._partition_parts)))
    with pytest.raises(Exception, match="noise drawn on a worker"):
        fit_distributed(_est(), frame, n_features=100)  # the tripwire catches a draw
    assert hasattr(est, "mean_")


# ----------------------------------------------- task results, retries, no accumulator
def _failing_first_attempt(run_parts):
    """``_partition_parts`` whose task for partition 0 computes its part and then
    fails, on its first attempt only: Spark retries it."""

    def parts(*args):
        run = run_parts(*args)

        def flaky(batches):
            from pyspark import TaskContext

            out = list(run(batches))
            context = TaskContext.get()
            if context.partitionId() == 0 and context.attemptNumber() == 0:
                raise RuntimeError("executor lost after computing its part")
            yield from out

        return flaky

    return parts


def test_a_retried_task_changes_nothing(spark, monkeypatch, by_value):
    X = sparse_rows(n=1500, d=200)
    accumulators = []
    monkeypatch.setattr(type(spark.sparkContext), "accumulator",
                        lambda *a, **k: accumulators.append(a))
    monkeypatch.setattr(_spark, "_partition_parts",
                        _failing_first_attempt(_spark._partition_parts))
    # Partition 0's first attempt always fails: the fit completes only if Spark reran
    # it, and the rerun's part replaced the lost one (the in-memory release).
    est = fit_distributed(_est(), _ordered(spark, X, 3), n_features=200,
                          row_order="partitions")
    np.testing.assert_array_equal(est.mean_, _est().fit(X).mean_)
    assert accumulators == []  # the parts never go through an accumulator


def test_an_accumulator_would_count_a_recomputed_stage_twice(spark):
    # Why task results: an accumulator updated in a transformation counts every row
    # again when the stage is recomputed (here by a second action, as after a lost
    # executor's shuffle output), so the sum's sensitivity would no longer hold.
    sc = spark.sparkContext
    total = sc.accumulator(0)

    def add(x):
        total.add(x)
        return x

    rows = sc.parallelize(range(1, 101), 4).map(add)
    assert rows.sum() == 5050 and total.value == 5050
    assert rows.count() == 100 and total.value == 2 * 5050


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("bad, message, row_order", [
    (np.nan, "Input X contains NaN", "multiset"),
    (np.inf, "Input X contains infinity", "partitions")])
def test_nan_and_inf_are_refused_as_in_memory(spark, bad, message, row_order):
    X = sparse_rows(n=400, d=50)
    X.data[7 * 6 + 2] = bad  # row 7
    with pytest.raises(ValueError, match=message):
        _est().fit(X)
    est = _est()
    with pytest.raises(ValueError, match=message):
        fit_distributed(est, _ordered(spark, X, 2), n_features=50, row_order=row_order)
    assert not hasattr(est, "mean_")  # nothing released


def test_malformed_layouts_name_the_parameter(spark, monkeypatch):
    X = sparse_rows(n=100, d=50)
    frame = _ordered(spark, X, 2)
    with pytest.raises(ValueError, match="n_features must be given"):
        fit_distributed(_est(), frame)
    with pytest.raises(ValueError, match="outside \\[0, n_features=40\\)"):
        fit_distributed(_est(), frame, n_features=40)
    with pytest.raises(ValueError, match="values column 'values'"):
        fit_distributed(_est(), frame.select("indices"), n_features=50)
    with pytest.raises(NotImplementedError, match="privacy_unit on Spark"):
        fit_distributed(_est(), frame, n_features=50, privacy_unit=np.arange(100))
    with pytest.raises(ValueError, match="row_order must be one of"):
        fit_distributed(_est(), frame, n_features=50, row_order="sorted")
    if _core.key_needs_data(_est()):
        # Partitions whose rows changed between the count and the read are refused.
        monkeypatch.setattr(_spark, "_partition_counts", lambda df: {0: 60, 1: 40})
        with pytest.raises(ValueError, match="not deterministic"):
            fit_distributed(_est(), frame, n_features=50, row_order="partitions")
