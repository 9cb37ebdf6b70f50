"""Data shared by the distributed tests."""

import numpy as np
import scipy.sparse as sp


def sparse_rows(n=3000, d=2000, nnz=6, seed=0):
    """Rows with ``nnz`` nonzeros each, some far outside the bound L = 1 (scaled, never
    rejected), as CSR."""
    rng = np.random.default_rng(seed)
    cols = np.concatenate([rng.choice(d, nnz, replace=False) for _ in range(n)])
    vals = rng.standard_normal(n * nnz) * rng.choice([0.1, 1.0, 50.0], n * nnz)
    indptr = np.arange(0, n * nnz + 1, nnz)
    return sp.csr_matrix((vals, cols, indptr), shape=(n, d))


def heavy_rows(n=2000, d=12, seed=0, sparse=False):
    """Student-t(2.5) rows, scaled by 10 and shifted by 3 (70 % zeros when sparse,
    as CSR): the heavy-tailed mean's test data."""
    rng = np.random.default_rng(seed)
    X = rng.standard_t(2.5, size=(n, d)) * 10 + 3
    if sparse:
        X[rng.random((n, d)) < 0.7] = 0.0
        return sp.csr_matrix(X)
    return X


def spy_on_draws(monkeypatch, names=("add_discrete_noise", "_next_key")):
    """Records the thread of every draw: each one (noise, exponential mechanism)
    derives its subkey through ``RandomSource._next_key`` or draws through
    ``add_discrete_noise``. Returns the list the spies append to."""
    import threading

    from skdpsparse.utils import RandomSource

    threads = []
    for name in names:
        original = getattr(RandomSource, name)

        def spy(self, *args, _original=original, **kwargs):
            threads.append(threading.get_ident())
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(RandomSource, name, spy)
    return threads


def spy_on_graphs(monkeypatch):
    """Records every graph ``dask.compute`` runs, pickled (what the scheduler and the
    workers receive). Returns the list of pickles."""
    import cloudpickle
    import dask

    graphs = []
    compute = dask.compute

    def spy_compute(*args, **kwargs):
        graphs.append(cloudpickle.dumps([dict(a.__dask_graph__()) for a in args
                                         if hasattr(a, "__dask_graph__")]))
        return compute(*args, **kwargs)
    monkeypatch.setattr(dask, "compute", spy_compute)
    return graphs


def assert_no_secret_in(graphs, seed, names=()):
    """No graph holds the seed (as 8 bytes or digits), a random source, the
    estimator's parameters or any of ``names`` (noise functions)."""
    for blob in graphs:
        for forbidden in (b"RandomSource", b"random_state", *names,
                          seed.to_bytes(8, "little"), str(seed).encode()):
            assert forbidden not in blob, forbidden
