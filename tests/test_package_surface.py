"""The package's face: every public estimator and tool importable from ``skdpsparse``,
the same object as in its subpackage, without importing numba until it is used, and
without POSIX-only modules (Windows and macOS)."""

import inspect
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sklearn.base import BaseEstimator

import skdpsparse
from skdpsparse import linear_model, mean, model_selection

SUBPACKAGES = (linear_model, mean, model_selection)


def test_every_public_estimator_is_exported_at_the_top_level():
    public = {name for module in SUBPACKAGES for name in module.__all__}
    assert public <= set(skdpsparse.__all__)
    for module in SUBPACKAGES:
        for name in module.__all__:
            assert getattr(skdpsparse, name) is getattr(module, name)


def test_exports_are_estimators_or_named_tools():
    for name in skdpsparse.__all__:
        value = getattr(skdpsparse, name)
        if inspect.isclass(value) and name.startswith("DP"):
            assert issubclass(value, BaseEstimator), name
    assert "DPSparseMeanEstimator" in dir(skdpsparse)


def test_from_import_and_unknown_name():
    from skdpsparse import DPCyclicSGD, DPSparseMeanEstimator  # noqa: F401

    with pytest.raises(AttributeError, match="no attribute 'DPSparseMean'"):
        skdpsparse.DPSparseMean  # noqa: B018


def _run(script):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)],
                          capture_output=True, text=True, timeout=300)


def test_import_does_not_load_numba_until_an_estimator_is_used():
    out = _run("""
        import sys
        import skdpsparse
        before = "numba" in sys.modules
        skdpsparse.DPSparseMeanEstimator
        print(before, "numba" in sys.modules)
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]


@pytest.mark.skipif(sys.platform == "win32", reason="simulates a platform without POSIX modules")
def test_every_export_imports_without_posix_only_modules():
    # Windows has none of these; a top-level `import fcntl` anywhere in the package
    # would make `import skdpsparse` fail there.
    out = _run("""
        import sys
        for name in ("fcntl", "termios", "resource", "pwd", "grp", "posix"):
            if name != "posix":
                sys.modules[name] = None
        import skdpsparse
        for name in skdpsparse.__all__:
            getattr(skdpsparse, name)
        import skdpsparse.accounting, skdpsparse.mechanisms, skdpsparse.datasets
        print("ok", len(skdpsparse.__all__))
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")


@pytest.mark.skipif(os.environ.get("SKDPSPARSE_TEST_WHEEL") != "1",
                    reason="set by the README's test command, which tests the built wheel")
def test_the_installed_wheel_is_what_is_tested():
    """CI builds the wheel, installs it and runs the tests from outside the source
    tree, so a file the wheel forgets fails here instead of being found in the tree."""
    root = Path(__file__).resolve().parents[1]
    installed = Path(skdpsparse.__file__).resolve()
    assert installed.parent != root / "skdpsparse", installed  # not the source tree
    assert "site-packages" in installed.parts, installed


def test_the_api_reference_lists_every_public_estimator_and_mechanism():
    """doc/api.rst names every exported estimator and every public callable of the
    mechanisms package (the names test_common checks for a privacy guarantee), so a
    new one cannot be left out of the reference."""
    import re

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        from test_common import _public_mechanisms
    finally:
        sys.path.pop(0)
    from skdpsparse.utils.discovery import all_estimators

    api = Path(__file__).resolve().parents[1] / "doc" / "api.rst"
    if not api.exists():  # the installed wheel is tested from outside the tree
        pytest.skip("doc/api.rst is not next to the tests")
    listed = set(re.findall(r"^ +([\w.]+) *$", api.read_text(encoding="utf-8"), re.M))
    missing = [name for name, cls in all_estimators()
               if name not in listed and f"{cls.__module__.split('.')[1]}.{name}" not in listed]
    missing += [f"mechanisms.{name}" for name, _ in _public_mechanisms()
                if f"mechanisms.{name}" not in listed]
    assert not missing, missing
