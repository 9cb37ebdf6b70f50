"""A digest of a matrix that chunks can compute apart and the driver can merge.

A fit's noise key is a keyed hash of the seed, the parameters and a digest of the data
(:func:`skdpsparse.utils.fit_random_source`). The in-memory digest
(``skdpsparse.utils._random._digest_array``) is one sequential BLAKE2b pass over the
rows; a sequential hash cannot be computed by several workers and merged, and
streaming every row through the driver would defeat the point of a cluster. So the
distributed fit uses a different function of the same data, defined here:

* the rows are cut into global blocks of :data:`BLOCK_ROWS` consecutive rows (by row
  index in the whole matrix, not by chunk);
* block b with canonical content c_b (per row its count of nonzeros, then the column
  indices as int64 and the values as float64, duplicates summed, zeros dropped, indices
  sorted: the same canonical form as the in-memory digest, so the container, dense or
  any sparse format, and the dtype do not matter) gets the 2048-bit value
  v_b = SHAKE256("skdps-rows-v1" ‖ b ‖ c_b);
* the digest is BLAKE2b(shape ‖ Σ_b v_b mod 2²⁰⁴⁸).

The sum is an incremental hash in the sense of Bellare and Micciancio (1997), "A new
paradigm for collision-free hashing: incrementality at reduced cost" (AdHash). It is
associative and commutative, so a chunk computes the sum over the blocks it holds
whole, and a block cut by a chunk boundary travels as its (at most
``BLOCK_ROWS - 1`` rows) fragments until :func:`merge_digests` has all of them. The
result is the same function of the data for every chunking and every merge order, and
for one in-memory array (one chunk). The block index inside each v_b makes it depend
on the row order, as the sequential digest does.

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

import numpy as np
import scipy.sparse as sp

__all__ = ["BLOCK_ROWS", "DigestPart", "chunk_digest", "final_digest", "merge_digests",
           "multiset_digest", "row_multiset_part"]

#: Rows per global block of the digest.
BLOCK_ROWS = 1024

_MODULUS_BYTES = 256  # 2048 bits
_MODULUS = 1 << (8 * _MODULUS_BYTES)
_PERSON = b"skdps-rows-v1"
_ROW_TAG = 2**64 - 1  # in place of a block index: a lone row of the multiset digest


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


def _block_value(index, counts, cols, vals):
    h = hashlib.shake_256(_PERSON + int(index).to_bytes(8, "little"))
    for part, dtype in ((counts, "<i8"), (cols, "<i8"), (vals, "<f8")):
        h.update(np.ascontiguousarray(part, dtype=dtype).view(np.uint8).reshape(-1))
    return int.from_bytes(h.digest(_MODULUS_BYTES), "little")


def _rows(block, start, stop):
    lo, hi = block.indptr[start], block.indptr[stop]
    return (np.diff(block.indptr[start:stop + 1]), block.indices[lo:hi],
            block.data[lo:hi])


def chunk_digest(chunk, row_offset, n_rows_total):
    """The :class:`DigestPart` of ``chunk``, rows ``row_offset`` onwards of a matrix
    of ``n_rows_total`` rows."""
    block = _canonical_csr(chunk)
    n = block.shape[0]
    part = DigestPart(n_rows=n)
    row = 0
    while row < n:
        g = row_offset + row  # global row
        b = g // BLOCK_ROWS
        b_start = b * BLOCK_ROWS
        b_stop = min(b_start + BLOCK_ROWS, n_rows_total)
        stop = min(n, b_stop - row_offset)
        counts, cols, vals = _rows(block, row, stop)
        if g == b_start and row_offset + stop == b_stop:
            part.total = (part.total + _block_value(b, counts, cols, vals)) % _MODULUS
        else:
            part.fragments.setdefault(b, []).append(
                (g, counts.copy(), cols.copy(), vals.copy()))
        row = stop
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


def final_digest(part, shape):
    """The 32-byte digest of a whole matrix of ``shape`` from its merged part."""
    if part.fragments or part.n_rows != shape[0]:
        raise ValueError("the digest does not cover every row of the matrix exactly once "
                         f"({part.n_rows} rows for shape {tuple(shape)}).")
    h = hashlib.blake2b(digest_size=32, person=b"skdps-dist-v1")
    h.update(repr(("matrix", tuple(int(s) for s in shape))).encode())
    h.update(part.total.to_bytes(_MODULUS_BYTES, "little"))
    return h.digest()


# ---------------------------------------------------------- order-free row multiset
def row_multiset_part(chunk):
    """(Σ_rows SHAKE256(row) mod 2²⁰⁴⁸, rows) of a chunk: a digest of the rows as a
    multiset, for engines with no stable global row order (Spark after a shuffle).

    Each row's canonical content (count, columns, values, as above) is hashed on its
    own, without a position; the sum is the same for every partitioning and order of
    the rows. It is another function of the data than :func:`final_digest` (which
    depends on row order), so a Spark fit and an in-memory fit of the same seed draw
    different noise of the same distribution.
    """
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
