"""Gradient exchange through the dist kvstores against a bare MPI Allreduce of the same buffer.

    mpiexec -n 2 python benchmarks/bench_dist.py            # 10M float32 values, table on rank 0
    mpiexec -n 2 python benchmarks/bench_dist.py --json     # the same, as JSON
    python benchmarks/bench_dist.py --workers 2             # starts mpiexec itself

Every row is the median over --repeats rounds; the rows of one round run back to back (after a
barrier each), so that a noisy machine slows all of them alike. Rows:

- ``mpi_allreduce``: ``COMM_WORLD.Allreduce`` of one 10M-value buffer (the baseline, 1.00x);
- ``sync_one_key`` / ``sync_200_keys``: ``dist_sync`` ``pushpull`` of the same values as one key,
  or as 200 keys of 50k values (how the Trainer calls it: one parameter at a time);
  ``sync_200_keys_one_call``: the 200 keys in one ``pushpull(list_of_keys, list_of_values)``;
- ``sync_2bit_*``: the same with 2bit compression (quantize, Allgather of the packed words,
  decode and sum in rank order);
- ``async_one_key``: ``dist_async`` ``pushpull`` (a round trip with rank 0's parameter server),
  measured last, once the server thread exists.

Bytes: ``payload`` is what one worker hands to MPI per exchange; ``sent~`` estimates what one
rank sends: 2(P-1)/P x payload for an Allreduce (reduce-scatter + allgather), (P-1) x payload for
an Allgather, the payload for a push and rank 0's reply for async. Goal: sync within 1.2x of the
bare Allreduce.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy  # noqa: E402

GOAL = 1.2


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", type=int, default=10_000_000, help="values exchanged")
    parser.add_argument("--keys", type=int, default=200, help="keys of the many-key rows")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threshold", type=float, default=0.5, help="2bit threshold")
    parser.add_argument("--no-async", action="store_true", help="skip the dist_async row")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--workers", type=int, default=None,
                        help="start this many ranks with mpiexec (when not already under it)")
    return parser.parse_args(argv)


def main(argv=None):
    args = _parse(sys.argv[1:] if argv is None else argv)
    from trainer_cli.kvstore import mpi as kvmpi
    if args.workers and not kvmpi.launched_by_mpiexec():
        from trainer_cli.dist_launch import launch
        rest = [a for a in sys.argv[1:] if not a.startswith("--workers")]
        if "--workers" in sys.argv[1:]:
            i = sys.argv.index("--workers")
            rest = sys.argv[1:i] + sys.argv[i + 2:]
        return launch([sys.executable, os.path.abspath(__file__)] + rest, args.workers)

    from trainer_cli import kvstore, nd
    MPI = kvmpi.load_mpi()
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    n, k = args.values, args.keys
    rng = numpy.random.RandomState(rank)
    flat = (rng.randn(n) * 0.3).astype(numpy.float32)
    recv = numpy.empty_like(flat)
    bounds = numpy.linspace(0, n, k + 1).astype(int)
    grad_one = nd.array(flat.copy())
    grads_many = [nd.array(flat[a:b].copy()) for a, b in zip(bounds[:-1], bounds[1:])]

    stores = {}

    def store(name, compressed=False):
        kv = kvstore.create(name)
        if compressed:
            kv.set_gradient_compression({"type": "2bit", "threshold": args.threshold})
        return kv

    sync_one = store("dist_sync")
    sync_one.init(0, nd.zeros((n,)))
    sync_many = store("dist_sync")
    sync_many.init(list(range(k)), [nd.zeros(g.shape) for g in grads_many])
    gc_one = store("dist_sync", compressed=True)
    gc_one.init(0, nd.zeros((n,)))
    gc_many = store("dist_sync", compressed=True)
    gc_many.init(list(range(k)), [nd.zeros(g.shape) for g in grads_many])
    stores.update(sync_one_key=sync_one, sync_200_keys=sync_many, sync_2bit_one_key=gc_one,
                  sync_2bit_200_keys=gc_many)

    rows = {
        "mpi_allreduce": lambda: world.Allreduce(flat, recv, op=MPI.SUM),
        "sync_one_key": lambda: sync_one.pushpull(0, grad_one),
        "sync_200_keys": lambda: [sync_many.pushpull(i, g) for i, g in enumerate(grads_many)],
        "sync_200_keys_one_call": lambda: sync_many.pushpull(list(range(k)), grads_many),
        "sync_2bit_one_key": lambda: gc_one.pushpull(0, grad_one),
        "sync_2bit_200_keys": lambda: [gc_many.pushpull(i, g) for i, g in enumerate(grads_many)],
    }
    stores["sync_200_keys_one_call"] = sync_many
    times, wire = _measure(world, rows, stores, args.repeats, flat.nbytes)
    if not args.no_async:
        # Created last: rank 0's server thread shares the cores with the ranks from then on.
        async_one = store("dist_async")
        async_one.init(0, nd.zeros((n,)))
        stores["async_one_key"] = async_one
        more = {"async_one_key": lambda: async_one.pushpull(0, grad_one)}
        t2, w2 = _measure(world, more, stores, max(3, args.repeats // 3), flat.nbytes,
                          polled_barrier=True)
        times.update(t2)
        wire.update(w2)
    # A row takes as long as its slowest rank. Buffers and our polled waits only: a blocking
    # mpi4py object collective holds the GIL and would starve rank 0's parameter server.
    names = list(times)
    med = numpy.array([statistics.median(times[name]) for name in names])
    worst = numpy.empty_like(med)
    kvmpi.wait(world.Iallreduce(med, worst, op=MPI.MAX), "collecting the timings")
    slowest = dict(zip(names, worst.tolist()))
    # Rank 0 serves its own async requests in-process and sends nothing: report the busiest rank.
    sent = numpy.array([float(wire[name]) for name in names])
    most = numpy.empty_like(sent)
    kvmpi.wait(world.Iallreduce(sent, most, op=MPI.MAX), "collecting the byte counts")
    wire = dict(zip(names, most.tolist()))
    kvmpi.wait(world.Ibarrier(), "the final barrier")
    if rank != 0:
        return 0
    report = _report(args, size, slowest, wire, flat.nbytes)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        _table(report)
    return 0


def _measure(world, rows, stores, repeats, raw_bytes, polled_barrier=False):
    """Per row, the seconds of each round (after a barrier) and the bytes it handed to MPI.

    Rows run in a different order each round (same on every rank), so that no row always
    follows the same neighbour. Once rank 0 hosts a parameter server, barriers are polled: a
    blocking one would keep the server from answering the other ranks.
    """
    from trainer_cli.kvstore import mpi as kvmpi
    times = {name: [] for name in rows}
    wire = {}
    order = numpy.random.RandomState(0)
    names = list(rows)
    for rnd in range(repeats + 1):
        for i in order.permutation(len(names)):
            name = names[i]
            kv = stores.get(name)
            before = kv.wire_bytes if kv is not None else 0
            if polled_barrier:
                kvmpi.wait(world.Ibarrier(), "a barrier between rows")
            else:
                world.Barrier()
            t0 = time.perf_counter()
            rows[name]()
            dt = time.perf_counter() - t0
            if rnd:  # round 0 warms up buffers, tables and MPI connections
                times[name].append(dt)
            wire[name] = (kv.wire_bytes - before) if kv is not None else raw_bytes
    return times, wire


def _sent_estimate(name, payload, size):
    if name.startswith("async"):
        return payload
    if "2bit" in name:
        return (size - 1) * payload
    return 2 * (size - 1) * payload // size


def _report(args, size, med, wire, raw_bytes):
    base = med["mpi_allreduce"]
    rows = []
    for name, seconds in med.items():
        payload = wire[name]
        rows.append({
            "name": name,
            "ms": round(seconds * 1e3, 3),
            "ratio_to_allreduce": round(seconds / base, 3),
            "payload_bytes": int(payload),
            "payload_vs_float32": round(payload / raw_bytes, 4),
            "sent_bytes_estimate": int(_sent_estimate(name, payload, size)),
        })
    sync_rows = [r for r in rows if r["name"] in ("sync_one_key", "sync_200_keys",
                                                  "sync_200_keys_one_call")]
    return {
        "benchmark": "bench_dist",
        "workers": size,
        "values": args.values,
        "keys": args.keys,
        "repeats": args.repeats,
        "threshold_2bit": args.threshold,
        "goal_ratio": GOAL,
        "goal_met": all(r["ratio_to_allreduce"] <= GOAL for r in sync_rows),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "numpy": numpy.__version__},
        "rows": rows,
    }


def _table(report):
    print("dist exchange: %d workers, %d float32 values (%d MB), median of %d rounds"
          % (report["workers"], report["values"], report["values"] * 4 // 10**6, report["repeats"]))
    head = "%-20s %9s %9s %13s %9s %13s" % ("row", "ms", "x bare", "payload B", "vs f32", "sent~ B")
    print(head)
    print("-" * len(head))
    for r in report["rows"]:
        print("%-20s %9.2f %9.2f %13d %9.4f %13d" % (
            r["name"], r["ms"], r["ratio_to_allreduce"], r["payload_bytes"],
            r["payload_vs_float32"], r["sent_bytes_estimate"]))
    print("goal: sync rows within %.1fx of the bare Allreduce: %s"
          % (report["goal_ratio"], "met" if report["goal_met"] else "NOT met"))


if __name__ == "__main__":
    import _calibrate   # the machine, builds and a one-op calibration, under the figures
    raise SystemExit(_calibrate.main_with_record(main))
