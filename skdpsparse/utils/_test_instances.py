"""Small, fast configurations of every public estimator, for the common tests.

One place that names, per estimator, the configurations the common tests run (as
scikit-learn's ``_test_common/instance_generator.py`` does): the tests iterate over
:func:`~skdpsparse.utils.discovery.all_estimators` and these instances, and
``tests/test_common.py`` fails when an exported estimator has none. Not public API.
"""

from dataclasses import dataclass, field

__all__ = ["EstimatorInstance", "estimator_instances"]


@dataclass(frozen=True)
class EstimatorInstance:
    """A named configuration: ``make()`` builds a fresh estimator."""

    id: str
    name: str  # the class, as exported by skdpsparse
    params: dict = field(default_factory=dict)
    task: str = None  # None (unsupervised), "regression" or "classification" (0/1)
    released: str = "coef_"  # the attribute (path) that carries the private release

    def make(self):
        import skdpsparse

        return getattr(skdpsparse, self.name)(**self.params)

    @property
    def estimator_class(self):
        import skdpsparse

        return getattr(skdpsparse, self.name)


def _selection_params():
    from skdpsparse import DPOutputPerturbationClassifier

    return dict(estimator=DPOutputPerturbationClassifier(classes=[0, 1]),
                param_grid={"alpha": [0.1, 1.0]}, random_state=0)


def estimator_instances(include=None):
    """Every configuration, or those whose ``id`` is in ``include``.

    Returns
    -------
    list of EstimatorInstance
    """
    E = EstimatorInstance
    binary = dict(classes=[0, 1])
    instances = [
        E("sparse_mean", "DPSparseMeanEstimator", dict(random_state=0), None, "mean_"),
        E("sparse_mean_pure", "DPSparseMeanEstimator",
          dict(delta=0, sparsity=2, random_state=0), None, "mean_"),
        E("heavy_tailed_mean", "DPHeavyTailedMean", dict(random_state=0), None, "mean_"),
        E("heavy_tailed_nsme", "DPHeavyTailedMean",
          dict(method="noise_smoothing", random_state=0), None, "mean_"),
        E("heavy_tailed_regressor", "DPHeavyTailedRegressor",
          dict(max_iter=5, random_state=0), "regression"),
        E("heavy_tailed_regressor_cwme", "DPHeavyTailedRegressor",
          dict(mean_oracle="cwme", alpha=0.5, random_state=0), "regression"),
        E("cyclic_sgd_logistic", "DPCyclicSGD",
          dict(epochs=2, batch_size=4, random_state=0, **binary), "classification"),
        E("cyclic_sgd_multinomial", "DPCyclicSGD",
          dict(epochs=2, batch_size=4, random_state=0, classes=[0, 1, 2]), "classification"),
        E("cyclic_sgd_huber", "DPCyclicSGD",
          dict(loss="huber", penalty="l1", epochs=2, batch_size=4, random_state=0),
          "regression"),
        E("dp_sgd_classifier", "DPSGDClassifier",
          dict(epochs=2, batch_size=8, random_state=0, **binary), "classification"),
        E("dp_sgd_classifier_softmax", "DPSGDClassifier",
          dict(epochs=2, batch_size=8, classes=[0, 1, 2], random_state=0),
          "classification"),
        E("dp_sgd_regressor", "DPSGDRegressor",
          dict(epochs=2, batch_size=8, label_bound=2.0, random_state=0), "regression"),
        E("dp_sgd_regressor_private_bound", "DPSGDRegressor",
          dict(epochs=2, random_state=0), "regression"),
        E("noisy_sgd_classifier", "DPNoisySGDClassifier",
          dict(noise_calibration="rdp", random_state=0, **binary), "classification"),
        E("noisy_sgd_regressor", "DPNoisySGDRegressor",
          dict(noise_calibration="rdp", random_state=0), "regression"),
        E("output_perturbation_classifier", "DPOutputPerturbationClassifier",
          dict(random_state=0, **binary), "classification"),
        E("sparse_exponential", "DPOutputPerturbationClassifier",
          dict(radius=1.0, method="exponential", tau=1.0, delta=0, random_state=0,
               **binary), "classification"),
        E("output_perturbation_regressor", "DPOutputPerturbationRegressor",
          dict(random_state=0), "regression"),
        E("output_perturbation_regressor_pure", "DPOutputPerturbationRegressor",
          dict(loss="huber", delta=0, random_state=0), "regression"),
        E("bias_reduced_sgd_classifier", "DPBiasReducedSGDClassifier",
          dict(random_state=0, **binary), "classification"),
        E("bias_reduced_sgd_classifier_ovr", "DPBiasReducedSGDClassifier",
          dict(random_state=0, classes=[0, 1, 2]), "classification"),
        E("bias_reduced_sgd_regressor", "DPBiasReducedSGDRegressor",
          dict(random_state=0), "regression"),
        E("bias_reduced_sgd_regressor_boosted", "DPBiasReducedSGDRegressor",
          dict(loss="squared", boosting="noisy_min", n_runs=2, random_state=0),
          "regression"),
        E("private_selection", "PrivateParameterSelection", _selection_params(),
          "classification", "best_estimator_.coef_"),
        # Large iterates: products x_j·θ_j of a raw extreme row overflow on their own.
        E("noisy_sgd_regressor_wide", "DPNoisySGDRegressor",
          dict(noise_calibration="rdp", radius=10.0, learning_rate=1.0, random_state=0),
          "regression"),
        E("noisy_sgd_classifier_wide", "DPNoisySGDClassifier",
          dict(noise_calibration="rdp", radius=10.0, learning_rate=1.0, random_state=0,
               **binary), "classification"),
        E("heavy_tailed_regressor_wide", "DPHeavyTailedRegressor",
          dict(max_iter=3, radius=10.0, learning_rate=50.0, random_state=0), "regression"),
    ]
    if include is None:
        return instances
    unknown = set(include) - {i.id for i in instances}
    if unknown:
        raise ValueError(f"unknown instance ids {sorted(unknown)}")
    return [i for i in instances if i.id in include]
