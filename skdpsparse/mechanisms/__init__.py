"""Randomizers on vectors and batches: data in, private numbers out.

One module per family (see ``ARCHITECTURE.md``): ``noise`` (the only place noise is
drawn), ``projection`` (Ghazi et al. 2024 Algorithm 1), ``l1_recovery`` with ``sensing`` and
``basis_pursuit`` (Ghazi et al. 2024 Algorithm 2), ``sparse_mean`` (choosing among them from
public quantities), ``heavy_tailed`` (Kamath, Liu and Zhang 2022 Algorithms 3 and 4).
"""
