"""Adversarial review of session 33's changes to the released noise path and to the
heavy-tailed mean's located interval (written by a reviewer, not the authors).

Reviewed: the ChaCha20 block function with 32-bit lanes (``skdpsparse/_kernels/
chacha.py``), the grid release in compiled passes (``grid_noise.to_grid``,
``from_grid``, ``max_abs_exceeds``; ``mechanisms/noise.py``), the exact noise fills on
the free cores (``grid_noise.fill_noise``'s thread count from
``sparse_rows.free_threads``), and the located interval's minimax-regret rule with
noisy tail bins read as at least 0 (``mechanisms/heavy_tailed_clip.py``).

1. The keystream is ChaCha20 (Bernstein 2008, "ChaCha, a variant of Salsa20"; IETF
   RFC 8439, Section 2.3) lane by lane, against a plain-Python block function written
   here from the RFC (independent of ``cryptography``), at counters where a batch of
   lanes crosses 2^31 and the 32-bit wrap, and nonce words with every bit set.
   FLAW (latent, predates this session): ``chacha20_keystream``'s guard against a
   counter that wraps never fires for a counter ≥ 0 (``not 0 <= counter and ...``
   parses as ``(not 0 <= counter) and ...``): blocks past 2^32 − 1 silently repeat
   the stream's first blocks. Reached only through the exact fallback
   (``grid_noise_exact.KeyBits``) after 2^32 blocks (256 GiB) of one chunk's stream,
   so not exploitable in practice. Found by this review (then xfail), fixed in 2497b44
   (the guard parenthesised): the test below is its regression test.
2. The draws do not depend on the thread count with the exact fallback running
   between threaded passes, at sizes that are not multiples of the chunk; a fit's
   sequence of draws (key schedule included) is the same with 1 and 2 threads and
   successive releases of one source never share noise.
3. Channels: a NaN or infinity in the statistic raises before any private draw (the
   key schedule untouched); the grid a mechanism hands to ``add_discrete_noise`` is
   within ±2^60 for every finite input, so the −2^63 that the former ``np.abs`` check
   let through could not come from a release (a robustness fix for direct callers,
   not a privacy bug). FLAW (usability, not privacy; b29fdf5): a read-only contiguous
   statistic failed with numba's TypingError after the draw, not a clear error
   before it; found by this review (then xfail), fixed in 2497b44 (refused before any
   draw): the test below is its regression test.
4. The located interval reads the data only through the released quantiles and the
   released (noisy) tail bins: recomputed from those and the plan's public numbers,
   it is the interval the fit used; and the exact bins would give another interval on
   this data (so a rule that read them would be caught).
"""

import os

import numba
import numpy as np
import pytest

from skdpsparse._kernels import grid_noise as gn
from skdpsparse._kernels._common import threads_are_fork_safe
from skdpsparse._kernels.chacha import LANES, chacha20_blocks, chacha20_keystream, key_words
from skdpsparse.utils import RandomSource

_M = 0xFFFFFFFF


# ------------------------------------------------------------ 1. ChaCha20 (RFC 8439)
def _rfc_block(key, counter, nonce):
    """RFC 8439 Section 2.3's block function, in plain Python (the reference)."""
    def rotl(v, k):
        return ((v << k) | (v >> (32 - k))) & _M

    def quarter(x, a, b, c, d):
        x[a] = (x[a] + x[b]) & _M
        x[d] = rotl(x[d] ^ x[a], 16)
        x[c] = (x[c] + x[d]) & _M
        x[b] = rotl(x[b] ^ x[c], 12)
        x[a] = (x[a] + x[b]) & _M
        x[d] = rotl(x[d] ^ x[a], 8)
        x[c] = (x[c] + x[d]) & _M
        x[b] = rotl(x[b] ^ x[c], 7)

    state = ([0x61707865, 0x3320646E, 0x79622D32, 0x6B206574]
             + [int.from_bytes(key[4 * i:4 * i + 4], "little") for i in range(8)]
             + [counter & _M] + list(nonce))
    x = list(state)
    for _ in range(10):
        for a, b, c, d in ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15),
                           (0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14)):
            quarter(x, a, b, c, d)
    return [(x[i] + state[i]) & _M for i in range(16)]


def test_rfc_reference_reproduces_the_rfc_test_vector():
    # RFC 8439 Section 2.3.2 (the reference itself is checked first).
    words = _rfc_block(bytes(range(32)), 1, (0x09000000, 0x4A000000, 0))
    assert words[:4] == [0xE4E7F110, 0x15593BD1, 0x1FDD0F50, 0xC47120A3]


@pytest.mark.parametrize("counter", [0, 2**31 - 7, 2**32 - 2 * LANES, 2**32 - LANES // 2])
@pytest.mark.parametrize("nonce", [(0, 0, 0), (_M, _M, _M), (0x9E3779B9, 0x7F4A7C15, 1)])
def test_every_lane_is_the_rfc_block(counter, nonce):
    # Lane l is block (counter + l) mod 2^32 (RFC 8439's 32-bit counter word), at a
    # batch crossing 2^31 (a sign bit in 32-bit arithmetic), the last batch the
    # readers allow (2^32 − 64, ..., 2^32 − 33), and one crossing the wrap (lanes 16
    # to 31 are blocks 0 to 15: the readers never ask for it, the kernel must still be
    # the cipher); nonce words with every bit set exercise the 64-bit→32-bit casts.
    key = bytes((7 * i + 3) & 0xFF for i in range(32))
    out = np.empty(16 * LANES, np.uint32)
    x, s = np.empty((16, LANES), np.uint32), np.empty((16, LANES), np.uint32)
    chacha20_blocks(key_words(key), counter, nonce[0], nonce[1], nonce[2], x, s, out)
    for lane in range(LANES):
        assert out[16 * lane:16 * lane + 16].tolist() == _rfc_block(key, counter + lane,
                                                                    nonce), lane


def test_keystream_bytes_follow_the_rfc_layout_across_batches():
    # 2·LANES + 3 blocks: three batches, the last one partly kept (chunk boundary).
    key, nonce = os.urandom(32), os.urandom(12)
    words = [int.from_bytes(nonce[4 * i:4 * i + 4], "little") for i in range(3)]
    got = np.frombuffer(chacha20_keystream(key, 2 * LANES + 3, counter=5, nonce=nonce),
                        "<u4").reshape(-1, 16)
    for block in (0, LANES - 1, LANES, 2 * LANES + 2):
        assert got[block].tolist() == _rfc_block(key, 5 + block, words)


# Was FLAW 1 (xfail strict): the guard parsed as `(not 0 <= counter) and ...`; fixed
# by its parentheses in chacha20_keystream.
@pytest.mark.parametrize("counter, n_blocks", [(2**32 - 1, 2), (2**32 + 5, 1)])
def test_keystream_refuses_a_counter_that_would_wrap(counter, n_blocks):
    with pytest.raises(ValueError, match="wrap"):
        chacha20_keystream(bytes(32), n_blocks, counter=counter)


# ------------------------------------------------------ 2. thread-count invariance
_two_threads = pytest.mark.skipif(
    numba.config.NUMBA_NUM_THREADS < 2 or not threads_are_fork_safe(),
    reason="needs two numba threads")


def _spy_parallel(monkeypatch):
    launches = []
    pool = gn._fill_parallel
    monkeypatch.setattr(gn, "_fill_parallel",
                        lambda *args: (launches.append(numba.get_num_threads()), pool(*args)))
    return launches


@_two_threads
@pytest.mark.parametrize("size", [7 * 64 + 13, 8 * 64 - 1, 8 * 64 + 1])
def test_threaded_fills_with_fallbacks_are_the_serial_fill(monkeypatch, size):
    # Threads even for short fills, a margin and a read cap that leave many draws to
    # the exact algorithm (it runs between the threaded pass and the serial resumes):
    # 1 and 2 threads give the draws of the fast serial fill, added or not, at sizes
    # that are not multiples of the chunk (64).
    monkeypatch.setattr(gn, "_MIN_THREADED_DRAWS", 0)
    launches = _spy_parallel(monkeypatch)
    key = key_words(os.urandom(32))
    monkeypatch.setenv("SKDPSPARSE_NUM_THREADS", "1")
    fast = np.zeros(size, np.int64)
    assert gn.fill_noise(fast, False, True, 2047, key, 2, 64) == 0
    start = np.arange(size, dtype=np.int64) * 1_000_003 - 5 * 10**8
    for threads in ("1", "2"):
        monkeypatch.setenv("SKDPSPARSE_NUM_THREADS", threads)
        slow = np.zeros(size, np.int64)
        assert gn.fill_noise(slow, False, True, 2047, key, 2, 64, margin=2.0**-6,
                             max_depth=9) > 0
        np.testing.assert_array_equal(slow, fast)
        added = start.copy()
        gn.fill_noise(added, True, True, 2047, key, 2, 64, margin=2.0**-6, max_depth=9)
        np.testing.assert_array_equal(added, start + fast)
    assert launches == [2, 2]  # the "2" fills ran on the pool, with two threads


@_two_threads
def test_a_fits_draws_and_key_schedule_do_not_depend_on_the_thread_count(monkeypatch):
    # A source's sequence of releases (a threaded add, a short serial draw, the same
    # statistic again) with 1 and 2 threads: the same values; the second release of
    # the same statistic has fresh noise (successive fills never share a stream).
    launches = _spy_parallel(monkeypatch)
    key = os.urandom(32)
    size = gn._MIN_THREADED_DRAWS + 4096 + 17
    statistic = np.arange(size, dtype=np.int64) - size // 2
    runs = {}
    for threads in ("1", "2"):
        monkeypatch.setenv("SKDPSPARSE_NUM_THREADS", threads)
        source = RandomSource(key)
        first = source.add_discrete_noise(statistic.copy(), "gaussian", 1000)
        short = source.discrete_noise(100, "laplace", 50)
        again = source.add_discrete_noise(statistic.copy(), "gaussian", 1000)
        runs[threads] = (first, short, again)
    for a, b in zip(runs["1"], runs["2"]):
        np.testing.assert_array_equal(a, b)
    first, _, again = runs["1"]
    assert np.mean(first == again) < 0.01  # fresh noise: about 1/(2.5·1000) agree
    assert launches == [2, 2]


# ------------------------------------------------- 3. channels of the grid release
class _Recording(RandomSource):
    def __init__(self, key):
        super().__init__(key)
        self.grids = []

    def add_discrete_noise(self, grid_values, kind, scale):
        self.grids.append(grid_values.copy())
        return super().add_discrete_noise(grid_values, kind, scale)


@pytest.mark.parametrize("position", [0, 4097, -1])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_a_non_finite_statistic_raises_before_any_draw(position, bad, layout):
    from skdpsparse.mechanisms.noise import add_noise_inplace

    values = np.random.default_rng(1).standard_normal(5000)
    values[position] = bad
    if layout == "strided":  # the NumPy path
        wide = np.zeros((values.size, 2))
        wide[:, 0] = values
        values = wide[:, 0]
    before = values.copy()
    source = _Recording(bytes(32))
    with pytest.raises(ValueError, match="NaN or infinity"):
        add_noise_inplace(values, source, "gaussian", 0.5, sensitivity=1.0)
    assert source.grids == [] and source._draws == 0  # no key derived, no noise drawn
    np.testing.assert_array_equal(values, before)  # NaN == NaN here


# Was FLAW 3 (xfail strict): now refused by add_noise_inplace before any draw.
def test_a_read_only_statistic_is_refused_clearly_before_any_draw():
    from skdpsparse.mechanisms.noise import add_noise_inplace

    values = np.linspace(-1.0, 1.0, 50)
    values.flags.writeable = False
    source = _Recording(bytes(32))
    with pytest.raises(ValueError, match="values|read-only"):
        add_noise_inplace(values, source, "gaussian", 0.5, sensitivity=1.0)
    assert source._draws == 0


@pytest.mark.parametrize("sensitivity", [1e-300, 1.0, 1e300])
def test_the_grid_a_mechanism_releases_is_within_two_to_the_sixty(sensitivity):
    # Every finite double, at three grid exponents, becomes a grid value within ±2^60:
    # the former bound check's blind spot (−2^63, np.abs(−2^63) < 0) could not be
    # reached from add_noise_inplace (the clip comes first), so it was not a privacy
    # bug of the estimators; the new check refuses it for direct callers too.
    from skdpsparse._kernels.exact_sampling import DISCRETE_GAUSSIAN, add_discrete_noise
    from skdpsparse.mechanisms.noise import add_noise_inplace

    tiny = np.nextafter(0.0, 1.0)
    extremes = np.array([-1.7976931348623157e308, 1.7976931348623157e308, -2.0**63,
                         2.0**63, -2.0**1000, tiny, -tiny, -0.0, 0.0, -2.0**-1074 * 3])
    source = _Recording(bytes(range(32)))
    add_noise_inplace(extremes.copy(), source, "laplace", sensitivity,
                      sensitivity=sensitivity)
    (grid,) = source.grids
    assert np.all(np.abs(grid.astype(object)) <= 2**60)  # object: no int64 overflow
    with pytest.raises(ValueError, match="2\\^60"):
        add_discrete_noise(np.array([5, -(1 << 63)], np.int64), DISCRETE_GAUSSIAN, 10,
                           key_words(bytes(32)), 0)


# --------------------------------------- 4. the located interval is post-processing
@pytest.mark.parametrize("n, epsilon, delta", [(30_000, 8.0, 1e-6), (50_000, 4.0, 0.0)])
def test_the_located_interval_is_a_function_of_the_releases(monkeypatch, n, epsilon, delta):
    # The released tail bins are replaced, as they leave draw_tail_bins, by other
    # values (every far bin read as empty): the interval the fit then uses must be the
    # one extrapolated_interval computes from the released quantiles, those bins and
    # the plan's public numbers alone, and not the one of the exact bins (which
    # differs on this data), so a rule that read the exact bins, or anything else
    # private, would be caught. Gaussian (zCDP) and Laplace (pure) bins.
    from skdpsparse.mechanisms import heavy_tailed_clip as C

    rng = np.random.default_rng(5)
    X = np.column_stack([rng.pareto(1.5, n), rng.pareto(3.0, n),
                         np.minimum(rng.pareto(2.0, n), 3.0),  # top-coded: a tail that ends
                         rng.standard_t(3, n)])
    plan = C.plan_quantile_clipped_mean(*X.shape, epsilon=epsilon, delta=delta)
    assert not plan.shared and plan.count_kind is not None
    released, exact = [], []
    draw = C.draw_tail_bins

    def replaced(bins, plan_, rng_):
        exact.append(bins.copy())
        out = draw(bins, plan_, rng_)
        out[1::2] = 0.0  # the far bins, as if drawn empty
        released.append(out.copy())
        return out

    monkeypatch.setattr(C, "draw_tail_bins", replaced)
    _, info = C.quantile_clipped_mean(X, plan, RandomSource(bytes(32)))
    assert len(released) == 1

    def interval(bins):
        return C.extrapolated_interval(info["quantiles"], plan.level, plan.noise_sd,
                                       max_stretch=plan.max_stretch, floor=True,
                                       tail_counts=bins.copy(), n_samples=plan.n_samples,
                                       count_sd=plan.count_sd)

    lower, upper = interval(released[0])
    np.testing.assert_array_equal(lower, info["lower"])
    np.testing.assert_array_equal(upper, info["upper"])
    lo_x, up_x = interval(exact[0])
    assert not (np.array_equal(lo_x, lower) and np.array_equal(up_x, upper))
    # The clamp at 0 reads nothing else: far bins drawn below 0 give the interval of
    # far bins of 0 (post-processing of the released bins alone).
    negative = released[0].copy()
    negative[1::2] = -7.0 - np.arange(2 * X.shape[1]).reshape(2, -1)
    for a, b in zip(interval(negative), (lower, upper)):
        np.testing.assert_array_equal(a, b)
