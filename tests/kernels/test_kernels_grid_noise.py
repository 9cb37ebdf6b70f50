"""The fast exact noise sampler (skdpsparse._kernels.grid_noise): its certified
floating-point decisions, its exact fallback, and its agreement with the exact
algorithm draw for draw."""

import math
import os
from decimal import Context, Decimal

import numpy as np
import pytest

from skdpsparse._kernels import grid_noise as gn
from skdpsparse._kernels import grid_noise_exact as gx
from skdpsparse._kernels.chacha import key_words

SCALES = [2, 3, 5, 1000, 1024, 2047, 2**29 + 12345, 2**45 + 1, 2**50]


def _exact_exp_neg(z, digits=60):
    return Context(prec=digits).exp(-Decimal(z))


def test_exp_neg_is_within_its_stated_error():
    # The derivation's bound: |_exp_neg(z) − e^{−z}| < 2^-49 for every z ≥ 0. Points
    # include the table boundaries j/64 (± one ulp) and the cut-off at 36.
    rng = np.random.default_rng(0)
    grid = np.arange(0, 40 * 64 + 1) / 64.0
    z = np.concatenate([rng.uniform(0, 40, 20_000), rng.uniform(0, 1 / 64, 2_000), grid,
                        np.nextafter(grid, 0), np.nextafter(grid, 100)])
    z = z[z >= 0]
    worst = max(abs(Decimal(gn._exp_neg(float(v))) - _exact_exp_neg(float(v))) for v in z)
    assert worst < Decimal(2) ** -49


@pytest.mark.parametrize("n", SCALES)
def test_tables_are_within_the_margin_of_the_exact_thresholds(n):
    # The kernel's decisions are certified if every threshold is within 2^-44 of its
    # exact value (the margin is 2^-40): checked against exact interval arithmetic.
    b, log_k, lower, guide, upper = gn.noise_tables(n)
    exact_lower, exact_upper = gx._tables(n, int(b), int(log_k), upper.size)
    bound = 2 ** -44
    for approx, exact in [(lower, exact_lower), (upper, exact_upper)]:
        for value, bounds in zip(approx, exact):
            lo, hi = bounds(40)
            assert lo - bound <= value <= hi + bound
    assert upper[-1] < 2**-20 <= (upper[-2] if upper.size > 1 else 1.0)
    # K·B/n in (1/2, 1]: no threshold is tiny.
    assert 0.5 < (1 << (int(log_k) + int(b))) / n <= 1
    # The guide is a lower bound of the count for every V in its cell.
    k = 1 << int(log_k)
    for g in range(k):
        assert guide[g] == sum(lower > (g + 1) / k)


@pytest.mark.parametrize("gaussian", [False, True])
@pytest.mark.parametrize("n", SCALES)
def test_kernel_draws_are_the_exact_algorithms(gaussian, n):
    key = key_words(os.urandom(32))
    values = np.zeros(300, np.int64)
    assert gn.fill_noise(values, False, gaussian, n, key, 5, 128) == 0
    b, log_k, _, _, upper = gn.noise_tables(n)
    want = []
    for c in range(3):
        want += gx.exact_chunk(min(128, 300 - 128 * c), gaussian, n, int(b), int(log_k),
                               upper.size, key, c, 5)
    assert values.tolist() == want


@pytest.mark.parametrize("gaussian", [False, True])
@pytest.mark.parametrize("n", [3, 2047, 2**45 + 1])
def test_the_fallback_gives_the_same_draws(gaussian, n):
    # A margin of 2^-6 leaves many decisions to the exact algorithm, which resumes the
    # kernel after each one: the draws must not change (broken resumption, a wrong bit
    # offset or a fallback that redraws would change them).
    key = key_words(os.urandom(32))
    fast, slow = np.zeros(500, np.int64), np.zeros(500, np.int64)
    assert gn.fill_noise(fast, False, gaussian, n, key, 2, 64) == 0
    redone = gn.fill_noise(slow, False, gaussian, n, key, 2, 64, margin=2.0**-6)
    assert redone > 50
    np.testing.assert_array_equal(fast, slow)
    added = np.arange(500, dtype=np.int64) - 250
    gn.fill_noise(added, True, gaussian, n, key, 2, 64, margin=2.0**-6)
    np.testing.assert_array_equal(added, fast + np.arange(500) - 250)


def test_the_exact_bits_can_start_at_any_offset():
    key = key_words(os.urandom(32))
    whole = gx.KeyBits(key, 7, 3)
    stream = [whole.take(13) for _ in range(200)]
    for offset in [0, 5, 32, 511, 512, 13 * 77]:
        part = gx.KeyBits(key, 7, 3, offset)
        assert part.offset == offset
        bits = "".join(format(w, "013b") for w in stream)
        assert format(part.take(13), "013b") == bits[offset:offset + 13]


def test_margin_must_be_at_least_the_certified_one():
    with pytest.raises(ValueError, match="margin"):
        gn.fill_noise(np.zeros(4, np.int64), False, True, 10, key_words(bytes(32)), 0, 4,
                      margin=2.0**-41)


def test_exact_side_decides_irrational_thresholds_against_dyadic_cells():
    # e^{-1} = 0.367879441171442...; its 4-bit cell is [5/16, 6/16).
    third = gx.exp_neg(gx.Fraction(1))
    assert gx._side(third, 5, 4) == 0
    assert gx._side(third, 6, 4) == -1 and gx._side(third, 4, 4) == 1
    assert math.isclose(float(third(30)[0]), math.exp(-1))


def test_exact_side_handles_probabilities_below_the_decimal_range():
    # exp(−10^7) underflows decimal's exponent range: it is still a positive threshold,
    # inside [0, 2^-k) and below every other cell (a bracket [0, tiny] must not loop).
    tiny = gx.exp_neg(gx.Fraction(10**7))
    assert gx._side(tiny, 0, 4) == 0
    assert gx._side(tiny, 1, 4) == -1
    assert gx._side(gx.exp_neg(gx.Fraction(1, 10**40)), 15, 4) == 0  # just below 1
