"""The sparse mean and output perturbation past one machine: dask CSR arrays on a
2-worker LocalCluster against the in-memory fits (issue 20).

Rows have ``--nnz`` nonzeros at uniform columns of d = ``--d``; chunks of
``--chunk-rows`` rows are generated on the workers from their block index (nothing is
shipped from the driver but the graph). Reported:

* wall and CPU time (driver + workers) of ``fit_distributed`` at n = ``--n``;
* the peak resident memory of each worker process, read by the driver from
  /proc/<pid>/status (VmHWM, see ``_vm_hwm``) of every worker's pid, each cluster
  fresh so the peak is this fit's (and the warm-up's); the target is < 1 GB per
  worker at n = 10⁷, d = 2²⁰, 16 nonzeros;
* at the largest n both can hold (``--in-memory-n``, the same rows): the in-memory
  ``DPSparseMeanEstimator.fit``, the in-memory core
  (``skdpsparse.distributed.fit_sparse_mean_in_memory``) and the distributed fit, and
  whether the estimator, the core and the distributed fit released the same vector
  bit for bit (one digest and one key for all three);
* output perturbation (``DPOutputPerturbationClassifier``, logistic loss, labels of a
  planted sparse model) on a dask CSR array of n = ``--op-n`` rows and d = ``--op-d``
  columns against its in-memory fit: wall and CPU time, the number of distributed
  passes (one per objective evaluation) and whether the two released the same
  coefficients bit for bit.

``--part digest`` measures instead the row hashing of a Spark fit's default key
(``row_order="multiset"``: every row hashed on its own, since Spark keeps no row
order): the compiled BLAKE2b pass (``_digest.row_multiset_part``) against the
``hashlib`` loop it replaced (``_digest._row_multiset_part_hashlib``, the same value),
beside the positional block digest of the in-memory and Dask fits and the bounded
exact sum every fit computes, on ``--digest-n`` generated rows, one thread, CPU time
per row, the four interleaved in each of ``--rounds`` rounds (paired ratios, so a
loaded machine moves them less than the absolute times), with the projection to
n = 10⁷ rows.

``--part spark`` times the Spark fits of the sparse mean (PySpark in local mode,
``--workers`` cores) on ``--spark-n`` generated rows written as Parquet (list columns
``indices`` / ``values`` and a ``user`` column of ``--rows-per-unit`` rows per unit on
average): row level with the multiset key (the default) and with the positional key
(``row_order="partitions"``), and user level (a distinct count, one shuffle by unit),
against the in-memory fits of the same rows; wall time only (the Python workers' CPU
is not read), the cases interleaved in each of ``--rounds`` rounds.

``--part cyclic`` times large-batch ``DPCyclicSGD`` (logistic, ``shuffle=False``,
batches of ``--cyclic-batch`` rows, ``--cyclic-epochs`` passes) on a dask CSR array of
``--cyclic-n`` rows and ``--cyclic-d`` columns (labels of a planted sparse model) on a
``--workers``-worker LocalCluster against its in-memory fit: wall time of each, the
two interleaved in each of ``--rounds`` rounds (medians, paired ratio), the number of
steps (one round trip each) and whether the two released the same coefficients bit
for bit.

Not a test: it prints numbers and never fails on a wall-clock value. Time it on a
quiet machine:

    .venv/bin/python benchmarks/bench_distributed.py                 # n = 10^7
    .venv/bin/python benchmarks/bench_distributed.py --n 200000 --d 65536 \\
        --chunk-rows 50000 --in-memory-n 100000 --op-n 100000 \\
        --op-d 16384 --op-chunk-rows 25000                           # a quick check
    .venv/bin/python benchmarks/bench_distributed.py --part digest   # the row hashing
    .venv/bin/python benchmarks/bench_distributed.py --part spark --spark-n 1000000
    .venv/bin/python benchmarks/bench_distributed.py --part cyclic   # DPCyclicSGD
"""

import argparse
import contextlib
import resource
import time

import numpy as np
import scipy.sparse as sp


def make_block(block_id, rows, d, nnz, seed):
    """Block ``block_id`` of the generated matrix: a pure function of its index."""
    rng = np.random.default_rng([seed, int(block_id)])
    cols = rng.integers(0, d, size=rows * nnz, dtype=np.int64)
    vals = rng.standard_normal(rows * nnz) * 0.5
    indptr = np.arange(0, rows * nnz + 1, nnz, dtype=np.int64)
    X = sp.csr_matrix((vals, cols, indptr), shape=(rows, d))
    X.sum_duplicates()
    return X


def dask_matrix(n, d, nnz, chunk_rows, seed):
    import dask.array as da

    sizes = [chunk_rows] * (n // chunk_rows) + ([n % chunk_rows] if n % chunk_rows else [])

    def block(block_info=None):
        loc = block_info[None]["chunk-location"][0]
        rows = block_info[None]["chunk-shape"][0]
        return make_block(loc, rows, d, nnz, seed)

    return da.map_blocks(block, chunks=(tuple(sizes), (d,)), dtype=np.float64,
                         meta=sp.csr_matrix((0, d)))


def in_memory_matrix(n, d, nnz, chunk_rows, seed):
    sizes = [chunk_rows] * (n // chunk_rows) + ([n % chunk_rows] if n % chunk_rows else [])
    return sp.vstack([make_block(i, r, d, nnz, seed) for i, r in enumerate(sizes)],
                     format="csr")


def planted_model(d, seed):
    """A sparse coefficient vector (1% of the columns) the labels follow."""
    rng = np.random.default_rng([seed, 10**6])
    return rng.standard_normal(d) * (rng.random(d) < 0.01) * 8.0


def labels_of(X, w):
    """Labels of the planted model, a pure function of the rows."""
    return (np.asarray(X @ w).ravel() > 0).astype(np.int64)


def _vm_hwm(pid="self"):
    """Peak resident memory of process ``pid``, in bytes: VmHWM of /proc/<pid>/status.

    Not ``ru_maxrss``: on Linux it survives fork and exec, so a worker spawned from a
    driver that once held 1 GB reports 1 GB whatever it used itself (measured: a
    child spawned from a parent holding 800 MB has ru_maxrss 830 MB and VmHWM 28 MB).
    """
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
    except OSError:  # pragma: no cover - not Linux
        pass
    if pid != "self":  # pragma: no cover
        return float("nan")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _worker_cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _worker_peaks(client):
    """{worker pid: VmHWM} read by the driver from /proc/<pid>/status of each worker
    process (the processes the nannies spawned; a LocalCluster runs on this host)."""
    import os

    return {pid: _vm_hwm(pid) for pid in sorted(client.run(os.getpid).values())}


def _gib(peaks):
    if peaks is None:
        return ""
    return ", ".join(f"{p / 2**30:.2f} GiB" for p in peaks.values())


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10**7)
    parser.add_argument("--d", type=int, default=2**20)
    parser.add_argument("--nnz", type=int, default=16)
    parser.add_argument("--chunk-rows", type=int, default=250_000)
    parser.add_argument("--in-memory-n", type=int, default=2_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--op-n", type=int, default=10**6,
                        help="rows of the output-perturbation comparison (0: skip it)")
    parser.add_argument("--op-d", type=int, default=2**18)
    parser.add_argument("--op-chunk-rows", type=int, default=125_000)
    parser.add_argument("--part", choices=("dask", "digest", "spark", "cyclic"),
                        default="dask",
                        help="dask: the fits above; digest: the multiset row hashing; "
                        "spark: the Spark fits; cyclic: large-batch DPCyclicSGD")
    parser.add_argument("--cyclic-n", type=int, default=400_000)
    parser.add_argument("--cyclic-d", type=int, default=2**16)
    parser.add_argument("--cyclic-batch", type=int, default=20_000)
    parser.add_argument("--cyclic-epochs", type=int, default=2)
    parser.add_argument("--digest-n", type=int, default=100_000)
    parser.add_argument("--spark-n", type=int, default=1_000_000)
    parser.add_argument("--rows-per-unit", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.part == "digest":
        return multiset_digest(args)
    if args.part == "spark":
        return spark_fits(args)
    if args.part == "cyclic":
        return cyclic_sgd(args)

    from skdpsparse.distributed import fit_distributed, fit_sparse_mean_in_memory
    from skdpsparse.mean import DPSparseMeanEstimator

    def est():
        return DPSparseMeanEstimator(epsilon=1.0, delta=1e-6, sparsity=args.nnz,
                                     method="threshold", random_state=0)

    print(f"sparse mean: d = {args.d}, {args.nnz} nonzeros per row, chunks of "
          f"{args.chunk_rows} rows, {args.workers} workers x 1 thread")
    rows = []
    m = min(args.in_memory_n, args.n)
    X = in_memory_matrix(m, args.d, args.nnz, args.chunk_rows, args.seed)
    small = X[:1000]  # warm up: the compiled kernels' cache load
    est().fit(small), fit_sparse_mean_in_memory(est(), small)
    fitted, wall, cpu = _timed(lambda: est().fit(X))
    rows.append(("in memory, estimator.fit", m, wall, cpu, None))
    core, wall, cpu = _timed(lambda: fit_sparse_mean_in_memory(est(), X))
    rows.append(("in memory, distributed core", m, wall, cpu, None))
    X = small = None  # free the in-memory matrix before the cluster runs
    for n in sorted({m, args.n}):
        Xd = dask_matrix(n, args.d, args.nnz, args.chunk_rows, args.seed)
        with fresh_client(args) as client:  # fresh processes: fresh peak-memory counters
            # Warm up: imports and the compiled kernels' cache load, on every worker.
            fit_distributed(est(), dask_matrix(2 * args.workers * 100, args.d, args.nnz,
                                               100, args.seed + 1))
            before = client.run(_worker_cpu)
            dist, wall, cpu = _timed(lambda: fit_distributed(est(), Xd))
            after = client.run(_worker_cpu)
            peaks = _worker_peaks(client)
        worker_cpu = sum(after[w] - before[w] for w in after)
        rows.append((f"dask, {args.workers} workers", n, wall, cpu + worker_cpu, peaks))
        if n == m:
            same = np.array_equal(dist.mean_, core.mean_)
            same_estimator = np.array_equal(dist.mean_, fitted.mean_)
    print(f"{'fit':32s} {'n':>11s} {'wall s':>8s} {'CPU s':>8s}  peak per worker (VmHWM)")
    for name, n, wall, cpu, peaks in rows:
        print(f"{name:32s} {n:11d} {wall:8.2f} {cpu:8.2f}  {_gib(peaks)}")
    base = rows[0][2]
    for name, n, wall, _, _ in rows[2:]:
        print(f"wall ratio {name} (n={n}) / in-memory fit (n={m}): {wall / base:.2f}")
    print(f"distributed == in-memory core at n={m}, bit for bit: {same}")
    print(f"distributed == in-memory estimator.fit at n={m}, bit for bit: "
          f"{same_estimator}")
    if args.op_n:
        output_perturbation(args)


@contextlib.contextmanager
def fresh_client(args):
    """A new LocalCluster (fresh worker processes) and its client."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None, memory_limit=0,
                      silence_logs=40) as cluster, Client(cluster) as client:
        yield client


def output_perturbation(args):
    from skdpsparse.distributed import _output_perturbation
    from skdpsparse.linear_model import DPOutputPerturbationClassifier

    def est():
        return DPOutputPerturbationClassifier(epsilon=1.0, delta=1e-6, sparsity=args.nnz,
                                              classes=[0, 1], random_state=0)

    n, d, rows = args.op_n, args.op_d, args.op_chunk_rows
    w = planted_model(d, args.seed)
    print(f"\noutput perturbation (logistic): n = {n}, d = {d}, {args.nnz} nonzeros per "
          f"row, chunks of {rows} rows")
    X = in_memory_matrix(n, d, args.nnz, rows, args.seed)
    y = labels_of(X, w)
    est().fit(X[:2000], y[:2000])  # warm up
    ref, wall_mem, cpu_mem = _timed(lambda: est().fit(X, y))
    X = y = None
    Xd = dask_matrix(n, d, args.nnz, rows, args.seed)
    yd = Xd.map_blocks(labels_of, w, drop_axis=1, dtype=np.int64,
                       meta=np.array([], dtype=np.int64))
    passes = []
    original = _output_perturbation.DaskRows.loss_gradient

    def counted(self, *a):
        passes.append(1)
        return original(self, *a)

    with fresh_client(args) as client:
        Xs = dask_matrix(400, d, args.nnz, 100, args.seed + 1)  # warm up every worker
        est().fit(Xs, Xs.map_blocks(labels_of, w, drop_axis=1, dtype=np.int64,
                                    meta=np.array([], dtype=np.int64)))
        _output_perturbation.DaskRows.loss_gradient = counted
        try:
            before = client.run(_worker_cpu)
            dist, wall, cpu = _timed(lambda: est().fit(Xd, yd))
            after = client.run(_worker_cpu)
            peaks = _worker_peaks(client)
        finally:
            _output_perturbation.DaskRows.loss_gradient = original
    worker_cpu = sum(after[k] - before[k] for k in after)
    print(f"{'fit':32s} {'n':>11s} {'wall s':>8s} {'CPU s':>8s}  peak per worker (VmHWM)")
    print(f"{'in memory, estimator.fit':32s} {n:11d} {wall_mem:8.2f} {cpu_mem:8.2f}")
    print(f"{'dask, ' + str(args.workers) + ' workers':32s} {n:11d} {wall:8.2f} "
          f"{cpu + worker_cpu:8.2f}  {_gib(peaks)}")
    print(f"wall ratio dask / in memory: {wall / wall_mem:.2f}; distributed passes "
          f"(loss and gradient): {len(passes)}")
    same = (np.array_equal(dist.coef_, ref.coef_)
            and np.array_equal(dist.intercept_, ref.intercept_))
    print(f"distributed == in-memory estimator.fit, bit for bit: {same}")


def cyclic_sgd(args):
    """Large-batch DPCyclicSGD: the dask fit (one round trip per step) against the
    in-memory ``shuffle=False`` fit of the same rows, interleaved."""
    from skdpsparse.distributed import fit_distributed
    from skdpsparse.linear_model import DPCyclicSGD

    n, d, b = args.cyclic_n, args.cyclic_d, args.cyclic_batch
    rows = b * max(1, (n // args.workers // 2) // b)  # chunks a multiple of b

    def est():
        return DPCyclicSGD(epsilon=1.0, batch_size=b, epochs=args.cyclic_epochs,
                           shuffle=False, classes=[0, 1], random_state=0)

    w = planted_model(d, args.seed)
    X = in_memory_matrix(n, d, args.nnz, rows, args.seed)
    y = labels_of(X, w)
    Xd = dask_matrix(n, d, args.nnz, rows, args.seed)
    yd = Xd.map_blocks(labels_of, w, drop_axis=1, dtype=np.int64,
                       meta=np.array([], dtype=np.int64))
    print(f"DPCyclicSGD (logistic, shuffle=False): n = {n}, d = {d}, {args.nnz} nonzeros "
          f"per row, b = {b}, {args.cyclic_epochs} passes, chunks of {rows} rows, "
          f"{args.workers} workers x 1 thread")
    mem, dist = [], []
    with fresh_client(args):
        ref = est().fit(X, y)  # warm up both (compiled kernels on every worker)
        fitted = fit_distributed(est(), Xd, yd)
        for _ in range(args.rounds):
            ref, wall, _ = _timed(lambda: est().fit(X, y))
            mem.append(wall)
            fitted, wall, _ = _timed(lambda: fit_distributed(est(), Xd, yd))
            dist.append(wall)
    m, t = float(np.median(mem)), float(np.median(dist))
    steps = fitted.n_steps_
    print(f"in memory: {m:.2f} s; dask: {t:.2f} s ({steps} steps, "
          f"{1e3 * t / steps:.0f} ms per step); ratio dask / in memory (medians of "
          f"{args.rounds} interleaved rounds): {t / m:.2f}")
    same = (np.array_equal(fitted.coef_, ref.coef_)
            and np.array_equal(fitted.intercept_, ref.intercept_))
    print(f"distributed == in-memory estimator.fit, bit for bit: {same}")


def multiset_digest(args):
    """CPU µs per row of the multiset digest (compiled, hashlib), the block digest and
    the bounded sum, interleaved; one thread each."""
    from skdpsparse._kernels.fixed_point import bounded_fixed_sum
    from skdpsparse.utils import _digest

    n = args.digest_n
    X = make_block(0, n, args.d, args.nnz, args.seed)
    cases = {
        "multiset, compiled BLAKE2b": lambda A: _digest.row_multiset_part(A, n_threads=1),
        "multiset, hashlib loop": _digest._row_multiset_part_hashlib,
        "block digest (positional)": lambda A: _digest.chunk_digest(A, 0, A.shape[0],
                                                                    n_threads=1),
        "bounded exact sum": lambda A: bounded_fixed_sum(
            (A.indptr, A.indices, A.data), args.d, 1.0, float(np.sqrt(args.nnz)), 30),
    }
    warm = X[:64]
    for fn in cases.values():  # compile or load every kernel first
        fn(warm)
    same = _digest.row_multiset_part(X) == _digest._row_multiset_part_hashlib(X)
    times = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, fn in cases.items():
            cpu = time.process_time()
            fn(X)
            times[name].append((time.process_time() - cpu) / n * 1e6)
    print(f"multiset digest: n = {n} rows, d = {args.d}, {args.nnz} nonzeros, one thread, "
          f"{args.rounds} interleaved rounds (CPU µs per row: median, min)")
    med = {name: float(np.median(t)) for name, t in times.items()}
    for name, t in times.items():
        print(f"{name:30s} {med[name]:7.3f} {min(t):7.3f}   "
              f"10^7 rows: {med[name] * 10:7.1f} CPU s")
    ratios = [a / b for a, b in zip(times["multiset, hashlib loop"],
                                    times["multiset, compiled BLAKE2b"])]
    print(f"hashlib / compiled, per round: {', '.join(f'{r:.1f}' for r in ratios)}")
    sums = [a / b for a, b in zip(times["multiset, compiled BLAKE2b"],
                                  times["bounded exact sum"])]
    print(f"compiled multiset / bounded sum, per round: {', '.join(f'{r:.1f}' for r in sums)}")
    print(f"compiled == hashlib value: {same}")


def _write_parquet(path, n, args):
    """The generated rows (and unit ids) as Parquet files of ``--chunk-rows`` rows;
    returns the in-memory matrix and the ids."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    X = in_memory_matrix(n, args.d, args.nnz, args.chunk_rows, args.seed)
    units = max(1, n // args.rows_per_unit)
    ids = np.random.default_rng([args.seed, 7]).integers(0, units, n)
    for k, start in enumerate(range(0, n, args.chunk_rows)):
        stop = min(n, start + args.chunk_rows)
        part = X[start:stop]
        offsets = pa.array((part.indptr - part.indptr[0]).astype(np.int32))
        pq.write_table(pa.table({
            "user": pa.array(ids[start:stop]),
            "indices": pa.ListArray.from_arrays(offsets, pa.array(part.indices)),
            "values": pa.ListArray.from_arrays(offsets, pa.array(part.data))}),
            f"{path}/part-{k:05d}.parquet")
    return X, ids


def spark_fits(args):
    import os
    import sys
    import tempfile

    from pyspark.sql import SparkSession

    from skdpsparse.distributed import fit_distributed, fit_sparse_mean_units_in_memory
    from skdpsparse.mean import DPSparseMeanEstimator

    def est():
        return DPSparseMeanEstimator(epsilon=1.0, delta=1e-6, sparsity=args.nnz,
                                     method="threshold", random_state=0)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(f"local[{args.workers}]")
             .appName("bench-distributed").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", str(2 * args.workers))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    n, d = args.spark_n, args.d
    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(f"{tmp}/small")
        os.mkdir(f"{tmp}/data")
        _write_parquet(f"{tmp}/small", 2000, args)
        X, ids = _write_parquet(f"{tmp}/data", n, args)
        small = spark.read.parquet(f"{tmp}/small")
        frame = spark.read.parquet(f"{tmp}/data")
        rows_only = frame.select("indices", "values")
        cases = {
            "in memory, estimator.fit": lambda: est().fit(X),
            "in memory, user level": lambda: fit_sparse_mean_units_in_memory(est(), X, ids),
            "spark, multiset key": lambda: fit_distributed(est(), rows_only, n_features=d),
            "spark, positional key": lambda: fit_distributed(
                est(), rows_only, n_features=d, row_order="partitions"),
            "spark, user level": lambda: fit_distributed(est(), frame, n_features=d,
                                                         privacy_unit="user"),
        }
        # warm up: the Python workers, their imports and the kernels' cache load
        fit_distributed(est(), small.select("indices", "values"), n_features=d)
        fit_distributed(est(), small, n_features=d, privacy_unit="user")
        times = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, fn in cases.items():
                wall = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - wall)
    spark.stop()
    print(f"spark: n = {n}, d = {d}, {args.nnz} nonzeros, {len(np.unique(ids))} units, "
          f"local[{args.workers}], {args.rounds} interleaved rounds (wall s)")
    base = times["in memory, estimator.fit"]
    for name, t in times.items():
        ratios = ", ".join(f"{a / b:.2f}" for a, b in zip(t, base))
        print(f"{name:28s} median {np.median(t):7.2f}   / in-memory fit: {ratios}")


if __name__ == "__main__":
    main()
