"""Benchmark of DPSparseMeanEstimator (issue: sparse mean). Not a test.

1. Error table: n = 10⁴, s = 10, ε = 1, δ = 1e-6, d ∈ {10³, 10⁴, 10⁵, 10⁶}: mean ℓ2
   error over 20 runs of each method, power-law and uniform column frequencies, with
   the ratio auto / dense Gaussian (targets: ≤ 1/5 at d = 10⁵, ≤ 1/15 at d = 10⁶).
2. Speed: the default fit on CSR n = 2·10⁵ and 10⁶, d = 2²⁰, 16 nonzeros per row,
   seeded and unseeded, against SciPy's non-private ``X.mean(axis=0)`` and against
   ``X.sum(axis=0) / n`` plus one ``standard_normal(d)`` draw (issue 24's honest
   baseline), paired rounds, min / median / max ratios (target ≤ 1.0), with the
   bandwidth floor. Threads: the free cores (``SKDPSPARSE_NUM_THREADS`` to set).
3. Scale: l1_recovery at d = 10⁷, n = 10⁴, s = 10 in a fresh subprocess: wall time,
   peak RSS, and its error next to the dense Gaussian's.
4. Declared one-hot blocks: the cost of ``one_hot_blocks`` (the rows' nonnegative
   clipping, one O(nnz) copy of the values, and the per-block simplex projection,
   O(d log d)) on one-hot CSR rows (n = 10⁶, 8 fields of 8 to 2¹⁴ categories),
   paired rounds against the same fit without the declaration; and the error of
   both against the dense Gaussian's (5 seeds).
5. ``"auto"``'s rule on generated rows only (never the real tasks): for each cell of
   n ∈ {2·10³, 2·10⁴}, d ∈ {2¹², 2¹⁶}, s ∈ {5, 40}, ε ∈ {0.5, 2}, power-law and
   uniform columns, plus hashed-text-like cells (d = 2¹⁸, s = 185, n ∈ {5·10³,
   2·10⁴}), the mean error of threshold and projection over 3 seeds, the winner,
   the rule's choice and μ̄/λ (μ̄ = L√s/min(d, ns), λ = σ√(2 ln d)).

Run:  python benchmarks/bench_sparse_mean.py            (all three parts)
      python benchmarks/bench_sparse_mean.py --part 1 --runs 5
      python benchmarks/bench_sparse_mean.py --part 2 [--sizes 200000,1000000]
      python benchmarks/bench_sparse_mean.py --part 4 [--reps 7]
      python benchmarks/bench_sparse_mean.py --part 5
"""

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

from skdpsparse.datasets import make_sparse_vectors
from skdpsparse.mean import DPSparseMeanEstimator
from skdpsparse.mechanisms.projection import bounded_mean

EPS, DELTA = 1.0, 1e-6


def error_table(runs, dims, n=10_000, s=10):
    methods = [("projection", DELTA), ("l1_recovery", DELTA), ("gaussian", DELTA),
               ("laplace", 0.0), ("projection", 0.0), ("auto", DELTA)]
    for dist in ["power_law", "uniform"]:
        print(f"\n[1] mean l2 error over {runs} runs, n={n}, s={s}, eps={EPS}, "
              f"delta={DELTA}, columns: {dist}")
        header = f"{'d':>9} " + " ".join(
            f"{m + ('/pure' if dl == 0 and m == 'projection' else ''):>13}"
            for m, dl in methods) + f" {'auto/gauss':>11} {'auto picks':>12}"
        print(header)
        for d in dims:
            X, _ = make_sparse_vectors(n, d, s, column_distribution=dist, random_state=0)
            target = bounded_mean(X, 1.0, s)
            row, picked = [], None
            for method, delta in methods:
                errs = []
                for seed in range(runs):
                    est = DPSparseMeanEstimator(epsilon=EPS, delta=delta, sparsity=s,
                                                method=method, random_state=seed).fit(X)
                    errs.append(np.linalg.norm(est.mean_ - target))
                    picked = est.method_ if method == "auto" else picked
                row.append(np.mean(errs))
            ratio = row[-1] / row[2]
            print(f"{d:>9} " + " ".join(f"{e:>13.4f}" for e in row)
                  + f" {ratio:>11.4f} {picked:>12}")


def speed(sizes=(2 * 10**5, 10**6), d=2**20, s=16, reps=7):
    """Paired rounds (ours and each baseline interleaved in one process): min / median
    / max of the per-round ratios, for a seeded fit and a ``random_state=None`` fit,
    against SciPy's ``X.mean(axis=0)`` and against the honest baseline
    ``X.sum(axis=0) / n`` plus one ``standard_normal(d)`` draw, with the bandwidth
    floor (one pass over the data and the indices) printed beside them."""
    from skdpsparse._kernels.sparse_rows import free_threads

    gen = np.random.default_rng()
    for n in sizes:
        X, _ = make_sparse_vectors(n, d, s, random_state=0)
        ests = {"seeded": DPSparseMeanEstimator(epsilon=EPS, delta=DELTA, sparsity=s,
                                                random_state=0),
                "None": DPSparseMeanEstimator(epsilon=EPS, delta=DELTA, sparsity=s)}
        base = {"X.mean(axis=0)": lambda: X.mean(axis=0),
                "X.sum(axis=0)/n + normal(d)":
                    lambda: np.asarray(X.sum(axis=0)).ravel() / n + gen.standard_normal(d)}
        for est in ests.values():
            est.fit(X)  # warm-up: numba compile / cache load, excluded from timing
        floor = min(_timed(lambda: (X.data.sum(), X.indices.sum())) for _ in range(3))
        times = {k: [] for k in list(ests) + list(base)}
        for _ in range(reps):
            for k, est in ests.items():
                times[k].append(_timed(lambda: est.fit(X)))
            for k, fn in base.items():
                times[k].append(_timed(fn))
        times = {k: np.array(v) for k, v in times.items()}
        print(f"\n[2] fit time, CSR n={n}, d={d}, {s} nonzeros/row, method "
              f"{ests['None'].method_}, {reps} paired rounds; free threads now "
              f"{free_threads()}; bandwidth floor {floor * 1e3:.1f} ms")
        for k in base:
            print(f"    {k:<28} median {np.median(times[k]):.3f} s")
        for k in ests:
            print(f"    fit random_state={k:<11} median {np.median(times[k]):.3f} s")
            for b in base:
                r = times[k] / times[b]
                print(f"      / {b:<26} min {r.min():.2f}  median {np.median(r):.2f}  "
                      f"max {r.max():.2f}  (target <= 1.0)")


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _scale_child(d, n, s):
    X, _ = make_sparse_vectors(n, d, s, column_distribution="power_law", random_state=0)
    target = bounded_mean(X, 1.0, s)
    t0 = time.perf_counter()
    est = DPSparseMeanEstimator(epsilon=EPS, delta=DELTA, sparsity=s, method="l1_recovery",
                                random_state=0).fit(X)
    elapsed = time.perf_counter() - t0
    err = float(np.linalg.norm(est.mean_ - target))
    gauss = DPSparseMeanEstimator(epsilon=EPS, delta=DELTA, sparsity=s, method="gaussian",
                                  random_state=0).fit(X)
    gerr = float(np.linalg.norm(gauss.mean_ - target))
    proj = DPSparseMeanEstimator(epsilon=EPS, delta=DELTA, sparsity=s, method="projection",
                                 random_state=0).fit(X)
    perr = float(np.linalg.norm(proj.mean_ - target))
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(json.dumps({"seconds": elapsed, "peak_gib": peak_gib, "error": err,
                      "gaussian_error": gerr, "projection_error": perr,
                      "n_iter": getattr(est, "n_iter_", None)}))


def scale(d=10**7, n=10_000, s=10):
    out = subprocess.run([sys.executable, __file__, "--child", str(d), str(n), str(s)],
                         capture_output=True, text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"\n[3] l1_recovery at d={d}, n={n}, s={s} (fresh process)")
    print(f"    fit time {r['seconds']:.1f} s (target < 180 s), peak RSS "
          f"{r['peak_gib']:.2f} GiB (target < 4 GiB), solver iterations {r['n_iter']}")
    print(f"    l2 error: l1_recovery {r['error']:.4f}, dense gaussian "
          f"{r['gaussian_error']:.4f}, projection {r['projection_error']:.4f}")


def one_hot_rows(n, sizes, seed=0):
    """n rows with one 1/√k in each of k blocks (power-law category frequencies), as
    ``OneHotEncoder`` then ``Normalizer`` give."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    cols = np.empty((n, len(sizes)), dtype=np.int64)
    for b, k in enumerate(sizes):
        p = 1.0 / np.arange(1, k + 1) ** 1.1
        cols[:, b] = offsets[b] + rng.choice(k, size=n, p=p / p.sum())
    data = np.full(cols.size, 1 / np.sqrt(len(sizes)))
    return sp.csr_matrix((data, cols.ravel(), np.arange(0, cols.size + 1, len(sizes))),
                         shape=(n, int(offsets[-1])))


def blocks_cost(n=10**6, sizes=(8, 12, 50, 300, 1000, 4096, 16384, 30), reps=7, seeds=5):
    X = one_hot_rows(n, sizes)
    k = len(sizes)
    mean = np.asarray(X.mean(axis=0)).ravel()
    plain = DPSparseMeanEstimator(epsilon=EPS, delta=DELTA, sparsity=k, method="projection")
    declared = DPSparseMeanEstimator(epsilon=EPS, delta=DELTA, sparsity=k,
                                     one_hot_blocks=list(sizes))
    plain.fit(X), declared.fit(X)  # warm-up: numba compile / cache load
    t_plain, t_decl = [], []
    for _ in range(reps):
        t_plain.append(_timed(lambda: plain.fit(X)))
        t_decl.append(_timed(lambda: declared.fit(X)))
    r = np.array(t_decl) / np.array(t_plain)
    print(f"\n[4] one_hot_blocks, CSR n={n}, d={X.shape[1]}, {k} fields, {reps} paired "
          f"rounds: plain projection median {np.median(t_plain):.3f} s, declared "
          f"{np.median(t_decl):.3f} s; declared / plain min {r.min():.2f} median "
          f"{np.median(r):.2f} max {r.max():.2f}")
    errs = {"projection": [], "one_hot_blocks": [], "gaussian": []}
    for seed in range(seeds):
        for key, kw in (("projection", dict(method="projection")),
                        ("one_hot_blocks", dict(one_hot_blocks=list(sizes))),
                        ("gaussian", dict(method="gaussian"))):
            est = DPSparseMeanEstimator(epsilon=EPS, delta=DELTA, sparsity=k,
                                        random_state=seed, **kw).fit(X)
            errs[key].append(np.linalg.norm(est.mean_ - mean))
    g = np.mean(errs["gaussian"])
    print("    l2 error / dense Gaussian's (mean of %d seeds): projection %.3f, "
          "one_hot_blocks %.3f" % (seeds, np.mean(errs["projection"]) / g,
                                   np.mean(errs["one_hot_blocks"]) / g))


def auto_rule_check(seeds=3):
    import itertools

    from skdpsparse.mechanisms.projection import mean_noise
    from skdpsparse.mechanisms.sparse_mean import choose_method, spread_signal

    cells = list(itertools.product((2000, 20000), (2**12, 2**16), (5, 40), (0.5, 2.0),
                                   ("power_law", "uniform")))
    cells += [(n, 2**18, 185, eps, "power_law") for n in (5000, 20000) for eps in (0.5, 2.0)]
    print(f"\n[5] auto's rule on generated rows ({seeds} seeds, delta={DELTA})")
    print(f"{'n':>6} {'d':>7} {'s':>4} {'eps':>4} {'columns':>9} {'thr/proj':>9} "
          f"{'winner':>11} {'rule':>11} {'mu/lambda':>9}")
    agree = 0
    for n, d, s, eps, dist in cells:
        X, _ = make_sparse_vectors(n, d, s, column_distribution=dist, random_state=7)
        mean = np.asarray(X.mean(axis=0)).ravel()
        err = {}
        for method in ("threshold", "projection"):
            err[method] = np.mean([np.linalg.norm(DPSparseMeanEstimator(
                epsilon=eps, delta=DELTA, sparsity=s, method=method, random_state=r
            ).fit(X).mean_ - mean) for r in range(seeds)])
        winner = min(err, key=err.get)
        rule = choose_method(n, d, s, eps, DELTA)
        agree += rule == winner
        sigma = mean_noise(n, epsilon=eps, delta=DELTA, norm_bound=1.0, sparsity=s)[1]
        ratio = spread_signal(n, d, s) / (sigma * np.sqrt(2 * np.log(d)))
        print(f"{n:>6} {d:>7} {s:>4} {eps:>4} {dist:>9} "
              f"{err['threshold'] / err['projection']:>9.2f} {winner:>11} {rule:>11} "
              f"{ratio:>9.3f}")
    print(f"    the rule picks the winner in {agree} of {len(cells)} cells")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", type=int, choices=[1, 2, 3, 4, 5])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--child", nargs=3, type=int)
    parser.add_argument("--sizes", default="200000,1000000")
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    if args.child:
        _scale_child(*args.child)
        return
    if args.part in (None, 1):
        error_table(args.runs, [10**3, 10**4, 10**5, 10**6])
    if args.part in (None, 2):
        speed(tuple(int(v) for v in args.sizes.split(",")), reps=args.reps)
    if args.part in (None, 3):
        scale()
    if args.part in (None, 4):
        blocks_cost(reps=args.reps)
    if args.part in (None, 5):
        auto_rule_check()


if __name__ == "__main__":
    main()
