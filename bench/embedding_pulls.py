#!/usr/bin/python3
"""Sparse against dense pulls and pushes of an embedding table under the parameter-server strategy.

The embedding_bag example model (a --rows x --width float32 table, 8 ids per example, their mean, a
dense layer to 10 classes) on 1 server and 2 workers, synchronous, global batch 128, random ids:
  - sparse: without staleness each lookup runs on the table's server, so a worker sends its ids and
    its gradient's rows and receives the rows its batch uses;
  - sparse_lazy: the same with --lazy-updates, so the server's momentum updates the rows looked up
    alone (LazyAdam's rule for momentum) instead of every row of the table each step;
  - dense: with staleness 1 a worker's lookups stay its own (it must not wait for the server's step),
    so each step it receives the whole table, as any dense pull does, and sends its whole gradient
    (which the server's dense momentum reads; under --lazy-updates it would send the rows).
And the all-reduce alternative on the same two processes: multi_worker_mirrored (`mpirun -np 2`),
whose workers sum the table's whole gradient every step (an all-reduce has no rows to send).
The bytes are worker 0's tensor bytes per step (its JSON summary), the rates the workers' examples/s
summed after the first steps. Prints one JSON object with the ratios.

Needs: a built tree (build/release, or --build DIR) with MPI and mpirun, and numpy.
Usage: bench/embedding_pulls.py [--build DIR] [--rows 1000000] [--width 64]
"""
import argparse
import json
import os
import tempfile

import numpy as np

from parameter_server_training import parameter_server
from peer_runs import built_programs, cpu_model, run, window_rate

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = "embedding_pulls"
IDS = 8


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(HERE, "..", "build", "release"))
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--width", type=int, default=64)
    args = parser.parse_args()
    mirra, examples = built_programs(args.build, DRIVER, ["tools/mirra/mirra", "examples/mirra-examples"])
    report = {"benchmark": f"sparse and dense pulls of a {args.rows} x {args.width} embedding table, 1 server and 2 workers, "
                           "synchronous, global batch 128, one thread each",
              "cpu": cpu_model()}
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "embedding_bag.mirra")
        run([examples, "write", "embedding_bag", model, "--vocab", str(args.rows), "--embedding", str(args.width),
             "--context", str(IDS)], DRIVER)
        rng = np.random.default_rng(7)
        ids = rng.integers(0, args.rows, size=(20_000, IDS), dtype=np.int64)
        data = os.path.join(work, "bags.npz")
        np.savez(data, ids=ids, labels=ids[:, 0] % 10)
        metrics = os.path.join(work, "metrics.jsonl")
        for name, steps, warmup, staleness, flags in (("sparse", 60, 20, 0, []), ("sparse_lazy", 200, 50, 0, ["--lazy-updates"]),
                                                      ("dense", 6, 2, 1, [])):
            train = [mirra, "train", model, "--data", data, "--steps", str(steps), "--batch-size", "128", "--threads", "1",
                     "--json", "--strategy", "parameter_server", "--update-mode", "sync", "--staleness", str(staleness)] + flags
            summary, rate = parameter_server(train, metrics, warmup=warmup)
            report[name] = {"examples_per_s": round(rate, 1),  # a worker receives the variables `staleness` more times
                            "worker_0_bytes_received_per_step": summary["bytes_received"] // (summary["steps"] + staleness),
                            "worker_0_bytes_sent_per_step": summary["bytes_sent"] // summary["steps"]}
        mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
        run(mpirun + [mirra, "train", model, "--data", data, "--steps", "6", "--batch-size", "128", "--threads", "1",
                      "--strategy", "multi_worker_mirrored", "--devices", "cpu:0", "--metrics", metrics], DRIVER)
        report["multi_worker_mirrored"] = {"examples_per_s": round(window_rate(metrics, 2), 1)}
    report["table_bytes"] = args.rows * args.width * 4
    report["ratio_dense_over_sparse_bytes_received"] = round(
        report["dense"]["worker_0_bytes_received_per_step"] / report["sparse"]["worker_0_bytes_received_per_step"], 1)
    report["ratio_sparse_over_dense_examples_per_s"] = round(report["sparse"]["examples_per_s"] / report["dense"]["examples_per_s"], 2)
    report["ratio_lazy_over_multi_worker_mirrored_examples_per_s"] = round(
        report["sparse_lazy"]["examples_per_s"] / report["multi_worker_mirrored"]["examples_per_s"], 1)
    report["ratio_lazy_over_sparse_examples_per_s"] = round(report["sparse_lazy"]["examples_per_s"] / report["sparse"]["examples_per_s"], 2)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
