"""Run every gallery example (examples/plot_*.py) at a reduced size so they never rot.

``SKDPSPARSE_EXAMPLES_SMALL=1`` makes each example choose tiny sizes (a few seconds
each). They run in this process with :func:`runpy.run_path`, so the numba kernels
compiled or loaded by the other tests are reused. Skipped without matplotlib.
"""

import runpy
from pathlib import Path

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")  # no display; the examples call plt.show(), a no-op under Agg
import matplotlib.pyplot as plt  # noqa: E402

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("plot_*.py"))


def test_examples_found():
    # A source checkout has examples; an empty list would silently test nothing.
    if not EXAMPLES_DIR.is_dir():
        pytest.skip("no examples/ directory next to tests/ (not a source checkout)")
    assert EXAMPLES, f"no plot_*.py in {EXAMPLES_DIR}"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
# Examples declare every bound and label set, so nothing may warn of a privacy leak.
@pytest.mark.filterwarnings("error::skdpsparse.exceptions.PrivacyLeakWarning")
def test_example_runs(path, monkeypatch, tmp_path):
    monkeypatch.setenv("SKDPSPARSE_EXAMPLES_SMALL", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)  # anything an example writes goes to a temporary dir
    plt.close("all")
    try:
        runpy.run_path(str(path), run_name="__main__")
        assert plt.get_fignums(), f"{path.name} made no matplotlib figure"
        # Run as a script, an example saves every figure it made (issue 21).
        saved = sorted(p.name for p in tmp_path.glob(f"{path.stem}_*.png"))
        assert len(saved) == len(plt.get_fignums()), (path.name, saved)
    finally:
        plt.close("all")
