"""Parquet rows to CSR chunks: the same matrix, hence the same release, as in memory."""

import numpy as np
import pytest

from skdpsparse.distributed import fit_distributed, fit_sparse_mean_in_memory
from skdpsparse.distributed.parquet import read_parquet_csr
from skdpsparse.mean import DPSparseMeanEstimator

from dist_data import sparse_rows

dask = pytest.importorskip("dask")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _write_lists(X, path, row_group_size):
    X = X.tocsr()
    rows = [(X.indices[a:b].tolist(), X.data[a:b].tolist())
            for a, b in zip(X.indptr[:-1], X.indptr[1:])]
    table = pa.table({"indices": [r[0] for r in rows], "values": [r[1] for r in rows]})
    pq.write_table(table, path, row_group_size=row_group_size)


def test_list_columns_read_as_csr_chunks_give_the_in_memory_release(tmp_path):
    X = sparse_rows(n=1500, d=300)
    _write_lists(X[:1000], tmp_path / "a.parquet", 300)
    _write_lists(X[1000:], tmp_path / "b.parquet", 200)
    Xd = read_parquet_csr([tmp_path / "a.parquet", tmp_path / "b.parquet"], 300)
    assert Xd.chunks[0] == (300, 300, 300, 100, 200, 200, 100)
    with dask.config.set(scheduler="threads"):
        assert abs(Xd.compute() - X).max() == 0
        est = fit_distributed(DPSparseMeanEstimator(sparsity=6, random_state=1), Xd)
    ref = fit_sparse_mean_in_memory(DPSparseMeanEstimator(sparsity=6, random_state=1), X)
    np.testing.assert_array_equal(est.mean_, ref.mean_)


def test_one_column_per_feature(tmp_path):
    X = sparse_rows(n=400, d=5, nnz=3).toarray()
    pq.write_table(pa.table({f"f{j}": X[:, j] for j in range(5)}),
                   tmp_path / "dense.parquet", row_group_size=150)
    Xd = read_parquet_csr(tmp_path / "dense.parquet", columns=[f"f{j}" for j in range(5)])
    with dask.config.set(scheduler="threads"):
        np.testing.assert_array_equal(Xd.compute(), X)


def test_malformed_rows_get_a_clear_error(tmp_path):
    table = pa.table({"indices": [[0, 1], [2]], "values": [[1.0], [2.0]]})
    pq.write_table(table, tmp_path / "bad.parquet")
    with dask.config.set(scheduler="threads"):
        with pytest.raises(ValueError, match="differ in length"):
            read_parquet_csr(tmp_path / "bad.parquet", 3).compute()
        pq.write_table(pa.table({"indices": [[0, 7]], "values": [[1.0, 2.0]]}),
                       tmp_path / "out.parquet")
        with pytest.raises(ValueError, match="outside"):
            read_parquet_csr(tmp_path / "out.parquet", 3).compute()
    with pytest.raises(ValueError, match="n_features"):
        read_parquet_csr(tmp_path / "out.parquet")
