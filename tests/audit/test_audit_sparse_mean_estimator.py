"""Privacy audit of :class:`~skdpsparse.mean.DPSparseMeanEstimator` end to end
(``fit`` on CSR input, release ``mean_``; projection method, ε-DP).

Neighbours: one row goes from -10L·e₀ to +10L·e₀ on a column no other row touches.
Attack: threshold on ``mean_[0]``. Broken variants: noise halved; rows bounded at 10L.
"""

from skdpsparse.audit import CASES, audit_failures, format_results, run_case


def test_audit_dp_sparse_mean_estimator(record_property):
    case = CASES["sparse_mean_estimator"]()
    results = run_case(case, n_runs=1000, seed=0)
    report = format_results(case, results)
    print(report)
    record_property("audit", report)
    assert not audit_failures(case, results), report
