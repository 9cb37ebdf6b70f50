"""Seeds: check_generator (datasets, mechanisms) and noise_generator (estimators)."""

import numpy as np
import pytest

from skdpsparse.datasets import make_sparse_classification
from skdpsparse.linear_model import DPOutputPerturbationClassifier
from skdpsparse.utils import check_generator, noise_generator


def test_check_generator_is_default_rng_for_ints_and_passes_generators_through():
    assert check_generator(3).standard_normal() == np.random.default_rng(3).standard_normal()
    g = np.random.default_rng(1)
    assert check_generator(g) is g and noise_generator(g) is g


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_noise_stream_is_reproducible_and_not_default_rng(seed):
    a = noise_generator(seed).standard_normal(4000)
    np.testing.assert_array_equal(a, noise_generator(seed).standard_normal(4000))
    b = np.random.default_rng(seed).standard_normal(4000)
    # Independent streams: the sample correlation is N(0, 1/4000); 5 SD = 0.079.
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.079


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True])
def test_noise_generator_rejects_what_check_generator_rejects(bad):
    with pytest.raises(ValueError, match="random_state"):
        noise_generator(bad)


def test_estimator_noise_is_not_the_data_coefficients_with_the_same_seed():
    """The bug this guards against: make_sparse_classification(random_state=0) draws its
    coefficients first from default_rng(0), and an estimator seeded 0 drew its Gaussian
    noise from default_rng(0) too, so a noise-dominated fit released (a multiple of) the
    true coefficients: correlation 0.994 and accuracy 0.89 at ε = 0.1."""
    X, y, coef = make_sparse_classification(2000, 300, 6, random_state=0)
    clf = DPOutputPerturbationClassifier(epsilon=0.1, alpha=1e-3, classes=[0, 1],
                                         random_state=0).fit(X, y)
    # 300 coordinates: the correlation of independent vectors is about N(0, 1/300).
    assert abs(np.corrcoef(clf.coef_[0], coef)[0, 1]) < 5 / np.sqrt(300)
