"""The exact shuffles behind DPHeavyTailedMean(method="cwme", shuffle=True).

exact_sampling's Fisher–Yates with the bit length of the bound kept across steps
(_shuffle_with) reads the same bits as recounting it at every step, so it gives the
same permutation bit for bit; ``shuffled`` equals the gather of the labels by that
permutation; the law of the permutations is uniform; and a variant that updates the
bit length one step early is caught by both checks.

The estimator's labels come from heavy_tailed_scaled.random_groups (Fisher–Yates on
the labels, Lemire's multiply-and-reject indices): every index map exact (checked for
every bound on 8-bit words), the consecutive sizes, the uniform arrangement law in
both index branches, and Sattolo's variant caught.
"""

import itertools
import math
import os

import numba
import numpy as np
import pytest
from scipy import stats

from skdpsparse._kernels import exact_sampling as es
from skdpsparse._kernels.chacha import key_words
from skdpsparse._kernels.heavy_tailed_scaled import consecutive_groups


@numba.njit
def _reference_shuffle(out, key, domain):
    # The textbook loop: the bound's bit length recounted at every step.
    io, r = es._new_reader(key, 0, domain)
    for i in range(out.size - 1, 0, -1):
        j, r = es._uniform_below(io, r, i + 1)
        out[i], out[j] = out[j], out[i]


@numba.njit
def _early_shuffle(out, key, domain):
    # Broken on purpose: the bit length drops one step early (at i == 2^(k-1)), so
    # position i = 2^(k-1) never keeps its own item.
    io, r = es._new_reader(key, 0, domain)
    k = 0
    i = out.size - 1
    while (np.int64(1) << k) <= i:
        k += 1
    low = np.int64(1) << (k - 1)
    while i >= 1:
        if i <= low and k > 1:
            k -= 1
            low >>= 1
        v = 0
        while True:
            v, r = es._bits(io, r, k)
            if v < i + 1:
                break
        out[i], out[v] = out[v], out[i]
        i -= 1


def _key(i):
    return key_words(int(i).to_bytes(32, "little"))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 8, 9, 1000, 2**16, 2**16 + 1, 200_003])
def test_permutation_is_bitwise_the_textbook_fisher_yates(n):
    for domain in (0, 3):
        ref = np.arange(n, dtype=np.int64)
        _reference_shuffle(ref, _key(n), domain)
        np.testing.assert_array_equal(es.permutation(n, _key(n), domain), ref)


def test_shuffled_labels_equal_the_gathered_labels():
    for n, m in [(1, 1), (10, 3), (1001, 32), (65_537, 7)]:
        labels = consecutive_groups(n, m)
        key = _key(7 * n + m)
        got = es.shuffled(labels, key, 1)
        np.testing.assert_array_equal(got, labels[es.permutation(n, key, 1)])
        np.testing.assert_array_equal(labels, consecutive_groups(n, m))  # not modified
        assert got.dtype == np.int64
    with pytest.raises(ValueError, match="integer"):
        es.shuffled(np.zeros(3), _key(0), 0)


def _chi2_pvalue(draw, n, runs):
    counts = dict.fromkeys(itertools.permutations(range(n)), 0)
    for d in range(runs):
        counts[tuple(draw(d))] += 1
    return stats.chisquare(list(counts.values())).pvalue


def test_permutations_of_five_are_uniform_and_the_broken_variant_is_caught():
    # 120 orders, 24 000 draws (200 expected per cell); fails if p < 1e-4. The broken
    # variant never leaves item 4 at position 4 (1/5 of the mass moved): p ~ 0.
    key = key_words(os.urandom(32))
    assert _chi2_pvalue(lambda d: es.permutation(5, key, d), 5, 24_000) > 1e-4

    def broken(d):
        out = np.arange(5, dtype=np.int64)
        _early_shuffle(out, key, d)
        return out

    assert _chi2_pvalue(broken, 5, 24_000) < 1e-10
    assert any(not np.array_equal(broken(d), es.permutation(5, key, d)) for d in range(50))


def test_shuffled_group_labels_have_the_uniform_arrangement_law():
    # A uniformly random arrangement of the multiset {0, 0, 1, 2}: 12 arrangements,
    # each with probability 2!/4! = 1/12. 12 000 draws; fails if p < 1e-4.
    labels = consecutive_groups(4, 3)
    np.testing.assert_array_equal(labels, [0, 0, 1, 2])
    key = key_words(os.urandom(32))
    counts = {}
    for d in range(12_000):
        t = tuple(es.shuffled(labels, key, d))
        counts[t] = counts.get(t, 0) + 1
    assert len(counts) == math.factorial(4) // 2
    assert stats.chisquare(list(counts.values())).pvalue > 1e-4


# ------------------------------------------------ random_groups: the labels cwme uses
# Fisher–Yates on the labels with Lemire's multiply-and-reject indices
# (heavy_tailed_scaled.random_groups): other bits than es.shuffled, the same law.
from skdpsparse._kernels import heavy_tailed_scaled as hts  # noqa: E402


@numba.njit
def _lemire_map(s, bits):
    # Every word x on [0, 2^bits) through Lemire's test: the accepted count per index.
    counts = np.zeros(s, np.int64)
    for x in range(1 << bits):
        ok, j = hts._lemire_accepts(np.int64(x), np.int64(s), bits)
        if ok:
            counts[j] += 1
    return counts


def test_lemire_indices_are_exactly_uniform_for_every_bound_on_8_bit_words():
    # The same code path as the 32-bit words of the shuffle: each j in [0, s) keeps
    # exactly floor(2^8 / s) accepted words, for every s up to 2^7 (the largest
    # bound is half the word, as _LEMIRE_MAX is for 32-bit words).
    for s in range(1, 129):
        np.testing.assert_array_equal(_lemire_map(s, 8), np.full(s, 256 // s), err_msg=s)


@pytest.mark.parametrize("n,m", [(1, 1), (2, 1), (10, 3), (1001, 32), (65_537, 7),
                                 (5000, 256), (5000, 257), (300, 300)])
def test_random_groups_have_the_consecutive_sizes(n, m):
    key = _key(n + 11 * m)
    g = hts.random_groups(n, m, key)
    m_used = min(n, m)
    assert g.dtype == (np.uint8 if m_used <= 256 else np.int64) and g.shape == (n,)
    np.testing.assert_array_equal(np.bincount(g, minlength=m_used),
                                  np.bincount(consecutive_groups(n, m), minlength=m_used))
    np.testing.assert_array_equal(g, hts.random_groups(n, m, key))  # keyed: repeatable
    if n > 100:
        assert not np.array_equal(g, hts.random_groups(n, m, key, domain=1))
        assert not np.array_equal(g, consecutive_groups(n, m))
    # accepted by the kernels' checks, uint8 as it is
    assert hts.check_groups(g, n, m).dtype == np.int64


def _labels(n, m, key, domain, lemire_max=hts._LEMIRE_MAX):
    sizes = np.diff(hts.group_bounds(n, m))
    return hts._random_labels_nb(sizes, key, domain, np.empty(n, np.uint8), lemire_max)


@numba.njit
def _sattolo(out, key, domain):
    # Broken on purpose: j uniform below i (Sattolo's algorithm), so no label stays
    # at the last position it started from: only cyclic permutations.
    io, r = hts._new_reader(key, 0, domain)
    for i in range(out.size - 1, 0, -1):
        while True:
            x, r = hts._bits(io, r, 32)
            ok, j = hts._lemire_accepts(x, np.int64(i), 32)
            if ok:
                break
        out[i], out[j] = out[j], out[i]


@pytest.mark.parametrize("lemire_max", [hts._LEMIRE_MAX, 1])
def test_random_groups_have_the_uniform_arrangement_law(lemire_max):
    # lemire_max = 1 sends every index through the branch for over 2^31 rows.
    # Permutations of 5 distinct labels: 120 cells, 24 000 draws (200 expected per
    # cell); the multiset {0, 0, 1, 2}: 12 arrangements, 12 000 draws. Fails if
    # p < 1e-4. Sattolo's variant (j below i) is caught: p ~ 0.
    key = key_words(os.urandom(32))
    assert _chi2_pvalue(lambda d: _labels(5, 5, key, d, lemire_max), 5, 24_000) > 1e-4
    counts = {}
    for d in range(12_000):
        t = tuple(_labels(4, 3, key, d, lemire_max))
        counts[t] = counts.get(t, 0) + 1
    assert len(counts) == math.factorial(4) // 2
    assert stats.chisquare(list(counts.values())).pvalue > 1e-4

    def broken(d):
        out = np.arange(5, dtype=np.uint8)
        _sattolo(out, key, d)
        return out

    assert _chi2_pvalue(broken, 5, 24_000) < 1e-10
