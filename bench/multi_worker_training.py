#!/usr/bin/python3
"""Training across worker processes, mirra next to PyTorch DDP and to Mirrored in one process, in one run.

For each model (MLP, CNN), interleaved and repeated:
  - mirra multi_worker_mirrored: `mpirun -np 2 mirra train` with one logical CPU device and one thread
    per worker (global batch 128, 64 examples per worker);
  - the same with the gradients all-reduced in bf16 (a config with all_reduce.compression: bf16);
  - the same with sharded optimizer state (--shard-optimizer-state: each worker's replica keeps half of
    the momentum slots), with the slot bytes per replica from worker 0's summary;
  - mirra mirrored: one process, Mirrored over cpu:0, cpu:1, two threads (the same global batch);
  - PyTorch DDP (gloo): bench/peers/torch_training.py --ddp 2, one thread per process, plain and with
    ZeroRedundancyOptimizer (--zero, PyTorch's ZeRO stage 1), the sharded run's peer.
mirra's throughput is taken from its --metrics lines over the steps after the first 20 (the peer's
window). Prints one JSON object: medians of examples/s; multi-worker over DDP (target >= 1.2) and over
Mirrored in one process; bf16 all-reduce over f32; sharded optimizer state over unsharded (throughput
and slot bytes per replica) and over DDP with ZeRO.

Needs: a built tree (build/release, or --build DIR) with MPI, mpirun, and Debian's python3-torch.
Usage: bench/multi_worker_training.py [--build DIR] [--models mlp,cnn] [--repeats 3]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

from peer_runs import example_models_driver, last_json, run, window_rate

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = {"mlp": 400, "cnn": 40}
WARMUP = 20


DRIVER = "multi_worker_training"


def mirra_examples_per_s(command, metrics, summaries=None):
    """Runs a `mirra train ... --metrics FILE` command; examples/s over the steps after WARMUP. Appends
    its JSON summary (worker 0's) to `summaries` when given."""
    summary = last_json(run(command + ["--metrics", metrics], DRIVER))
    if summaries is not None:
        summaries.append(summary)
    return window_rate(metrics, WARMUP)


def main():
    args, mirra, examples = example_models_driver(DRIVER, os.path.join(HERE, "..", "build", "release"))
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode != 0:
        sys.exit("multi_worker_training: PyTorch is missing (apt-get install python3-torch)")

    report = {"benchmark": "data-parallel training over 2 workers, Fashion-MNIST, global batch 128, SGD momentum 0.9",
              "window": f"examples/s after {WARMUP} warm-up steps; medians over repeats", "models": {}}
    with tempfile.TemporaryDirectory() as work:
        bf16_config = os.path.join(work, "bf16_all_reduce.json")
        with open(bf16_config, "w") as f:
            json.dump({"all_reduce": {"compression": "bf16"}}, f)
        for model in args.models.split(","):
            model_file = os.path.join(work, model + ".mirra")
            run([examples, "write", model, model_file], DRIVER)
            train = [mirra, "train", model_file, "--steps", str(STEPS[model]), "--batch-size", "128", "--json"]
            summaries = {"unsharded": [], "sharded": []}
            commands = {
                "mirra_multi_worker": lambda m: mirra_examples_per_s(
                    ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"] + train +
                    ["--strategy", "multi_worker_mirrored", "--devices", "cpu:0", "--threads", "1"], m,
                    summaries["unsharded"]),
                "mirra_multi_worker_sharded": lambda m: mirra_examples_per_s(
                    ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"] + train +
                    ["--strategy", "multi_worker_mirrored", "--devices", "cpu:0", "--threads", "1",
                     "--shard-optimizer-state"], m, summaries["sharded"]),
                "mirra_multi_worker_bf16_all_reduce": lambda m: mirra_examples_per_s(
                    ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"] + train +
                    ["--config", bf16_config, "--strategy", "multi_worker_mirrored", "--devices", "cpu:0", "--threads", "1"], m),
                "mirra_mirrored": lambda m: mirra_examples_per_s(
                    train + ["--strategy", "mirrored", "--devices", "cpu:0,cpu:1", "--threads", "2"], m),
                "pytorch_ddp": lambda m: last_json(run(
                    ["/usr/bin/python3", os.path.join(HERE, "peers", "torch_training.py"), model, "--threads", "1",
                     "--ddp", "2", "--steps", str(STEPS[model])], DRIVER))["examples_per_s"],
                "pytorch_ddp_zero": lambda m: last_json(run(
                    ["/usr/bin/python3", os.path.join(HERE, "peers", "torch_training.py"), model, "--threads", "1",
                     "--ddp", "2", "--zero", "--steps", str(STEPS[model])], DRIVER))["examples_per_s"],
            }
            runs = {name: [] for name in commands}
            for _ in range(args.repeats):
                for name, measure in commands.items():
                    runs[name].append(measure(os.path.join(work, "metrics.jsonl")))
            entry = {name: {"examples_per_s": round(statistics.median(r), 1), "runs": [round(x, 1) for x in r]}
                     for name, r in runs.items()}
            ours = entry["mirra_multi_worker"]["examples_per_s"]
            entry["ratio_vs_pytorch_ddp"] = round(ours / entry["pytorch_ddp"]["examples_per_s"], 3)
            entry["ratio_vs_mirrored_one_process"] = round(ours / entry["mirra_mirrored"]["examples_per_s"], 3)
            entry["ratio_bf16_all_reduce_over_f32"] = round(
                entry["mirra_multi_worker_bf16_all_reduce"]["examples_per_s"] / ours, 3)
            sharded = entry["mirra_multi_worker_sharded"]["examples_per_s"]
            entry["ratio_sharded_over_unsharded"] = round(sharded / ours, 3)
            entry["ratio_sharded_vs_pytorch_ddp_zero"] = round(sharded / entry["pytorch_ddp_zero"]["examples_per_s"], 3)
            for kind, found in summaries.items():
                entry[f"slot_bytes_per_replica_{kind}"] = max(found[-1]["optimizer_slot_bytes"].values())
            report["models"][model] = entry
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
