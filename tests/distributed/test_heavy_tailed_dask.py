"""DPHeavyTailedMean on Dask collections: its statistics (rank counts on the
public and the union grids, tail bins, clipped sums) merge to the in-memory ones
exactly, so with the interval stated (``bounds=``) or located privately (the
default) the release is the in-memory estimator's bit for bit under one noise key;
every draw is made on the driver. (cwme and noise smoothing:
test_heavy_tailed_groups_dask.py.)"""

import threading
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from dist_data import assert_no_secret_in, heavy_rows, spy_on_draws, spy_on_graphs

from skdpsparse.distributed import _heavy_tailed, fit_distributed
from skdpsparse.mean import DPHeavyTailedMean
from skdpsparse.mechanisms import heavy_tailed_clip
from skdpsparse.mechanisms.heavy_tailed_clip import box_clipped_mean
from skdpsparse.mechanisms.heavy_tailed_mean import plan_heavy_tailed_mean
from skdpsparse.mechanisms.quantile import geometric_grid, rank_counts
from skdpsparse.utils import RandomSource

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")


_heavy = heavy_rows


def _cuts(n, k, seed=0):
    cuts = np.sort(np.random.default_rng(seed).choice(np.arange(1, n), k, replace=False))
    return [0, *cuts.tolist(), n]


@pytest.mark.parametrize("sparse", [False, True])
def test_merged_rank_counts_are_the_in_memory_ones(sparse):
    X = _heavy(sparse=sparse)
    grid = geometric_grid()
    b = _cuts(X.shape[0], 5)
    parts = [_heavy_tailed.partial_rank_counts(X[s:e], grid, X.shape[1], s)
             for s, e in zip(b, b[1:])]
    merged = parts[0]
    for p in parts[1:]:
        merged = _heavy_tailed.merge_rank_counts(merged, p)
    np.testing.assert_array_equal(merged[0], rank_counts(X, grid, strict=True))
    np.testing.assert_array_equal(merged[1], rank_counts(X, grid))


@pytest.mark.parametrize("sparse", [False, True])
def test_merged_clipped_sums_are_the_in_memory_ones(sparse):
    X = _heavy(sparse=sparse)
    n, d = X.shape
    lower, upper = np.full(d, -5.0), np.full(d, 12.0)
    upper[3] = lower[3]  # a zero-width column
    F = _heavy_tailed.clipped_frac_bits(n)
    b = _cuts(n, 4, seed=1)
    parts = [_heavy_tailed.partial_clipped_sums(X[s:e], lower, upper, F, s)
             for s, e in zip(b, b[1:])]
    merged = parts[0]
    for p in parts[1:]:
        merged = _heavy_tailed.merge_clipped(merged, p)
    ref, ref_bits = box_clipped_mean(X, lower, upper)
    assert ref_bits == F
    np.testing.assert_array_equal(_heavy_tailed.clipped_unit_mean(merged, lower, upper, F),
                                  ref)


@pytest.mark.parametrize("noise, delta", [("gaussian", 1e-6), ("laplace", 1e-6),
                                          ("laplace", 0.0)])
def test_stated_bounds_release_is_the_in_memory_one(noise, delta):
    # The same seed: one digest, hence one key, in memory and on Dask.
    X = _heavy(sparse=True)
    kw = dict(bounds=(-5.0, 12.0), noise=noise, delta=delta, random_state=0)
    ref = DPHeavyTailedMean(**kw).fit(X)
    with dask.config.set(scheduler="threads"):
        est = fit_distributed(DPHeavyTailedMean(**kw),
                              da.from_array(X, chunks=(333, 12), asarray=False))
    np.testing.assert_array_equal(est.mean_, ref.mean_)
    np.testing.assert_array_equal(est.noise_scale_, ref.noise_scale_)
    assert est.method_ == ref.method_ == "clipped"
    assert str(est.privacy_spent_) == str(ref.privacy_spent_)


def _fit_both(X, rows, **kw):
    """The in-memory fit and the threaded-scheduler Dask fit of one estimator."""
    kw.setdefault("random_state", 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # too few rows: public, both warn
        ref = DPHeavyTailedMean(**kw).fit(X)
        with dask.config.set(scheduler="threads"):
            est = fit_distributed(DPHeavyTailedMean(**kw),
                                  da.from_array(X, chunks=(rows, X.shape[1]), asarray=False))
    return ref, est


def _assert_same_release(ref, est):
    for name in ("mean_", "clip_lower_", "clip_upper_", "noise_scale_"):
        np.testing.assert_array_equal(getattr(est, name), getattr(ref, name), err_msg=name)
    assert est.method_ == ref.method_ == "private_clip"
    assert est.clip_level_ == ref.clip_level_
    assert str(est.privacy_spent_) == str(ref.privacy_spent_)
    assert est.n_features_in_ == ref.n_features_in_


# (n, d, kw): per-column intervals with α below its cap (n = 5·10⁴, d = 4), at the
# cap (d = 1, a dense column: digested as a vector in memory), pure DP, and the
# shared scale (d = 6 at n = 2000).
LOCATED = [(50_000, 4, {}), (2000, 1, {}), (3000, 1, {"delta": 0.0}), (2000, 6, {})]


@pytest.mark.parametrize("n, d, kw", LOCATED)
@pytest.mark.parametrize("sparse", [False, True])
def test_the_located_release_is_the_in_memory_one(n, d, kw, sparse):
    X = _heavy(n=n, d=d, sparse=sparse)
    shared = plan_heavy_tailed_mean(n, d, **kw).mechanism.shared
    assert shared == (d == 6)  # the cases cover both plans
    for rows in (n, n // 3 + 7):  # one chunk, then four of uneven sizes
        ref, est = _fit_both(X, rows, **kw)
        _assert_same_release(ref, est)


def _run_over(chunks):
    """``run`` of :func:`_heavy_tailed.located_interval` over a list of chunks."""
    offsets = np.cumsum([0] + [c.shape[0] for c in chunks[:-1]])

    def run(partial, *args, **kwargs):
        out = None
        for chunk, off in zip(chunks, offsets):
            part = partial(chunk, *args, row_offset=int(off), **kwargs)
            out = part if out is None else _heavy_tailed.merge_sums(out, part)
        return out
    return run


def test_the_located_interval_is_drawn_as_in_memory():
    # The mechanism at a fixed level: same draws from the merged counts as from the
    # rows, chunks of 1000, 1 and 1999 rows.
    X = _heavy(n=3000, d=3, sparse=True)
    plan = heavy_tailed_clip.plan_quantile_clipped_mean(3000, 3, epsilon=1.0, delta=1e-6,
                                                        level=0.02)
    ref, info = heavy_tailed_clip.quantile_clipped_mean(X, plan, RandomSource(bytes(32)))
    run = _run_over([X[:1000], X[1000:1001], X[1001:]])
    rng = RandomSource(bytes(32))
    lower, upper, quantiles = _heavy_tailed.located_interval(
        run(_heavy_tailed.partial_rank_counts, plan.grid, 3), run, plan, rng)
    np.testing.assert_array_equal(quantiles, info["quantiles"])
    np.testing.assert_array_equal(lower, info["lower"])
    np.testing.assert_array_equal(upper, info["upper"])
    mean_plan = heavy_tailed_clip.plan_clipped_mean(3000, lower, upper, rho=plan.mean_rho,
                                                    epsilon=plan.mean_epsilon)
    part = run(_heavy_tailed.partial_clipped_sums, mean_plan.lower, mean_plan.upper,
               _heavy_tailed.clipped_frac_bits(3000))
    np.testing.assert_array_equal(_heavy_tailed.release_clipped(part, mean_plan, rng), ref)


def test_every_draw_is_on_the_driver_and_no_secret_is_in_a_graph(monkeypatch):
    pytest.importorskip("cloudpickle")
    seed = 918273645546372819
    graphs = spy_on_graphs(monkeypatch)
    threads = spy_on_draws(monkeypatch)
    X = _heavy(n=50_000, d=4, sparse=True)
    with dask.config.set(scheduler="threads"):
        fit_distributed(DPHeavyTailedMean(random_state=seed),
                        da.from_array(X, chunks=(12_500, 4), asarray=False))
    assert threads and set(threads) == {threading.get_ident()}
    # Passes: digest + rank counts, union-grid counts, (tail bins,) clipped sums.
    assert len(graphs) >= 3
    assert_no_secret_in(graphs, seed, (b"DPHeavyTailedMean", b"add_noise",
                                       b"exponential_mechanism"))


def test_the_located_release_on_the_process_cluster(process_client):
    X = _heavy(n=50_000, d=4, sparse=True)
    ref = DPHeavyTailedMean(random_state=5).fit(X)
    est = fit_distributed(DPHeavyTailedMean(random_state=5),
                          da.from_array(X, chunks=(9000, 4), asarray=False))
    _assert_same_release(ref, est)


@pytest.mark.filterwarnings("ignore:n=3000 rows are too few")
@pytest.mark.parametrize("sparse", [False, True])
def test_nan_in_any_chunk_is_refused_before_any_draw(monkeypatch, sparse):
    threads = spy_on_draws(monkeypatch)
    X = _heavy(n=3000, d=2)
    X[2500, 1] = np.nan
    X = sp.csr_matrix(X) if sparse else X
    with pytest.raises(ValueError, match="NaN"):
        with dask.config.set(scheduler="threads"):
            fit_distributed(DPHeavyTailedMean(), da.from_array(X, chunks=(1000, 2),
                                                               asarray=False))
    assert threads == []


def test_nan_in_a_chunk_is_rejected():
    X = _heavy(n=300)
    X[250, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        with dask.config.set(scheduler="threads"):
            fit_distributed(DPHeavyTailedMean(bounds=(-1.0, 1.0)),
                            da.from_array(X, chunks=(100, 12)))
