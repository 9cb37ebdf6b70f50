"""add_noise_inplace: the one place noise is added to arrays."""

import numpy as np
import pytest
from scipy import stats

from skdpsparse.mechanisms.noise import add_noise_inplace, gaussian_noise, laplace_noise


@pytest.mark.parametrize("size", [1, 1000, (1 << 14) + 7, 3 * (1 << 14)])
def test_gaussian_values_equal_gaussian_noise_for_the_same_state(size):
    # The chunked, buffered draw must be the same stream as one standard_normal call.
    base = np.linspace(-1, 1, size)
    z = base.copy()
    add_noise_inplace(z, np.random.default_rng(5), "gaussian", 2.5)
    np.testing.assert_array_equal(z, base + gaussian_noise(np.random.default_rng(5), 2.5, size))


def test_laplace_values_equal_laplace_noise():
    z = np.zeros(5000)
    add_noise_inplace(z, np.random.default_rng(1), "laplace", 0.7)
    np.testing.assert_array_equal(z, laplace_noise(np.random.default_rng(1), 0.7, 5000))


@pytest.mark.parametrize("kind, law", [("gaussian", stats.norm(scale=3.0)),
                                       ("laplace", stats.laplace(scale=3.0))])
def test_non_contiguous_arrays_receive_the_noise(kind, law):
    # reshape(-1) of a strided view is a copy: the noise must be written back, or the
    # release would be noiseless.
    a = np.zeros((400, 20))
    view = a[:, ::2]
    add_noise_inplace(view, np.random.default_rng(0), kind, 3.0)
    assert np.all(a[:, 1::2] == 0.0)  # untouched columns stay untouched
    assert stats.kstest(view.ravel(), law.cdf).pvalue > 1e-3


def test_bad_arguments():
    with pytest.raises(TypeError, match="float64"):
        add_noise_inplace(np.zeros(3, dtype=np.float32), np.random.default_rng(0),
                          "gaussian", 1.0)
    with pytest.raises(ValueError, match="kind"):
        add_noise_inplace(np.zeros(3), np.random.default_rng(0), "cauchy", 1.0)
    with pytest.raises(ValueError, match="sigma"):
        add_noise_inplace(np.zeros(3), np.random.default_rng(0), "gaussian", -1.0)
