"""Noise needed by cyclic DP-SGD under last-iterate accounting vs composition.

Noise multiplier z (noise N(0, z²C²) on the sum of clipped gradients, replace-one
neighbours) for (ε, δ) = (1, 1e-5), n = 10⁴, b = 256, C = 1, M = 1, over
E ∈ {1, 5, 20} and m ∈ {0, 0.1, 1}, at λ = 0.1 (and λ = 0.01 to show the step-size
dependence). Columns: composition over the K steps touching a record; Theorem 4.5 with
L = 1 + λ·max(m, M) (valid when clipping binds); Theorem 4.5 with eq. (12) (only if
clipping never binds); the ratios composition / last-iterate. T = ⌈E n/b⌉ steps, so
with b ∤ n some records are seen E + 1 times (K). Not a test.

Run:  python benchmarks/bench_last_iterate_table.py [--learning-rates 0.1 0.01]
"""

import argparse
import time

from skdpsparse.accounting.last_iterate import (
    calibrate_last_iterate_noise,
    cyclic_schedule,
    last_iterate_epsilon,
)

EPS, DELTA = 1.0, 1e-5
N, B, C, M = 10_000, 256, 1.0, 1.0


def table(lr):
    print(f"\n(eps, delta) = ({EPS:g}, {DELTA:g}), n={N}, b={B}, C={C:g}, M={M:g}, "
          f"lambda={lr:g}")
    print(f"{'E':>3} {'m':>5} {'T':>5} {'K':>3} {'z comp':>8} {'z safe':>8} {'z eq12':>8} "
          f"{'comp/safe':>10} {'comp/eq12':>10}  winner (clipping binds / never binds)")
    for epochs in [1, 5, 20]:
        sched = cyclic_schedule(N, B, epochs)
        common = dict(n_samples=N, batch_size=B, epochs=epochs, learning_rate=lr, clip_norm=C)
        z_comp = calibrate_last_iterate_noise(EPS, DELTA, **common)
        for m in [0.0, 0.1, 1.0]:
            row = {}
            for binds in (True, False):
                kw = dict(common, weak_convexity=m, smoothness=M, clipping_can_bind=binds)
                z = calibrate_last_iterate_noise(EPS, DELTA, **kw)
                row[binds] = (z, last_iterate_epsilon(DELTA, noise_multiplier=z, **kw).bound)
            (z_safe, w_safe), (z_eq12, w_eq12) = row[True], row[False]
            print(f"{epochs:>3} {m:>5g} {sched.n_steps:>5} {sched.max_uses:>3} {z_comp:>8.4f} "
                  f"{z_safe:>8.4f} {z_eq12:>8.4f} {z_comp / z_safe:>10.3f} "
                  f"{z_comp / z_eq12:>10.3f}  {w_safe} / {w_eq12}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learning-rates", type=float, nargs="+", default=[0.1, 0.01])
    args = parser.parse_args()
    start = time.perf_counter()
    for lr in args.learning_rates:
        table(lr)
    print(f"\n({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
