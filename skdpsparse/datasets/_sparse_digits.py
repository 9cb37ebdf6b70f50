"""A real sparse, high-dimensional classification set built from the bundled digits."""

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_digits
from sklearn.utils import Bunch

from ._validation import check_bool, check_int, check_option

__all__ = ["load_sparse_digits"]

_SIDE = 8  # images are 8 x 8
_N_PIXELS = _SIDE * _SIDE
_N_LEVELS = 17  # intensities 0..16

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _splitmix64(keys):
    """SplitMix64 mixer on a uint64 array: ``mix(key + golden)``, wrapping mod 2**64.

    Returns a new uint64 array of at least one dimension.

    Deterministic across processes and platforms, unlike Python's salted ``hash``.
    ``_splitmix64(0)`` is the first output of the SplitMix64 generator seeded with 0.
    """
    z = np.array(keys, dtype=np.uint64, ndmin=1)  # arrays wrap silently; scalars warn
    z += _GOLDEN
    z ^= z >> np.uint64(30)
    z *= _MIX1
    z ^= z >> np.uint64(27)
    z *= _MIX2
    z ^= z >> np.uint64(31)
    return z


def _pixel_pairs(pairs):
    """Pixel pairs ``(i, j)``, ``i < j``, in lexicographic order, as an (n_pairs, 2) array."""
    if pairs == "all":
        i, j = np.triu_indices(_N_PIXELS, k=1)
        return np.column_stack([i, j])
    idx = np.arange(_N_PIXELS).reshape(_SIDE, _SIDE)
    horizontal = np.column_stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()])
    vertical = np.column_stack([idx[:-1, :].ravel(), idx[1:, :].ravel()])
    both = np.concatenate([horizontal, vertical])
    return both[np.lexsort((both[:, 1], both[:, 0]))]


def _feature_names(pair_array, n_buckets):
    pixel = [f"pixel_{p // _SIDE}_{p % _SIDE}" for p in range(_N_PIXELS)]
    names = [f"{pixel[p]}=={v}" for p in range(_N_PIXELS) for v in range(_N_LEVELS)]
    names += [f"{pixel[i]}*{pixel[j]}#{b}" for i, j in pair_array.tolist()
              for b in range(n_buckets)]
    return np.asarray(names, dtype=object)


_DESCR = """Sparse digits
=============

A sparse, high-dimensional binary-feature version of scikit-learn's bundled optical
recognition of handwritten digits data (``sklearn.datasets.load_digits``: 1797 images
of 8 x 8 pixels, intensities 0..16, 10 classes).

Features (all 0/1, stored as float64 CSR):

* one-hot pixel intensities: column ``17 * pixel + intensity`` for the 64 pixels,
  ``1088`` columns;
* hashed pairwise crosses: pixel pair number ``p`` (pairs ``(i, j)``, ``i < j``, in
  lexicographic order) owns the block of columns
  ``1088 + p * n_buckets .. 1088 + (p + 1) * n_buckets - 1``, and the cross
  ``(v_i, v_j)`` of the two intensities sets the column of that block given by
  ``splitmix64(289 * p + 17 * v_i + v_j) mod n_buckets`` (SplitMix64 finalizer on
  ``key + 0x9E3779B97F4A7C15``, in uint64 arithmetic). Crosses may collide within a
  block, never across blocks.

Every row has exactly ``64 + n_pairs`` nonzeros. ``pairs="adjacent"`` uses the 112
horizontally or vertically neighbouring pairs, ``pairs="all"`` the 2016 pairs.

Targets: the digit 0..9, or with ``binary=True`` whether the digit is odd (1) or
even (0).
"""


def load_sparse_digits(*, return_X_y=False, pairs="adjacent", n_buckets=256, binary=False):
    """Load the digits as a sparse one-hot + hashed-pixel-cross classification set.

    Built from scikit-learn's bundled ``load_digits`` (no download): each of the 64
    pixel intensities (0..16) is one-hot encoded into 17 columns, and every pixel pair
    in ``pairs`` owns its own block of ``n_buckets`` columns into which the pair of
    intensities is hashed with a fixed integer hash (SplitMix64, identical in every
    process whatever ``PYTHONHASHSEED``). Every row has exactly ``64 + n_pairs``
    nonzero entries, all equal to 1.0.

    ================  ==============  ==============
    pairs             "adjacent"      "all"
    ================  ==============  ==============
    n_pairs           112             2016
    n_features        1088 + 112 B    1088 + 2016 B
    with B = 256      29 760          517 184
    nonzeros per row  176             2080
    ================  ==============  ==============

    Parameters
    ----------
    return_X_y : bool, default=False
        Return ``(data, target)`` instead of a ``Bunch``.
    pairs : {"adjacent", "all"}, default="adjacent"
        Which pixel pairs to cross: horizontal and vertical neighbours, or all pairs.
    n_buckets : int, default=256
        Columns per pixel pair, at least 1. There are 289 possible intensity crosses
        per pair, so fewer buckets means more collisions within a pair.
    binary : bool, default=False
        If True the target is whether the digit is odd (1) or even (0).

    Returns
    -------
    data : sklearn.utils.Bunch
        With ``data`` (scipy.sparse.csr_matrix of shape (1797, n_features), float64,
        canonical format), ``target`` (ndarray of shape (1797,), int64),
        ``target_names``, ``feature_names`` (ndarray of str of shape (n_features,)),
        ``pairs`` (ndarray of shape (n_pairs, 2): the pixel indices of every pair, in
        block order), ``n_buckets`` and ``DESCR``.
    (data, target) : tuple
        If ``return_X_y`` is True.

    Examples
    --------
    >>> from skdpsparse.datasets import load_sparse_digits
    >>> X, y = load_sparse_digits(return_X_y=True)
    >>> X.shape, X.nnz // X.shape[0]
    ((1797, 29760), 176)
    """
    return_X_y = check_bool(return_X_y, "return_X_y")
    check_option(pairs, "pairs", ("adjacent", "all"))
    n_buckets = check_int(n_buckets, "n_buckets", min_value=1)
    binary = check_bool(binary, "binary")

    digits = load_digits()
    levels = np.rint(digits.data).astype(np.int64)  # (n, 64), values 0..16
    target = digits.target.astype(np.int64)
    n_samples = levels.shape[0]

    pair_array = _pixel_pairs(pairs)
    n_pairs = pair_array.shape[0]
    n_onehot = _N_PIXELS * _N_LEVELS
    n_features = n_onehot + n_pairs * n_buckets

    onehot_cols = _N_LEVELS * np.arange(_N_PIXELS) + levels
    pair_index = np.arange(n_pairs, dtype=np.int64)
    keys = (_N_LEVELS * _N_LEVELS) * pair_index + _N_LEVELS * levels[:, pair_array[:, 0]] \
        + levels[:, pair_array[:, 1]]
    buckets = (_splitmix64(keys) % np.uint64(n_buckets)).astype(np.int64)
    cross_cols = n_onehot + n_buckets * pair_index + buckets

    n_per_row = _N_PIXELS + n_pairs
    index_dtype = np.int32 if n_features <= np.iinfo(np.int32).max else np.int64
    indices = np.concatenate([onehot_cols, cross_cols], axis=1).astype(index_dtype).ravel()
    indptr = np.arange(0, n_samples * n_per_row + 1, n_per_row, dtype=index_dtype)
    X = sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(n_samples, n_features))
    X.has_sorted_indices = True  # blocks are disjoint and in column order
    X.has_canonical_format = True

    if binary:
        target = target % 2
        target_names = np.array(["even", "odd"])
    else:
        target_names = digits.target_names.copy()
    if return_X_y:
        return X, target
    return Bunch(
        data=X,
        target=target,
        target_names=target_names,
        feature_names=_feature_names(pair_array, n_buckets),
        pairs=pair_array,
        n_buckets=n_buckets,
        DESCR=_DESCR,
    )
