"""The demo behind ``python -m skdpsparse``; each estimator adds one section."""

import time

import numpy as np


def _section(title):
    print()
    print(title)
    print("-" * len(title))


def demo_sparse_mean():
    """DPSparseMeanEstimator on generated embedding-like data (seed 002, Section 3)."""
    from .datasets import make_sparse_vectors
    from .mean import DPSparseMeanEstimator

    n, d, s = 20_000, 2**17, 16
    X, _ = make_sparse_vectors(n, d, s, column_distribution="power_law", random_state=0)
    target = np.asarray(X.mean(axis=0)).ravel()  # rows already have unit norm
    _section(f"DPSparseMeanEstimator: n={n}, d={d}, s={s} nonzeros per row (CSR)")
    print(f"{'method':<18} {'privacy spent':<16} {'l2 error':>9}  (||mean|| = "
          f"{np.linalg.norm(target):.3f})")
    for method, delta in [("gaussian", 1e-6), ("projection", 1e-6),
                          ("laplace", 0.0), ("projection", 0.0), ("auto", 1e-6)]:
        est = DPSparseMeanEstimator(epsilon=1.0, delta=delta, sparsity=s, method=method,
                                    random_state=0).fit(X)
        err = np.linalg.norm(est.mean_ - target)
        label = method if method != "auto" else f"auto->{est.method_}"
        print(f"{label:<18} {str(est.privacy_spent_):<16} {err:>9.4f}")


DEMOS = [demo_sparse_mean]


def run_demo():
    """Run every demo section; returns a process exit code."""
    print("skdpsparse demo: privacy spent and utility reached, per estimator")
    for demo in DEMOS:
        start = time.perf_counter()
        demo()
        print(f"({time.perf_counter() - start:.1f} s)")
    return 0
