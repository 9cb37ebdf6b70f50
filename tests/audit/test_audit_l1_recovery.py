"""Privacy audit of :func:`~skdpsparse.mechanisms.l1_recovery.gaussian_l1_recovery`
(seed 002, Algorithm 2), compressed-sensing branch.

Neighbours: one row goes from -10L·e₀ to +10L·e₀ (column 0 untouched by other rows).
Attack: threshold on the recovered coordinate 0. Its noise is calibrated for the 1.5L
clip of each measurement vector, which a 1-sparse row cannot reach, and basis pursuit
denoising (radius from the claimed σ) erases signals within the noise: halving the
noise is not detectable here, so the teeth are the bounding variant — rows bounded
at 10L and measurements clipped at 15L while the noise still assumes L.
"""

from skdpsparse.audit import CASES, audit_failures, format_results, run_case


def test_audit_gaussian_l1_recovery(record_property):
    case = CASES["l1_recovery"]()
    results = run_case(case, n_runs=600, seed=0, variants=("correct", "bound x10"))
    report = format_results(case, results)
    print(report)
    record_property("audit", report)
    assert not audit_failures(case, results), report
