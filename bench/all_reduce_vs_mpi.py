#!/usr/bin/python3
"""In-process all-reduce next to its bounds, in one run.

Runs `mirra bench allreduce` (mirra's AllReduce over N logical devices, and the streaming-memory bound
measured in the same process: 2 x N x size bytes at the in-place a += b bandwidth), then OpenMPI's
MPI_Allreduce between N processes on this host (bench/peers/mpi_allreduce.cc, built as
mirra-mpi-allreduce-peer), for N in 2 and 4 and sizes 1 to 256 MiB. Prints one JSON object: per size,
mirra's time, the bound, the fraction of the bound reached, MPI's time and the speed-up over MPI.

Needs: a built tree (build/release, or --build DIR) with MPI found by CMake, and mpirun (openmpi-bin).
Usage: bench/all_reduce_vs_mpi.py [--build DIR] [--replicas 2,4] [--sizes-mib 1,4,16,64,256]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(command):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"all_reduce_vs_mpi: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(HERE, "..", "build", "release"))
    parser.add_argument("--replicas", default="2,4")
    parser.add_argument("--sizes-mib", default="1,4,16,64,256")
    parser.add_argument("--threads", default="2")
    args = parser.parse_args()
    mirra = os.path.join(args.build, "tools", "mirra", "mirra")
    peer = os.path.join(args.build, "bench", "mirra-mpi-allreduce-peer")
    for path in (mirra, peer):
        if not os.access(path, os.X_OK):
            sys.exit(f"all_reduce_vs_mpi: {path} is missing; build first (the peer needs libopenmpi-dev)")
    if not shutil.which("mpirun"):
        sys.exit("all_reduce_vs_mpi: mpirun is missing (apt-get install openmpi-bin)")

    sizes = args.sizes_mib.split(",")
    report = run([mirra, "bench", "allreduce", "--threads", args.threads, "--replicas"] + args.replicas.split(",") +
                 ["--sizes-mib"] + sizes)[0]
    mpi = {}
    for n in args.replicas.split(","):
        for line in run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", n, peer] + sizes):
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
