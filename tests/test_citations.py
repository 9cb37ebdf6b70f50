"""The package cites papers as papers: no docstring, comment or documentation page says
"seed 00N" (the project's internal numbering) or points at a file outside the
repository (the derivations the guarantees rest on ship in ``doc/derivations/``)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = [
    (re.compile(r"\bseeds? 00\d"), "a paper cited by the project's internal number"),
    (re.compile(r"/work/shared|\.\./shared|papers/recovered|INDEX\.md"),
     "a path outside the repository"),
    (re.compile(r"\bnotes §"), "a section of internal notes"),
]


def _sources():
    if not (ROOT / "skdpsparse").is_dir():
        return []
    files = list((ROOT / "skdpsparse").rglob("*.py"))
    files += [p for p in (ROOT / "doc").rglob("*.rst")
              if "generated" not in p.parts and "auto_examples" not in p.parts]
    files += list((ROOT / "examples").glob("*.py")) + list((ROOT / "benchmarks").glob("*.py"))
    files += [ROOT / "README.md"]
    return [p for p in files if p.is_file()]


def test_sources_found():
    if not (ROOT / "skdpsparse").is_dir():
        pytest.skip("not a source checkout")
    assert len(_sources()) > 50


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_internal_citation_or_outside_path(path):
    text = path.read_text(encoding="utf-8")
    problems = []
    for pattern, what in FORBIDDEN:
        for match in pattern.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            problems.append(f"{path.relative_to(ROOT)}:{line}: {what}: {match.group(0)!r}")
    assert not problems, "\n".join(problems)
