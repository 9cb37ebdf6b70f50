"""Datasets: synthetic sparse and heavy-tailed data with known population parameters,
and a real sparse high-dimensional classification set built from bundled data.

Every generator takes ``random_state`` (None, int or ``numpy.random.Generator``) and is
deterministic for an int seed. Nothing is downloaded.
"""

from ._generators import make_sparse_classification, make_sparse_regression, make_sparse_vectors
from ._heavy_tailed import central_moment_bound, make_heavy_tailed
from ._sparse_digits import load_sparse_digits

__all__ = [
    "central_moment_bound",
    "load_sparse_digits",
    "make_heavy_tailed",
    "make_sparse_classification",
    "make_sparse_regression",
    "make_sparse_vectors",
]
