"""Labels against the declared ``classes`` (issue 17): one policy for every classifier.

A label of ``y`` that is not in ``classes`` is input malformed relative to a declared
parameter: ``fit`` raises a ``ValueError`` naming ``classes`` before anything is
computed, charged or released (it used to count silently as a negative: accuracy 0 for
``classes=["a", "b"]`` with labels "no"/"yes"; a label 0.5 raised in some paths, with
scikit-learn's "Unknown label type", and not in others). Declared labels are accepted
whatever their type (0.5 included), and need not all occur in ``y``.
"""

import numpy as np
import pytest

from skdpsparse import PrivacyLedger
from skdpsparse.linear_model import (
    DPBiasReducedSGDClassifier,
    DPCyclicSGD,
    DPNoisySGDClassifier,
    DPOutputPerturbationClassifier,
)
from skdpsparse.model_selection import PrivateParameterSelection

CLASSIFIERS = [
    pytest.param(lambda c: DPOutputPerturbationClassifier(classes=c, random_state=0), True,
                 id="output_perturbation"),
    pytest.param(lambda c: DPOutputPerturbationClassifier(
        classes=c, method="exponential", radius=1.0, tau=1.0, delta=0, random_state=0),
        True, id="sparse_exponential"),
    pytest.param(lambda c: DPCyclicSGD(classes=c, epochs=1, batch_size=10, random_state=0),
                 True, id="cyclic_sgd"),
    pytest.param(lambda c: DPNoisySGDClassifier(classes=c, noise_calibration="rdp",
                                                random_state=0), True, id="noisy_sgd"),
    pytest.param(lambda c: DPBiasReducedSGDClassifier(classes=c, random_state=0), True,
                 id="bias_reduced"),
    pytest.param(lambda c: PrivateParameterSelection(
        DPOutputPerturbationClassifier(classes=c), {"alpha": [0.1, 1.0]}, random_state=0),
        True, id="private_selection"),
]


def _X(n=40):
    return np.random.default_rng(0).standard_normal((n, 3))


def _labels(values, n=40):
    return np.array([values[i % len(values)] for i in range(n)])


@pytest.mark.parametrize("factory, multiclass", CLASSIFIERS)
@pytest.mark.parametrize("classes, y", [
    (["a", "b"], _labels(["no", "yes"])),          # none of the labels is declared
    ([0, 1], _labels([0.0, 1.0, 0.5])),             # 0.5: continuous type, undeclared
    ([0, 1], _labels([0, 1, 2])),                   # one extra label
    (["0", "1"], _labels([0, 1])),                  # declared as strings, given as ints
    ([0.5, 1.5], _labels([0.5, 1.0])),
], ids=["strings", "half", "extra_label", "str_vs_int", "floats"])
def test_undeclared_labels_are_a_clear_error(factory, multiclass, classes, y):
    est = factory(classes)
    with PrivacyLedger() as ledger:
        with pytest.raises(ValueError, match=r"classes=") as err:
            est.fit(_X(), y)
    assert "not declared" in str(err.value)
    assert len(ledger.entries) == 0  # nothing was charged, so nothing was released
    if not isinstance(est, DPNoisySGDClassifier):  # (see the test below)
        assert not _fitted(est)


def _fitted(est):
    return [k for k in vars(est) if k.endswith("_") and not k.startswith("_")]


def test_noisy_sgd_validation_error_sets_nothing():
    est = DPNoisySGDClassifier(classes=[0, 1], random_state=0)
    with pytest.raises(ValueError, match="classes="):
        est.fit(_X(), _labels([0, 1, 2]))
    assert not _fitted(est)


@pytest.mark.parametrize("factory, multiclass", CLASSIFIERS)
@pytest.mark.parametrize("classes, values", [
    ([0, 1], [0.0, 1.0]),             # floats equal to the declared ints
    ([0, 1], [1, 1]),                  # a declared label need not occur
    ([0.5, 1.5], [0.5, 1.5]),          # "continuous" labels, declared
    (["no", "yes"], ["yes", "no"]),
])
def test_declared_labels_of_any_type_fit(factory, multiclass, classes, values):
    y = _labels(values)
    est = factory(classes).fit(_X(), y)
    assert list(est.classes_) == sorted(classes)
    assert set(est.predict(_X())) <= set(classes)


@pytest.mark.parametrize("factory, multiclass", CLASSIFIERS)
def test_three_declared_labels(factory, multiclass):
    y = _labels([0.0, 0.5, 1.0])
    est = factory([0, 0.5, 1])
    if multiclass:
        assert list(est.fit(_X(), y).classes_) == [0, 0.5, 1]
    else:
        with pytest.raises(ValueError, match="classes"):
            est.fit(_X(), y)
