#!/usr/bin/python3
"""Sharded optimizer state (ZeRO stage 1): memory and throughput of Mirrored with Adam, sharded and not.

For each model (MLP, CNN) it runs `mirra bench training --strategy mirrored --optimizer adam` over 2 and
4 logical CPU devices (2 threads), with and without `--shard-optimizer-state`, next to PyTorch's
DistributedDataParallel over 2 processes with Adam, plain and under ZeroRedundancyOptimizer (PyTorch's
ZeRO stage 1; bench/peers/torch_training.py --adam [--zero]). Each run is a process of its own;
configurations are interleaved and repeated; medians are reported. Per configuration: examples/s, the
optimizer slots' bytes on the replica that holds the most (measured from the values the session holds;
PyTorch's: process 0's optimizer state), the largest per-device allocator peak (mirra) and the peak RSS.
Ratios: sharded over unsharded for throughput and for slot bytes per replica (about 1/N expected), and
mirra's sharded throughput over PyTorch ZeRO's.

Usage: bench/sharded_state_vs_unsharded.py [--models mlp,cnn] [--repeats 3] [--mirra PATH]
"""
import argparse
import json
import os
import statistics
import sys

import peer_runs

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = "sharded_state_vs_unsharded"
STEPS = {"mlp": 400, "cnn": 60}


def commands(model, mirra, torch):
    steps = ["--steps", str(STEPS[model])]
    configs = {}
    for replicas in (2, 4):
        devices = ",".join(f"cpu:{r}" for r in range(replicas))
        bench = [mirra, "bench", "training", "--model", model, "--threads", "2", "--strategy", "mirrored",
                 "--devices", devices, "--optimizer", "adam"] + steps
        configs[f"mirra_unsharded_{replicas}"] = bench
        configs[f"mirra_sharded_{replicas}"] = bench + ["--shard-optimizer-state"]
    peer = torch + [model, "--adam", "--ddp", "2", "--threads", "1"] + steps
    configs["pytorch_ddp_2"] = peer
    configs["pytorch_zero_2"] = peer + ["--zero"]
    return configs


def summary(runs):
    """Medians of a configuration's runs."""
    first = runs[0]
    result = peer_runs.summarise(runs)
    if "optimizer_slot_bytes" in first:  # mirra: bytes on the replica holding the most
        result["slot_bytes_per_replica"] = statistics.median(max(r["optimizer_slot_bytes"].values()) for r in runs)
        result["allocator_peak_bytes_per_device"] = statistics.median(max(r["allocator_peak_bytes"].values()) for r in runs)
    else:
        result["slot_bytes_per_replica"] = statistics.median(r["optimizer_state_bytes"] for r in runs)
    return result


def ratio(a, b):
    return round(a / b, 3)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mirra", default=os.path.join(HERE, "..", "build", "release", "tools", "mirra", "mirra"))
    args = parser.parse_args()
    if not os.access(args.mirra, os.X_OK):
        sys.exit(f"{DRIVER}: no runner at {args.mirra}; build first (scripts/test.sh or scripts/demo.sh)")
    peer_runs.require_time(DRIVER)
    torch = ["/usr/bin/python3", os.path.join(HERE, "peers", "torch_training.py")]

    report = {"benchmark": "Mirrored training with Adam, sharded optimizer state against unsharded, Fashion-MNIST, "
                           "global batch 128",
              "window": "examples/s over the timed steps after 20 warm-up steps; medians over repeats",
              "models": {}}
    for model in args.models.split(","):
        every = commands(model, args.mirra, torch)
        runs = {name: [] for name in every}
        for _ in range(args.repeats):
            for name, command in every.items():
                runs[name].append(peer_runs.measure(command, DRIVER))
        s = {name: summary(results) for name, results in runs.items()}
        ratios = {}
        for replicas in (2, 4):
            sharded, unsharded = s[f"mirra_sharded_{replicas}"], s[f"mirra_unsharded_{replicas}"]
            ratios[f"{replicas}_replicas"] = {
                "examples_per_s_sharded_over_unsharded": ratio(sharded["examples_per_s"], unsharded["examples_per_s"]),
                "slot_bytes_per_replica_sharded_over_unsharded":
                    ratio(sharded["slot_bytes_per_replica"], unsharded["slot_bytes_per_replica"]),
                "allocator_peak_sharded_over_unsharded":
                    ratio(sharded["allocator_peak_bytes_per_device"], unsharded["allocator_peak_bytes_per_device"])}
        ratios["pytorch_zero_over_ddp_slot_bytes"] = ratio(s["pytorch_zero_2"]["slot_bytes_per_replica"],
                                                           s["pytorch_ddp_2"]["slot_bytes_per_replica"])
        ratios["mirra_sharded_2_over_pytorch_zero_2_examples_per_s"] = ratio(s["mirra_sharded_2"]["examples_per_s"],
                                                                            s["pytorch_zero_2"]["examples_per_s"])
        report["models"][model] = {"configs": s, "ratios": ratios}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
