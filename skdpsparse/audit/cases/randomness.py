"""Attacks on the randomness rather than on the noise scale: Mironov's floating-point
attack on one release of a Laplace mechanism (Mironov 2012, "On significance of the
least significant bits for differential privacy", CCS), against the library's exact
grid noise and against :func:`~skdpsparse.audit.variants.float_noise`, the float noise
it drew before (a broken variant the attack must break).
"""

import math

import numpy as np

__all__ = ["float_laplace_support", "floating_point_attack", "mironov_distinguisher"]


def _numpy_laplace(k, scale):
    """NumPy's Laplace(0, scale) draw from the 53-bit uniform U = k·2⁻⁵³ (the
    ``random_laplace`` routine of numpy/random/src/distributions: log of 2U below ½,
    of 2 − 2U above), with the C library's ``log`` as NumPy calls it."""
    u = k * 2.0**-53
    if u >= 0.5:
        return -(scale * math.log(2.0 - u - u))
    return scale * math.log(u + u)


def float_laplace_support(release, mean, scale):
    """Whether ``release == fl(mean + Y)`` for some draw Y of NumPy's float Laplace.

    Every draw is a function of a 53-bit integer k, monotone on each half; the floats
    Y that round ``mean + Y`` to ``release`` lie within one ulp of ``release − mean``,
    so the candidate k are those whose draw lands there, checked exactly.
    """
    release, mean = float(release), float(mean)
    gap = math.ulp(release) + math.ulp(release - mean)
    lo, hi = release - mean - gap, release - mean + gap
    for negative in (True, False):
        if negative:  # Y = b log(2U), U < 1/2
            if lo >= 0:
                continue
            ends = [math.exp(min(v, 0.0) / scale) / 2 for v in (lo, hi)]
        else:  # Y = −b log(2 − 2U), U ≥ 1/2
            if hi < 0:
                continue
            ends = [1 - math.exp(-max(v, 0.0) / scale) / 2 for v in (lo, hi)]
        first = max(1, math.floor(min(ends) * 2.0**53) - 2)
        last = min(2**53 - 1, math.ceil(max(ends) * 2.0**53) + 2)
        if last - first > 10_000:
            raise ValueError("the release is too far from the mean for this attack.")
        for k in range(first, last + 1):
            if (k * 2.0**-53 < 0.5) == negative and mean + _numpy_laplace(k, scale) == release:
                return True
    return False


def mironov_distinguisher(release, mean0, mean1, scale):
    """Mironov (2012)'s attack on one release of a Laplace mechanism in floating point:
    0 or 1 when only that candidate statistic can have produced ``release`` (decided
    with certainty, coordinate by coordinate), ``None`` otherwise.

    Parameters
    ----------
    release, mean0, mean1 : array-like of shape (d,)
        The released vector and the two candidate noiseless statistics.
    scale : float
        The Laplace scale b.
    """
    for r, m0, m1 in zip(np.ravel(release), np.ravel(mean0), np.ravel(mean1)):
        if m0 == m1:
            continue
        in0, in1 = float_laplace_support(r, m0, scale), float_laplace_support(r, m1, scale)
        if in0 != in1:
            return 0 if in0 else 1
    return None


def floating_point_attack(n_releases, seed=1):
    """Mironov's attack on the low bits of one release of the pure-DP dense Laplace sparse
    mean (:class:`~skdpsparse.mean.DPSparseMeanEstimator`, ``method="laplace"``, d = 40,
    n = 50): for the library's exact grid noise and for the float noise it used to draw
    (:func:`~skdpsparse.audit.variants.float_noise` on the same bounded mean and scale),
    the share of releases the attack claims to identify with certainty and the
    accuracy of those claims.

    Returns
    -------
    exact, broken : tuple of (share claimed, accuracy)
    problems : list of str
        Empty when the attack fails on the exact releases (its "certain" answers are
        guesses there, no better than 70 % right) and breaks the float variant (at
        least half the releases, all correct).
    """
    from sklearn.base import clone

    from ...mean import DPSparseMeanEstimator
    from ...mechanisms.projection import bounded_mean
    from ..variants import float_noise

    rng = np.random.default_rng(seed)
    d, n = 40, 50
    X0 = rng.uniform(-1, 1, (n, d)) / np.sqrt(d)
    X1 = X0.copy()
    X1[0] = -X1[0]
    est = DPSparseMeanEstimator(method="laplace", delta=0.0, epsilon=1.0, norm_bound=1.0,
                                sparsity=d)
    means = [bounded_mean(X, 1.0, d) for X in (X0, X1)]
    scale = 2.0 * np.sqrt(d) / n  # b = 2L√s/(nε)

    def rate(release):
        claims = right = 0
        for t in range(n_releases):
            guess = mironov_distinguisher(release(t % 2), *means, scale)
            claims += guess is not None
            right += guess == t % 2
        return claims / n_releases, right / max(claims, 1)

    exact = rate(lambda b: clone(est).fit((X0, X1)[b]).mean_)
    broken = rate(lambda b: float_noise(means[b], scale, rng))
    problems = []
    if exact[0] > 0 and exact[1] > 0.7:
        problems.append(f"floating-point attack: {exact[1]:.1%} accurate on exact releases")
    if broken[0] < 0.5 or broken[1] < 1.0:
        problems.append(f"floating-point attack missed the float variant {broken}")
    return exact, broken, problems
