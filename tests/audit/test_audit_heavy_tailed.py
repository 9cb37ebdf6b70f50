"""Privacy audit of the heavy-tailed mean mechanisms (seed 004, Algorithms 3 and 4):
:func:`~skdpsparse.mechanisms.heavy_tailed.private_cwme` (Laplace, ε-DP; Gaussian,
zCDP) and :func:`~skdpsparse.mechanisms.heavy_tailed.private_noise_smoothing_mean`.

Neighbours attain the sensitivity proved in the module: for the trimmed median of
means, consecutive groups arranged so that the group of row 0 is the median (odd m)
or one of the two middle ones (even m), row 0 going from -100τ to +100τ; for the
noise-smoothing mean, row 0 going from -10⁶τ to +10⁶τ (ψ_c saturates), and from
-1.7e308 to +1.7e308 with τ = 0.5 (x/τ beyond float64: refused as non-finite before
issue 17). Attack:
threshold on the sum of the released coordinates (the difference direction). Broken
variants: noise halved; clipping / soft truncation at 10τ with the noise for τ.
"""

import pytest

from skdpsparse.audit import CASES, audit_failures, format_results, run_case


@pytest.mark.parametrize("name", ["cwme_laplace", "cwme_gaussian", "noise_smoothing",
                                  "noise_smoothing_extreme"])
def test_audit_heavy_tailed_mechanism(name, record_property):
    case = CASES[name]()
    results = run_case(case, n_runs=2000, seed=0)
    report = format_results(case, results)
    print(report)
    record_property("audit", report)
    assert not audit_failures(case, results), report
