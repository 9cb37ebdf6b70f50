"""Privacy at scale: what a cluster must not change about the guarantee.

* The noise is drawn once, on the driver: never on a worker, and no seed, key or
  estimator is shipped to the workers (the task graph is inspected, and the workers'
  RandomSource is booby-trapped).
* Partial sums travel only as task results: a worker killed mid-run makes its tasks
  rerun, which replaces their results and changes nothing in the release.
* Every chunk rejects NaN/inf (``test_sparse_mean_dask.py``).
* User level: a unit spread over every partition contributes one bounded total.
"""

import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsparse.distributed import (
    _sparse_mean, fit_distributed, fit_sparse_mean_in_memory, fit_sparse_mean_units_in_memory,
)
from skdpsparse.mean import DPSparseMeanEstimator
from skdpsparse.utils import RandomSource, _digest

from dist_data import sparse_rows

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
cloudpickle = pytest.importorskip("cloudpickle")

SEED = 918273645546372819  # distinctive, to be looked for in the graph


def _est(**kw):
    kw.setdefault("sparsity", 6)
    kw.setdefault("random_state", SEED)
    return DPSparseMeanEstimator(**kw)


def _dask_csr(X, rows):
    return da.from_array(X, chunks=(rows, X.shape[1]), asarray=False)


def _threads(fn, *args, **kwargs):
    with dask.config.set(scheduler="threads"):
        return fn(*args, **kwargs)


def test_the_task_graph_holds_no_seed_key_estimator_or_noise():
    from skdpsparse.distributed._core import sparse_mean_plan
    from skdpsparse.distributed._dask import bounded_sum_graph, row_chunks

    chunks, shape, _ = row_chunks(_dask_csr(sparse_rows(n=600), 150))
    graph = bounded_sum_graph(chunks, sparse_mean_plan(*shape, 1.0, 6))
    blob = cloudpickle.dumps(dict(graph.__dask_graph__()))
    for forbidden in (b"RandomSource", b"random_state", b"DPSparseMeanEstimator",
                      b"add_noise", b"add_discrete_noise", b"fit_random_source",
                      SEED.to_bytes(8, "little"), str(SEED).encode()):
        assert forbidden not in blob, forbidden
    assert b"partial_bounded_sum" in blob and b"merge_parts" in blob


def test_noise_is_drawn_once_on_the_driver_thread(monkeypatch):
    calls = []
    original = RandomSource.add_discrete_noise

    def spy(self, *args, **kwargs):
        calls.append(threading.get_ident())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(RandomSource, "add_discrete_noise", spy)
    _threads(fit_distributed, _est(), _dask_csr(sparse_rows(), 400))
    assert calls == [threading.get_ident()]


def _install_tripwire():
    from skdpsparse.utils import RandomSource as Source

    def tripwire(self, *args, **kwargs):
        Source.worker_draws = getattr(Source, "worker_draws", 0) + 1
        raise AssertionError("noise drawn on a worker")

    Source.__init__ = tripwire
    Source.worker_draws = 0
    return True


def _worker_draws():
    from skdpsparse.utils import RandomSource as Source

    return getattr(Source, "worker_draws", None)


def test_no_worker_ever_creates_a_random_source(process_client):
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        assert all(process_client.run(_install_tripwire).values())
        X = sparse_rows()
        est = fit_distributed(_est(), _dask_csr(X, 500))
        assert list(process_client.run(_worker_draws).values()) == [0, 0]
        np.testing.assert_array_equal(est.mean_, fit_sparse_mean_in_memory(_est(), X).mean_)
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def _slow_blocks(n_blocks, rows, d, delay):
    def block(block_id=None):
        time.sleep(delay)
        rng = np.random.default_rng(block_id[0])  # the chunk is a function of its index
        return sp.random(rows, d, density=8 / d, format="csr", random_state=rng) * 30

    return da.map_blocks(block, chunks=((rows,) * n_blocks, (d,)), dtype=float,
                         meta=sp.csr_matrix((0, d)))


def test_a_worker_killed_mid_run_changes_nothing(process_client):
    X = _slow_blocks(16, 200, 500, delay=0.25)
    reference = _threads(fit_distributed, _est(), X)
    pids = process_client.run(os.getpid)
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(fit_distributed, _est(), X)
        time.sleep(1.0)  # a few blocks done, most not
        assert not future.done()
        victim = sorted(pids.values())[0]
        os.kill(victim, signal.SIGKILL)  # a worker process this test's cluster started
        est = future.result(timeout=120)
    process_client.wait_for_workers(2, timeout=60)  # the nanny restarted it
    assert victim not in process_client.run(os.getpid).values()
    np.testing.assert_array_equal(est.mean_, reference.mean_)


# ------------------------------------------------------------------ user level
def _adversarial_units(n_regular=300, adversary_rows=64, d=50, seed=0):
    """Regular units of 1–3 rows, and one unit whose rows, each of norm L = 1 and all
    in one direction, are interleaved with everyone else's (so every partition holds
    some): its rows sum to 64L."""
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(n_regular), rng.integers(1, 4, n_regular))
    X = sp.random(len(ids), d, density=0.1, format="csr", random_state=rng)
    adv = sp.csr_matrix((np.ones(adversary_rows), (np.arange(adversary_rows),
                                                   np.zeros(adversary_rows, int))),
                        shape=(adversary_rows, d))
    where = np.sort(rng.choice(len(ids) + adversary_rows, adversary_rows, replace=False))
    order = np.full(len(ids) + adversary_rows, -1)
    order[where] = np.arange(adversary_rows)
    rows, all_ids, r = [], [], 0
    for slot in order:
        if slot >= 0:
            rows.append(adv[slot])
            all_ids.append(10**6)
        else:
            rows.append(X[r])
            all_ids.append(ids[r])
            r += 1
    return sp.vstack(rows, format="csr"), np.asarray(all_ids), adv.shape[0]


def _captured_part(monkeypatch):
    seen = []
    original = _sparse_mean.sparse_mean_attributes

    def capture(estimator, part, plan, *args, **kwargs):
        seen.append((part, plan))
        return original(estimator, part, plan, *args, **kwargs)

    monkeypatch.setattr(_sparse_mean, "sparse_mean_attributes", capture)
    return seen


@pytest.mark.parametrize("rows_per_chunk", [10**6, 97])
def test_a_unit_spread_over_every_partition_contributes_one_bounded_total(
        monkeypatch, rows_per_chunk):
    X, ids, _ = _adversarial_units()
    seen = _captured_part(monkeypatch)
    rows = min(rows_per_chunk, X.shape[0])
    est = _threads(fit_distributed, _est(), _dask_csr(X, rows),
                   privacy_unit=da.from_array(ids, chunks=rows))
    # The neighbour: the adversary's unit replaced by one empty unit.
    X0 = X.tolil()
    X0[np.flatnonzero(ids == 10**6), :] = 0
    est0 = _threads(fit_distributed, _est(), _dask_csr(X0.tocsr(), rows),
                    privacy_unit=da.from_array(ids, chunks=rows))
    (part, plan), (part0, plan0) = seen
    assert plan.n_rows == plan0.n_rows == len(np.unique(ids))  # n = the number of units
    change = np.ldexp((part.sums - part0.sums).astype(np.float64), -plan.frac_bits)
    # One bounded unit total (L = 1), up to the rounding to 2^-F of its one entry.
    assert np.linalg.norm(change) <= 1.0 + 2.0**-plan.frac_bits
    assert np.linalg.norm(change) >= 1.0 - 2.0**-plan.frac_bits  # scaled, not dropped
    assert est.privacy_unit_ == est0.privacy_unit_ == "privacy_unit"


def test_the_user_level_release_is_the_same_for_every_partitioning_and_in_memory():
    X, ids, _ = _adversarial_units(seed=1)
    ref = fit_sparse_mean_units_in_memory(_est(), X, ids)
    for rows in (X.shape[0], 211, 50):
        est = _threads(fit_distributed, _est(), _dask_csr(X, rows),
                       privacy_unit=da.from_array(ids, chunks=rows))
        np.testing.assert_array_equal(est.mean_, ref.mean_)


def test_user_level_on_the_process_cluster(process_client):
    X, ids, _ = _adversarial_units(seed=2)
    ref = fit_sparse_mean_units_in_memory(_est(), X, ids)
    est = fit_distributed(_est(), _dask_csr(X, 120), privacy_unit=da.from_array(ids, 120))
    np.testing.assert_array_equal(est.mean_, ref.mean_)


# -------------------------------------------------------------------- the digest
def test_the_digest_is_one_function_of_the_data_for_every_chunking():
    X = sparse_rows(n=5000, d=300)
    n = X.shape[0]
    whole = _digest.final_digest(_digest.chunk_digest(X, 0, n), X.shape)
    rng = np.random.default_rng(0)
    for _ in range(3):
        cuts = np.sort(rng.choice(np.arange(1, n), 6, replace=False))
        bounds = [0, *cuts.tolist(), n]
        parts = [_digest.chunk_digest(X[a:b], a, n) for a, b in zip(bounds, bounds[1:])]
        rng.shuffle(parts)  # any merge order
        merged = parts[0]
        for p in parts[1:]:
            merged = _digest.merge_digests(merged, p, n)
        assert _digest.final_digest(merged, X.shape) == whole
    dense = _digest.final_digest(_digest.chunk_digest(X.toarray(), 0, n), X.shape)
    assert dense == whole  # the container does not matter
    swapped = X[np.r_[1, 0, 2:n]]
    assert _digest.final_digest(_digest.chunk_digest(swapped, 0, n), X.shape) != whole
    changed = X.copy()
    changed.data[17] += 1e-12
    assert _digest.final_digest(_digest.chunk_digest(changed, 0, n), X.shape) != whole


def test_a_digest_with_a_missing_row_is_refused():
    X = sparse_rows(n=3000, d=20)
    part = _digest.chunk_digest(X[:2000], 0, 3000)
    with pytest.raises(ValueError, match="every row"):
        _digest.final_digest(part, X.shape)


def test_the_in_memory_key_digest_is_the_merged_chunk_digest():
    # One digest for both paths (item 4 of issue 20): _digest_array of an in-memory
    # matrix equals the merge of any chunking's parts, with the container's tag; a
    # (K, n) target matrix is read example by example, so chunks of examples merge.
    from skdpsparse.utils._random import _digest_array

    X = sparse_rows(n=2600, d=300)
    n = X.shape[0]
    bounds = [0, 700, 1500, 1501, n]
    merged = None
    for a, b in zip(bounds, bounds[1:]):
        part = _digest.chunk_digest(X[a:b], a, n)
        merged = part if merged is None else _digest.merge_digests(merged, part, n)
    tag = _digest.kernel_tag(True, np.float64)
    assert _digest.final_digest(merged, X.shape, tag) == _digest_array(X)
    assert _digest_array(X.toarray()) != _digest_array(X)  # dense: another loop
    assert _digest_array(X.astype(np.float32)) != _digest_array(X)
    targets = np.where(np.arange(3)[:, None] == np.arange(n)[None, :] % 3, 1.0, -1.0)
    merged = None
    for a, b in zip(bounds, bounds[1:]):
        part = _digest.chunk_digest(np.ascontiguousarray(targets[:, a:b].T), a, n)
        merged = part if merged is None else _digest.merge_digests(merged, part, n)
    assert _digest.final_digest(merged, targets.shape, ("dense", "float64"),
                                orientation="columns") == _digest_array(targets)
    y = np.arange(n) % 3
    assert _digest_array(y) == _digest_array(y.astype(float))  # a vector's values only
    assert _digest_array(y) != _digest_array(y[::-1])
