"""Time the numba kernels against plain NumPy/SciPy baselines, in one run.

Run with ``python benchmarks/bench_kernels.py [--quick]``. Every timing is the
median of several repetitions after a warm-up call (so numba's compile time is
excluded); the table prints both times and their ratio. This is a measurement, not
a test: nothing here fails on a number.

Cases:

* Euclidean projection onto the l1 ball of a Gaussian vector, against the
  sort-based reference of Duchi et al. (2008) from the kernel tests, for a small
  radius (sqrt(s), s = 10) and one leaving half the entries nonzero.
* Contribution bounding of CSR rows (per-row scales, then the scaled data) against
  a vectorised NumPy/SciPy version, at n = 1e6 rows, 16 nonzeros per row,
  d = 2**20.
* The fused bounded column sum (the sum behind a private mean) against SciPy's
  plain ``X.mean(axis=0)``, same matrix.
* The ChaCha20 keystream (every exact draw's bits; 4 MB, or 1 MB with ``--quick``)
  against NumPy's ``Generator.bytes`` (PCG64: not a cipher, a reference speed for
  random bytes).
* The noise grid's two passes (``grid_noise.to_grid`` / ``from_grid``, d = 10⁶)
  against the NumPy expressions they replaced (ldexp, clip, rint, astype; astype,
  ldexp), checked equal bit for bit first.
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "kernels"))
from kernels_reference import project_l1_sort  # noqa: E402

from skdpsparse._kernels import (  # noqa: E402
    csr_bounded_column_sum,
    csr_bounding_scales,
    csr_scale_rows,
    project_l1_ball,
)


def median_time(fn, repeat):
    fn()  # warm-up: compiles (or loads from cache) and touches memory
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def numpy_bound_rows(X, l2_bound, l1_bound):
    """Vectorised contribution bounding: row norms by segment sums, then scaling."""
    nonempty = np.diff(X.indptr) > 0
    starts = X.indptr[:-1][nonempty]
    sq = np.zeros(X.shape[0])
    ab = np.zeros(X.shape[0])
    sq[nonempty] = np.add.reduceat(X.data * X.data, starts)
    ab[nonempty] = np.add.reduceat(np.abs(X.data), starts)
    with np.errstate(divide="ignore"):
        scales = np.minimum(1.0, np.minimum(l2_bound / np.sqrt(sq), l1_bound / ab))
    return scales, X.data * np.repeat(scales, np.diff(X.indptr))


def kernel_bound_rows(X, l2_bound, l1_bound):
    scales = csr_bounding_scales(X.indptr, X.data, l2_bound, l1_bound)
    return scales, csr_scale_rows(X.indptr, X.data, scales)


def numpy_to_grid(values, exponent):
    """The NumPy rounding to the noise grid that ``to_grid`` replaced."""
    scaled = np.ldexp(values, -exponent)
    np.clip(scaled, -float(1 << 60), float(1 << 60), out=scaled)
    return np.rint(scaled).astype(np.int64)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    args = parser.parse_args()
    repeat = 3 if args.quick else 7
    rng = np.random.default_rng(0)
    rows = []

    # -- l1-ball projection
    for d in ([10**5, 10**6] if args.quick else [10**6, 10**7]):
        v = rng.standard_normal(d)
        a = np.abs(v)
        for label, radius in [
            ("sqrt(10)", np.sqrt(10.0)),
            ("half nonzero", float(np.maximum(a - np.median(a), 0.0).sum())),
        ]:
            x = project_l1_ball(v, radius)
            assert np.allclose(x, project_l1_sort(v, radius), atol=1e-9)
            t_ref = median_time(lambda: project_l1_sort(v, radius), repeat)
            t_ker = median_time(lambda: project_l1_ball(v, radius), repeat)
            rows.append((f"l1-ball projection d={d:.0e}, r={label}", "sort (Duchi)", t_ref, t_ker))
        v = a = None  # free them before the next size (a del confuses flake8)

    # -- CSR contribution bounding and bounded column sums
    n, nnz_row, d = (10**5, 16, 2**17) if args.quick else (10**6, 16, 2**20)
    indptr = np.arange(0, n * nnz_row + 1, nnz_row, dtype=np.int32)
    indices = rng.integers(0, d, n * nnz_row, dtype=np.int32)
    data = rng.standard_normal(n * nnz_row)
    X = sp.csr_matrix((data, indices, indptr), shape=(n, d))
    X.sum_duplicates()  # canonical, as the mechanisms pass it (a few dozen duplicates)
    l2_bound, l1_bound = 1.0, np.sqrt(10.0)

    s_ref, d_ref = numpy_bound_rows(X, l2_bound, l1_bound)
    s_ker, d_ker = kernel_bound_rows(X, l2_bound, l1_bound)
    assert np.allclose(s_ref, s_ker) and np.allclose(d_ref, d_ker)
    del s_ref, d_ref, s_ker, d_ker
    t_ref = median_time(lambda: numpy_bound_rows(X, l2_bound, l1_bound), repeat)
    t_ker = median_time(lambda: kernel_bound_rows(X, l2_bound, l1_bound), repeat)
    label = f"CSR row bounding n={n:.0e}, {nnz_row}/row, d=2^{d.bit_length() - 1}"
    rows.append((label, "NumPy/SciPy vectorised", t_ref, t_ker))

    def fused_mean():
        return csr_bounded_column_sum(X.indptr, X.indices, X.data, d, l2_bound, l1_bound) / n

    def unbounded_mean():
        return csr_bounded_column_sum(X.indptr, X.indices, X.data, d, np.inf, np.inf) / n

    assert np.allclose(unbounded_mean(), np.asarray(X.mean(axis=0)).ravel())
    t_ref = median_time(lambda: X.mean(axis=0), repeat)
    rows.append(("bounded column mean (fused), same X", "SciPy X.mean(axis=0)", t_ref,
                 median_time(fused_mean, repeat)))
    rows.append(("  same, no bounds (the scatter alone)", "SciPy X.mean(axis=0)", t_ref,
                 median_time(unbounded_mean, repeat)))

    # -- ChaCha20 keystream and the noise grid's passes
    from skdpsparse._kernels.chacha import LANES, _keystream, key_words
    from skdpsparse._kernels.grid_noise import from_grid, grid_factor, to_grid

    n_blocks = (1 << 14) if args.quick else (1 << 16)
    words = np.empty(16 * n_blocks, np.uint32)
    key = key_words(os.urandom(32))
    gen = np.random.default_rng(1)
    assert n_blocks % LANES == 0
    rows.append((f"ChaCha20 keystream, {n_blocks * 64 >> 20} MB", "NumPy Generator.bytes",
                 median_time(lambda: gen.bytes(64 * n_blocks), repeat),
                 median_time(lambda: _keystream(key, 0, 0, 0, 0, n_blocks, words), repeat)))
    values, exponent = rng.standard_normal(10**6) * 1e-3, -30
    grid = np.empty(values.size, np.int64)
    back = np.empty(values.size)
    assert to_grid(values, grid_factor(-exponent), grid)
    assert np.array_equal(grid, numpy_to_grid(values, exponent))
    from_grid(grid, grid_factor(exponent), back)
    assert back.tobytes() == np.ldexp(grid.astype(np.float64), exponent).tobytes()
    rows.append(("noise grid rounding d=1e6 (to_grid)", "NumPy ldexp/clip/rint",
                 median_time(lambda: numpy_to_grid(values, exponent), repeat),
                 median_time(lambda: to_grid(values, grid_factor(-exponent), grid), repeat)))
    rows.append(("noise grid back d=1e6 (from_grid)", "NumPy astype + ldexp",
                 median_time(lambda: np.ldexp(grid.astype(np.float64), exponent), repeat),
                 median_time(lambda: from_grid(grid, grid_factor(exponent), back), repeat)))

    width = max(len(r[0]) for r in rows)
    print(f"median of {repeat} runs after warm-up; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} CPUs")
    print(f"{'case':<{width}}  {'baseline':<24}{'baseline s':>11}{'kernel s':>11}{'speed-up':>10}")
    for case, base, t_ref, t_ker in rows:
        print(f"{case:<{width}}  {base:<24}{t_ref:>11.4f}{t_ker:>11.4f}{t_ref / t_ker:>9.1f}x")


if __name__ == "__main__":
    main()
