"""DPHeavyTailedMean(method="cwme", shuffle=False) and method="noise_smoothing" on
Dask: one pass of exact-order sums (per group of the consecutive split, or per chunk),
the median and every draw on the driver. With one chunk per group (cwme) or one chunk
(noise smoothing) the release is the in-memory one bit for bit under one key; with
pieces of a group (or of the sum) in k chunks, the statistic differs by float
re-association only (bound below)."""

import threading
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
from dist_data import assert_no_secret_in, heavy_rows, spy_on_draws, spy_on_graphs

from skdpsparse._kernels.heavy_tailed import group_bounds
from skdpsparse.distributed import _heavy_tailed_groups as G
from skdpsparse.distributed import fit_distributed
from skdpsparse.mean import DPHeavyTailedMean
from skdpsparse.mechanisms.heavy_tailed import (
    median_of_group_means,
    noise_smoothing_mean,
    trimmed_median_of_means,
)

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

N, D = 4000, 6


def _heavy(sparse, n=N, d=D):
    return heavy_rows(n, d, sparse=sparse)


def _est(method, **kw):
    kw.setdefault("random_state", 11)
    if method == "cwme":
        kw.update(shuffle=False, n_groups=8)
    return DPHeavyTailedMean(method=method, truncation=4.0, **kw)


def _dask_fit(est, X, rows):
    with dask.config.set(scheduler="threads"):
        return fit_distributed(est, da.from_array(X, chunks=(rows, X.shape[1]),
                                                  asarray=False))


def _same_release(est, ref, method):
    np.testing.assert_array_equal(est.mean_, ref.mean_)
    assert est.noise_scale_ == ref.noise_scale_ and est.truncation_ == ref.truncation_
    assert est.method_ == ref.method_ == method
    assert str(est.privacy_spent_) == str(ref.privacy_spent_)
    if method == "cwme":
        assert est.n_groups_ == ref.n_groups_ == 8


# Chunks of N/8 = 500 rows are the groups; 250 splits none; N is one chunk.
@pytest.mark.parametrize("rows", [N, 500, 250])
@pytest.mark.parametrize("center", [0.0, 20.0])  # 20: clip(0) = 8 != 0 (implicit zeros)
@pytest.mark.parametrize("sparse", [False, True])
def test_cwme_release_is_the_in_memory_one(sparse, center, rows):
    X = _heavy(sparse)
    ref = _est("cwme", center=center).fit(X)
    _same_release(_dask_fit(_est("cwme", center=center), X, rows), ref, "cwme")


@pytest.mark.parametrize("sparse", [False, True])
def test_noise_smoothing_release_is_the_in_memory_one(sparse):
    X = _heavy(sparse)
    ref = _est("noise_smoothing").fit(X)
    _same_release(_dask_fit(_est("noise_smoothing"), X, N), ref, "noise_smoothing")


def _merged(partial, X, cuts, *args):
    out = None
    for s, e in zip(cuts, cuts[1:]):
        part = partial(X[s:e], *args, row_offset=s)
        out = part if out is None else (G.merge_groups(out, part) if
                                        isinstance(part, G.GroupSumPart) else out + part)
    return out


@pytest.mark.parametrize("sparse", [False, True])
def test_split_groups_differ_by_reassociation_only(sparse):
    # Chunks cutting through groups: each group is the sum of k <= 4 partial float
    # sums, so its mean moves by at most (k - 1)·u·Σ|clip(x)|/n_g <= 3u·(|c| + 3τ)
    # (each |clip(x)| <= |c| + 3τ); the median of means by as much. Noise smoothing:
    # k = 5 chunk shares, each (τ/n_c)Σψ rounded and rescaled by n_c/n, within
    # 8k·u·τ·sup|ψ| <= 8k·u·τ.
    X = _heavy(sparse)
    tau, c = 4.0, 20.0
    cuts = [0, 137, 1400, 1401, 2999, N]
    bounds = group_bounds(N, 8)
    lo, hi = G._clip_interval(SimpleNamespace(center=c, n_features=D, tau=tau))
    part = _merged(G.partial_group_sums, X, cuts, bounds, lo, hi, D)
    got = median_of_group_means(G.cwme_group_sums(part, bounds, lo, hi), N)
    want = trimmed_median_of_means(X, tau=tau, n_groups=8, center=c)
    u = np.finfo(float).eps / 2
    assert np.all(np.abs(got - want) <= 3 * u * (abs(c) + 3 * tau))
    got = _merged(G.partial_smoothed_sums, X, cuts, tau, 1.0, N, D)
    want = noise_smoothing_mean(X, tau=tau, smoothing_variance=1.0)
    assert np.all(np.abs(got - want) <= 8 * 5 * u * tau)


def test_the_consecutive_groups_are_the_kernels_with_a_group_in_pieces():
    # A group whose rows lie in three chunks: the pieces in row order add to the
    # group's sum (here exactly: integer values), and a chunk holding several groups
    # returns each of them.
    X = np.arange(60.0).reshape(20, 3) % 7
    bounds = group_bounds(20, 3)  # 7, 7, 6 rows
    lo, hi = np.full(3, -9.0), np.full(3, 5.0)
    part = _merged(G.partial_group_sums, X, [0, 2, 4, 20], bounds, lo, hi, 3)
    sums = G.cwme_group_sums(part, bounds, lo, hi)
    clipped = np.clip(X, lo, hi)
    want = np.vstack([clipped[a:b].sum(axis=0) for a, b in zip(bounds, bounds[1:])])
    np.testing.assert_array_equal(sums, want)


def test_cwme_shuffle_is_refused_with_the_reason():
    X = da.from_array(_heavy(False, n=100), chunks=(50, D))
    with pytest.raises(NotImplementedError, match="shuffle=False"):
        fit_distributed(DPHeavyTailedMean(method="cwme", truncation=4.0), X)


@pytest.mark.parametrize("method", ["cwme", "noise_smoothing"])
@pytest.mark.parametrize("sparse", [False, True])
def test_nan_in_any_chunk_is_refused_before_any_draw(monkeypatch, method, sparse):
    threads = spy_on_draws(monkeypatch)
    X = _heavy(False)
    X[3500, 2] = np.nan
    X = sp.csr_matrix(X) if sparse else X
    with pytest.raises(ValueError, match="NaN"):
        _dask_fit(_est(method), X, 1000)
    assert threads == []


@pytest.mark.parametrize("method", ["cwme", "noise_smoothing"])
def test_every_draw_is_on_the_driver_and_no_secret_is_in_a_graph(monkeypatch, method):
    pytest.importorskip("cloudpickle")
    seed = 918273645546372819
    threads = spy_on_draws(monkeypatch)
    graphs = spy_on_graphs(monkeypatch)
    _dask_fit(_est(method, random_state=seed), _heavy(True), 700)
    assert threads and set(threads) == {threading.get_ident()}
    assert len(graphs) == 1  # one pass: the digest and the sums together
    assert_no_secret_in(graphs, seed, (b"DPHeavyTailedMean", b"add_noise",
                                       b"release_statistic"))


@pytest.mark.parametrize("method", ["cwme", "noise_smoothing"])
def test_the_release_on_the_process_cluster(process_client, method):
    X = _heavy(True)
    ref = _est(method).fit(X)
    est = fit_distributed(_est(method), da.from_array(X, chunks=(N // 8, D),
                                                      asarray=False))
    if method == "cwme":
        _same_release(est, ref, method)
    else:  # 8 chunk shares: re-association only (see the split test's bound)
        np.testing.assert_allclose(est.mean_, ref.mean_, rtol=0, atol=1e-12)
