"""ChaCha20 and the exact samplers: test vectors, a plain-Python reference, and the
exact laws (chi-square against the probability mass functions)."""

import math
import os

import numpy as np
import pytest
from scipy import stats

pytest.importorskip("cryptography")
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms  # noqa: E402

from skdpsparse._kernels import exact_sampling as es  # noqa: E402
from skdpsparse._kernels.chacha import chacha20_keystream, key_words  # noqa: E402

import exact_sampling_reference as ref  # noqa: E402


def test_chacha20_block_rfc8439_vector():
    # RFC 8439 Section 2.3.2: key 00..1f, nonce 000000090000004a00000000, counter 1.
    out = chacha20_keystream(bytes(range(32)), 1, counter=1,
                             nonce=bytes.fromhex("000000090000004a00000000"))
    assert out.hex() == (
        "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
        "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e")


@pytest.mark.parametrize("counter, n_blocks", [(0, 1), (7, 33), (2**32 - 70, 70)])
def test_chacha20_keystream_matches_cryptography(counter, n_blocks):
    key, nonce = os.urandom(32), os.urandom(12)
    enc = Cipher(algorithms.ChaCha20(key, counter.to_bytes(4, "little") + nonce),
                 mode=None).encryptor()
    assert chacha20_keystream(key, n_blocks, counter=counter, nonce=nonce) == \
        enc.update(bytes(64 * n_blocks))


@pytest.mark.parametrize("kind", [es.DISCRETE_LAPLACE, es.DISCRETE_GAUSSIAN])
@pytest.mark.parametrize("scale", [2, 3, 1000, 2**29 + 12345, 2**45 + 1])
def test_kernel_draws_equal_the_python_reference(kind, scale):
    key = os.urandom(32)
    got = es.discrete_noise(300, kind, scale, key_words(key), 5, chunk=128)
    want = ref.discrete_noise(300, kind == es.DISCRETE_GAUSSIAN, scale, key, 5, 128)
    assert got.tolist() == want


def test_draws_do_not_depend_on_the_thread_count():
    key = key_words(os.urandom(32))
    big = es.discrete_noise(3 * 4096 + 11, es.DISCRETE_GAUSSIAN, 77, key, 1)  # parallel
    small = np.concatenate([es.discrete_noise(4096, es.DISCRETE_GAUSSIAN, 77, key, 1)])
    np.testing.assert_array_equal(big[:4096], small)


def _chi_square(draws, pmf, support):
    observed = np.array([(draws == k).sum() for k in support] + [0])
    expected = np.array([pmf(k) for k in support])
    expected = np.append(expected, 1 - expected.sum()) * draws.size
    observed[-1] = draws.size - observed[:-1].sum()
    keep = expected > 5
    return stats.chisquare(observed[keep], expected[keep] * observed[keep].sum()
                           / expected[keep].sum()).pvalue


SAMPLERS = [es.discrete_noise, es.cks_discrete_noise]  # the fast one, and CKS 2020's


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("n", [2, 3, 5])
def test_discrete_laplace_has_its_exact_law(n, sampler):
    draws = sampler(200_000, es.DISCRETE_LAPLACE, n, key_words(os.urandom(32)), 0)
    z = (1 - math.exp(-1 / n)) / (1 + math.exp(-1 / n))  # P(0)
    assert _chi_square(draws, lambda k: z * math.exp(-abs(k) / n), range(-12 * n, 12 * n)) \
        > 1e-4


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("n", [2, 3, 5])
def test_discrete_gaussian_has_its_exact_law(n, sampler):
    draws = sampler(200_000, es.DISCRETE_GAUSSIAN, n, key_words(os.urandom(32)), 0)
    weights = {k: math.exp(-k * k / (2 * n * n)) for k in range(-40 * n, 40 * n + 1)}
    total = sum(weights.values())
    assert _chi_square(draws, lambda k: weights[k] / total, range(-6 * n, 6 * n + 1)) > 1e-4


@pytest.mark.parametrize("kind", [es.DISCRETE_LAPLACE, es.DISCRETE_GAUSSIAN])
@pytest.mark.parametrize("n", [1023, 2**30 + 7])
def test_the_two_exact_samplers_agree_in_law(kind, n):
    # Two independent exact algorithms of one law: 100 000 draws each, binned at
    # quantiles of the law, pass a chi-square test of homogeneity at level 1e-4.
    fast = es.discrete_noise(100_000, kind, n, key_words(os.urandom(32)), 0) / n
    slow = es.cks_discrete_noise(100_000, kind, n, key_words(os.urandom(32)), 0) / n
    edges = np.quantile(np.concatenate([fast, slow]), np.linspace(0, 1, 41)[1:-1])
    table = [np.bincount(np.searchsorted(edges, x), minlength=40) for x in (fast, slow)]
    assert stats.chi2_contingency(table)[1] > 1e-4


def test_discrete_gaussian_moments_at_a_large_scale():
    n = 2**29 + 3
    draws = es.discrete_noise(100_000, es.DISCRETE_GAUSSIAN, n, key_words(os.urandom(32)), 0)
    assert abs(draws.mean() / n) < 5 / math.sqrt(draws.size)
    assert abs(draws.std() / n - 1) < 0.02
    assert stats.kstest(draws / n, "norm").pvalue > 1e-4


def test_added_noise_is_saturated_by_post_processing_only():
    values = np.array([2**60, -(2**60), 0], dtype=np.int64)
    es.add_discrete_noise(values, es.DISCRETE_LAPLACE, 2**50, key_words(bytes(32)), 0)
    assert np.all(np.abs(values) <= 2**61)
    with pytest.raises(ValueError, match="2\\^60"):
        es.add_discrete_noise(np.array([2**61], dtype=np.int64), es.DISCRETE_LAPLACE, 2,
                              key_words(bytes(32)), 0)


def test_uniform_integers_permutation_and_coins_are_exact():
    key = key_words(os.urandom(32))
    draws = es.uniform_integers(7, 70_000, key, 0)
    assert stats.chisquare(np.bincount(draws, minlength=7)).pvalue > 1e-4
    counts = {}
    for d in range(6000):
        p = tuple(es.permutation(3, key, d))
        counts[p] = counts.get(p, 0) + 1
    assert len(counts) == 6 and stats.chisquare(list(counts.values())).pvalue > 1e-4
    coins = es.bernoulli_fractions(np.full(100_000, 1), np.full(100_000, 3), key, 0)
    assert abs(coins.mean() - 1 / 3) < 5 * math.sqrt(2 / 9 / coins.size)
    coins = es.bernoulli_exp_fractions(np.full(100_000, 5), np.full(100_000, 2), key, 0)
    assert abs(coins.mean() - math.exp(-2.5)) < 5 * math.sqrt(0.08 / coins.size)


def test_categorical_exp_has_the_exponential_mechanism_law():
    exponents = np.array([0, 1 << 40, 3 << 39, 5 << 40, 200 << 40], dtype=np.int64)
    draws = es.categorical_exp(exponents, 40, 100_000, key_words(os.urandom(32)), 0)
    w = np.exp(-exponents / 2.0**40)
    counts = np.bincount(draws, minlength=5)
    assert counts[4] == 0  # weight e^-200
    assert stats.chisquare(counts[:4], w[:4] / w[:4].sum() * counts[:4].sum()).pvalue > 1e-4
