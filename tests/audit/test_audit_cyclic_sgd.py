"""Privacy audit of :class:`~skdpsparse.linear_model.DPCyclicSGD` end to end (seed 003
Algorithm 1, last-iterate accounting; squared loss, no penalty, no intercept, CSR input;
release ``coef_``).

Neighbours: row 0 is 10R·e₀ on a column no other row touches (scaled to R·e₀) with
target -10⁶ in D and +10⁶ in D', so its gradient is clipped to ∓C·e₀ at every step.
With one batch of all n rows, coordinate 0 of the last iterate is exactly a Gaussian
mechanism with μ = 2√E/z, the composition over the E uses that the accountant charges
(Theorem 4.5 gives the same at b = n): the hardest pair for a linear model. Attack:
threshold on ``coef_[0]``. Claims: ``privacy_spent_`` at δ = 1e-5 and, for the same
noise multiplier, the estimator's RDP conversion at δ = 0.2, where both broken variants
must be refuted: noise halved, and rows bounded at 10R with gradients clipped at 10C
while the noise is for C.
"""

from skdpsparse.audit import CASES, audit_failures, format_results, run_case


def test_audit_dp_cyclic_sgd(record_property):
    case = CASES["cyclic_sgd"]()
    results = run_case(case, n_runs=1000, seed=0)
    report = format_results(case, results)
    print(report)
    record_property("audit", report)
    assert not audit_failures(case, results), report
