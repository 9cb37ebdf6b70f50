"""DPOutputPerturbation{Classifier,Regressor} on Dask: the in-memory release.

Bound on the difference: none. Every objective, gradient and Hessian-vector
evaluation of the certified solver is an exact int64 sum of per-row terms rounded to
a power-of-two grid (``skdpsparse._solvers.erm.FixedPointObjective``), the same
integers for every chunking, merge order and scheduler; the driver is the in-memory
one (``certified_minimizers``), so the iterates, the certificate and the minimizer
are the in-memory ones, and the key comes from the same digests. The tests assert
bit-identical releases.
"""

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsparse.distributed import _output_perturbation
from skdpsparse.linear_model import (
    DPOutputPerturbationClassifier, DPOutputPerturbationRegressor,
)
from skdpsparse.utils import RandomSource

from dist_data import sparse_rows

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
cloudpickle = pytest.importorskip("cloudpickle")

SEED = 918273645546372819  # distinctive, to be looked for in the graphs


def _data(n=2000, d=150, seed=1):
    X = sparse_rows(n=n, d=d, nnz=6, seed=seed)
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    score = X @ w
    return X, (score > 0).astype(int), np.clip(score, -3.0, 3.0), rng.integers(0, 3, n)


def _clf(**kw):
    return DPOutputPerturbationClassifier(sparsity=6, random_state=SEED, **kw)


def _reg(**kw):
    kw.setdefault("label_bound", 3.0)
    return DPOutputPerturbationRegressor(sparsity=6, random_state=SEED, **kw)


def _dask(X, y, rows):
    Xd = da.from_array(X, chunks=(rows, X.shape[1]), asarray=False)
    return Xd, da.from_array(np.asarray(y), chunks=rows)


def _threads(fn, *args, **kwargs):
    with dask.config.set(scheduler="threads"):
        return fn(*args, **kwargs)


def _same(est, ref):
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    np.testing.assert_array_equal(est.intercept_, ref.intercept_)
    assert isinstance(est.coef_, np.ndarray)
    assert str(est.privacy_spent_) == str(ref.privacy_spent_)
    assert est.alpha_ == ref.alpha_ and est.noise_scale_ == ref.noise_scale_
    assert est.n_features_in_ == ref.n_features_in_


BINARY, REGRESSION, MULTICLASS = 0, 1, 2
CASES = {
    "binary": (lambda: _clf(classes=[0, 1]), BINARY),
    "multiclass-ball": (lambda: _clf(classes=[0, 1, 2], radius=5.0), MULTICLASS),
    "laplace": (lambda: _clf(classes=[0, 1], delta=0.0), BINARY),
    "squared": (lambda: _reg(), REGRESSION),
    "squared-interval": (lambda: _reg(label_bound=(-1.0, 3.5)), REGRESSION),
    "huber-no-intercept": (lambda: _reg(loss="huber", fit_intercept=False), REGRESSION),
}


@pytest.mark.parametrize("case", list(CASES))
def test_threaded_release_is_the_in_memory_estimator_bit_for_bit(case):
    make, target = CASES[case]
    X, *ys = _data()
    y = ys[target]
    ref = make().fit(X, y)
    for rows in (2000, 500, 333):  # one chunk, aligned chunks, ragged chunks
        _same(_threads(make().fit, *_dask(X, y, rows)), ref)


def test_dense_chunks_give_the_in_memory_fit_of_the_dense_array():
    X, y, _, _ = _data(n=800, d=30)
    X = X.toarray()
    ref = _clf(classes=[0, 1]).fit(X, y)
    _same(_threads(_clf(classes=[0, 1]).fit, *_dask(X, y, 300)), ref)


def test_every_pass_is_exact_so_the_solver_runs_the_same_iterates():
    # The oracle itself: the same integers from one chunk as from any chunking.
    from skdpsparse._solvers.erm import InMemoryRows

    X, _, y, _ = _data()
    Xd, yd = _dask(X, y, 457)
    est = _reg()
    captured = {}
    original = _output_perturbation.DaskRows.loss_gradient

    def spy(self, *args):
        out = original(self, *args)
        captured.setdefault("first", (args, out, self))
        return out

    _output_perturbation.DaskRows.loss_gradient = spy
    try:
        _threads(est.fit, Xd, yd)
    finally:
        _output_perturbation.DaskRows.loss_gradient = original
    args, out, rows = captured["first"]
    from skdpsparse.mechanisms.output_perturbation import bound_inputs

    Xb, yb = bound_inputs(X, np.asarray(y, dtype=float)[None, :], "squared",
                          norm_bound=1.0, sparsity=6, label_bound=3.0)
    mem = InMemoryRows(Xb, yb)
    ref = mem.loss_gradient(*args)
    assert out[0] == ref[0] and out[2] == ref[2] and out[3] == ref[3]
    np.testing.assert_array_equal(out[1], ref[1])
    np.testing.assert_array_equal(rows.counts, mem.counts)
    assert rows.passes > 1  # one pass per evaluation


def test_the_task_graphs_hold_no_seed_key_estimator_or_noise(monkeypatch):
    X, y, _, _ = _data(n=600, d=40)
    blobs = []
    original_compute, original_persist = dask.compute, dask.persist

    def record(fn):
        def inner(*collections, **kw):
            for c in collections:
                if hasattr(c, "__dask_graph__"):
                    blobs.append(cloudpickle.dumps(dict(c.__dask_graph__())))
            return fn(*collections, **kw)
        return inner

    monkeypatch.setattr(dask, "compute", record(original_compute))
    monkeypatch.setattr(dask, "persist", record(original_persist))
    _threads(_clf(classes=[0, 1]).fit, *_dask(X, y, 150))
    assert len(blobs) > 3
    for blob in blobs:
        for forbidden in (b"RandomSource", b"random_state", b"DPOutputPerturbation",
                          b"add_noise", b"add_discrete_noise", b"fit_random_source",
                          SEED.to_bytes(8, "little"), str(SEED).encode()):
            assert forbidden not in blob, forbidden
    assert any(b"_loss_gradient" in blob for blob in blobs)


def test_noise_is_drawn_once_on_the_driver(monkeypatch):
    import threading

    calls = []
    original = RandomSource.add_discrete_noise

    def spy(self, *args, **kwargs):
        calls.append(threading.get_ident())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(RandomSource, "add_discrete_noise", spy)
    X, y, _, _ = _data(n=600, d=40)
    _threads(_clf(classes=[0, 1]).fit, *_dask(X, y, 150))
    assert calls == [threading.get_ident()]


def _slow_blocks(n_blocks, rows, d, delay):
    def block(block_id=None):
        time.sleep(delay)
        rng = np.random.default_rng(block_id[0])  # the chunk is a function of its index
        return sp.random(rows, d, density=8 / d, format="csr", random_state=rng) * 3

    X = da.map_blocks(block, chunks=((rows,) * n_blocks, (d,)), dtype=float,
                      meta=sp.csr_matrix((0, d)))

    def labels(block_id=None):
        return np.random.default_rng(1000 + block_id[0]).integers(0, 2, rows)

    y = da.map_blocks(labels, chunks=((rows,) * n_blocks,), dtype=np.int64)
    return X, y


def test_a_worker_killed_mid_fit_changes_nothing(process_client):
    # On a process cluster, with a worker SIGKILLed mid-fit, the release is the
    # in-memory estimator's. The persisted bounded chunks of the killed worker are
    # lost; the scheduler recomputes them from their (pure) tasks and the remaining
    # passes return the same integers.
    X, y = _slow_blocks(8, 250, 300, delay=0.3)
    X_mem, y_mem = _threads(dask.compute, X, y)
    reference = _clf(classes=[0, 1]).fit(sp.csr_matrix(X_mem), y_mem)  # in memory
    pids = process_client.run(os.getpid)
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(_clf(classes=[0, 1]).fit, X, y)
        time.sleep(1.0)  # the chunks take at least 8 x 0.3 s / 2 workers to prepare
        assert not future.done()
        victim = sorted(pids.values())[0]
        os.kill(victim, signal.SIGKILL)  # a worker process this test's cluster started
        est = future.result(timeout=180)
    # (The nanny restarts the worker in the background; the fit did not wait for it.)
    _same(est, reference)


def test_unsupported_options_are_refused_before_reading_the_data():
    def boom(block_id=None):
        raise AssertionError("a chunk was read")

    X = da.map_blocks(boom, chunks=((100,), (5,)), dtype=float)
    y = da.zeros(100, chunks=100)
    for est, what in ((_clf(classes=[0, 1], method="exponential", radius=1.0),
                       "exponential"),
                      (_clf(classes=[0, 1], norm_bound="private"), "norm_bound"),
                      (_reg(label_bound="private"), "label_bound")):
        with pytest.raises(NotImplementedError, match=what):
            est.fit(X, y)


def test_undeclared_labels_and_bad_targets_raise_clear_errors():
    X, y, _, _ = _data(n=300, d=20)
    y = y.copy()
    y[7] = 5
    with pytest.raises(ValueError, match="classes"):
        _threads(_clf(classes=[0, 1]).fit, *_dask(X, y, 100))
    yr = np.zeros(300)
    yr[9] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        _threads(_reg().fit, *_dask(X, yr, 100))
    with pytest.raises(ValueError, match="y"):
        _clf(classes=[0, 1]).fit(_dask(X, y, 100)[0], np.asarray(y))
