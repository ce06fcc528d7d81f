#!/usr/bin/python3
"""Mixed precision: training throughput in f32 and bf16, mirra next to PyTorch and TensorFlow, in one run.

For each model (MLP, CNN, ResNet-20) it runs `mirra bench training` in f32 and with
`--mixed-precision bf16`, on one device and Mirrored over cpu:0, cpu:1 (2 threads), next to the same
models and settings in bf16 on the peers: PyTorch under torch.autocast("cpu", torch.bfloat16) with 1
and 2 threads and with DistributedDataParallel over 2 processes (convolutional models also in
channels-last memory), TensorFlow under Keras's "mixed_bfloat16" policy with intra-op threads 1 and 2
and MirroredStrategy over 2 logical CPUs (bench/peers/; each at its fastest, as in
training_vs_pytorch.py and training_vs_tensorflow.py). Each run is a process of its own;
configurations are interleaved and repeated; medians are reported with two ratios per model and
placement: mirra bf16 over mirra f32, and mirra bf16 over the faster peer in bf16 (>1: mirra faster).

TensorFlow comes from PyPI into the virtual environment training_vs_tensorflow.py uses (--venv, default
build/tf-venv, made on first use); PyTorch from the system python3.
Usage: bench/mixed_precision_vs_peers.py [--models mlp,cnn,resnet20] [--repeats 3] [--mirra PATH] [--venv PATH]
"""
import argparse
import json
import os
import sys

import peer_runs
from peer_runs import best_of, summarise

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = "mixed_precision_vs_peers"
STEPS = {"mlp": 400, "cnn": 60, "resnet20": 20}
# PyTorch also runs these in channels-last memory, its faster layout on a CPU (its best counting).
CONVOLUTIONAL = {"cnn", "resnet20"}
STEPS_PER_CALL = 10  # TensorFlow's fastest loop: several steps per tf.function call


def commands(model, mirra, tensorflow, torch):
    steps = ["--steps", str(STEPS[model])]
    bench = [mirra, "bench", "training", "--model", model, "--threads", "2"]
    one_device, mirrored = {}, {}
    for precision in ("off", "bf16"):
        name = "f32" if precision == "off" else "bf16"
        one_device[f"mirra_{name}"] = bench + ["--mixed-precision", precision] + steps
        mirrored[f"mirra_{name}"] = bench + ["--strategy", "mirrored", "--mixed-precision", precision] + steps
    for threads in (1, 2):
        one_device[f"pytorch_bf16_threads_{threads}"] = torch + [model, "--bf16", "--threads", str(threads)] + steps
        if model in CONVOLUTIONAL:
            one_device[f"pytorch_bf16_threads_{threads}_channels_last"] = torch + [
                model, "--bf16", "--threads", str(threads), "--channels-last"] + steps
        one_device[f"tensorflow_bf16_intra_{threads}"] = tensorflow + [
            model, "--bf16", "--intra", str(threads), "--inter", "1", "--steps-per-call", str(STEPS_PER_CALL)] + steps
        mirrored[f"tensorflow_bf16_mirrored_intra_{threads}"] = tensorflow + [
            model, "--bf16", "--mirrored", "2", "--intra", str(threads), "--inter", "2",
            "--steps-per-call", str(STEPS_PER_CALL)] + steps
    mirrored["pytorch_bf16_ddp_2"] = torch + [model, "--bf16", "--ddp", "2", "--threads", "1"] + steps
    if model in CONVOLUTIONAL:
        mirrored["pytorch_bf16_ddp_2_channels_last"] = torch + [
            model, "--bf16", "--ddp", "2", "--threads", "1", "--channels-last"] + steps
    return one_device, mirrored


def compare(section):
    peers = [name for name in section if not name.startswith("mirra_")]
    best_peer = best_of(section, peers)
    bf16, f32 = section["mirra_bf16"]["examples_per_s"], section["mirra_f32"]["examples_per_s"]
    return {"configs": section, "best_peer_bf16": best_peer,
            "bf16_over_f32": round(bf16 / f32, 3),
            "bf16_over_best_peer_bf16": round(bf16 / section[best_peer]["examples_per_s"], 3)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mirra", default=os.path.join(HERE, "..", "build", "release", "tools", "mirra", "mirra"))
    parser.add_argument("--venv", default=os.path.join(HERE, "..", "build", "tf-venv"))
    args = parser.parse_args()
    if not os.access(args.mirra, os.X_OK):
        sys.exit(f"{DRIVER}: no runner at {args.mirra}; build first (scripts/test.sh or scripts/demo.sh)")
    peer_runs.require_time(DRIVER)
    tensorflow = [peer_runs.tensorflow_python(args.venv, DRIVER), os.path.join(HERE, "peers", "tf_training.py")]
    torch = ["/usr/bin/python3", os.path.join(HERE, "peers", "torch_training.py")]

    report = {"benchmark": "training throughput in f32 and bf16, Fashion-MNIST, global batch 128, SGD momentum 0.9",
              "window": "examples/s over the timed steps after 20 warm-up steps; medians over repeats",
              "models": {}}
    for model in args.models.split(","):
        one_device, mirrored = commands(model, args.mirra, tensorflow, torch)
        every = {("one_device", name): command for name, command in one_device.items()}
        every.update({("mirrored", name): command for name, command in mirrored.items()})
        runs = {key: [] for key in every}
        for _ in range(args.repeats):
            for key, command in every.items():
                runs[key].append(peer_runs.measure(command, DRIVER))
        report["mirra_onednn"] = next(r[0]["onednn"] for r in runs.values() if r[0].get("framework") == "mirra")
        report["models"][model] = {
            placement: compare({name: summarise(runs[(placement, name)]) for name in names})
            for placement, names in (("one_device", one_device), ("mirrored", mirrored))}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
