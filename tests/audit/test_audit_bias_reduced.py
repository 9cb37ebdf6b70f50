"""Privacy audit of the bias-reduced gradient oracle (seed 002 Algorithm 5):
:class:`~skdpsparse.mechanisms.bias_reduced.BiasReducedOracle` as a mechanism in its own
right — one call at the top level on n = 2^{M+1} = 32 rows, so that the batch B is the
whole dataset (no subsampling amplification) — releasing its four private means
(G⁺ on B, G⁻ on the halves O and E, G₀ on one random row), of which 𝒢(x) is a
post-processing. Each mean runs the projection mechanism at (ε, δ) = (5, 1e-5), the
oracle at (4ε, 4δ).

Neighbours: row 0's gradient is -10L·e₀ in D and +10L·e₀ in D' (column 0 touched by no
other row; bounding scales it to ∓L·e₀). Attack: the log-likelihood ratio of coordinate
0 of the four means (as if unprojected Gaussians), threshold chosen on half the runs.

Claim (derived from the budgets the projection_mechanism calls report, ApproxDP(ε, δ)
each): the row enters G⁺, exactly one of G⁻_O, G⁻_E (a data-independent partition of B:
parallel composition), and G₀ with probability 1/n (amplification by subsampling, as in
``step_privacy``); basic composition gives (2ε + ln(1 + (e^ε − 1)/n), 2δ + δ/n) =
(11.72, 2.0e-5), and, composing each mean's exact analytic-Gaussian curve with the best
split of δ, ε = 2.93 at δ = 0.2, where the halved noise and the rows bounded at 10L must
be refuted. Dense gradient rows go through ``bounded_mean`` (which ``inflated_bounds``
patches); CSR rows through the oracle's own kernel, which it does not reach: there the
teeth are the halved noise, and row 0 at 10L checks that the kernel bounds at all.

Not audited end to end, because no audit of the estimators
(``DPBiasReducedSGDRegressor`` / ``Classifier``) can have teeth: before the projections
G⁺ − ½(G⁻_O + G⁻_E) does not move at all with one row (g/m − ½·2g/m = 0), so 𝒢(x) shows
the row only through G₀ — the sampled index with probability 1/n — and the projections'
residue, while the estimator charges all three means on B per step (Lemma 6.3) plus the
whole filter budget ε/2; halving the noise leaves the release far below that charge,
and the bounding variant cannot reach it (the estimator scales the rows of X itself,
after which the gradients are within the oracle's bound). See
``skdpsparse/_audit_cases_selection.py``.
"""

import pytest

from skdpsparse.audit import CASES, VARIANTS, audit_failures, format_results, run_case


@pytest.mark.parametrize("name, variants", [
    ("bias_reduced_oracle", tuple(VARIANTS)),
    ("bias_reduced_oracle_csr", ("correct", "noise/2")),
])
def test_audit_bias_reduced_oracle(name, variants, record_property):
    case = CASES[name]()
    results = run_case(case, n_runs=3000, seed=0, variants=variants)
    report = format_results(case, results)
    print(report)
    record_property("audit", report)
    assert not audit_failures(case, results), report
