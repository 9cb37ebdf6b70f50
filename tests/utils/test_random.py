"""The randomness policy: per-fit keys, seeds as key-derivation inputs, exact draws."""

import pathlib
import re

import numpy as np
import pytest
from scipy import stats
from sklearn.base import clone

from skdpsparse.datasets import make_sparse_classification
from skdpsparse.linear_model import DPOutputPerturbationClassifier
from skdpsparse.mean import DPSparseMeanEstimator
from skdpsparse.utils import RandomSource, check_generator, fit_random_source


def _key(source):
    return source._key


def test_check_generator_is_default_rng_for_ints_and_passes_generators_through():
    assert check_generator(3).standard_normal() == np.random.default_rng(3).standard_normal()
    g = np.random.default_rng(1)
    assert check_generator(g) is g


def test_check_generator_keeps_128_bits_of_a_random_state():
    # Four 32-bit words of the legacy stream, not one 31-bit integer.
    entropy = check_generator(np.random.RandomState(0)).bit_generator.seed_seq.entropy
    assert 100 < int(entropy).bit_length() <= 128


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True])
def test_fit_random_source_rejects_bad_seeds(bad):
    est = DPSparseMeanEstimator()
    with pytest.raises(ValueError, match="random_state"):
        fit_random_source(bad, est, np.zeros((3, 2)))


def test_same_seed_parameters_and_data_give_the_same_key():
    X = np.arange(12.0).reshape(4, 3)
    est = DPSparseMeanEstimator(epsilon=2.0)
    assert _key(fit_random_source(7, est, X)) == _key(fit_random_source(7, clone(est), X))
    big = 2**200 + 3  # seeds wider than 64 bits are kept whole
    assert _key(fit_random_source(big, est, X)) != _key(fit_random_source(big + 1, est, X))


def test_any_change_of_data_or_parameters_changes_the_key():
    X = np.arange(12.0).reshape(4, 3)
    est = DPSparseMeanEstimator(epsilon=2.0)
    base = _key(fit_random_source(7, est, X))
    X2 = X.copy()
    X2[3, 2] = np.nextafter(X2[3, 2], np.inf)  # one ulp of one entry
    assert _key(fit_random_source(7, est, X2)) != base
    assert _key(fit_random_source(7, est.set_params(epsilon=2.5), X)) != base
    assert _key(fit_random_source(8, DPSparseMeanEstimator(epsilon=2.0), X)) != base
    assert _key(fit_random_source(None, est, X)) != _key(fit_random_source(None, est, X))


def test_a_generator_deep_copied_by_clone_still_gives_distinct_keys_per_dataset():
    # clone() deep-copies the Generator: the seed material is the same in both clones,
    # the data is not.
    est = DPSparseMeanEstimator(random_state=np.random.default_rng())
    a, b = clone(est), clone(est)
    X = np.arange(12.0).reshape(4, 3)
    assert _key(fit_random_source(a.random_state, a, X[:2])) != \
        _key(fit_random_source(b.random_state, b, X[2:]))


def test_public_generator_and_children_are_independent_of_the_noise():
    src = RandomSource(bytes(32))
    public = src.public_generator("sensing operator").integers(0, 2**62, size=4)
    again = RandomSource(bytes(32)).public_generator("sensing operator")
    again = again.integers(0, 2**62, size=4)
    np.testing.assert_array_equal(public, again)  # a function of the key and label
    children = src.spawn(3)
    assert len({c._key for c in children} | {src._key}) == 4


def test_secret_int_has_full_width():
    src = RandomSource.from_entropy()
    widths = [src.secret_int().bit_length() for _ in range(64)]
    assert max(widths) == 256 and min(widths) > 240


def test_exact_coins():
    src = RandomSource.from_entropy()
    coins = [src.bernoulli(0.3) for _ in range(3000)]
    assert abs(np.mean(coins) - 0.3) < 5 * np.sqrt(0.21 / 3000)
    coins = [src.bernoulli_exp(1.5) for _ in range(3000)]
    assert abs(np.mean(coins) - np.exp(-1.5)) < 5 * np.sqrt(0.18 / 3000)
    assert not src.bernoulli(0.0) and src.bernoulli(1.0)
    # A subnormal p is compared exactly (17 words of long division), not rounded to 0 or 1.
    assert not any(src.bernoulli(2.0**-1074) for _ in range(20))


def test_choice_without_replacement_is_uniform_and_distinct():
    src = RandomSource.from_entropy()
    draws = np.array([src.choice(10, 3, replace=False) for _ in range(4000)])
    assert all(len(set(row)) == 3 for row in draws.tolist())
    assert stats.chisquare(np.bincount(draws[:, 0], minlength=10)).pvalue > 1e-4
    assert stats.chisquare(np.bincount(draws[:, 2], minlength=10)).pvalue > 1e-4


def test_estimator_noise_is_not_the_data_coefficients_with_the_same_seed():
    """The bug this guards against: make_sparse_classification(random_state=0) draws its
    coefficients first from default_rng(0); an estimator seeded 0 that drew its noise from
    default_rng(0) too released (a multiple of) the true coefficients."""
    X, y, coef = make_sparse_classification(2000, 300, 6, random_state=0)
    clf = DPOutputPerturbationClassifier(epsilon=0.1, alpha=1e-3, classes=[0, 1],
                                         random_state=0).fit(X, y)
    # 300 coordinates: the correlation of independent vectors is about N(0, 1/300).
    assert abs(np.corrcoef(clf.coef_[0], coef)[0, 1]) < 5 / np.sqrt(300)


_PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "skdpsparse"
# A seed drawn as an int narrower than 128 bits: integers(2**32 ...), randint(...),
# "2**31 - 1" / "2**63" bounds in a seeding call.
_SHORT_SEED = re.compile(r"(integers|randint)\([^)]*2\s*\*\*\s*(3[12]|6[34])|_SEED_BOUND")


def test_no_short_integer_seed_anywhere_in_the_package():
    offenders = [f"{path.relative_to(_PACKAGE)}:{i}: {line.strip()}"
                 for path in sorted(_PACKAGE.rglob("*.py"))
                 for i, line in enumerate(path.read_text().splitlines(), 1)
                 if _SHORT_SEED.search(line)]
    assert offenders == []


def test_parameters_are_encoded_faithfully_or_the_seed_is_refused():
    from skdpsparse.utils._random import _canonical

    assert _canonical({3, 1, 2}) == _canonical({2, 3, 1})  # no hash-seed dependence
    assert _canonical(lambda y: y + 1) != _canonical(lambda y: y + 2)
    k = 3
    assert _canonical(lambda y: y + k) != _canonical((lambda k: lambda y: y + k)(4))

    class Opaque:
        __slots__ = ()

    X = np.zeros((4, 2))
    with pytest.warns(RuntimeWarning, match="random_state is ignored"):
        a = fit_random_source(7, DPSparseMeanEstimator(method=Opaque()), X)
        b = fit_random_source(7, DPSparseMeanEstimator(method=Opaque()), X)
    assert _key(a) != _key(b)  # fresh entropy, not a shared key


def test_the_data_digest_is_one_function_of_the_data_for_every_path_and_thread_count():
    import scipy.sparse as sp

    from skdpsparse.utils import _digest
    from skdpsparse.utils._random import _digest_array

    X = sp.random(3000, 200, density=0.05, format="csr", random_state=0)
    n = X.shape[0]
    whole = {_digest.chunk_digest(X, 0, n, n_threads=t).total for t in (1, 2, 3)}
    assert len(whole) == 1  # the threads hash blocks, the sum does not care
    # A non-canonical container of the same data (duplicates, a stored zero, unsorted
    # indices) takes the copying path and gets the digest of the canonical slices.
    coo = X.tocoo()
    rows = np.r_[coo.row, coo.row, 5]
    cols = np.r_[coo.col, coo.col, 7 if X[5, 7] == 0 else 8]
    vals = np.r_[coo.data / 2, coo.data / 2, 0.0]
    messy = sp.csr_matrix((vals, (rows, cols)), shape=X.shape)
    messy.has_canonical_format = False
    assert not _digest._is_canonical(messy)
    assert _digest.chunk_digest(messy, 0, n).total in whole
    assert _digest_array(messy) == _digest_array(X)
    assert _digest_array(X.astype(np.float32)) != _digest_array(X)  # the dtype tag
    changed = X.copy()
    changed.data[-1] = np.nextafter(changed.data[-1], 2.0)
    assert _digest_array(changed) != _digest_array(X)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint16, np.uint64, np.float64])
def test_permutation_of_an_array_is_the_gather_of_the_index_permutation(dtype):
    # Integer items are shuffled in place (exact_sampling.shuffled) instead of gathered
    # through an index permutation: the same permutation bit for bit, and the dtype kept.
    items = (np.arange(1000) * 7 % 13).astype(dtype)
    if dtype is np.uint64:
        items[3] = np.uint64(2**64 - 1)  # above int64: the gather path
    key = bytes(range(32))
    shuffled = RandomSource(key).permutation(items)
    assert shuffled.dtype == items.dtype
    np.testing.assert_array_equal(shuffled, items[RandomSource(key).permutation(items.size)])
