"""Privacy audit of :class:`~skdpsparse.linear_model.DPHeavyTailedRegressor` end to end
(noise-smoothing gradient oracle, one step, with its random row permutation; release
``coef_`` and ``intercept_``).

Neighbours: row 0 has x = 10⁶(1, …, 1) and y = ∓10⁶, so its gradient at w = 0
saturates the soft truncation in every coordinate with opposite signs. Attack:
threshold on ``coef_.sum() + intercept_``. Broken variant: the noise halved, refuted at the
δ = 0.2 point of the ρ-zCDP curve (the truncation at 10τ is refuted through the same
oracle in ``test_audit_heavy_tailed.py``, and here by ``benchmarks/audit.py``).
"""

from skdpsparse.audit import CASES, audit_failures, format_results, run_case


def test_audit_dp_heavy_tailed_regressor(record_property):
    case = CASES["heavy_tailed_regressor"]()
    results = run_case(case, n_runs=2000, seed=0, variants=("correct", "noise/2"))
    report = format_results(case, results)
    print(report)
    record_property("audit", report)
    assert not audit_failures(case, results), report
