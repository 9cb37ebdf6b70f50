"""DPSparseMeanEstimator on a Spark DataFrame (local[2]): the statistic is the
in-memory one exactly, the release is the in-memory one under one noise key, and the
parts come back as task results. Skipped, with the reason, without PySpark or a JRE."""

import os
import shutil
import sys

import numpy as np
import pytest

from skdpsparse.distributed import _core, fit_distributed, fit_sparse_mean_in_memory
from skdpsparse.mean import DPSparseMeanEstimator
from skdpsparse.utils import RandomSource

from dist_data import sparse_rows

pyspark = pytest.importorskip("pyspark", reason="PySpark (about 800 MB) is not installed")
if shutil.which("java") is None:
    pytest.skip("PySpark needs a Java runtime >= 17 and none is on PATH",
                allow_module_level=True)


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers' Python: ours
    session = (SparkSession.builder.master("local[2]").appName("skdpsparse-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.pyspark.python", sys.executable)
               .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _frame(spark, X, partitions=3):
    rows = [(X.indices[a:b].tolist(), X.data[a:b].tolist())
            for a, b in zip(X.indptr[:-1], X.indptr[1:])]
    return spark.createDataFrame(rows, "indices array<int>, values array<double>") \
        .repartition(partitions)  # a shuffle: Spark keeps no row order


def test_spark_release_is_the_in_memory_one_under_one_key(
        spark, monkeypatch, shared_noise):
    monkeypatch.setattr(_core, "fit_random_source_from_digests",
                        lambda *args: RandomSource(shared_noise))
    X = sparse_rows(n=1200, d=300)
    ref = fit_sparse_mean_in_memory(DPSparseMeanEstimator(sparsity=6, random_state=0), X)
    est = fit_distributed(DPSparseMeanEstimator(sparsity=6, random_state=0),
                          _frame(spark, X), n_features=300)
    np.testing.assert_array_equal(est.mean_, ref.mean_)


def test_spark_key_is_the_same_for_every_partitioning(spark):
    X = sparse_rows(n=600, d=100)
    a = fit_distributed(DPSparseMeanEstimator(sparsity=6, random_state=0),
                        _frame(spark, X, 2), n_features=100)
    b = fit_distributed(DPSparseMeanEstimator(sparsity=6, random_state=0),
                        _frame(spark, X, 5), n_features=100)
    np.testing.assert_array_equal(a.mean_, b.mean_)


def test_spark_rejects_nan(spark):
    X = sparse_rows(n=100, d=50)
    X.data[7] = np.nan
    with pytest.raises(Exception, match="NaN"):
        fit_distributed(DPSparseMeanEstimator(sparsity=6), _frame(spark, X),
                        n_features=50)
