"""Fits on Dask collections: the core's ``partial`` on every chunk, merged by task
results, released once on the driver.

Nothing is pulled into the driver's memory: the driver sees the collection's metadata
(shape, chunk sizes, column names and dtypes), the merged part (d int64 sums, a row
count, a digest) and then draws the noise itself. The task graph holds the chunks'
own tasks, :func:`~skdpsparse.distributed._core.partial_bounded_sum`,
:func:`~skdpsparse.distributed._core.merge_parts` and a
:class:`~skdpsparse.distributed._core.BoundedSumPlan` of public numbers: no seed, no
key, no estimator (``tests/distributed/test_privacy_at_scale.py`` inspects it).
"""

import numpy as np

import dask
from dask.base import is_dask_collection

from ._core import merge_parts, partial_bounded_sum

__all__ = ["bounded_sum_graph", "chunk_kernel", "row_chunks"]


def _is_dataframe(X):
    return hasattr(X, "dtypes") and hasattr(X, "columns") and hasattr(X, "to_delayed")


def chunk_kernel(X):
    """The digest's kernel tag of the in-memory matrix this collection would validate
    to (:func:`~skdpsparse.utils._digest.kernel_tag`), from metadata only: a
    dataframe is dense, float32 only when every column is; an array is sparse when its
    chunks are."""
    from ..utils._digest import kernel_tag

    if _is_dataframe(X):
        float32 = all(str(t) == "float32" for t in X.dtypes)
        return kernel_tag(False, np.float32 if float32 else np.float64)
    import scipy.sparse as sp

    return kernel_tag(sp.issparse(getattr(X, "_meta", None)), X.dtype)


def row_chunks(X):
    """The row chunks of a dask array or dataframe, read from metadata only.

    Returns
    -------
    chunks : list of (Delayed chunk, first row, row count)
    shape : (n, d)
    input_attrs : dict
        ``n_features_in_`` and, for a dataframe with string column names,
        ``feature_names_in_`` (what scikit-learn's validation would set).
    """
    if not is_dask_collection(X):
        raise TypeError(f"X must be a dask collection, got {type(X).__name__}.")
    if _is_dataframe(X):
        non_numeric = [str(c) for c, t in X.dtypes.items()
                       if not (np.issubdtype(t, np.number) or np.issubdtype(t, np.bool_))]
        if non_numeric:
            raise ValueError(f"X must have numeric columns only; {non_numeric} are not.")
        parts = list(X.to_delayed())
        # Row counts are public under replacement neighbours (n is); counting them
        # reads the partitions once and returns only integers.
        lengths = [int(v) for v in dask.compute(*[dask.delayed(len)(p) for p in parts])]
        columns = list(X.columns)
        d = len(columns)
        attrs = {"n_features_in_": d}
        if columns and all(isinstance(c, str) for c in columns):
            attrs["feature_names_in_"] = np.asarray(columns, dtype=object)
    else:
        if X.ndim != 2:
            raise ValueError(f"Expected a 2-D dask array, got {X.ndim} dimension(s).")
        if X.numblocks[1] != 1:
            X = X.rechunk({1: -1})  # a partial needs whole rows
        if any(np.isnan(c) for c in X.chunks[0]):
            X = X.compute_chunk_sizes()
        parts = list(X.to_delayed()[:, 0])
        lengths = [int(c) for c in X.chunks[0]]
        d = int(X.shape[1])
        attrs = {"n_features_in_": d}
    n = int(sum(lengths))
    if n < 1 or d < 1:
        raise ValueError(f"Found array with {n} sample(s) and {d} feature(s) while a "
                         "minimum of 1 is required.")
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(int).tolist()
    return list(zip(parts, offsets, lengths)), (n, d), attrs


def bounded_sum_graph(chunks, plan, digest=True):
    """A Delayed of the merged :class:`~skdpsparse.distributed._core.BoundedSumPart`:
    one ``partial_bounded_sum`` task per chunk, then a binary tree of ``merge_parts``.
    The partial sums travel only as task results (never through a shared
    accumulator), so a retried task replaces its result instead of adding to it.
    With ``digest`` (the default) the parts carry the data digest too, for a key
    derived from the data; a fit whose key is not can pass False."""
    partial = dask.delayed(partial_bounded_sum, pure=True)
    merge = dask.delayed(merge_parts, pure=True)
    level = [partial(chunk, plan, offset, rows, digest)
             for chunk, offset, rows in chunks]
    while len(level) > 1:
        level = [merge(level[i], level[i + 1], plan.n_rows) if i + 1 < len(level)
                 else level[i] for i in range(0, len(level), 2)]
    return level[0]


def compute_bounded_sum(chunks, plan, digest=True):
    """Run :func:`bounded_sum_graph` on the current scheduler; the merged part."""
    (part,) = dask.compute(bounded_sum_graph(chunks, plan, digest))
    return part
