"""The data digest of every fit's noise key: chunks compute it apart, a driver merges.

A fit's noise key is a keyed hash of the seed, the parameters and a digest of each
data array (:func:`skdpsparse.utils.fit_random_source`). A sequential hash cannot be
computed by several workers and merged, and streaming every row through the driver
would defeat the point of a cluster; so the one digest of the library, in memory
(``skdpsparse.utils._random._digest_array``) and on Dask alike, is defined here:

* a matrix of shape (r, c) is read as *lines*: its rows, except a short wide matrix
  (r < c and r ≤ :data:`MAX_COLUMN_READ_ROWS`), read by columns: a (K, n) target
  matrix, one row per problem, is so read example by example, and a chunk of
  examples holds whole lines; a vector of length n is n lines of one entry;
* the lines are cut into global blocks of :data:`BLOCK_ROWS` consecutive lines (by
  line index in the whole matrix, not by chunk);
* block b with canonical content c_b (per line its count of nonzeros, then the
  indices as int64 and the values as float64, duplicates summed, zeros dropped,
  indices sorted: so the container, dense or any sparse format, does not matter)
  gets the 2048-bit value v_b = E(BLAKE2b-512("skdps-rows-v2", b ‖ c_b)), E the
  expansion of a 512-bit digest to 2048 bits by four BLAKE2b calls keyed with it
  (SHAKE256 until 2026-11-27: three times slower, it took half of a seeded sparse
  mean's fit);
* the digest is BLAKE2b(shape ‖ kernel ‖ Σ_b v_b mod 2²⁰⁴⁸), where the kernel tag
  says whether the fit reads the matrix dense or sparse and in which float dtype
  (those choose the compiled loop and its rounding, and two containers of one matrix
  must not share noise on statistics that round differently; a vector's tag is
  "vector", whatever its dtype).

The sum is an incremental hash in the sense of Bellare and Micciancio (1997), "A new
paradigm for collision-free hashing: incrementality at reduced cost" (AdHash). It is
associative and commutative, so a chunk computes the sum over the blocks it holds
whole, and a block cut by a chunk boundary travels as its (at most
``BLOCK_ROWS - 1`` lines) fragments until :func:`merge_digests` has all of them. The
result is the same function of the data for every chunking and every merge order, and
for one in-memory array (one chunk): the same seed gives the same key in memory and on
Dask. The block index inside each v_b makes it depend on the line order. The cases
whose lines a chunk does not hold whole, a data matrix of at most 256 rows and more
columns, or more than 256 target rows (one-vs-rest over more than 256 classes), are
digested by rows (data) or by examples (targets) on a cluster anyway: such a fit
draws other noise (of the same distribution) than in memory.

What it is for, and its limit: the key derivation needs two different datasets to get
different keys (so clones fitted on different data never share noise). A collision
would need Σ v_b to agree modulo 2²⁰⁴⁸ for two different data sets; Wagner's (2002)
generalised-birthday attack on such sums costs about 2^(2048/(1 + log₂ k)) hash
evaluations for k blocks (more than 2⁸⁰ for k below 2²⁴ blocks, i.e. 1.7·10¹⁰ rows).
And a collision alone shares no noise: every release's draw also hashes the exact
statistic it is added to (:meth:`skdpsparse.utils.RandomSource.add_discrete_noise`).

Nothing secret enters here: a worker sees only the data and public positions.
"""

import hashlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp

__all__ = ["BLOCK_ROWS", "DigestPart", "array_digest", "by_columns", "chunk_digest",
           "final_digest", "kernel_tag", "merge_digests", "multiset_digest",
           "row_multiset_part"]

#: Rows per global block of the digest.
BLOCK_ROWS = 1024

_MODULUS_BYTES = 256  # 2048 bits
_MODULUS = 1 << (8 * _MODULUS_BYTES)
_PERSON = b"skdps-rows-v2"
_PERSON_EXPAND = b"skdps-expand-v2"
_ROW_TAG = 2**64 - 1  # in place of a block index: a lone row of the multiset digest


def _initial_states():
    from .._kernels.blake2b import initial_state

    return initial_state(64, 0, _PERSON), initial_state(64, 64, _PERSON_EXPAND)


# h₀ of the row hash and of the keyed expansion (the parameters _block_value uses)
_ROW_STATE, _EXPAND_STATE = _initial_states()


class DigestPart:
    """The digest of some rows of a matrix: a sum of whole blocks and fragments.

    Attributes
    ----------
    total : int
        Σ v_b mod 2²⁰⁴⁸ over the blocks this part holds whole.
    fragments : dict
        block index → list of (first row, counts, columns, values) of the rows of a
        block this part holds only partly.
    n_rows : int
        Rows covered.
    """

    __slots__ = ("total", "fragments", "n_rows")

    def __init__(self, total=0, fragments=None, n_rows=0):
        self.total = int(total)
        self.fragments = {} if fragments is None else fragments
        self.n_rows = int(n_rows)


def _canonical_csr(chunk):
    """CSR of float64 with sorted indices, no duplicates, no explicit zeros."""
    if sp.issparse(chunk):
        block = sp.csr_array(chunk, dtype=np.float64, copy=True)
    else:
        block = sp.csr_array(np.asarray(chunk, dtype=np.float64))
    block.sum_duplicates()
    block.eliminate_zeros()
    block.sort_indices()
    return block


def _canonical_lines(lines, start, stop, canonical=False):
    """(counts, indices, values) of lines ``start:stop`` in canonical form; reads only
    those lines (bounded extra memory for a large in-memory matrix). ``canonical``:
    the CSR ``lines`` already is (:func:`_is_canonical`), so its slices are used."""
    if sp.issparse(lines):
        if canonical:
            return _rows(lines, start, stop)
        block = _canonical_csr(lines[start:stop])
        return np.diff(block.indptr), block.indices, block.data
    block = np.asarray(lines[start:stop], dtype=np.float64)
    rows, cols = np.nonzero(block)
    return np.bincount(rows, minlength=block.shape[0]), cols, block[rows, cols]


def _is_canonical(csr):
    """Whether a CSR's own arrays are its canonical form (sorted indices, no
    duplicates, no stored zeros); float32 values are widened when hashed, exactly."""
    return bool(csr.has_canonical_format) and not (csr.data == 0).any()


def _block_value(index, counts, cols, vals):
    """v_b: BLAKE2b-512 of (b, counts, indices as int64, values as float64), expanded
    to 2048 bits by four BLAKE2b calls keyed with it (a pseudo-random function of the
    block, as the sum needs). BLAKE2b runs about three times as fast as SHAKE256."""
    h = hashlib.blake2b(int(index).to_bytes(8, "little"), digest_size=64, person=_PERSON)
    for part, dtype in ((counts, "<i8"), (cols, "<i8"), (vals, "<f8")):
        h.update(np.ascontiguousarray(part, dtype=dtype).view(np.uint8).reshape(-1))
    seed = h.digest()
    value = b"".join(hashlib.blake2b(bytes([i]), digest_size=64, key=seed,
                                     person=_PERSON_EXPAND).digest() for i in range(4))
    return int.from_bytes(value, "little")


def _rows(block, start, stop):
    lo, hi = block.indptr[start], block.indptr[stop]
    return (np.diff(block.indptr[start:stop + 1]), block.indices[lo:hi],
            block.data[lo:hi])


def chunk_digest(chunk, row_offset, n_rows_total, n_threads=None):
    """The :class:`DigestPart` of the lines of ``chunk``, lines ``row_offset`` onwards
    of a matrix of ``n_rows_total`` lines (a chunk's rows, or the transposed chunk of
    a matrix read by columns). Whole blocks are hashed on ``n_threads`` threads
    (default: the free cores; hashlib releases the GIL), the sum is the same."""
    from .._kernels.sparse_rows import free_threads

    if sp.issparse(chunk) and chunk.format != "csr":
        chunk = sp.csr_array(chunk)
    canonical = sp.issparse(chunk) and _is_canonical(chunk)
    n = chunk.shape[0]
    part = DigestPart(n_rows=n)
    whole = []
    row = 0
    while row < n:
        g = row_offset + row  # global line
        b = g // BLOCK_ROWS
        b_start = b * BLOCK_ROWS
        b_stop = min(b_start + BLOCK_ROWS, n_rows_total)
        stop = min(n, b_stop - row_offset)
        if g == b_start and row_offset + stop == b_stop:
            whole.append((b, row, stop))
        else:
            counts, cols, vals = _canonical_lines(chunk, row, stop, canonical)
            part.fragments.setdefault(b, []).append(
                (g, counts.copy(), cols.copy(), vals.copy()))
        row = stop

    def value(block):
        b, start, stop = block
        return _block_value(b, *_canonical_lines(chunk, start, stop, canonical))

    n_threads = min(free_threads() if n_threads is None else int(n_threads), len(whole))
    if n_threads > 1:
        with ThreadPoolExecutor(max_workers=n_threads) as pool:
            values = list(pool.map(value, whole))
    else:
        values = [value(block) for block in whole]
    part.total = sum(values) % _MODULUS
    return part


def merge_digests(a, b, n_rows_total):
    """The :class:`DigestPart` of the rows of ``a`` and ``b`` (disjoint), completing
    every block whose fragments are now all there."""
    total = (a.total + b.total) % _MODULUS
    fragments = {k: list(v) for k, v in a.fragments.items()}
    for k, v in b.fragments.items():
        fragments.setdefault(k, []).extend(v)
    for k in list(fragments):
        pieces = sorted(fragments[k], key=lambda piece: piece[0])
        b_start = k * BLOCK_ROWS
        b_len = min(BLOCK_ROWS, n_rows_total - b_start)
        if sum(len(p[1]) for p in pieces) == b_len:
            counts = np.concatenate([p[1] for p in pieces])
            cols = np.concatenate([p[2] for p in pieces])
            vals = np.concatenate([p[3] for p in pieces])
            total = (total + _block_value(k, counts, cols, vals)) % _MODULUS
            del fragments[k]
        else:
            fragments[k] = pieces
    return DigestPart(total, fragments, a.n_rows + b.n_rows)


def kernel_tag(sparse, dtype):
    """The kernel tag of a matrix the fit reads sparse or dense, in ``dtype`` as
    scikit-learn's validation leaves it (float32 kept, anything else float64)."""
    dtype = np.dtype(dtype)
    name = "float32" if dtype == np.float32 else "float64"
    return ("sparse" if sparse else "dense", name)


#: A matrix with at most this many rows, and more columns, is read by columns.
MAX_COLUMN_READ_ROWS = 256


def by_columns(shape):
    """Whether a matrix of ``shape`` is read by columns (a short wide matrix: fewer
    rows than columns, and at most :data:`MAX_COLUMN_READ_ROWS` rows)."""
    return len(shape) == 2 and shape[0] < shape[1] and shape[0] <= MAX_COLUMN_READ_ROWS


def final_digest(part, shape, kernel=("dense", "float64"), orientation=None):
    """The 32-byte digest of a whole matrix of ``shape`` from its merged part.

    ``kernel`` is :func:`kernel_tag`'s tag (or ``("vector",)``); ``orientation``
    ("rows" or "columns") defaults to the one :func:`by_columns` gives the shape.
    """
    if orientation is None:
        orientation = "columns" if by_columns(shape) else "rows"
    n_lines = shape[1] if orientation == "columns" else shape[0]
    if part.fragments or part.n_rows != n_lines:
        raise ValueError("the digest does not cover every row (every column, for a "
                         "matrix read by columns) exactly once "
                         f"({part.n_rows} lines for shape {tuple(shape)}).")
    h = hashlib.blake2b(digest_size=32, person=b"skdps-dist-v2")
    h.update(repr(("matrix", tuple(int(s) for s in shape), tuple(kernel),
                   orientation)).encode())
    h.update(part.total.to_bytes(_MODULUS_BYTES, "little"))
    return h.digest()


def array_digest(a, kernel):
    """The digest of an in-memory matrix or vector (one chunk of all its lines)."""
    if not sp.issparse(a) and np.ndim(a) != 2:
        a = np.asarray(a)
        shape = a.shape
        lines = a.reshape(-1, 1)
        return final_digest(chunk_digest(lines, 0, lines.shape[0]), shape, kernel,
                            orientation="rows")
    shape = a.shape
    lines = a
    if by_columns(shape):
        lines = sp.csr_array(a.T) if sp.issparse(a) else np.asarray(a).T
    return final_digest(chunk_digest(lines, 0, lines.shape[0]), shape, kernel)


# ---------------------------------------------------------- order-free row multiset
def row_multiset_part(chunk, n_threads=None):
    """(Σ_rows v(row) mod 2²⁰⁴⁸, rows) of a chunk: a digest of the rows as a
    multiset, for engines with no stable global row order (Spark after a shuffle).

    Each row's canonical content (count, columns, values, as above) is hashed on its
    own, without a position; the sum is the same for every partitioning and order of
    the rows. It is another function of the data than :func:`final_digest` (which
    depends on row order), so a Spark fit and an in-memory fit of the same seed draw
    different noise of the same distribution.

    Each v(row) is ``_block_value(tag, [k], cols, vals)``, computed by the compiled
    BLAKE2b of :mod:`skdpsparse._kernels.blake2b` (the same bytes as ``hashlib``,
    which took about 36 µs per row of 16 nonzeros from Python), on ``n_threads``
    threads over row ranges (default: the free cores; the sum does not depend on it).
    """
    from .._kernels.sparse_rows import free_threads
    from .._kernels.blake2b import row_multiset_limbs

    block = chunk if sp.issparse(chunk) and chunk.format == "csr" \
        and chunk.dtype == np.float64 and _is_canonical(chunk) else _canonical_csr(chunk)
    n = block.shape[0]
    indptr = np.asarray(block.indptr, dtype=np.int64)
    indices = np.asarray(block.indices, dtype=np.int64)
    bits = np.ascontiguousarray(block.data, dtype=np.float64).view(np.uint64)
    n_threads = max(1, min(free_threads() if n_threads is None else int(n_threads),
                           n // 4096 or 1))

    def limbs(lo, hi):
        acc = np.zeros(_MODULUS_BYTES // 8, dtype=np.uint64)
        row_multiset_limbs(indptr[lo:hi + 1] - indptr[lo], indices[indptr[lo]:indptr[hi]],
                           bits[indptr[lo]:indptr[hi]], np.uint64(_ROW_TAG),
                           _ROW_STATE, _EXPAND_STATE, acc)
        return int.from_bytes(acc.astype("<u8").tobytes(), "little")

    cuts = np.linspace(0, n, n_threads + 1).astype(np.int64)
    ranges = list(zip(cuts[:-1].tolist(), cuts[1:].tolist()))
    if n_threads > 1:
        with ThreadPoolExecutor(max_workers=n_threads) as pool:
            values = list(pool.map(lambda r: limbs(*r), ranges))
    else:
        values = [limbs(*r) for r in ranges]
    return sum(values) % _MODULUS, n


def _row_multiset_part_hashlib(chunk):
    """:func:`row_multiset_part` with ``hashlib``, row by row (the reference the
    compiled pass is tested against)."""
    block = _canonical_csr(chunk)
    total = 0
    for i in range(block.shape[0]):
        counts, cols, vals = _rows(block, i, i + 1)
        total += _block_value(_ROW_TAG, counts, cols, vals)
    return total % _MODULUS, block.shape[0]


def multiset_digest(total, shape):
    """The 32-byte digest of a matrix's rows as a multiset, from the merged total."""
    h = hashlib.blake2b(digest_size=32, person=b"skdps-mset-v1")
    h.update(repr(("rows", tuple(int(s) for s in shape))).encode())
    h.update((int(total) % _MODULUS).to_bytes(_MODULUS_BYTES, "little"))
    return h.digest()
