"""skdpsparse.privacy_spent: the composed guarantee of a fitted estimator or pipeline,
refusing to certify one with a step that learned from the data without a guarantee
(issue 17, item 6)."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import FeatureUnion, Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, Normalizer, OneHotEncoder, StandardScaler

import skdpsparse
from skdpsparse import privacy_spent
from skdpsparse.accounting import (
    ZCDP,
    ApproxDP,
    DiscreteGaussianEvent,
    PureDP,
    compose_events,
    with_event,
)
from skdpsparse.linear_model import DPNoisySGDClassifier, DPOutputPerturbationRegressor
from skdpsparse.mean import DPHeavyTailedMean
from skdpsparse.model_selection import PrivateParameterSelection

pytestmark = pytest.mark.filterwarnings("ignore::skdpsparse.exceptions.PrivacyLeakWarning")


class _PrivateShift(TransformerMixin, BaseEstimator):
    """A private transformer for the tests: shifts X by nothing, reports a discrete
    Gaussian event of multiplier z (or a pure ε when z is None)."""

    def __init__(self, epsilon=1.0, delta=1e-6, z=5.0):
        self.epsilon = epsilon
        self.delta = delta
        self.z = z

    def fit(self, X, y=None):
        if self.z is None:
            self.privacy_spent_ = PureDP(self.epsilon)
        else:
            event = DiscreteGaussianEvent(self.z)
            eps = compose_events([event], self.delta).epsilon
            self.privacy_spent_ = with_event(ApproxDP(eps, self.delta), event)
        return self

    def transform(self, X):
        return X


def _data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) / 2
    return X, (X[:, 0] > 0).astype(int)


def test_exported_at_the_top_level():
    assert skdpsparse.privacy_spent is privacy_spent
    assert "privacy_spent" in skdpsparse.__all__


def test_a_fitted_estimator_reports_its_own_budget_with_its_event():
    X, y = _data()
    clf = DPNoisySGDClassifier(classes=[0, 1], random_state=0).fit(X, y)
    spent = privacy_spent(clf)
    assert spent == clf.privacy_spent_ and spent.event == clf.privacy_spent_.event
    mean = DPHeavyTailedMean(random_state=0).fit(X)
    assert privacy_spent(mean) == mean.privacy_spent_  # a ZCDP budget stays one


def test_stateless_steps_cost_nothing():
    X, y = _data()
    pipe = make_pipeline(Normalizer(), FunctionTransformer(np.tanh),
                         DPNoisySGDClassifier(classes=[0, 1], random_state=0)).fit(X, y)
    assert privacy_spent(pipe) == pipe[-1].privacy_spent_
    cats = [[0, 1, 2]]
    ct = ColumnTransformer([("onehot", OneHotEncoder(categories=cats), [0]),
                            ("rest", Normalizer(), make_column_selector(pattern="x[12]"))])
    Z = np.c_[np.arange(600) % 3, X[:, 1:]]
    import pandas as pd

    frame = pd.DataFrame(Z, columns=["x0", "x1", "x2"])
    pipe = make_pipeline(ct, DPNoisySGDClassifier(classes=[0, 1], random_state=0)).fit(frame, y)
    assert privacy_spent(pipe) == pipe[-1].privacy_spent_


@pytest.mark.parametrize("step, name", [
    (StandardScaler(), "StandardScaler"),
    (OneHotEncoder(), "OneHotEncoder"),  # categories="auto" are read from the data
    (OneHotEncoder(categories=[[0.0, 1.0]] * 3, min_frequency=3), "OneHotEncoder"),
    (FunctionTransformer(np.exp, np.log), "FunctionTransformer"),  # checks the inverse on X
])
def test_a_learned_non_private_step_is_refused(step, name):
    X, y = _data()
    pipe = Pipeline([("prep", step),
                     ("clf", DPNoisySGDClassifier(classes=[0, 1], random_state=0))])
    if name == "OneHotEncoder":
        X = (X > 0).astype(float)
    pipe.fit(X, y)
    with pytest.raises(ValueError, match=rf"'prep' \({name}\).*without a privacy guarantee"):
        privacy_spent(pipe)


def test_nested_and_unknown_compositions():
    X, y = _data()
    scaled = ColumnTransformer([("s", StandardScaler(), [0, 1, 2])])
    pipe = make_pipeline(make_pipeline(scaled),
                         DPNoisySGDClassifier(classes=[0, 1], random_state=0)).fit(X, y)
    with pytest.raises(ValueError, match="StandardScaler"):
        privacy_spent(pipe)
    # GridSearchCV selects with non-private scores: not certified.
    search = GridSearchCV(DPNoisySGDClassifier(classes=[0, 1], random_state=0),
                          {"radius": [1.0, 2.0]}, cv=2).fit(X, y)
    with pytest.raises(ValueError, match="GridSearchCV"):
        privacy_spent(search)
    with pytest.raises(ValueError, match="LogisticRegression"):
        privacy_spent(LogisticRegression().fit(X, y))
    with pytest.raises(ValueError, match="no private step"):
        privacy_spent(make_pipeline(Normalizer()).fit(X))
    with pytest.raises(ValueError, match="not fitted"):
        privacy_spent(make_pipeline(Normalizer(), DPNoisySGDClassifier(classes=[0, 1])))


def test_several_private_steps_compose_by_their_events():
    X, y = _data()
    union = FeatureUnion([("a", _PrivateShift(z=4.0)), ("b", _PrivateShift(z=6.0))])
    pipe = make_pipeline(union, DPNoisySGDClassifier(classes=[0, 1], random_state=0))
    pipe.fit(X, y)
    budgets = [union.transformer_list[0][1].privacy_spent_,
               union.transformer_list[1][1].privacy_spent_, pipe[-1].privacy_spent_]
    spent = privacy_spent(pipe)
    # Default δ: the sum of the steps' δs; ε from the events (in ρ), below basic.
    assert spent == compose_events([b.event for b in budgets], 3e-6)
    assert spent.epsilon < sum(b.epsilon for b in budgets)
    assert privacy_spent(pipe, delta=1e-5) == compose_events([b.event for b in budgets], 1e-5)
    pure = make_pipeline(_PrivateShift(epsilon=0.5, z=None), _PrivateShift(epsilon=0.25, z=None))
    assert privacy_spent(pure.fit(X)) == PureDP(0.75)


class _PrivateZCDP(TransformerMixin, BaseEstimator):
    """A private transformer reporting ρ-zCDP (as DPHeavyTailedMean does)."""

    def __init__(self, epsilon=1.0, rho=0.01):
        self.epsilon = epsilon
        self.rho = rho

    def fit(self, X, y=None):
        self.privacy_spent_ = ZCDP(self.rho)
        return self

    def transform(self, X):
        return X


def test_zcdp_steps_add_in_rho_and_mixed_ones_need_a_delta():
    X, _ = _data()
    union = FeatureUnion([("a", _PrivateZCDP(rho=0.01)), ("b", _PrivateZCDP(rho=0.02))])
    assert privacy_spent(union.fit(X)) == ZCDP(0.03)
    mixed = FeatureUnion([("a", _PrivateZCDP(rho=0.01)), ("b", _PrivateShift())]).fit(X)
    with pytest.raises(ValueError, match="delta"):
        privacy_spent(mixed)
    assert privacy_spent(mixed, delta=1e-5).delta == 1e-5


def test_a_selected_model_reports_the_whole_selection():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 5)) / np.sqrt(5)
    y = X @ np.ones(5) / 2 + 0.1 * rng.normal(size=2000)
    search = PrivateParameterSelection(
        make_pipeline(Normalizer(), DPOutputPerturbationRegressor()),
        {"dpoutputperturbationregressor__alpha": [0.1, 1.0]}, epsilon=1.0,
        scoring="neg_mean_squared_error", gamma=0.5, random_state=0).fit(X, y)
    total = search.privacy_spent_
    assert privacy_spent(search) == total
    # best_estimator_ was chosen among runs: the selection's total covers it, not the
    # run budget its private step reports.
    best = search.best_estimator_
    assert best[-1].privacy_spent_ == search.run_budget_ != total
    assert privacy_spent(best) == total and privacy_spent(best[-1]) == total
    # A refit of the released model is a new fit with its own budget.
    best[-1].fit(X, y)
    assert privacy_spent(best[-1]) == best[-1].privacy_spent_ != total


def test_docstring_example():
    import doctest

    from skdpsparse import _privacy_spent

    result = doctest.testmod(_privacy_spent, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
