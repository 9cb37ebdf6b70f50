"""Privacy audit of the projection mechanism (seed 002, Algorithm 1):
:func:`~skdpsparse.mechanisms.projection.projection_mechanism` on
:func:`~skdpsparse.mechanisms.projection.bounded_mean`, noise from
:func:`~skdpsparse.mechanisms.projection.mean_noise`.

Neighbours: one row goes from -10L·e₀ to +10L·e₀ on a column no other row touches
(bounding scales it to ∓L). Attack: threshold on the released coordinate 0, chosen on
half the runs; Clopper–Pearson bound (95 %) on the other half. The same audit must
refute the mechanism with its noise halved and with rows bounded at 10L.
"""

import pytest

from skdpsparse.audit import CASES, audit_failures, format_results, run_case


@pytest.mark.parametrize("name", ["projection_laplace", "projection_gaussian"])
def test_audit_projection_mechanism(name, record_property):
    case = CASES[name]()
    results = run_case(case, n_runs=2000, seed=0)
    report = format_results(case, results)
    print(report)
    record_property("audit", report)
    assert not audit_failures(case, results), report
