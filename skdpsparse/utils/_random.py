"""Randomness policy: where every random bit of a private fit comes from.

Threat model (the user guide's "Randomness" section says the same in prose):

* **Every fit gets its own secret key.** An estimator's ``fit`` turns its
  ``random_state`` into a :class:`RandomSource`, a 256-bit ChaCha20 key, with
  :func:`fit_random_source`. With ``random_state=None`` (the default) the key is 32
  bytes of operating-system entropy (:func:`secrets.token_bytes`), fresh per fit.
* **A seed is a key-derivation input, not the noise.** With an int, a
  ``numpy.random.Generator`` or a ``RandomState``, the key is a keyed BLAKE2b hash
  of (the seed material, the estimator's class and parameters, the data it was
  given). So the same seed, parameters and data reproduce the release bit for bit
  (scikit-learn's idempotence checks, tests and reports rely on it), while two fits
  that differ in their data or in any parameter draw independent-looking noise:
  clones under ``GridSearchCV``/``cross_validate`` (which deep-copy ``random_state``)
  no longer share a noise vector that cancels in a difference of two releases.
* **What a seed cannot protect.** Whoever knows the seed material can recompute the
  key from the data and parameters and hence the noise: the guarantee then holds
  only against people who do not know the seed. An int seed has as much secrecy as
  the int (``random_state=0`` has none); a Generator has at most the entropy it was
  seeded with. Use ``None`` for a release; use a seed for tests and reproducible
  reports.
* **All privacy-relevant draws are exact and use only the key.** Noise comes from the
  exact discrete samplers of :mod:`skdpsparse._kernels.exact_sampling` on ChaCha20
  keystream; permutations, batch indices and coins come from the same exact integer
  samplers. Public randomness (the sensing operator of ℓ1-recovery, which may be
  published) comes from a separately derived key, so publishing it reveals nothing
  about the noise.
* **Why the key digests the data even when every draw is keyed by its statistic.**
  Keying a fit by (seed, parameters) alone and each draw by its exact statistic
  would give two fits with equal statistics equal releases, and *whether* two fold
  models are equal is a function of single rows: two disjoint chunks of one-hot rows
  with the same column counts give folds 0 and 1 of a ``KFold`` equal statistics, so
  equal releases under one seed, and changing one row of one chunk makes them
  independent; the pair identifies which neighbour was used with certainty. With the
  digest in the key, releases coincide only when two fits got identical data, a far
  smaller event (it needs identical training sets). The guarantee for seeded fits
  under composition is still weaker than for ``random_state=None``, whose keys are
  fresh per fit. (``tests/mean/test_sparse_mean_randomness.py`` runs this attack.)
"""

import functools
import hashlib
import numbers
import secrets
import types
import warnings
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from .._kernels import exact_sampling
from .._kernels.chacha import key_words
from ._digest import array_digest, kernel_tag

__all__ = ["RandomSource", "as_random_source", "check_generator", "fit_random_source"]

_PERSON_FIT = b"skdps-fit-v1"
_PERSON_DRAW = b"skdps-draw-v1"
_PERSON_CHILD = b"skdps-child-v1"


def check_generator(random_state):
    """Turn a scikit-learn style ``random_state`` into a ``numpy.random.Generator``.

    For **public** randomness only (data generators, examples): a fit's private draws
    come from :func:`fit_random_source`.

    Parameters
    ----------
    random_state : None, int, numpy.random.Generator or numpy.random.RandomState

    Returns
    -------
    numpy.random.Generator
    """
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be non-negative, got {random_state}.")
        return np.random.default_rng(int(random_state))
    if isinstance(random_state, np.random.RandomState):
        # 128 bits of the legacy stream: SeedSequence keeps all of it.
        return np.random.default_rng(int.from_bytes(random_state.bytes(16), "little"))
    raise ValueError(
        "random_state must be None, an int, a numpy.random.Generator or a "
        f"numpy.random.RandomState; got {random_state!r}."
    )


def _blake(data, *, key, person):
    return hashlib.blake2b(data, digest_size=32, key=key, person=person).digest()


class RandomSource:
    """A secret 256-bit key and a counter: the source of one fit's private draws.

    Each draw method derives a fresh subkey, BLAKE2b(key, "draw", counter), and runs
    an exact sampler on that subkey's ChaCha20 keystream, so successive draws are
    independent and a source replays identically from the same key.

    Parameters
    ----------
    key : bytes of length 32
        Secret. :meth:`from_entropy` draws one from the operating system.

    Examples
    --------
    >>> from skdpsparse.utils import RandomSource
    >>> src = RandomSource(bytes(32))
    >>> src.integers(10, size=3).tolist() == RandomSource(bytes(32)).integers(10, size=3).tolist()
    True
    """

    def __init__(self, key):
        key = bytes(key)
        if len(key) != 32:
            raise ValueError(f"a RandomSource key has 32 bytes, got {len(key)}.")
        self._key = key
        self._draws = 0

    def __repr__(self):
        return "RandomSource(<secret key>)"

    @classmethod
    def from_entropy(cls):
        """A source keyed by 32 bytes of operating-system entropy."""
        return cls(secrets.token_bytes(32))

    def _next_key(self, label, context=None):
        self._draws += 1
        message = label.encode() + b"\x00" + self._draws.to_bytes(8, "little")
        if context is not None:  # e.g. the exact statistic the noise is added to
            message += hashlib.blake2b(context, digest_size=32).digest()
        return key_words(_blake(message, key=self._key, person=_PERSON_DRAW))

    def spawn(self, n_children, label="child"):
        """``n_children`` independent sources (keys derived from this one and ``label``)."""
        return [RandomSource(_blake(self._next_key(label).tobytes(), key=self._key,
                                    person=_PERSON_CHILD)) for _ in range(int(n_children))]

    def secret_int(self, bits=256):
        """A secret non-negative int of ``bits`` bits (a seed for an inner fit)."""
        nbytes = (int(bits) + 7) // 8
        words = self._next_key("seed").astype("<u4").tobytes()
        while len(words) < nbytes:
            words += self._next_key("seed").astype("<u4").tobytes()
        return int.from_bytes(words[:nbytes], "little") >> (8 * nbytes - int(bits))

    def public_generator(self, label):
        """A ``numpy.random.Generator`` for randomness that may be **published**.

        Its seed is a one-way function of the key, so seeing its draws (e.g. a sensing
        operator) reveals nothing about any other draw of this source.
        """
        seed = int.from_bytes(_blake(label.encode(), key=self._key, person=b"skdps-public"),
                              "little")
        return np.random.Generator(np.random.PCG64DXSM(np.random.SeedSequence(seed)))

    # -- exact draws -------------------------------------------------------------
    def add_discrete_noise(self, grid_values, kind, scale):
        """Add discrete Laplace (``kind="laplace"``) or discrete Gaussian noise of
        integer scale ``scale`` to the int64 ``grid_values`` in place (see
        :func:`skdpsparse._kernels.exact_sampling.add_discrete_noise`).

        The draw's key also hashes the exact values it is added to, so two releases of
        different statistics never share noise even under one key (the same data in
        another container, or summed in another order, can round differently); equal
        statistics get equal noise, which releases nothing new.
        """
        code = _NOISE_CODES[kind]
        grid_values = np.ascontiguousarray(grid_values)
        key = self._next_key(kind, context=grid_values.view(np.uint8))
        return exact_sampling.add_discrete_noise(grid_values, code, scale, key, 0)

    def discrete_noise(self, size, kind, scale):
        """``size`` draws of discrete Laplace or discrete Gaussian noise on ℤ."""
        return exact_sampling.discrete_noise(size, _NOISE_CODES[kind], scale,
                                             self._next_key(kind), 0)

    def integers(self, low, high=None, size=None):
        """Uniform integers in [low, high) (or [0, low)), exactly; a scalar if size is None."""
        if high is None:
            low, high = 0, low
        low, high = int(low), int(high)
        count = 1 if size is None else int(np.prod(size))
        out = exact_sampling.uniform_integers(high - low, count, self._next_key("integers"), 0)
        out += low
        return int(out[0]) if size is None else out.reshape(size)

    def permutation(self, n):
        """A uniformly random permutation of ``range(n)``, or of the array ``n``."""
        if isinstance(n, numbers.Integral):
            return exact_sampling.permutation(int(n), self._next_key("permutation"), 0)
        items = np.asarray(n)
        key = self._next_key("permutation")
        if items.ndim == 1 and (items.dtype.kind == "i" or (
                items.dtype.kind == "u" and items.dtype.itemsize < 8)):
            # The same permutation, bit for bit, without the index array and the gather
            # (a third of the shuffled-group cwme's time at n = 2e5).
            return exact_sampling.shuffled(items, key, 0).astype(items.dtype, copy=False)
        return items[exact_sampling.permutation(len(items), key, 0)]

    def choice(self, n, size, replace=True):
        """``size`` indices of ``range(n)``, uniform, with or without replacement.

        Without replacement the result is a uniformly random ordered subset: i.i.d.
        uniform indices with repeats skipped (each new index is uniform over those not
        yet chosen), or a prefix of a random permutation when ``size`` > n/2.
        """
        n, size = int(n), int(size)
        if replace:
            return self.integers(n, size=size)
        if size > n:
            raise ValueError(f"cannot choose {size} of {n} without replacement.")
        if 2 * size > n:
            return self.permutation(n)[:size]
        chosen, seen = [], set()
        while len(chosen) < size:
            for i in self.integers(n, size=2 * (size - len(chosen))).tolist():
                if i not in seen:
                    seen.add(i)
                    chosen.append(i)
                    if len(chosen) == size:
                        break
        return np.array(chosen, dtype=np.int64)

    def categorical_exp(self, exponents, frac_bits, size=1):
        """Indices i with P[i] ∝ exp(−exponents[i]/2^frac_bits), exactly (integer
        exponents, minimum 0; :func:`~skdpsparse._kernels.exact_sampling.categorical_exp`)."""
        return exact_sampling.categorical_exp(exponents, frac_bits, size,
                                              self._next_key("categorical"), 0)

    def bernoulli(self, p):
        """One coin with P[True] = p exactly (p a float in [0, 1], read as the dyadic
        rational it is, or a :class:`fractions.Fraction`)."""
        p = Fraction(p)
        if not 0 <= p <= 1:
            raise ValueError(f"p must be in [0, 1], got {p}.")
        return self._coin(p.numerator, p.denominator)

    def _coin(self, num, den):
        # A uniform real against num/den, 61 binary digits at a time: the digits of
        # num/den come from long division on Python ints, exact for any denominator
        # (2^1074 for the smallest float). The first differing digit decides.
        rem = num
        while rem:
            rem <<= 61
            digit, rem = divmod(rem, den)
            word = self.integers(1 << 61)
            if word != digit:
                return word < digit
        return False  # num/den ended: the uniform is at least num/den

    def bernoulli_exp(self, gamma):
        """One coin with P[True] = exp(−γ) exactly, γ ≥ 0 a float or Fraction
        (Canonne, Kamath, Steinke 2020, Algorithm 1, with exp(−⌊γ⌋) as ⌊γ⌋ coins)."""
        gamma = Fraction(gamma)
        if gamma < 0:
            raise ValueError(f"gamma must be non-negative, got {gamma}.")
        whole, frac = divmod(gamma, 1)
        for _ in range(int(whole)):
            if not self._bernoulli_exp_unit(Fraction(1)):
                return False
        return self._bernoulli_exp_unit(frac)

    def _bernoulli_exp_unit(self, gamma):
        k = 1
        while self.bernoulli(gamma / k):
            k += 1
        return k % 2 == 1


_NOISE_CODES = {"laplace": exact_sampling.DISCRETE_LAPLACE,
                "gaussian": exact_sampling.DISCRETE_GAUSSIAN}


def as_random_source(rng):
    """The :class:`RandomSource` a mechanism draws from, given what its caller passed.

    A :class:`RandomSource` is used as is; a ``numpy.random.Generator`` (as tests and
    direct callers pass) keys a new source with 32 bytes of its stream; ``None`` draws
    a key from the operating system.
    """
    if isinstance(rng, RandomSource):
        return rng
    if rng is None:
        return RandomSource.from_entropy()
    if isinstance(rng, np.random.Generator):
        return RandomSource(rng.bytes(32))
    raise TypeError("rng must be a RandomSource, a numpy.random.Generator or None "
                    f"(see skdpsparse.utils.fit_random_source), got {type(rng).__name__}.")


# ------------------------------------------------------------------ key derivation
class _NotCanonical(Exception):
    """A parameter value with no faithful deterministic encoding."""


def _canonical(value, depth=0):
    """A deterministic byte string that changes whenever a parameter value does.

    Faithful for numbers, strings, containers, arrays and array-likes (by their values),
    estimators (by class and parameters), functions (by code, constants, defaults and
    closure contents), partials (by function and arguments) and objects built of these
    (by their attributes). Anything else raises :class:`_NotCanonical`: a ``repr`` may
    be truncated or carry a memory address, and two different values must never get
    one key.
    """
    if depth > 25:
        raise _NotCanonical("parameter nested too deeply to encode")
    rec = functools.partial(_canonical, depth=depth + 1)
    if value is None or isinstance(value, (bool, numbers.Number, str, bytes)):
        return type(value).__name__.encode() + repr(value).encode()
    if isinstance(value, (list, tuple)):
        return b"[" + b",".join(rec(v) for v in value) + b"]"
    if isinstance(value, (set, frozenset)):
        return b"{" + b",".join(sorted(rec(v) for v in value)) + b"}"
    if isinstance(value, dict):
        return b"{" + b",".join(sorted(rec(k) + b":" + rec(v) for k, v in value.items())) + b"}"
    if isinstance(value, np.ndarray) or sp.issparse(value):
        return b"array" + _digest_array(value)
    if isinstance(value, (np.random.Generator, np.random.RandomState, RandomSource)):
        return type(value).__name__.encode()  # seed material is handled separately
    if hasattr(value, "get_params") and not isinstance(value, type):
        return type(value).__qualname__.encode() + rec(value.get_params(deep=False))
    if hasattr(value, "__array__") and not callable(value):  # pandas objects and the like
        return b"arraylike" + _digest_array(np.asarray(value))
    if isinstance(value, functools.partial):
        return b"partial" + rec(value.func) + rec(value.args) + rec(value.keywords)
    if isinstance(value, types.CodeType):
        return (b"code" + value.co_code + rec(value.co_consts) + rec(value.co_names)
                + rec(value.co_varnames))
    if isinstance(value, (types.FunctionType, types.LambdaType)):
        cells = tuple(c.cell_contents for c in (value.__closure__ or ()))
        return (b"function" + f"{value.__module__}.{value.__qualname__}".encode()
                + rec(value.__code__) + rec(value.__defaults__)
                + rec(value.__kwdefaults__) + rec(cells))
    if isinstance(value, (type, types.BuiltinFunctionType, types.ModuleType)) or (
            callable(value) and getattr(value, "__qualname__", None) is not None
            and not hasattr(value, "__dict__")):
        return f"{getattr(value, '__module__', '')}.{value.__qualname__}".encode()
    if hasattr(value, "__dict__"):  # e.g. a scikit-learn scorer: its attributes
        return type(value).__qualname__.encode() + rec(vars(value))
    raise _NotCanonical(f"no faithful encoding of {type(value).__name__}")


def _digest_array(a):
    """A digest of an array's values and of the kernel family that will read it.

    The mergeable digest of :mod:`skdpsparse.utils._digest`, one function of
    the data for one in-memory array and for any chunking of it on a cluster (so the
    same seed gives the same key in memory and on Dask). Numeric data is hashed as
    float64 in a canonical sparse form, block of lines by block of lines (rows, or
    the columns of a short wide matrix such as a (K, n) target matrix): for each line
    its count of
    nonzeros, then the indices and values of the nonzeros; so every SciPy sparse
    format gives one digest, and a vector the same digest whatever its integer or
    float storage (labels, targets). A matrix's digest also says whether it is dense
    or sparse and its float dtype: those choose the compiled loop and its
    floating-point order, and the SGD loops draw their noise before they see the
    gradients, so two containers of one matrix must not share noise on statistics
    that round differently. (Releases of a statistic are protected regardless:
    :meth:`RandomSource.add_discrete_noise` also hashes the exact values it is added
    to.) Non-numeric arrays are hashed through their ``repr``.
    """
    if not sp.issparse(a):
        a = np.asarray(a)
        if a.ndim == 2 and a.shape[1] == 1:
            a = a[:, 0]
        if a.dtype.kind not in "biuf":
            h = hashlib.blake2b(digest_size=32)
            h.update(repr(("object", a.shape, a.tolist())).encode())
            return h.digest()
        if a.ndim != 2:
            return array_digest(a, ("vector",))
    return array_digest(a, kernel_tag(sp.issparse(a), a.dtype))


def _seed_material(random_state):
    """The secret input of the key derivation, and whether it is a fixed seed."""
    if isinstance(random_state, np.random.Generator):
        return random_state.bytes(32)
    if isinstance(random_state, np.random.RandomState):
        return random_state.bytes(32)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be non-negative, got {random_state}.")
        seed = int(random_state)
        return b"int" + seed.to_bytes(max(1, (seed.bit_length() + 7) // 8), "little")
    raise ValueError(
        "random_state must be None, an int, a numpy.random.Generator or a "
        f"numpy.random.RandomState; got {random_state!r}."
    )


def fit_random_source(random_state, estimator, *data):
    """The :class:`RandomSource` of one fit (see the module docstring for the policy).

    Parameters
    ----------
    random_state : None, int, numpy.random.Generator or numpy.random.RandomState
        ``None``: a fresh key from the operating system. Otherwise the key is
        BLAKE2b(key = H(seed material), message = estimator class, parameters except
        ``random_state``, and a digest of every array in ``data``). A Generator or
        RandomState gives 32 bytes of its stream as seed material (and advances).
    estimator : object with ``get_params``
        The estimator being fitted (its parameters enter the key).
    *data : array-like or sparse matrix
        The data of the fit, as validated (X, y, ...).

    Returns
    -------
    RandomSource
    """
    if random_state is None:
        return RandomSource.from_entropy()
    return fit_random_source_from_digests(
        random_state, estimator, lambda: [_digest_array(a) if a is not None else b"None"
                                          for a in data], stacklevel=4)


def fit_random_source_from_digests(random_state, estimator, digests, *, stacklevel=3):
    """:func:`fit_random_source` with the data digests given (a list, or a callable
    returning it, called only when a key is derived): the derivation of a fit whose
    data a cluster digested chunk by chunk (:mod:`skdpsparse.distributed`), which
    gives the same key as the in-memory fit of the same data."""
    if random_state is None:
        return RandomSource.from_entropy()
    material = hashlib.blake2b(_seed_material(random_state), digest_size=32).digest()
    params = {k: v for k, v in estimator.get_params(deep=False).items()
              if k != "random_state"}
    try:
        message = [type(estimator).__qualname__.encode(), _canonical(params)]
    except _NotCanonical as exc:
        # Fail closed: a key shared by two different parameter values would let two
        # releases share noise. Fresh entropy keeps the guarantee and loses only the
        # reproduction.
        warnings.warn(f"{type(estimator).__name__}: random_state is ignored for this fit "
                      f"({exc}); its noise is drawn from fresh entropy and will not "
                      "reproduce.", RuntimeWarning, stacklevel=stacklevel)
        return RandomSource.from_entropy()
    message += list(digests() if callable(digests) else digests)
    return RandomSource(_blake(b"\x00".join(message), key=material, person=_PERSON_FIT))
