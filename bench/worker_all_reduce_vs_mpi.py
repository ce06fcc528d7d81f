#!/usr/bin/python3
"""The cross-worker all-reduce next to raw MPI_Allreduce, in one run.

Runs `mpirun -np W mirra bench allreduce --across-workers` (an AllReduce node in a Session on every
worker, local replicas summed in process, then MPI_Iallreduce across workers by the workers'
collective; the slowest worker's time) and OpenMPI's MPI_Allreduce between the same number of
processes (bench/peers/mpi_allreduce.cc, built as mirra-mpi-allreduce-peer), for sizes 1 to 64 MiB:
  - flat: W workers x 1 replica against MPI over W processes (target: at least 0.9x MPI's speed);
  - hierarchical: 2 workers x 2 local replicas against flat MPI over 4 processes.
Prints one JSON object: per case and size, mirra's ms, MPI's ms and MPI's time over mirra's.

Needs: a built tree (build/release, or --build DIR) with MPI found by CMake, and mpirun (openmpi-bin).
Usage: bench/worker_all_reduce_vs_mpi.py [--build DIR] [--workers 2] [--sizes-mib 1,4,16,64]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def run(command):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"worker_all_reduce_vs_mpi: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(HERE, "..", "build", "release"))
    parser.add_argument("--workers", default="2")
    parser.add_argument("--sizes-mib", default="1,4,16,64")
    parser.add_argument("--threads", default="1")
    args = parser.parse_args()
    mirra = os.path.join(args.build, "tools", "mirra", "mirra")
    peer = os.path.join(args.build, "bench", "mirra-mpi-allreduce-peer")
    for path in (mirra, peer):
        if not os.access(path, os.X_OK):
            sys.exit(f"worker_all_reduce_vs_mpi: {path} is missing; build first (the peer needs libopenmpi-dev)")
    if not shutil.which("mpirun"):
        sys.exit("worker_all_reduce_vs_mpi: mpirun is missing (apt-get install openmpi-bin)")
    sizes = args.sizes_mib.split(",")

    def mirra_ms(workers, replicas):
        report = run(MPIRUN + ["-np", str(workers), mirra, "bench", "allreduce", "--across-workers", "--threads", args.threads,
                               "--replicas", str(replicas), "--sizes-mib"] + sizes)[0]
        return {r["mib"]: r["ms"] for r in report["results"]}

    def mpi_ms(processes):
        return {line["mib"]: line["ms"] for line in run(MPIRUN + ["-np", str(processes), peer] + sizes)}

    cases = [(int(w), 1, int(w)) for w in args.workers.split(",")] + [(2, 2, 4)]
    results = []
    for workers, replicas, processes in cases:
        ours, theirs = mirra_ms(workers, replicas), mpi_ms(processes)
        for mib in (int(s) for s in sizes):
            results.append({"workers": workers, "replicas_per_worker": replicas, "mpi_processes": processes, "mib": mib,
                            "ms": ours[mib], "mpi_allreduce_ms": theirs[mib],
                            "speed_vs_mpi": round(theirs[mib] / ours[mib], 3)})
    print(json.dumps({"benchmark": "cross-worker all-reduce (sum, f32) vs OpenMPI MPI_Allreduce",
                      "peer": "mirra-mpi-allreduce-peer: MPI_Allreduce in place, best of 5, slowest rank",
                      "results": results}, indent=1))


if __name__ == "__main__":
    main()
