"""Parquet files as a dask array of CSR chunks, one chunk per row group.

Two layouts:

* sparse rows as two list columns, ``indices`` (list of integers in [0, d)) and
  ``values`` (list of numbers) of equal lengths per row;
* one numeric column per feature (``columns=[...]``), read as dense chunks.

Row counts come from the Parquet footers (metadata, no data read), so the array has
known chunk sizes and n is known before any chunk is read. Each chunk is read by the
worker that needs it, with pyarrow; nothing passes through the driver.
"""

import numpy as np
import scipy.sparse as sp

__all__ = ["read_parquet_csr"]


def _pieces(paths):
    import pyarrow.parquet as pq

    pieces = []
    for path in paths:
        meta = pq.ParquetFile(path).metadata
        pieces += [(str(path), g, meta.row_group(g).num_rows)
                   for g in range(meta.num_row_groups) if meta.row_group(g).num_rows]
    return pieces


def _list_parts(column, name):
    import pyarrow as pa

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_list(arr.type) and not pa.types.is_large_list(arr.type):
        raise ValueError(f"{name}: expected a list column, got {arr.type}.")
    if arr.null_count:
        raise ValueError(f"{name}: a row's list is null; write an empty list instead.")
    offsets = np.asarray(arr.offsets, dtype=np.int64)
    flat = arr.flatten()
    if flat.null_count:
        raise ValueError(f"{name}: the lists hold null entries.")
    return offsets - offsets[0], flat.to_numpy(zero_copy_only=False)


def read_row_group(path, row_group, n_features, indices, values, columns):
    """One row group as CSR (list layout) or a dense float64 array (columns)."""
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path)
    if columns is not None:
        table = file.read_row_group(row_group, columns=list(columns))
        return np.column_stack([table.column(c).to_numpy(zero_copy_only=False)
                                .astype(np.float64) for c in columns])
    table = file.read_row_group(row_group, columns=[indices, values])
    indptr, cols = _list_parts(table.column(indices), f"indices column {indices!r}")
    indptr_v, data = _list_parts(table.column(values), f"values column {values!r}")
    if not np.array_equal(indptr, indptr_v):
        raise ValueError(f"{path}, row group {row_group}: the lists of {indices!r} and "
                         f"{values!r} differ in length on some row.")
    if cols.dtype.kind not in "iu":
        raise ValueError(f"indices column {indices!r} must hold integers, got {cols.dtype}.")
    if cols.size and (cols.min() < 0 or cols.max() >= n_features):
        raise ValueError(f"{path}, row group {row_group}: an index is outside "
                         f"[0, n_features={n_features}).")
    return sp.csr_matrix((np.asarray(data, dtype=np.float64), cols.astype(np.int64),
                          indptr), shape=(len(indptr) - 1, n_features))


def read_parquet_csr(paths, n_features=None, *, indices="indices", values="values",
                     columns=None):
    """A ``dask.array`` of the rows stored in Parquet ``paths``, chunked by row group.

    **Privacy guarantee.** None needed: a reader, no release. ``n_features`` must be
    declared (public) for list columns: reading d from the data would reveal the
    largest column index present. The row count per row group comes from the files'
    metadata (n is public under replacement neighbours).

    Parameters
    ----------
    paths : str, path or list of them
        Parquet files, read in the order given.
    n_features : int
        d, for the list layout (a public number: it must not be read from the data).
    indices, values : str
        The list columns of the sparse layout.
    columns : list of str, optional
        Read these numeric columns as dense features instead (one per feature).

    Returns
    -------
    dask.array.Array of shape (n, d), scipy.sparse CSR chunks (or dense ones)
    """
    import dask.array as da

    if isinstance(paths, (str, bytes)) or not hasattr(paths, "__iter__"):
        paths = [paths]
    pieces = _pieces(list(paths))
    if not pieces:
        raise ValueError("the Parquet files hold no rows.")
    if columns is not None:
        n_features = len(columns)
        meta = np.empty((0, n_features))
    else:
        if n_features is None or int(n_features) < 1:
            raise ValueError("n_features (d) must be given for the list layout, got "
                             f"{n_features!r}.")
        n_features = int(n_features)
        meta = sp.csr_matrix((0, n_features))

    def block(block_info=None):
        path, group, _ = pieces[block_info[None]["chunk-location"][0]]
        return read_row_group(path, group, n_features, indices, values, columns)

    sizes = tuple(rows for _, _, rows in pieces)
    return da.map_blocks(block, chunks=(sizes, (n_features,)), dtype=np.float64, meta=meta)
