"""Numba kernels: the hot loops on plain arrays (dense vectors, dense 2-D arrays and
CSR parts ``indptr, indices, data``).

No Python objects, no randomness, no privacy decisions: the mechanisms layer decides
bounds and noise and calls these. Every compiled function is
``@numba.njit(cache=True)``, so a second process loads it from the cache instead of
compiling it again. Inputs may be float32 or float64; accumulation is in float64.

Conventions:

* ``projections`` and ``prox`` export thin Python wrappers (input coercion,
  ``out=None``, argument checks); the compiled core of ``f`` is ``f_nb`` in the
  same module, with ``out`` explicit, for use from other compiled code.
* ``sparse_rows`` and ``linear_losses`` functions are compiled dispatchers,
  callable from Python and from compiled code alike (they check their own
  arguments), except ``csr_scale_rows``/``dense_scale_rows`` (wrappers for
  ``out=None`` around ``*_nb`` cores).
* CSR inputs are assumed canonical SciPy parts (column indices in range, no
  duplicates); the loops do not bounds-check them.

Concurrent compilation: the saves of these kernels go through ``_cache_safety`` (two
processes compiling at once cannot pair one signature with another's machine code).

Editing: numba alone invalidates a cached kernel when *its own* source file changes,
not when a compiled function it inlines from another file does. ``_cache_safety`` also
marks this package's caches with every kernel file's modification time and size, so an
edit of any file here (or in ``skdpsparse/distributed``) recompiles every kernel in the
next process.
"""

from . import _cache_safety, _common

# Every kernel file is in this directory, so numba caches them all in the folder it
# chose for _common's: route the saves into it through a save that two processes
# compiling at once cannot corrupt (see _cache_safety).
_cache_safety.install(_cache_safety.kernel_cache_path(_common.on_grid_nb))

from .linear_losses import (  # noqa: E402
    HINGE,
    HUBER,
    LOGISTIC,
    LOSS_CODES,
    SIGMOID,
    SMOOTHED_HINGE,
    SQUARED,
    check_loss,
    csr_clipped_gradient_sum,
    csr_loss_gradient,
    csr_margins,
    dense_clipped_gradient_sum,
    dense_loss_gradient,
    dense_margins,
    loss_derivative,
    loss_value,
    loss_value_and_derivative,
    per_example_derivatives,
    per_example_losses,
)
from .projections import (  # noqa: E402
    l1_ball_threshold,
    linf_distance_to_l2_ball,
    linf_nearest_in_l2_ball,
    project_box,
    project_l1_ball,
    project_l2_ball,
)
from .prox import prox_elastic_net, prox_l1, prox_l2_squared, soft_threshold  # noqa: E402
from .sparse_rows import (  # noqa: E402
    csr_bounded_column_sum,
    csr_bounded_column_sum_rows,
    csr_bounded_column_sum_threaded,
    csr_bounding_scales,
    csr_row_norms,
    csr_scale_rows,
    csr_scaled_column_sum,
    dense_bounded_column_sum,
    dense_bounding_scales,
    dense_row_norms,
    dense_scale_rows,
    dense_scaled_column_sum,
)

__all__ = [
    # projections
    "l1_ball_threshold",
    "project_l1_ball",
    "project_l2_ball",
    "project_box",
    "linf_distance_to_l2_ball",
    "linf_nearest_in_l2_ball",
    # prox
    "soft_threshold",
    "prox_l1",
    "prox_l2_squared",
    "prox_elastic_net",
    # sparse_rows
    "csr_row_norms",
    "dense_row_norms",
    "csr_bounding_scales",
    "dense_bounding_scales",
    "csr_scaled_column_sum",
    "dense_scaled_column_sum",
    "csr_bounded_column_sum",
    "csr_bounded_column_sum_rows",
    "csr_bounded_column_sum_threaded",
    "dense_bounded_column_sum",
    "csr_scale_rows",
    "dense_scale_rows",
    # linear_losses
    "SQUARED",
    "LOGISTIC",
    "HINGE",
    "SMOOTHED_HINGE",
    "HUBER",
    "SIGMOID",
    "LOSS_CODES",
    "check_loss",
    "loss_value",
    "loss_derivative",
    "loss_value_and_derivative",
    "per_example_losses",
    "per_example_derivatives",
    "dense_margins",
    "csr_margins",
    "dense_loss_gradient",
    "csr_loss_gradient",
    "dense_clipped_gradient_sum",
    "csr_clipped_gradient_sum",
]
