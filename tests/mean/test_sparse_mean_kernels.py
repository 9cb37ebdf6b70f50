"""The sparse mean's fast paths: the same numbers as the plain NumPy steps they replace."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsparse._kernels import fixed_point as fp
from skdpsparse._kernels.sparse_rows import free_threads
from skdpsparse.mean import DPSparseMeanEstimator


def test_the_fused_conversion_is_ldexp_then_division_bit_for_bit():
    rng = np.random.default_rng(0)
    for frac_bits in (0, 1, 29, 40, 62):
        for n in (1, 3, 10**6 + 3):
            sums = rng.integers(-2**62, 2**62, 20_000)
            sums[:5] = [0, 1, -1, 2**62 - 1, -2**62]
            expected = np.ldexp(sums.astype(np.float64), -frac_bits) / n
            got = fp.fixed_sum_to_mean(sums, frac_bits, n)
            np.testing.assert_array_equal(got.view(np.int64), expected.view(np.int64))


def _reference_sums(X, l2, l1, frac_bits):
    """The exact sums in Python: each row scaled into the bounds (the norms summed in
    row order, as the kernel does), each entry rounded to 2^-F."""
    out = np.zeros(X.shape[1], dtype=np.int64)
    scale = math.ldexp(1.0, frac_bits)
    for i in range(X.shape[0]):
        row = X.data[X.indptr[i]:X.indptr[i + 1]]
        sumsq = n1 = 0.0
        for v in row.tolist():  # in order, as the kernel sums them
            sumsq += v * v
            n1 += abs(v)
        n2 = math.sqrt(sumsq)
        c = 1.0
        if n2 > l2:
            c = l2 / n2
        if n1 * c > l1:
            c = l1 / n1
        np.add.at(out, X.indices[X.indptr[i]:X.indptr[i + 1]],
                  np.rint(c * scale * row).astype(np.int64))
    return out


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_prefetching_kernel_gives_the_exact_sums_for_every_thread_count(threads):
    X = sp.random(3000, 700, density=0.03, format="csr", random_state=1) * 3
    parts = (X.indptr, X.indices, X.data)
    F = fp.fixed_point_bits(X.shape[0], 1.0)
    np.testing.assert_array_equal(
        fp.bounded_fixed_sum(parts, X.shape[1], 1.0, 2.0, F, n_threads=threads),
        _reference_sums(X, 1.0, 2.0, F))


@pytest.mark.parametrize("bad,message", [(np.nan, "NaN"), (np.inf, "infinity"),
                                         (-np.inf, "infinity")])
@pytest.mark.parametrize("threads", [1, 2])
def test_the_kernel_refuses_nan_and_infinity_in_its_pass(bad, message, threads, monkeypatch):
    monkeypatch.setattr(fp.sparse_rows, "_THREADED_MIN_NNZ", 1)
    X = sp.random(400, 50, density=0.2, format="csr", random_state=2)
    X.data[-1] = bad  # in the last row: the last thread's range
    with pytest.raises(ValueError, match=message):
        fp.bounded_fixed_sum((X.indptr, X.indices, X.data), 50, 1.0, 2.0, 20,
                             n_threads=threads)
    for method in ("threshold", "projection", "l1_recovery"):
        with pytest.raises(ValueError, match=message):
            DPSparseMeanEstimator(method=method).fit(X)
        with pytest.raises(ValueError, match=message):
            DPSparseMeanEstimator(method=method).fit(X.toarray())


def test_the_thread_count_is_the_users_or_at_most_the_cpus(monkeypatch):
    monkeypatch.setenv("SKDPSPARSE_NUM_THREADS", "3")
    assert free_threads() == 3
    for bad in ("0", "-1", "two"):
        monkeypatch.setenv("SKDPSPARSE_NUM_THREADS", bad)
        with pytest.raises(ValueError, match="SKDPSPARSE_NUM_THREADS"):
            free_threads()
    monkeypatch.delenv("SKDPSPARSE_NUM_THREADS")
    assert 1 <= free_threads() <= 4
    assert free_threads(limit=1) == 1
