"""Large-batch DPCyclicSGD on Dask: one round trip per step, the gradient sums of each
batch computed by the chunks holding it, every draw on the driver; the release is the
in-memory ``shuffle=False`` fit's (bit for bit when every batch lies in one chunk;
otherwise up to the summation-order bound of the module, tested here)."""

import threading

import numpy as np
import pytest

from skdpsparse.distributed import _cyclic_sgd, fit_distributed
from skdpsparse.linear_model import DPCyclicSGD
from skdpsparse.mechanisms.cyclic_sgd import plan_cyclic_sgd
from skdpsparse.mechanisms.noise import grid_noise
from skdpsparse.utils import RandomSource

from dist_data import assert_no_secret_in, sparse_rows, spy_on_draws, spy_on_graphs

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

N, D, B = 20_000, 20, 10_000


def _classification(n=N, d=D, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * rng.choice([0.1, 1.0, 20.0], size=(n, 1))
    y = (X[:, 0] + 0.5 * rng.standard_normal(n) > 0).astype(int)
    return X, y


def _est(**kw):
    kw = dict(dict(batch_size=B, epochs=2, shuffle=False, classes=[0, 1], random_state=4),
              **kw)
    return DPCyclicSGD(**kw)


def _dask_fit(est, X, y, rows):
    with dask.config.set(scheduler="threads"):
        return fit_distributed(est, da.from_array(X, chunks=(rows, X.shape[1]),
                                                  asarray=False),
                               da.from_array(y, chunks=rows))


def _assert_same(est, ref):
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    np.testing.assert_array_equal(est.intercept_, ref.intercept_)
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    assert est.n_steps_ == ref.n_steps_ and est.batch_size_ == ref.batch_size_
    assert str(est.privacy_spent_) == str(ref.privacy_spent_)


@pytest.mark.parametrize("rows", [N, B // 2])
def test_batches_inside_chunks_give_the_in_memory_release(rows):
    X, y = _classification()
    ref = _est().fit(X, y)
    _assert_same(_dask_fit(_est(), X, y, rows), ref)


def test_sparse_regression_with_chunks_across_batches():
    # CSR with an elastic-net penalty (eager noise in memory too: in memory the
    # default l2 penalty runs the scaled release on CSR, which Dask does not); chunks
    # of 7001 rows cut batches, so some sums are two partial sums added.
    X = sparse_rows(n=N, d=300, nnz=6)
    y = X @ np.random.default_rng(1).standard_normal(300)
    kw = dict(loss="squared", classes=None, penalty="elasticnet")
    ref = _est(**kw).fit(X, y)
    est = _dask_fit(_est(**kw), X, y, 7001)
    # The bound of the module: a grid rounding flips by one step γ = 2^-20 σ or
    # coarser at most rarely; no flip happens here, and a flip would stay far below
    # this tolerance.
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=0, atol=1e-6)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=0, atol=1e-6)


def test_the_summation_order_bound_is_a_vanishing_fraction_of_the_noise():
    # Split and whole sums of one batch differ by at most 2(b − 1)·u·Σ_i|g_ij| per
    # coordinate (each within (b − 1)·u·Σ|g_ij| of the exact sum), and the
    # displacement λ/b times that, at most 2(b − 1)·u·λC, is 2(b − 1)·b·u/z of σ:
    # below 2.3e-8 σ at b = 10⁴, z ≥ 1 (a few grid steps γ, each about 2^-29 σ).
    X, y = _classification()
    data = (X, np.where(y == 1, 1.0, -1.0))
    theta = np.random.default_rng(2).standard_normal(D + 1) * 0.1
    args = (theta, 1, 1.0, 2.0, True)  # logistic, C = 2: clipping binds for some rows
    rows = np.arange(B, dtype=np.int64)
    whole = _cyclic_sgd._gradient_sum(data, rows, *args)
    parts = [_cyclic_sgd._gradient_sum(data, r, *args) for r in np.split(rows, [3333])]
    u = 2.0**-53
    magnitude = sum(np.abs(_cyclic_sgd._gradient_sum(data, rows[i:i + 1], *args)[0])
                    for i in range(B))
    assert np.all(np.abs(parts[0][0] + parts[1][0] - whole[0])
                  <= 2 * (B - 1) * u * magnitude)
    for z in (1.0, 5.0):
        plan = plan_cyclic_sgd(N, D, loss="logistic", norm_bound=1.0, fit_intercept=True,
                               batch_size=B, epochs=2, delta=1e-6, noise_multiplier=z)
        _, spacing = grid_noise((1, D + 1), RandomSource(bytes(32)), "gaussian",
                                plan.noise_std, sensitivity=plan.learning_rate
                                * plan.clip_norm / B)
        worst = 2 * (B - 1) * u * plan.learning_rate * plan.clip_norm
        assert worst < 2.3e-8 * plan.noise_std
        assert worst < 64 * spacing and spacing < 2.0**-28 * plan.noise_std


def test_batch_segments_wrap_and_cross_chunks():
    offsets = np.array([0, 7, 10])
    pieces = _cyclic_sgd.batch_segments(8, 6, offsets, 12)
    assert [(c, r.tolist()) for c, r in pieces] == [(1, [1, 2]), (2, [0, 1]), (0, [0, 1])]


def test_every_draw_is_on_the_driver_and_no_secret_is_in_a_graph(monkeypatch):
    pytest.importorskip("cloudpickle")
    seed = 918273645546372819
    threads = spy_on_draws(monkeypatch, ("add_discrete_noise", "_next_key",
                                         "discrete_noise"))
    graphs = spy_on_graphs(monkeypatch)
    X, y = _classification()
    _dask_fit(_est(random_state=seed), X, y, 7000)
    assert threads and set(threads) == {threading.get_ident()}
    assert len(graphs) >= 4  # labels, prepare, then one per step
    assert_no_secret_in(graphs, seed, (b"DPCyclicSGD", b"grid_noise",
                                       b"_noisy_prox_step"))


def test_the_release_on_the_process_cluster(process_client):
    X, y = _classification()
    ref = _est().fit(X, y)
    est = fit_distributed(_est(), da.from_array(X, chunks=(5000, D)),
                          da.from_array(y, chunks=5000))
    _assert_same(est, ref)


@pytest.mark.parametrize("kw, match", [
    (dict(shuffle=True), "shuffle=False"),
    (dict(batch_size="auto"), "large batches only"),  # b = ⌈20n/100⌉ = 4000
    (dict(batch_size=256), "large batches only"),
    (dict(classes=[0, 1, 2]), "3 classes"),
])
def test_refused_with_the_reason(kw, match):
    X, y = _classification()
    with pytest.raises((ValueError, NotImplementedError), match=match):
        _dask_fit(_est(**kw), X, y, 5000)


def test_nan_in_a_chunk_and_in_the_targets_are_refused():
    X, y = _classification()
    X[15_000, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        _dask_fit(_est(), X, y, 5000)
    X, _ = _classification()
    t = X[:, 0].copy()
    t[12_345] = np.inf
    with pytest.raises(ValueError, match="NaN or infinity"):
        _dask_fit(_est(loss="squared", classes=None), X, t, 5000)
