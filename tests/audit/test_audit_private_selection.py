"""Privacy audits of private selection (:mod:`skdpsparse.mechanisms.private_selection`)
and of :class:`~skdpsparse.model_selection.PrivateParameterSelection` end to end.

* ``report_noisy_min``: two scores of sensitivity Δ, equal in D and moved by (+Δ, −Δ)
  in D' (not monotone); attack: the index released. Claim ε = 2 (pure). With the noise
  halved (Lap(Δ/ε), the monotone scale) the ratio at a gap of 0 is e^{2ε}/(1 + ε) > e^ε,
  refuted with 2000 runs.
* ``random_stopping_selection`` (Liu–Talwar, untruncated, pure runs): each run draws
  one of two settings uniformly and scores it at ε₁ = 0.75; scores move by Δ in opposite
  directions; release: the selected setting and its score (LT19's output); attack: their
  exact log-likelihood ratio. Claim 3ε₁ = 2.25. Its release is a best-of-K
  report-noisy-min, whose privacy loss is at most 2ε₁ (4ε₁ with the noise halved): the
  halved noise shows only in tail events, and is refuted here with 4000 runs, with a
  small margin (about 1.1 times the claim; 1 of the 7 seeds tried fell short at this size —
  ``benchmarks/audit.py`` runs it with 10⁴).
* ``PrivateParameterSelection`` around ``DPOutputPerturbationRegressor`` (Laplace), two
  settings, γ = 1/2; attack: threshold on ``best_estimator_.coef_[0]`` (the pair of
  ``case_output_perturbation``). Claim ``privacy_spent_`` (ε = 2). Teeth: the inner
  fits' rows bounded at 10R. The halved noise is not expected to be refuted here: the
  estimator releases the setting, not its score, and pays for ~1/γ inner fits per search,
  so the test of the selection above would need far more than CI can run.
"""

import pytest

from skdpsparse.audit import CASES, audit_failures, format_results, run_case


@pytest.mark.parametrize("name, n_runs, variants", [
    ("report_noisy_min", 2000, ("correct", "noise/2")),
    pytest.param("random_stopping", 4000, ("correct", "noise/2"), marks=pytest.mark.slow),
    pytest.param("private_parameter_selection", 300, ("correct", "bound x10"),
                 marks=pytest.mark.slow),
])
def test_audit_private_selection(name, n_runs, variants, record_property):
    case = CASES[name]()
    results = run_case(case, n_runs=n_runs, seed=0, variants=variants)
    report = format_results(case, results)
    print(report)
    record_property("audit", report)
    assert not audit_failures(case, results), report
