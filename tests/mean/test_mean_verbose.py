"""verbose on the mean estimators: public numbers before the release, the same text
for neighbouring datasets, nothing after a refused fit."""

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsparse import DPHeavyTailedMean, DPSparseMeanEstimator, PrivacyLedger
from skdpsparse.accounting import ApproxDP
from skdpsparse.exceptions import BudgetExceededError

ESTIMATORS = [
    pytest.param(lambda v: DPSparseMeanEstimator(sparsity=3, verbose=v, random_state=0),
                 id="sparse_gaussian"),
    pytest.param(lambda v: DPSparseMeanEstimator(sparsity=3, method="l1_recovery",
                                                 verbose=v, random_state=0),
                 id="sparse_l1_recovery"),
    pytest.param(lambda v: DPHeavyTailedMean(verbose=v, random_state=0), id="heavy_tailed"),
]


def _neighbours(n=400, d=30):
    rng = np.random.default_rng(0)
    X = sp.random(n, d, density=0.1, random_state=1, format="csr")
    X.data = rng.standard_normal(X.nnz) / 2
    X2 = X.tolil(copy=True)
    X2[0, :] = 0.0
    X2[0, 5] = 40.0  # one row replaced by an extreme one
    return X, X2.tocsr()


def _without_times(text):
    return [line.rsplit(", ", 1)[0] if line.endswith(" s") else line
            for line in text.splitlines()]


@pytest.mark.parametrize("factory", ESTIMATORS)
@pytest.mark.filterwarnings("ignore:n=400 rows are too few")
def test_the_lines_before_the_release_are_the_same_for_neighbours(factory, capsys):
    X, X2 = _neighbours()
    factory(1).fit(X)
    first = _without_times(capsys.readouterr().out)
    factory(1).fit(X2)
    second = _without_times(capsys.readouterr().out)
    assert first[0].split("] ")[1].startswith("plan: method=")
    # Everything printed before the release is identical; the done line carries the
    # budget (public) and, for l1_recovery, iterations of post-processing of the
    # released measurements.
    assert first[:-1] == second[:-1]
    assert first[-1].split("] ")[1].startswith("done: released")


@pytest.mark.parametrize("factory", ESTIMATORS)
@pytest.mark.filterwarnings("ignore:n=400 rows are too few")
def test_a_refused_fit_prints_no_done_line(factory, capsys):
    X, _ = _neighbours()
    with PrivacyLedger(limit=ApproxDP(0.01, 1e-9)):
        with pytest.raises(BudgetExceededError):
            factory(1).fit(X)
    out = capsys.readouterr().out
    assert "plan:" in out and "done:" not in out
