"""Privacy audit of :class:`~skdpsparse.mean.DPHeavyTailedMean` end to end (cwme with
the random assignment of rows to groups, release ``mean_``).

With two groups of equal size the median of the two group means is the mean of all
clipped rows, whatever the permutation: row 0 going from -100τ to +100τ attains the
sensitivity under the estimator's own shuffling. Attack: threshold on the sum of
``mean_``. Broken variants (both must be refuted): noise halved; clipping at 10τ
with the noise for τ. The zCDP claim is audited at δ = 1e-5 and, where a factor 2 in
the noise shows, at the δ = 0.2 point of the same ρ-zCDP curve.
"""

import pytest

from skdpsparse.audit import CASES, audit_failures, format_results, run_case


@pytest.mark.parametrize("name, n_runs", [
    ("heavy_tailed_mean_laplace", 1000),
    ("heavy_tailed_mean_gaussian", 2000),
])
def test_audit_dp_heavy_tailed_mean(name, n_runs, record_property):
    case = CASES[name]()
    results = run_case(case, n_runs=n_runs, seed=0)
    report = format_results(case, results)
    print(report)
    record_property("audit", report)
    assert not audit_failures(case, results), report
