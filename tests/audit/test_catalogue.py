"""Every case of the audit catalogue (:data:`skdpsparse.audit.CATALOGUE`) at the CI size
stored beside it: the claims of the mechanism as shipped must stand, and each broken
variant with a required detection must be refuted (the audit's teeth). What each case
audits, and why some variants are not required, is in its builder's docstring
(``skdpsparse/audit/cases/``)."""

import pytest

from skdpsparse.audit import CATALOGUE, format_results, run


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.slow) if entry.slow else name
    for name, entry in CATALOGUE.items()
])
def test_audit_case(name, record_property):
    case, results, failures = run(name)
    report = format_results(case, results)
    print(report)
    record_property("audit", report)
    assert not failures, report


def test_every_case_has_teeth_in_ci():
    """Each case runs at least one broken variant with a required detection in CI (the
    heavy-tailed regressor's bounding variant is left to the full-size run: its oracle
    is audited with it in ``noise_smoothing``), and only variants it implements; or
    names (``teeth_in``) the case whose CI audit refutes the same broken steps of the
    same code (the provable noisy SGD: the RDP-calibrated case, whose smaller noise
    gives the bounding variant's detection the power CI can afford)."""
    for name, entry in CATALOGUE.items():
        case = entry.build()
        if entry.teeth_in:
            other = CATALOGUE[entry.teeth_in]
            assert not other.teeth_in, name
            assert set(case.detect) <= set(other.build().detect) & set(other.variants), name
        else:
            assert set(case.detect) & set(entry.variants), name
        assert set(case.detect) <= set(entry.supports), name
        assert set(entry.variants) <= set(entry.supports), name
