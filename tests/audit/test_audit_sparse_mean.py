"""Privacy audit of :func:`~skdpsparse.mechanisms.sparse_mean.private_sparse_mean` with
the dense baselines ``"laplace"`` (ε-DP) and ``"gaussian"`` (analytic Gaussian).

Neighbours, attack and broken variants as in ``test_audit_projection.py``; the
projection method is audited there and through ``DPSparseMeanEstimator``.
"""

import pytest

from skdpsparse.audit import CASES, audit_failures, format_results, run_case


@pytest.mark.parametrize("name", ["sparse_mean_laplace", "sparse_mean_gaussian"])
def test_audit_private_sparse_mean(name, record_property):
    case = CASES[name]()
    results = run_case(case, n_runs=2000, seed=0)
    report = format_results(case, results)
    print(report)
    record_property("audit", report)
    assert not audit_failures(case, results), report
