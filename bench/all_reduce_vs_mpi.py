#!/usr/bin/python3
"""All-reduce next to its bounds and peers, in one run.

In process (default): runs `mirra bench allreduce` (mirra's AllReduce over N logical devices, and the
streaming-memory bound measured in the same process: 2 x N x size bytes at the in-place a += b
bandwidth), then OpenMPI's MPI_Allreduce between N processes on this host
(bench/peers/mpi_allreduce.cc, built as mirra-mpi-allreduce-peer), for N in 2 and 4 and sizes 1 to
256 MiB. Per size: mirra's time, the bound, the fraction of the bound reached, MPI's time and the
speed-up over MPI.

Across workers (--across-workers): runs `mpirun -np W mirra bench allreduce --across-workers` (an
all-reduce (a rank per local replica) in a session on every worker as multi_worker_mirrored runs it: local replicas summed in
process, then MPI_Iallreduce across workers; the slowest worker's time) next to raw MPI_Allreduce
between as many processes: W workers x 1 replica against W processes (target: at least 0.9x MPI's
speed), and 2 workers x 2 local replicas against flat MPI over 4 processes, sizes 1 to 64 MiB.

Prints one JSON object. Needs: a built tree (build/release, or --build DIR) with MPI found by CMake,
and mpirun (openmpi-bin).
Usage: bench/all_reduce_vs_mpi.py [--build DIR] [--replicas 2,4] [--sizes-mib 1,4,16,64,256]
       bench/all_reduce_vs_mpi.py --across-workers [--workers 2] [--sizes-mib 1,4,16,64]
"""
import argparse
import json
import os
import shutil
import sys

from peer_runs import built_programs, run

HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


DRIVER = "all_reduce_vs_mpi"


def reports(command):
    """The JSON objects command prints, one a line."""
    return [json.loads(line) for line in run(command, DRIVER).splitlines() if line.startswith("{")]


def across_workers(args, mirra, peer, sizes):
    def mirra_ms(workers, replicas):
        report = reports(MPIRUN + ["-np", str(workers), mirra, "bench", "allreduce", "--across-workers", "--threads", "1",
                               "--replicas", str(replicas), "--sizes-mib"] + sizes)[0]
        return {r["mib"]: r["ms"] for r in report["results"]}

    def mpi_ms(processes):
        return {line["mib"]: line["ms"] for line in reports(MPIRUN + ["-np", str(processes), peer] + sizes)}

    results = []
    for workers, replicas, processes in [(int(w), 1, int(w)) for w in args.workers.split(",")] + [(2, 2, 4)]:
        ours, theirs = mirra_ms(workers, replicas), mpi_ms(processes)
        for mib in (int(s) for s in sizes):
            results.append({"workers": workers, "replicas_per_worker": replicas, "mpi_processes": processes, "mib": mib,
                            "ms": ours[mib], "mpi_allreduce_ms": theirs[mib],
                            "speed_vs_mpi": round(theirs[mib] / ours[mib], 3)})
    print(json.dumps({"benchmark": "cross-worker all-reduce (sum, f32) vs OpenMPI MPI_Allreduce",
                      "peer": "MPI_Allreduce in place, best of 5, slowest rank", "results": results}, indent=1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(HERE, "..", "build", "release"))
    parser.add_argument("--replicas", default="2,4")
    parser.add_argument("--sizes-mib")
    parser.add_argument("--threads", default="2")
    parser.add_argument("--across-workers", action="store_true")
    parser.add_argument("--workers", default="2")
    args = parser.parse_args()
    mirra, peer = built_programs(args.build, DRIVER, ["tools/mirra/mirra", "bench/mirra-mpi-allreduce-peer"],
                                 "build first (the peer needs libopenmpi-dev)")
    if not shutil.which("mpirun"):
        sys.exit("all_reduce_vs_mpi: mpirun is missing (apt-get install openmpi-bin)")

    if args.across_workers:
        return across_workers(args, mirra, peer, (args.sizes_mib or "1,4,16,64").split(","))
    sizes = (args.sizes_mib or "1,4,16,64,256").split(",")
    report = reports([mirra, "bench", "allreduce", "--threads", args.threads, "--replicas"] + args.replicas.split(",") +
                 ["--sizes-mib"] + sizes)[0]
    mpi = {}
    for n in args.replicas.split(","):
        for line in reports(MPIRUN + ["-np", n, peer] + sizes):
            mpi[(line["ranks"], line["mib"])] = line["ms"]
    for result in report["results"]:
        mpi_ms = mpi.get((result["replicas"], result["mib"]))
        result["mpi_allreduce_ms"] = mpi_ms
        result["speedup_over_mpi"] = round(mpi_ms / result["ms"], 2) if mpi_ms else None
        result["fraction_of_bound"] = round(result["fraction_of_bound"], 3)
    report["peers"] = "streaming bound measured in process; OpenMPI MPI_Allreduce (float sum, in place) across processes"
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
