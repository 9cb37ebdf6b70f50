"""``python -m skdpsparse``: fit every estimator on generated or bundled data.

Prints, for each estimator, the privacy it spent and the utility it reached next to a
baseline, so a fresh install shows at a glance what the library does.
"""

import sys

from ._demo import run_demo

if __name__ == "__main__":
    sys.exit(run_demo())
