"""The multiset digest of Spark's rows (``_digest.row_multiset_part``): the compiled
BLAKE2b pass gives the value of the ``hashlib`` reference, row by row, on random
inputs, and keeps the properties the key needs (no order, every row counted)."""

import hashlib

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsparse._kernels import blake2b as _blake2b
from skdpsparse.utils import _digest


def _awkward_rows(seed, n=700, d=5000):
    """Rows of 0 to 40 nonzeros: messages of 16 + 16k bytes cross the 128-byte blocks
    at every offset (k = 7 and 15 fill one and two blocks exactly), with unsorted
    indices, duplicates, explicit zeros, -0.0, subnormals and huge values."""
    rng = np.random.default_rng(seed)
    counts = rng.choice([0, 1, 6, 7, 8, 15, 16, 23, 40], size=n)
    indptr = np.r_[0, np.cumsum(counts)]
    cols = rng.integers(0, d, indptr[-1])
    vals = rng.standard_normal(indptr[-1]) * rng.choice([1e-310, 1.0, 1e300], indptr[-1])
    vals[rng.random(indptr[-1]) < 0.05] = 0.0
    vals[rng.random(indptr[-1]) < 0.02] = -0.0
    return sp.csr_matrix((vals, cols, indptr), shape=(n, d))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_compiled_digest_equals_the_hashlib_reference(seed):
    X = _awkward_rows(seed)
    reference = _digest._row_multiset_part_hashlib(X)
    assert _digest.row_multiset_part(X, n_threads=1) == reference
    assert _digest.row_multiset_part(X, n_threads=3) == reference  # threads: same sum
    canonical = X.copy()
    canonical.sum_duplicates()
    canonical.eliminate_zeros()
    assert _digest.row_multiset_part(canonical) == reference  # the no-copy path
    assert _digest.row_multiset_part(X.toarray()) == reference  # any container
    assert _digest.row_multiset_part(X[:0]) == (0, 0)


def test_the_compiled_hash_is_blake2b():
    # One row's value by hand with hashlib: BLAKE2b-512 (person skdps-rows-v2) of the
    # tag, the count, the indices and the values, expanded by four keyed calls.
    cols, vals = np.array([3, 9], dtype=np.int64), np.array([0.5, -2.0])
    seed = hashlib.blake2b((2**64 - 1).to_bytes(8, "little") + (2).to_bytes(8, "little")
                           + cols.astype("<i8").tobytes() + vals.astype("<f8").tobytes(),
                           digest_size=64, person=b"skdps-rows-v2").digest()
    value = b"".join(hashlib.blake2b(bytes([i]), digest_size=64, key=seed,
                                     person=b"skdps-expand-v2").digest() for i in range(4))
    row = sp.csr_matrix((vals, cols, [0, 2]), shape=(1, 10))
    assert _digest.row_multiset_part(row) == (int.from_bytes(value, "little"), 1)
    with pytest.raises(ValueError, match="at most 16 bytes"):
        _blake2b.initial_state(64, 0, b"x" * 17)


def test_the_multiset_digest_ignores_order_and_sees_every_row():
    X = _awkward_rows(3, n=300)
    total, n = _digest.row_multiset_part(X)
    rng = np.random.default_rng(0)
    shuffled = X[rng.permutation(300)]
    halves = [_digest.row_multiset_part(shuffled[:111]), _digest.row_multiset_part(shuffled[111:])]
    assert (sum(h[0] for h in halves) % 2**2048, sum(h[1] for h in halves)) == (total, n)
    changed = X.copy()
    changed.data[np.flatnonzero(changed.data)[0]] *= 1 + 2**-52
    assert _digest.row_multiset_part(changed)[0] != total
    assert _digest.row_multiset_part(X[:-1])[0] != total  # a missing row
    doubled = sp.vstack([X, X[:1]], format="csr")
    assert _digest.row_multiset_part(doubled)[0] != total  # a repeated row counts
