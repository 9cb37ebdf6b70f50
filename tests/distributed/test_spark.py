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
  nothing is released;
* with ``privacy_unit=<column>`` (user-level units), the bounded statistic is the
  in-memory units fit's bit for bit on every partitioning, and a unit whose rows are
  spread over every partition contributes one bounded total (a variant that bounds
  each partition's part of a unit is caught twice: by the size of its change, and by
  the driver's count of units).

Skipped, with the reason, without PySpark or a Java runtime.
"""

import os
import shutil
import sys
import threading

import numpy as np
import pytest
import scipy.sparse as sp

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
    with pytest.raises(ValueError, match="privacy_unit for a Spark DataFrame is the "
                       "name"):
        fit_distributed(_est(), frame, n_features=50, privacy_unit=np.arange(100))
    with pytest.raises(ValueError, match="row_order must be one of"):
        fit_distributed(_est(), frame, n_features=50, row_order="sorted")
    if _core.key_needs_data(_est()):
        # Partitions whose rows changed between the count and the read are refused.
        monkeypatch.setattr(_spark, "_partition_counts", lambda df: {0: 60, 1: 40})
        with pytest.raises(ValueError, match="not deterministic"):
            fit_distributed(_est(), frame, n_features=50, row_order="partitions")


# ---------------------------------------------------------------- user-level units
def _unit_frame(spark, X, ids, partitions):
    """Rows of X with their unit ids (column ``user``), in order, no shuffle."""
    rows = [(int(u), *r) for u, r in zip(ids, _rows(X))]
    rdd = spark.sparkContext.parallelize(rows, partitions)
    return spark.createDataFrame(rdd, "user long, indices array<int>, values array<double>")


def _uest():
    # The Gaussian release: with tens of units the threshold would zero every entry.
    return _est(method="gaussian")


def _unit_data(n=900, d=60, units=40, seed=3):
    X = sparse_rows(n=n, d=d, seed=seed)
    ids = np.random.default_rng(seed).integers(0, units, n) * 7 - 50  # any integers
    return X, ids


@pytest.fixture
def shuffle_partitions(spark):
    """Sets spark.sql.shuffle.partitions (the shuffle by unit's) for one test."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    yield lambda k: spark.conf.set("spark.sql.shuffle.partitions", str(k))
    spark.conf.set("spark.sql.shuffle.partitions", before)


def test_user_level_statistic_and_release_are_the_in_memory_ones(
        spark, monkeypatch, shuffle_partitions):
    from skdpsparse.distributed import _sparse_mean, fit_sparse_mean_units_in_memory

    X, ids = _unit_data()
    seen = _captured_part(monkeypatch)  # _core's: both paths release through it
    reference = fit_sparse_mean_units_in_memory(_uest(), X, ids)
    released = []
    for partitions, shuffled in ((1, 1), (5, 4), (3, 7)):
        shuffle_partitions(shuffled)
        est = fit_distributed(_uest(), _unit_frame(spark, X, ids, partitions),
                              n_features=60, privacy_unit="user")
        assert est.privacy_unit_ == "user" and est.n_features_in_ == 60
        released.append(est.mean_)
    (ref_part, ref_plan), *spark_parts = seen
    assert ref_plan.n_rows == len(np.unique(ids))  # n = U, the number of units
    for part, plan in spark_parts:
        assert plan == ref_plan and part.n_rows == ref_part.n_rows
        np.testing.assert_array_equal(part.sums, ref_part.sums)  # exact int64 sums
    for mean in released[1:]:  # multiset key: one release for every partitioning
        np.testing.assert_array_equal(mean, released[0])
    assert not np.array_equal(released[0], reference.mean_)  # other key than in memory
    # With the key's digest set aside, the release is the in-memory one bit for bit.
    original = _core.fit_random_source_from_digests
    monkeypatch.setattr(_core, "fit_random_source_from_digests",
                        lambda seed, est, digests: original(seed, est, [b"same"]))
    same = fit_distributed(_uest(), _unit_frame(spark, X, ids, 3), n_features=60,
                           privacy_unit="user")
    np.testing.assert_array_equal(
        same.mean_, _sparse_mean.fit_sparse_mean_units_in_memory(_uest(), X, ids).mean_)


def test_user_level_positional_key_gives_the_in_memory_release(spark, shuffle_partitions):
    # row_order="partitions" with privacy_unit: the digest of [ids | X] by position,
    # read before the shuffle by unit, is the in-memory units fit's: same seed, same
    # release bit for bit, for every input and shuffle partitioning.
    from skdpsparse.distributed import fit_sparse_mean_units_in_memory

    X, ids = _unit_data()
    reference = fit_sparse_mean_units_in_memory(_uest(), X, ids)
    for partitions, shuffled in ((1, 1), (3, 4)):
        shuffle_partitions(shuffled)
        est = fit_distributed(_uest(), _unit_frame(spark, X, ids, partitions),
                              n_features=60, privacy_unit="user", row_order="partitions")
        np.testing.assert_array_equal(est.mean_, reference.mean_)
        assert est.privacy_unit_ == "user"
        assert str(est.privacy_spent_) == str(reference.privacy_spent_)


def _spread_adversary(n_other=400, d=30, partitions=4, rows=64, seed=4):
    """Everyone else's rows (units 0..79) with one adversarial unit (id 10**6) of
    ``rows`` rows of norm L = 1 in one direction, interleaved so that every one of the
    ``partitions`` ordered partitions holds some of them; and its neighbour, the
    adversary's rows replaced by zero rows (the same units)."""
    X = sparse_rows(n=n_other, d=d, nnz=4, seed=seed).tolil()
    ids = list(np.random.default_rng(seed).integers(0, 80, n_other))
    at = np.linspace(0, n_other, rows, endpoint=False).astype(int)[::-1]
    for i in at:
        X = sp.vstack([X[:i], sp.csr_matrix(([1.0], ([0], [0])), shape=(1, d)), X[i:]],
                      format="lil")
        ids.insert(i, 10**6)
    ids = np.asarray(ids)
    X = X.tocsr()
    X0 = X.tolil()
    X0[np.flatnonzero(ids == 10**6), 0] = 0.0
    return X, X0.tocsr(), ids


def test_a_unit_spread_over_every_partition_contributes_one_bounded_total(
        spark, monkeypatch, shuffle_partitions):
    shuffle_partitions(3)
    X, X0, ids = _spread_adversary()
    d, U = X.shape[1], len(np.unique(ids))
    plan = _core.sparse_mean_plan(U, d, 1.0, 6)
    frames = [_unit_frame(spark, A, ids, 4) for A in (X, X0)]
    adversary = ids == 10**6
    per_partition = frames[0].rdd.mapPartitions(
        lambda it: [sum(r["user"] == 10**6 for r in it)]).collect()
    assert len(per_partition) == 4 and min(per_partition) > 0  # rows in every one
    assert adversary.sum() == sum(per_partition) == 64

    def change(frame, frame0):
        a = _spark._unit_statistic(frame, "user", plan, "indices", "values", None, False)
        b = _spark._unit_statistic(frame0, "user", plan, "indices", "values", None, False)
        return np.linalg.norm(np.ldexp((a[0] - b[0]).astype(np.float64),
                                       -plan.frac_bits)), a[1]

    moved, units = change(*frames)
    # One bounded unit total (norm L = 1; replacement allows 2L), up to its rounding.
    assert abs(moved - 1.0) <= 2.0**-plan.frac_bits and units == U
    # The broken variant: no shuffle, each partition bounds its part of a unit.
    monkeypatch.setattr(_spark, "_by_unit", lambda df, unit: df)
    moved, units = change(*frames)
    assert moved > 2.0  # 4 bounded parts of norm 1: past the sensitivity 2L
    assert units > U  # the adversary (and others) counted in several partitions
    with pytest.raises(RuntimeError, match="not all in one partition"):
        fit_distributed(_uest(), frames[0], n_features=d, privacy_unit="user")


def test_the_user_level_function_ships_public_numbers_only(spark, monkeypatch):
    from pyspark import cloudpickle

    X, ids = _unit_data(n=300)
    frame = _unit_frame(spark, X, ids, 2)
    shipped = _spy_map_in_arrow(monkeypatch, frame)
    est = fit_distributed(_uest(), frame, n_features=60, privacy_unit="user")
    assert hasattr(est, "mean_")
    assert [schema for _, schema in shipped] == [_spark.UNIT_PART_SCHEMA]
    blob = cloudpickle.dumps(shipped[0][0])
    for forbidden in (b"RandomSource", b"random_state", b"DPSparseMeanEstimator",
                      b"add_noise", b"add_discrete_noise", b"fit_random_source",
                      SEED.to_bytes(8, "little"), str(SEED).encode()):
        assert forbidden not in blob, forbidden
    assert b"bound_unit_totals" in blob and b"unit_totals" in blob


def test_user_level_bad_input_is_refused_as_in_memory(spark):
    X, ids = _unit_data(n=300)
    bad = X.copy()
    bad.data[5] = np.nan
    est = _uest()
    with pytest.raises(ValueError, match="Input X contains NaN"):
        fit_distributed(est, _unit_frame(spark, bad, ids, 2), n_features=60,
                        privacy_unit="user")
    assert not hasattr(est, "mean_")  # nothing released
    frame = _unit_frame(spark, X, ids, 2)
    with pytest.raises(ValueError, match="column 'who' is not in"):
        fit_distributed(_uest(), frame, n_features=60, privacy_unit="who")
    with pytest.raises(ValueError, match="must hold integer ids, got double"):
        fit_distributed(_uest(), frame.withColumn("user", frame["user"] * 0.5),
                        n_features=60, privacy_unit="user")
    with pytest.raises(ValueError, match="Input X contains NaN"):  # the positional key
        fit_distributed(est, _unit_frame(spark, bad, ids, 2), n_features=60,
                        privacy_unit="user", row_order="partitions")
    assert not hasattr(est, "mean_")
    from pyspark.sql import functions as F

    with_null = frame.withColumn(
        "user", F.when(F.col("user") == int(ids[0]), F.lit(None)).otherwise(F.col("user")))
    with pytest.raises(ValueError, match="holds a null id"):
        fit_distributed(_uest(), with_null, n_features=60, privacy_unit="user")
