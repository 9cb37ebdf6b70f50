"""Benchmark of DPSparseMeanEstimator (issue: sparse mean). Not a test.

1. Error table: n = 10⁴, s = 10, ε = 1, δ = 1e-6, d ∈ {10³, 10⁴, 10⁵, 10⁶}: mean ℓ2
   error over 20 runs of each method, power-law and uniform column frequencies, with
   the ratio auto / dense Gaussian (targets: ≤ 1/5 at d = 10⁵, ≤ 1/15 at d = 10⁶).
2. Speed: fit with method="projection" on CSR n = 10⁶, d = 2²⁰, 16 nonzeros per row,
   against SciPy's non-private ``X.mean(axis=0)`` in the same run (target ratio ≤ 1.0).
3. Scale: l1_recovery at d = 10⁷, n = 10⁴, s = 10 in a fresh subprocess: wall time,
   peak RSS, and its error next to the dense Gaussian's.

Run:  python benchmarks/bench_sparse_mean.py            (all three parts)
      python benchmarks/bench_sparse_mean.py --part 1 --runs 5
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


def speed(n=10**6, d=2**20, s=16, reps=5):
    X, _ = make_sparse_vectors(n, d, s, random_state=0)
    est = DPSparseMeanEstimator(epsilon=EPS, delta=DELTA, sparsity=s, method="projection",
                                random_state=0)
    est.fit(X[:1000])  # warm-up: numba compile / cache load, excluded from timing
    t_ours, t_scipy = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        est.fit(X)
        t_ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        X.mean(axis=0)
        t_scipy.append(time.perf_counter() - t0)
    ours, base = np.median(t_ours), np.median(t_scipy)
    print(f"\n[2] fit time, CSR n={n}, d={d}, {s} nonzeros/row (median of {reps})")
    print(f"    DPSparseMeanEstimator(projection): {ours:.3f} s")
    print(f"    scipy X.mean(axis=0) (non-private): {base:.3f} s")
    print(f"    ratio ours/scipy: {ours / base:.2f}  (target <= 1.0)")


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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", type=int, choices=[1, 2, 3])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--child", nargs=3, type=int)
    args = parser.parse_args()
    if args.child:
        _scale_child(*args.child)
        return
    if args.part in (None, 1):
        error_table(args.runs, [10**3, 10**4, 10**5, 10**6])
    if args.part in (None, 2):
        speed()
    if args.part in (None, 3):
        scale()


if __name__ == "__main__":
    main()
