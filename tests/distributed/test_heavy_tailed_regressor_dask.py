"""DPHeavyTailedRegressor on Dask: one round trip per step, the rows in the
collection's order. Each step's oracle statistic (cwme's group sums of the scaled
rows, the noise-smoothing share) is a task result; the median and the step's draw are
made on the driver with the in-memory calls. Against the mechanism's run on the same
prepared rows in the same order and one key: bit for bit (groups and batches inside
chunks)."""

import threading

import numpy as np
import pytest
import scipy.sparse as sp
from dist_data import assert_no_secret_in, spy_on_draws, spy_on_graphs

from skdpsparse import DPHeavyTailedRegressor
from skdpsparse.distributed import fit_distributed
from skdpsparse.mechanisms.heavy_tailed_sco import (
    ENTRY_CAP,
    plan_heavy_tailed_regression,
    run_heavy_tailed_sco,
)
from skdpsparse.utils import RandomSource, fit_random_source

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
from skdpsparse.distributed import _cyclic_sgd  # noqa: E402  (the key's derivation)

N, D = 2400, 4


def _data(sparse, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(3, size=(N, D))
    y = X @ np.array([0.5, -0.5, 0.25, 0.0]) + rng.standard_t(3, N)
    X[0, 1] = 1e200  # capped at ENTRY_CAP, as in memory
    if sparse:
        X[rng.random((N, D)) < 0.5] = 0.0
        X = sp.csr_matrix(X)
    return X, y


def _est(oracle, alpha, **kw):
    return DPHeavyTailedRegressor(mean_oracle=oracle, alpha=alpha, radius=2.0,
                                  max_iter=6, random_state=7, **kw)


def _reference(est, X, y, key):
    """run_heavy_tailed_sco on the in-memory fit's prepared rows, unpermuted."""
    plan = plan_heavy_tailed_regression(
        N, D, epsilon=est.epsilon, delta=est.delta, radius=est._radius(), loss=est.loss,
        huber_threshold=est._huber_threshold(), oracle=est.mean_oracle, alpha=est.alpha,
        fit_intercept=True, max_iter=est.max_iter, learning_rate=est.learning_rate,
        truncation=est.truncation, moment=est.moment, moment_bound=est.moment_bound,
        gradient_bound=est.gradient_bound, smoothness=est.smoothness,
        failure_prob=est.failure_prob, smoothing_variance=est.smoothing_variance)
    Xp = X.copy()
    if sp.issparse(Xp):
        np.clip(Xp.data, -ENTRY_CAP, ENTRY_CAP, out=Xp.data)
        Xp = sp.hstack([Xp, np.ones((N, 1))], format="csr")
    else:
        Xp = np.hstack([np.clip(Xp, -ENTRY_CAP, ENTRY_CAP), np.ones((N, 1))])
    w, info = run_heavy_tailed_sco(Xp, np.clip(y, -ENTRY_CAP, ENTRY_CAP), plan,
                                   RandomSource(key))
    return plan, w


def _dask_fit(est, X, y, rows, monkeypatch=None, key=None):
    if monkeypatch is not None:  # the key the reference uses
        monkeypatch.setattr(_cyclic_sgd, "fit_random_source_from_digests",
                            lambda *args: RandomSource(key))
    with dask.config.set(scheduler="threads"):
        return fit_distributed(est, da.from_array(X, chunks=(rows, D), asarray=False),
                               da.from_array(y, chunks=rows))


# Convex (alpha = 0): every step reads all rows; 400-row chunks hold whole groups
# when the group count divides 6. Strongly convex (alpha > 0): disjoint batches of
# n // T rows; chunks of one batch hold its groups whole.
@pytest.mark.parametrize("oracle", ["cwme", "noise_smoothing"])
@pytest.mark.parametrize("alpha", [0.0, 0.5])
@pytest.mark.parametrize("sparse", [False, True])
def test_the_run_is_the_mechanisms_on_the_same_rows(monkeypatch, oracle, alpha, sparse):
    X, y = _data(sparse)
    key = bytes(range(32))
    plan, w = _reference(_est(oracle, alpha), X, y, key)
    step_rows = N if plan.setting == "convex" else plan.batch_size
    rows = step_rows  # one chunk per step's rows: every piece whole
    if oracle == "cwme":
        m = plan.step.groups_used
        rows = step_rows // m if step_rows % m == 0 else step_rows
    est = _dask_fit(_est(oracle, alpha), X, y, rows, monkeypatch, key)
    np.testing.assert_array_equal(est.coef_, w[:D])
    assert est.intercept_ == w[D]
    assert est.n_iter_ == plan.n_iter and est.setting_ == plan.setting
    assert est.noise_scale_ == plan.step.noise_scale


@pytest.mark.parametrize("oracle", ["cwme", "noise_smoothing"])
def test_chunks_cutting_groups_move_the_run_by_reassociation_only(monkeypatch, oracle):
    X, y = _data(True)
    key = bytes(range(32))
    _, w = _reference(_est(oracle, 0.0), X, y, key)
    est = _dask_fit(_est(oracle, 0.0), X, y, 333, monkeypatch, key)
    np.testing.assert_allclose(np.r_[est.coef_, est.intercept_], w, rtol=0, atol=1e-9)


def test_the_key_is_the_in_memory_fits():
    X, y = _data(True)
    est = _est("cwme", 0.0)
    keys = []
    original = _cyclic_sgd.fit_random_source_from_digests

    def spy(*args):
        keys.append(original(*args)._key)
        return original(*args)
    mp = pytest.MonkeyPatch()
    mp.setattr(_cyclic_sgd, "fit_random_source_from_digests", spy)
    try:
        _dask_fit(est, X, y, 600)
    finally:
        mp.undo()
    assert keys == [fit_random_source(7, _est("cwme", 0.0), X, y)._key]


@pytest.mark.parametrize("bad", ["X", "y"])
def test_nan_in_any_chunk_is_refused_before_any_draw(monkeypatch, bad):
    threads = spy_on_draws(monkeypatch)
    X, y = _data(False)
    if bad == "X":
        X[2000, 1] = np.nan
    else:
        y[2000] = np.inf
    with pytest.raises(ValueError, match="NaN"):
        _dask_fit(_est("cwme", 0.0), X, y, 600)
    assert threads == []


def test_every_draw_is_on_the_driver_and_no_secret_is_in_a_graph(monkeypatch):
    pytest.importorskip("cloudpickle")
    seed = 918273645546372819
    threads = spy_on_draws(monkeypatch)
    graphs = spy_on_graphs(monkeypatch)
    X, y = _data(True)
    with dask.config.set(scheduler="threads"):
        fit_distributed(_est("cwme", 0.0).set_params(random_state=seed),
                        da.from_array(X, chunks=(600, D), asarray=False),
                        da.from_array(y, chunks=600))
    assert threads and set(threads) == {threading.get_ident()}
    assert len(graphs) >= 7  # prepare, then one per step
    assert_no_secret_in(graphs, seed, (b"DPHeavyTailedRegressor", b"add_noise",
                                       b"release_statistic"))


def test_the_fit_on_the_process_cluster(process_client):
    X, y = _data(True)
    a = fit_distributed(_est("noise_smoothing", 0.0),
                        da.from_array(X, chunks=(N, D), asarray=False),
                        da.from_array(y, chunks=N))
    with dask.config.set(scheduler="threads"):
        b = _dask_fit(_est("noise_smoothing", 0.0), X, y, N)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.intercept_ == b.intercept_
