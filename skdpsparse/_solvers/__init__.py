"""The library's Python-level solvers (not public): the post-processing or certified
optimisation steps that mechanisms call between their noise draws.

* :mod:`~skdpsparse._solvers.erm` -- regularized ERM of linear models solved to a
  certified accuracy (output perturbation, its distributed path);
* :mod:`~skdpsparse._solvers.basis_pursuit` -- matrix-free basis pursuit (the
  decoding step of ℓ1-recovery, post-processing of released measurements).

Their compiled loops stay in :mod:`skdpsparse._kernels` (``erm_passes``,
``basis_pursuit_prox``), whose numba cache folder is made safe for concurrent
compilation (:mod:`skdpsparse._kernels._cache_safety`): a solver here compiles nothing.
"""
