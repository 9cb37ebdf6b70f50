"""The privacy calculus: budgets, RDP/zCDP curves, composition and noise calibration.

No data ever enters this layer, only numbers. See ``ARCHITECTURE.md``.
"""

from .budget import (
    ZCDP,
    ApproxDP,
    PureDP,
    approx_dp_to_zcdp,
    zcdp_to_delta,
    zcdp_to_epsilon,
)
from .calibrate import (
    analytic_gaussian_sigma,
    calibrate_noise_multiplier,
    gaussian_delta,
    gaussian_sigma,
    gaussian_sigma_classic,
    laplace_scale,
    zcdp_gaussian_sigma,
)
from .filters import ApproxDPFilter, filter_epsilon
from .last_iterate import (
    LAST_ITERATE_BOUNDS,
    CyclicSchedule,
    LastIterateEpsilon,
    calibrate_last_iterate_noise,
    cyclic_schedule,
    displacement_noise_std,
    last_iterate_epsilon,
    last_iterate_rdp,
    last_iterate_rdp_bounds,
)
from .rdp import (
    DEFAULT_ORDERS,
    RdpCurve,
    gaussian_rdp,
    laplace_rdp,
    poisson_subsampled_gaussian_rdp,
    rdp_to_epsilon,
    subsampled_without_replacement_gaussian_rdp,
)

__all__ = [
    "DEFAULT_ORDERS",
    "LAST_ITERATE_BOUNDS",
    "CyclicSchedule",
    "LastIterateEpsilon",
    "calibrate_last_iterate_noise",
    "cyclic_schedule",
    "displacement_noise_std",
    "last_iterate_epsilon",
    "last_iterate_rdp",
    "last_iterate_rdp_bounds",
    "ZCDP",
    "ApproxDP",
    "ApproxDPFilter",
    "PureDP",
    "RdpCurve",
    "analytic_gaussian_sigma",
    "approx_dp_to_zcdp",
    "filter_epsilon",
    "calibrate_noise_multiplier",
    "gaussian_delta",
    "gaussian_rdp",
    "gaussian_sigma",
    "gaussian_sigma_classic",
    "laplace_rdp",
    "laplace_scale",
    "poisson_subsampled_gaussian_rdp",
    "rdp_to_epsilon",
    "subsampled_without_replacement_gaussian_rdp",
    "zcdp_gaussian_sigma",
    "zcdp_to_delta",
    "zcdp_to_epsilon",
]
