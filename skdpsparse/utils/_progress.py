"""One progress format for every estimator's ``verbose`` option.

scikit-learn's estimators take ``verbose`` as a bool or a non-negative int (0 silent,
1 a line per stage, higher more lines) and print to standard output. Every estimator
here does the same, through :class:`Progress`, with one line format::

    [DPCyclicSGD] epoch 3/20: 120 noisy steps, 0.84 s

What a progress line may say. Only public numbers: counts fixed by the plan (steps,
epochs, runs), the stage's name and the elapsed time. Never a loss, a norm or any
other statistic of the data that has not been released: a verbose fit must release
exactly what a silent one does. (Elapsed time is a side channel that every fit has,
verbose or not; the noise draws do not depend on the data.)
"""

import sys
import time

from ._params import InstanceOf, Interval

__all__ = ["VERBOSE_CONSTRAINT", "Progress"]

#: The ``_parameter_constraints`` entry of every ``verbose`` parameter.
VERBOSE_CONSTRAINT = [InstanceOf(bool), Interval("integer", 0, None, closed="left")]


class Progress:
    """Progress lines of one fit.

    Parameters
    ----------
    verbose : bool or int
        0 or False prints nothing; 1 or True prints the lines of level 1; 2 and more
        also those of level 2 (one per step, say).
    name : str
        The estimator's class name, printed in brackets.

    Examples
    --------
    >>> from skdpsparse.utils._progress import Progress
    >>> progress = Progress(1, "DPCyclicSGD")
    >>> progress.report("epoch", 1, 20, "64 noisy steps", seconds=False)
    [DPCyclicSGD] epoch 1/20: 64 noisy steps
    >>> progress.report("step", 3, 64, level=2)  # level 2: not printed at verbose=1
    """

    def __init__(self, verbose, name):
        self.level = int(verbose)
        self.name = str(name)
        self._start = time.perf_counter()

    def __bool__(self):
        return self.level > 0

    def elapsed(self):
        """Seconds since the fit started."""
        return time.perf_counter() - self._start

    def report(self, stage, index=None, total=None, detail="", *, level=1, seconds=True):
        """Print ``[name] stage index/total: detail, 0.84 s`` if ``verbose >= level``.

        Parameters
        ----------
        stage : str
            What is counted ("epoch", "run", "step").
        index, total : int, optional
            The position (1-based) and the planned count; ``total`` may be None when
            the count is random (private selection's runs).
        detail : str, default=""
            Public numbers only (module docstring).
        level : int, default=1
        seconds : bool, default=True
            Whether to append the elapsed time.
        """
        if self.level < level:
            return
        head = f"[{self.name}] {stage}"
        if index is not None:
            head += f" {index}" if total is None else f" {index}/{total}"
        parts = [p for p in (detail, f"{self.elapsed():.2f} s" if seconds else "") if p]
        line = head + (": " + ", ".join(parts) if parts else "")
        print(line, file=sys.stdout, flush=True)
