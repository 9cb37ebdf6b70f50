"""Cost of the exact samplers (issue: noise an attacker cannot exploit). Not a test.

1. Draws: 10⁷ exact discrete Gaussian and discrete Laplace draws (the library's noise,
   table inversion with certified decisions) against NumPy's
   ``Generator.standard_normal`` and ``Generator.laplace`` of the same count, in the
   same run (target for the Gaussian: ≤ 3×), and against the previous exact sampler
   (the Bernoulli factories of Canonne, Kamath and Steinke 2020,
   ``exact_sampling.cks_discrete_noise``).
2. Sparse mean: ``DPSparseMeanEstimator(method="projection")`` on CSR n = 10⁶,
   d = 2²⁰, 16 nonzeros per row, with ``random_state=None`` (OS-keyed ChaCha20 and
   exact samplers), against SciPy's non-private ``X.mean(axis=0)`` and against
   ``X.sum(axis=0) / n`` plus one NumPy Gaussian draw of length d (target: ≤ 1.0× the
   first).

3. Scale sweep ("no slow scales", measured): 200 scales drawn log-uniformly over
   [2, 2⁵⁰] (seeded), plus the scale where the earlier float-table kernel fell back
   on 40 % of the draws; at each, 10⁵ discrete Gaussian and 10⁵ discrete Laplace
   draws, the fraction made by the exact fallback, and the Gaussian's time against
   NumPy's ``standard_normal`` of the same count, timed right after it (process CPU
   time, best of 3, on one thread: the sweep runs single-threaded, so that a loaded
   machine's scheduling does not masquerade as a slow scale). Prints the worst
   fallback rate, the worst and median time ratios and the slowest scales.

Each timing is the median of ``--reps`` runs; ratios are paired (same round), and the
min/median/max of the per-round ratios are printed. On a loaded machine only the
ratios mean anything. ``--threads 1`` runs the samplers on one thread (NumPy's
generators are single-threaded).

Run:  python benchmarks/bench_samplers.py            (all parts)
      python benchmarks/bench_samplers.py --part 1 --reps 5
      python benchmarks/bench_samplers.py --part 3
"""

import argparse
import os
import time

import numba
import numpy as np

from skdpsparse._kernels import exact_sampling as es
from skdpsparse._kernels import grid_noise as gn
from skdpsparse._kernels.chacha import key_words
from skdpsparse.datasets import make_sparse_vectors
from skdpsparse.mean import DPSparseMeanEstimator


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _report(name, ours, base, base_name):
    ratios = np.array(ours) / np.array(base)
    print(f"{name:<42} {np.median(ours):8.3f} s  {base_name:<28} {np.median(base):8.3f} s  "
          f"ratio min/median/max {ratios.min():.2f} / {np.median(ratios):.2f} / "
          f"{ratios.max():.2f}")


def draws(count=10**7, reps=5):
    key = key_words(os.urandom(32))
    scale = 2**29 + 12345  # the grid scale of a typical release (b/γ ≥ 2^29)
    gen = np.random.default_rng()
    es.discrete_noise(10, es.DISCRETE_GAUSSIAN, scale, key, 0)  # compile outside timing
    es.discrete_noise(10, es.DISCRETE_LAPLACE, scale, key, 0)
    es.cks_discrete_noise(10_000, es.DISCRETE_GAUSSIAN, scale, key, 0)
    es.cks_discrete_noise(10_000, es.DISCRETE_LAPLACE, scale, key, 0)
    rows = {"gauss": ([], [], []), "lap": ([], [], [])}
    for r in range(reps):
        rows["gauss"][0].append(_timed(lambda: es.discrete_noise(
            count, es.DISCRETE_GAUSSIAN, scale, key, r)))
        rows["gauss"][1].append(_timed(lambda: gen.standard_normal(count)))
        rows["gauss"][2].append(_timed(lambda: es.cks_discrete_noise(
            count, es.DISCRETE_GAUSSIAN, scale, key, r)))
        rows["lap"][0].append(_timed(lambda: es.discrete_noise(
            count, es.DISCRETE_LAPLACE, scale, key, r)))
        rows["lap"][1].append(_timed(lambda: gen.laplace(0.0, 1.0, count)))
        rows["lap"][2].append(_timed(lambda: es.cks_discrete_noise(
            count, es.DISCRETE_LAPLACE, scale, key, r)))
    print(f"\n[1] {count:.0e} draws, {reps} rounds, {os.cpu_count()} CPUs, "
          f"{numba.get_num_threads()} numba thread(s)")
    _report("exact discrete Gaussian (ChaCha20)", rows["gauss"][0], rows["gauss"][1],
            "numpy standard_normal")
    _report("exact discrete Laplace (ChaCha20)", rows["lap"][0], rows["lap"][1],
            "numpy laplace")
    _report("exact discrete Gaussian (ChaCha20)", rows["gauss"][0], rows["gauss"][2],
            "previous exact (CKS 2020)")
    _report("exact discrete Laplace (ChaCha20)", rows["lap"][0], rows["lap"][2],
            "previous exact (CKS 2020)")


def sparse_mean(n=10**6, d=2**20, s=16, reps=5):
    X, _ = make_sparse_vectors(n, d, s, random_state=0)
    est = DPSparseMeanEstimator(epsilon=1.0, delta=1e-6, sparsity=s, method="projection")
    est.fit(X)  # compile outside timing
    gen = np.random.default_rng()
    ours, scipy_mean, honest = [], [], []
    for _ in range(reps):
        ours.append(_timed(lambda: est.fit(X)))
        scipy_mean.append(_timed(lambda: X.mean(axis=0)))
        honest.append(_timed(lambda: np.asarray(X.sum(axis=0)).ravel() / n
                             + gen.standard_normal(d)))
    print(f"\n[2] sparse mean fit, CSR n={n:.0e}, d=2^{d.bit_length() - 1}, {s} nonzeros/row,"
          f" random_state=None, {reps} rounds")
    _report("DPSparseMeanEstimator(projection).fit", ours, scipy_mean, "X.mean(axis=0)")
    _report("DPSparseMeanEstimator(projection).fit", ours, honest,
            "X.sum(axis=0)/n + normal(d)")


def scale_sweep(count=10**5, n_scales=200, seed=0):
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        _scale_sweep(count, n_scales, seed)
    finally:
        numba.set_num_threads(threads)


def _scale_sweep(count, n_scales, seed):
    key = key_words(os.urandom(32))
    rng = np.random.default_rng(seed)
    scales = set()
    while len(scales) < n_scales:
        scales.add(max(2, int(2 ** rng.uniform(1, 50))))
    scales = sorted(scales) + [812165106069600]  # λ within 1e-16 of 1/2: 40 % before
    gen = np.random.default_rng()
    out = np.zeros(count, np.int64)
    gn.fill_noise(out[:10], False, True, 2**29 + 12345, key, 0, 4096)  # compile
    rows = []
    for i, n in enumerate(scales):
        gn.noise_tables(n)  # the per-scale tables (about 15 ms), outside the timing
        ours, base = [], []
        for _ in range(3):  # best of 3, interleaved; CPU time (one thread: see main)
            start = time.process_time()
            gauss = gn.fill_noise(out, False, True, n, key, 2 * i, 4096)
            ours.append(time.process_time() - start)
            start = time.process_time()
            gen.standard_normal(count)
            base.append(time.process_time() - start)
        lap = gn.fill_noise(out, False, False, n, key, 2 * i + 1, 4096)
        rows.append((n, gauss / count, lap / count, min(ours) / min(base)))
    rates = np.array([max(g, lap) for _, g, lap, _ in rows])
    ratios = np.array([r for *_, r in rows])
    print(f"\n[3] scale sweep: {len(scales)} scales (log-uniform on [2, 2^50], seed {seed}, "
          f"and N = 812165106069600), {count:.0e} Gaussian and {count:.0e} Laplace draws "
          f"each, {numba.get_num_threads()} thread(s)")
    print(f"worst fallback rate {rates.max():.2e} (at N = {rows[rates.argmax()][0]}), "
          f"total {sum(g + lap for _, g, lap, _ in rows) * count:.0f} fallback draws of "
          f"{2 * count * len(rows):.0e}")
    print(f"Gaussian time / numpy standard_normal: worst {ratios.max():.2f} "
          f"(N = {rows[ratios.argmax()][0]}), median {np.median(ratios):.2f}, "
          f"best {ratios.min():.2f}")
    for n, g, lap, r in sorted(rows, key=lambda row: -row[3])[:3]:
        print(f"   slowest: N = {n:<17d} ratio {r:.2f}  fallback rates {g:.1e} / {lap:.1e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", type=int, choices=[1, 2, 3])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        numba.set_num_threads(args.threads)
    if args.part in (None, 1):
        draws(reps=args.reps)
    if args.part in (None, 2):
        sparse_mean(reps=args.reps)
    if args.part in (None, 3):
        scale_sweep()


if __name__ == "__main__":
    main()
