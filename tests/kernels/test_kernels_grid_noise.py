"""The fast exact noise sampler (skdpsparse._kernels.grid_noise): its certified
floating-point decisions, its exact fallback, and its agreement with the exact
algorithm draw for draw."""

import math
import os
from decimal import Context, Decimal

import numba
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


def _floor_word(bounds, digits=60):
    """⌊2⁶³ T⌋ from the specification's own interval bounds on T (fractions)."""
    lo, hi = bounds(digits)
    low, high = math.floor(lo * 2**63), math.floor(hi * 2**63)
    assert low == high  # 60 digits decide 63 bits unless T is within 1e-41 of a cell end
    return low


@pytest.mark.parametrize("n", SCALES)
def test_table_words_are_the_exact_floors_of_the_thresholds(n):
    # The kernel's decisions are exact if every word is ⌊2⁶³ T⌋ for its threshold T:
    # checked against the specification's fraction intervals (a second code path: the
    # tables come from decimal powers with outward rounding).
    b, log_k, lower, guide, upper = gn.noise_tables(n)
    exact_lower, exact_upper = gx._tables(n, int(b), int(log_k), upper.size)
    assert lower.tolist() == [_floor_word(f) for f in exact_lower]
    assert upper.tolist() == [_floor_word(f) for f in exact_upper]
    assert upper[-1] < 2**43 <= (upper[-2] if upper.size > 1 else 2**63)  # λ^h vs 2^-20
    # K·B/n in (1/2, 1]: no threshold is tiny.
    assert 0.5 < (1 << (int(log_k) + int(b))) / n <= 1
    # The guide counts the thresholds above each cell of L's first read (k + 4 bits).
    depth = int(log_k) + 4
    words = [int(t) for t in lower]
    for g in [0, 1, (1 << depth) // 3, (1 << depth) - 2, (1 << depth) - 1]:
        assert guide[g] == sum(t >= (g + 1) << (63 - depth) for t in words)
    assert np.all(np.diff(guide.astype(np.int64)) <= 0)
    assert not lower.flags.writeable  # the cached tables cannot be altered by a caller


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
    # A margin of 2^-6 and table reads capped at 9 bits leave many decisions to the
    # exact algorithm (every table comparison that reads past its first group, about
    # one in ten to twenty, and the float comparisons near their thresholds), which
    # resumes the kernel after each one: the draws must not change (broken resumption,
    # a wrong bit offset or a fallback that redraws would change them).
    key = key_words(os.urandom(32))
    fast, slow = np.zeros(500, np.int64), np.zeros(500, np.int64)
    assert gn.fill_noise(fast, False, gaussian, n, key, 2, 64) == 0
    redone = gn.fill_noise(slow, False, gaussian, n, key, 2, 64, margin=2.0**-6,
                           max_depth=9)
    assert redone > 5  # measured: 14 to 105 over these cases
    np.testing.assert_array_equal(fast, slow)
    added = np.arange(500, dtype=np.int64) - 250
    gn.fill_noise(added, True, gaussian, n, key, 2, 64, margin=2.0**-6, max_depth=9)
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
    with pytest.raises(ValueError, match="max_depth"):
        gn.fill_noise(np.zeros(4, np.int64), False, True, 10, key_words(bytes(32)), 0, 4,
                      max_depth=64)


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


# ------------------------------------------------ to and from the grid (noise.py)
def _numpy_to_grid(values, exponent):
    """The NumPy expression the compiled pass replaced (its reference)."""
    with np.errstate(over="ignore"):
        scaled = np.ldexp(values, -exponent)
    np.clip(scaled, -float(1 << 60), float(1 << 60), out=scaled)
    return np.rint(scaled).astype(np.int64)


def _awkward_values(exponent, rng):
    """Values at every magnitude of the grid 2^exponent: halfway points (ties to even),
    neighbours of the clip, huge ones, signed zeros, subnormals, random ones."""
    gamma = math.ldexp(1.0, exponent)
    k = np.arange(-6, 7, dtype=np.float64)
    big = float(1 << 60)
    specials = np.concatenate([
        (k + 0.5) * gamma, np.nextafter((k + 0.5) * gamma, np.inf),
        np.nextafter((k + 0.5) * gamma, -np.inf), k * gamma,
        [big * gamma, -big * gamma, np.nextafter(big, np.inf) * gamma, 2.0 ** 62 * gamma,
         1e308, -1e308, 5e-324, -5e-324, 2.2250738585072014e-308, 0.0, -0.0]])
    randoms = np.ldexp(rng.standard_normal(2000), rng.integers(-80, 80, 2000)) * gamma
    return np.concatenate([specials, randoms, rng.standard_normal(2000)])


@pytest.mark.parametrize("exponent", [-1022, -1000, -60, -30, -1, 0, 7, 40, 1000, 1022])
def test_to_and_from_grid_are_the_numpy_expressions_bit_for_bit(exponent):
    # Multiplying by the double 2^-e is ldexp(v, -e) exactly (both correctly rounded):
    # the grid values, and the release after the noise, must be those of the NumPy
    # passes they replaced, at the ends of the exponent range as well.
    rng = np.random.default_rng(exponent + 2000)
    with np.errstate(over="ignore", under="ignore"):
        values = _awkward_values(exponent, rng)
    values = values[np.isfinite(values)]
    grid = np.empty(values.size, np.int64)
    assert gn.to_grid(values, gn.grid_factor(-exponent), grid)
    np.testing.assert_array_equal(grid, _numpy_to_grid(values, exponent))
    noisy = grid + rng.integers(-(1 << 61), 1 << 61, grid.size)  # odd integers beyond 2^53
    back = np.empty(grid.size)
    gn.from_grid(noisy, gn.grid_factor(exponent), back)
    with np.errstate(over="ignore", under="ignore"):
        want = np.ldexp(noisy.astype(np.float64), exponent)
    assert back.tobytes() == want.tobytes()  # bit for bit, signed zeros included


def test_to_grid_reports_non_finite_values_and_the_factor_range():
    out = np.empty(3, np.int64)
    for bad in (np.nan, np.inf, -np.inf):
        assert not gn.to_grid(np.array([1.0, bad, 2.0]), 1.0, out)
    assert gn.grid_factor(1022) == 2.0**1022 and gn.grid_factor(-1022) == 2.0**-1022
    assert gn.grid_factor(1023) is None and gn.grid_factor(-1023) is None  # not normal


def test_max_abs_exceeds_counts_the_most_negative_integer():
    # np.abs(-2^63) is -2^63: the former check |values|.max() > 2^60 let it through.
    bound = 1 << 60
    assert not gn.max_abs_exceeds(np.array([bound, -bound, 0], np.int64), bound)
    assert gn.max_abs_exceeds(np.array([0, bound + 1], np.int64), bound)
    assert gn.max_abs_exceeds(np.array([-(1 << 63)], np.int64), bound)
    assert not gn.max_abs_exceeds(np.zeros(0, np.int64), bound)
    from skdpsparse._kernels.exact_sampling import DISCRETE_GAUSSIAN, add_discrete_noise

    with pytest.raises(ValueError, match="2\\^60"):  # k + Y would overflow int64
        add_discrete_noise(np.array([-(1 << 63)], np.int64), DISCRETE_GAUSSIAN, 10,
                           key_words(bytes(32)), 0)


@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
@pytest.mark.parametrize("shape", [(5000,), (40, 25)])
def test_release_is_the_former_numpy_release_for_the_same_key(kind, shape):
    # add_noise_inplace with the compiled passes against the former NumPy path, run
    # here on a second source with the same key: the same grid values, so the same
    # hashed context, the same noise and the same release, bit for bit.
    from skdpsparse.mechanisms.noise import add_noise_inplace, plan_grid_noise
    from skdpsparse.utils import RandomSource

    rng = np.random.default_rng(7)
    values = rng.standard_normal(shape) * 0.3
    plan = plan_grid_noise(kind, 0.25, 0.1, values.size)
    values.flat[::97] = 2.5 * math.ldexp(1.0, plan.exponent)  # ties: round to even
    key = os.urandom(32)
    grid = _numpy_to_grid(values.reshape(-1), plan.exponent)
    RandomSource(key).add_discrete_noise(grid, kind, plan.grid_scale)
    want = np.ldexp(grid.astype(np.float64), plan.exponent).reshape(shape)
    got = add_noise_inplace(values.copy(), RandomSource(key), kind, 0.25, sensitivity=0.1)
    assert got.tobytes() == want.tobytes()
    # A non-contiguous view takes the NumPy path: the same release again.
    wide = np.zeros((values.size, 2))
    wide[:, 0] = values.reshape(-1)
    add_noise_inplace(wide[:, 0], RandomSource(key), kind, 0.25, sensitivity=0.1)
    assert wide[:, 0].tobytes() == want.reshape(-1).tobytes()


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two numba threads")
def test_fill_uses_the_free_threads_and_the_draws_do_not_change(monkeypatch):
    # The thread count comes from free_threads (here SKDPSPARSE_NUM_THREADS): one
    # thread runs the serial fill, two the pool with two threads; the draws are the
    # same, and numba's setting of the calling thread is restored.
    launches = []
    pool = gn._fill_parallel
    monkeypatch.setattr(gn, "_fill_parallel",
                        lambda *args: (launches.append(numba.get_num_threads()), pool(*args)))
    key = key_words(os.urandom(32))
    draws = {}
    before = numba.get_num_threads()
    for threads in ("1", "2"):
        monkeypatch.setenv("SKDPSPARSE_NUM_THREADS", threads)
        values = np.zeros(gn._MIN_THREADED_DRAWS + 4097, np.int64)
        gn.fill_noise(values, False, True, 2**29 + 12345, key, 3, 4096)
        draws[threads] = values
        assert numba.get_num_threads() == before
    assert launches == [2]
    np.testing.assert_array_equal(draws["1"], draws["2"])
