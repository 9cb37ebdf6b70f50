"""The index of the plans (issue 22, "plan, then run"): ``skdpsparse.mechanisms.__all__``
names every plan builder (``plan_*``) and every plan class (``*Plan``) that a mechanism
module defines, each loaded lazily from its module, frozen, and listed in doc/api.rst."""

import dataclasses
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import skdpsparse.mechanisms as mechanisms


def _defined_plans():
    """``(module, name)`` for every plan builder and plan class defined (not imported)
    in a module of the mechanisms package."""
    found = []
    for info in pkgutil.iter_modules(mechanisms.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{mechanisms.__name__}.{info.name}")
        for name, value in vars(module).items():
            is_plan = ((inspect.isfunction(value) and name.startswith("plan_"))
                       or (inspect.isclass(value) and name.endswith("Plan")))
            if is_plan and value.__module__ == module.__name__:
                found.append((info.name, name))
    return sorted(found)


def test_every_plan_is_in_the_index_as_the_object_of_its_module():
    defined = _defined_plans()
    assert len(defined) >= 20
    missing = [f"{module}.{name}" for module, name in defined
               if name not in mechanisms.__all__]
    assert not missing, f"plans not in skdpsparse.mechanisms.__all__: {missing}"
    for name in mechanisms.__all__:  # indexed under the module that defines it
        module = importlib.import_module(f"{mechanisms.__name__}.{mechanisms._MODULE_OF[name]}")
        assert getattr(mechanisms, name) is getattr(module, name), name
        assert getattr(module, name).__module__ == module.__name__, name
    assert set(mechanisms.__all__) <= set(dir(mechanisms))
    with pytest.raises(AttributeError, match="has no attribute 'plan_nothing'"):
        mechanisms.plan_nothing  # noqa: B018


def test_every_plan_class_is_frozen():
    for name in mechanisms.__all__:
        value = getattr(mechanisms, name)
        if inspect.isclass(value):
            frozen = (issubclass(value, tuple) or (dataclasses.is_dataclass(value)
                                                   and value.__dataclass_params__.frozen))
            assert frozen, name


def test_the_api_reference_lists_every_plan():
    api = Path(__file__).resolve().parents[2] / "doc" / "api.rst"
    if not api.exists():  # the installed wheel is tested from outside the tree
        pytest.skip("doc/api.rst is not next to the tests")
    listed = set(re.findall(r"^ +([\w.]+) *$", api.read_text(encoding="utf-8"), re.M))
    missing = [name for name in mechanisms.__all__
               if f"mechanisms.{mechanisms._MODULE_OF[name]}.{name}" not in listed]
    assert not missing, missing


def test_the_index_imports_no_mechanism_until_a_plan_is_used():
    out = subprocess.run([sys.executable, "-c", (
        "import sys, skdpsparse.mechanisms as m\n"
        "loaded = lambda: sorted(k for k in sys.modules if k.startswith(m.__name__ + '.'))\n"
        "print(loaded(), 'numba' in sys.modules)\n"
        "m.plan_grid_noise\n"
        "print(loaded())\n")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert first == "[] False"
    assert "'skdpsparse.mechanisms.noise'" in second
