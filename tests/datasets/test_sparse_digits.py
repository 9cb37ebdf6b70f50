"""load_sparse_digits: structure, exact hashing, reproducibility across processes."""

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.utils import Bunch

from skdpsparse.datasets import load_sparse_digits
from skdpsparse.datasets._sparse_digits import _splitmix64

MASK = (1 << 64) - 1

# sha256 of the CSR indices (as little-endian int64) of the default configurations; a
# change means the dataset changed for every user, which must be deliberate.
PINNED = {
    ("adjacent", 256): "33406349e57ab8f4ddd795baa56f4df1d3f8d47178df61a574f27796c97e7b2d",
    ("all", 256): "58a2f3cf92671acbf284cf311808b38cdedf959d556ae78458300d5b63378def",
}


def _digest(X):
    return hashlib.sha256(X.indices.astype("<i8").tobytes()).hexdigest()


def _splitmix64_reference(key):
    """SplitMix64 in Python integers: mix(key + golden gamma)."""
    z = (int(key) + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def test_splitmix64_known_values():
    # The first two outputs of the SplitMix64 generator seeded with 0.
    out = _splitmix64(np.array([0, 0x9E3779B97F4A7C15], dtype=np.uint64))
    assert [int(v) for v in out] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4]
    keys = np.random.default_rng(0).integers(0, 2**63, size=200, dtype=np.int64)
    keys = np.concatenate([keys, [0, 1, 288, 2**63 - 1]])
    assert [int(v) for v in _splitmix64(keys)] == [_splitmix64_reference(k) for k in keys]


def _pairs(kind):
    if kind == "all":
        return [(i, j) for i in range(64) for j in range(i + 1, 64)]
    out = [(8 * r + c, 8 * r + c + 1) for r in range(8) for c in range(7)]
    out += [(8 * r + c, 8 * (r + 1) + c) for r in range(7) for c in range(8)]
    return sorted(out)


@pytest.mark.parametrize("pairs, n_pairs", [("adjacent", 112), ("all", 2016)])
@pytest.mark.parametrize("n_buckets", [1, 17, 256, 300])
def test_structure(pairs, n_pairs, n_buckets, assert_sparse_rows):
    X, y = load_sparse_digits(return_X_y=True, pairs=pairs, n_buckets=n_buckets)
    n_features = 64 * 17 + n_pairs * n_buckets
    cols = assert_sparse_rows(X, 1797, n_features, 64 + n_pairs)
    np.testing.assert_array_equal(X.data, 1.0)
    # One-hot block: one column per pixel, decoding to the original intensity.
    digits = load_digits()
    np.testing.assert_array_equal(cols[:, :64] - 17 * np.arange(64), digits.data)
    # Cross blocks: exactly one column in every pair's own block.
    block = (cols[:, 64:] - 1088) // n_buckets
    np.testing.assert_array_equal(block, np.broadcast_to(np.arange(n_pairs), (1797, n_pairs)))
    np.testing.assert_array_equal(y, digits.target)
    assert y.dtype == np.int64


def test_shapes_of_the_defaults():
    X, _ = load_sparse_digits(return_X_y=True)
    assert X.shape == (1797, 29_760) and X.nnz == 1797 * 176
    X, _ = load_sparse_digits(return_X_y=True, pairs="all")
    assert X.shape == (1797, 517_184) and X.nnz == 1797 * 2080


@pytest.mark.parametrize("pairs", ["adjacent", "all"])
def test_crosses_match_reference_hash(pairs):
    n_buckets = 256
    bunch = load_sparse_digits(pairs=pairs, n_buckets=n_buckets)
    expected_pairs = _pairs(pairs)
    np.testing.assert_array_equal(bunch.pairs, expected_pairs)
    X = bunch.data
    levels = load_digits().data.astype(int)
    for row in (0, 1, 917, 1796):
        got = X.indices[X.indptr[row] + 64 : X.indptr[row + 1]]
        want = [1088 + p * n_buckets
                + _splitmix64_reference(289 * p + 17 * levels[row, i] + levels[row, j])
                % n_buckets
                for p, (i, j) in enumerate(expected_pairs)]
        np.testing.assert_array_equal(got, want)


def test_hash_spreads_crosses():
    """Different intensity crosses of a pair mostly land in different buckets."""
    X, _ = load_sparse_digits(return_X_y=True, n_buckets=256)
    used = np.unique(X.indices[X.indices >= 1088])
    assert used.size > 0.1 * (X.shape[1] - 1088)


def test_pinned_digests():
    for (pairs, n_buckets), digest in PINNED.items():
        X, _ = load_sparse_digits(return_X_y=True, pairs=pairs, n_buckets=n_buckets)
        assert _digest(X) == digest, (pairs, n_buckets)


def test_identical_across_processes_with_different_hash_seeds():
    code = (
        "import hashlib, numpy as np\n"
        "from skdpsparse.datasets import load_sparse_digits\n"
        "X, y = load_sparse_digits(return_X_y=True, n_buckets=97)\n"
        "h = hashlib.sha256(X.indices.astype('<i8').tobytes())\n"
        "h.update(X.indptr.astype('<i8').tobytes()); h.update(y.astype('<i8').tobytes())\n"
        "print(h.hexdigest(), hash('salted'))\n"
    )
    outputs = []
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=120, check=True)
        outputs.append(proc.stdout.split())
    assert outputs[0][1] != outputs[1][1], "the two processes did not get different salts"
    assert outputs[0][0] == outputs[1][0]
    X, y = load_sparse_digits(return_X_y=True, n_buckets=97)
    h = hashlib.sha256(X.indices.astype("<i8").tobytes())
    h.update(X.indptr.astype("<i8").tobytes())
    h.update(y.astype("<i8").tobytes())
    assert h.hexdigest() == outputs[0][0]


def test_bunch_and_binary():
    bunch = load_sparse_digits(binary=True)
    assert isinstance(bunch, Bunch)
    for key in ("data", "target", "target_names", "feature_names", "pairs", "n_buckets",
                "DESCR"):
        assert key in bunch
    digits = load_digits()
    np.testing.assert_array_equal(bunch.target, digits.target % 2)
    np.testing.assert_array_equal(bunch.target_names, ["even", "odd"])
    assert bunch.feature_names.shape == (bunch.data.shape[1],)
    assert len(set(bunch.feature_names)) == bunch.data.shape[1]
    row0 = bunch.feature_names[bunch.data.indices[: bunch.data.indptr[1]]]
    assert row0[0] == f"pixel_0_0=={int(digits.data[0, 0])}"
    assert row0[64].startswith("pixel_0_0*pixel_0_1#")
    assert "Sparse digits" in bunch.DESCR
    multi = load_sparse_digits()
    np.testing.assert_array_equal(multi.target_names, np.arange(10))
    assert (multi.data != bunch.data).nnz == 0


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        (dict(pairs="diagonal"), ValueError, "pairs"),
        (dict(n_buckets=0), ValueError, "n_buckets"),
        (dict(n_buckets=2.5), TypeError, "n_buckets"),
        (dict(binary=1), TypeError, "binary"),
        (dict(return_X_y="yes"), TypeError, "return_X_y"),
    ],
)
def test_argument_validation(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        load_sparse_digits(**kwargs)
