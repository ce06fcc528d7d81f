#!/usr/bin/python3
"""Training throughput and peak memory, mirra next to PyTorch, in one run.

For each model (MLP, CNN, ResNet-20 on Fashion-MNIST; ResNet-18 and ResNet-50 on synthetic 224x224x3
images at batch 32) and thread count (1, 2) it runs `mirra bench training` and the PyTorch peer
(bench/peers/torch_training.py, same models, settings, data and timing window; convolutional models
also in channels-last memory, PyTorch's faster layout on a CPU, its best counting), each in its own
process under /usr/bin/time -v, interleaved and repeated; it reports the median examples/s of every
configuration, each framework at its best thread count, the throughput ratio (mirra / PyTorch, >1 is
faster) and the peak-RSS ratio (mirra / PyTorch, <1 is leaner), as one JSON object.

With --mirrored it also trains with MirroredStrategy over cpu:0, cpu:1 (global batch 128, 2 threads)
next to PyTorch DDP (gloo, 2 processes x 1 thread, 64 examples each) and reports Mirrored against
DDP, against mirra on one device and against PyTorch's best single process.

With --baseline PATH it also runs the team's reference PyTorch script (torch_baseline.py, which takes
`{mlp|cnn} single --threads T --steps N`), and PyTorch's figure is the best of both peers.

Needs: a built runner (build/release/tools/mirra/mirra, or --mirra), Debian's python3-torch and time.
Usage: bench/training_vs_pytorch.py [--models mlp,cnn,resnet20,resnet18,resnet50] [--repeats 3] [--mirra PATH] [--baseline PATH]
                                    [--mirrored]
"""
import argparse
import json
import os
import subprocess
import sys

import peer_runs
from peer_runs import summarise

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = {"mlp": 400, "cnn": 40, "resnet20": 40, "resnet18": 4, "resnet50": 3}
# What both sides add for a model: the ImageNet-shaped ResNets train on synthetic images, batch 32.
MODEL_ARGS = {"resnet18": ["--synthetic", "--batch-size", "32", "--warmup-steps", "2"],
              "resnet50": ["--synthetic", "--batch-size", "32", "--warmup-steps", "2"]}
CONVOLUTIONAL = {"cnn", "resnet20", "resnet18", "resnet50"}


def model_args(model):
    return MODEL_ARGS.get(model, [])


def measure(command):
    return peer_runs.measure(command, "training_vs_pytorch")


def mirrored_section(args, model, peers, single):
    """Mirrored over cpu:0, cpu:1 next to DDP over 2 processes, and against the single-device figures."""
    runs = {"mirra_mirrored": [], "pytorch_ddp": []}
    peer = ["/usr/bin/python3", os.path.join(HERE, "peers", "torch_training.py"), model, "--threads", "1", "--ddp", "2",
            "--steps", str(STEPS[model])] + model_args(model)
    ddp = {"pytorch_ddp": peer}
    if model in CONVOLUTIONAL:
        ddp["pytorch_ddp_channels_last"] = peer + ["--channels-last"]
        runs["pytorch_ddp_channels_last"] = []
    if args.baseline:
        ddp["pytorch_baseline_ddp"] = ["/usr/bin/python3", args.baseline, model, "ddp", "--threads", "1",
                                       "--world", "2", "--steps", str(STEPS[model])]
        runs["pytorch_baseline_ddp"] = []
    for _ in range(args.repeats):
        runs["mirra_mirrored"].append(measure([args.mirra, "bench", "training", "--model", model, "--strategy",
                                               "mirrored", "--threads", "2", "--steps", str(STEPS[model])] +
                                              model_args(model)))
        for name, command in ddp.items():
            runs[name].append(measure(command))
    section = {name: summarise(r) for name, r in runs.items()}
    best_ddp = max(ddp, key=lambda name: section[name]["examples_per_s"])
    best_single = max(peers, key=lambda name: single[name]["examples_per_s"])
    mirrored = section["mirra_mirrored"]["examples_per_s"]
    section["ratio_vs_pytorch_ddp"] = round(mirrored / section[best_ddp]["examples_per_s"], 3)
    section["ratio_vs_mirra_one_device"] = round(mirrored / single["mirra"]["examples_per_s"], 3)
    section["ratio_vs_pytorch_best_single_process"] = round(mirrored / single[best_single]["examples_per_s"], 3)
    return section


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--mirrored", action="store_true", help="also Mirrored over 2 devices vs PyTorch DDP")
    parser.add_argument("--baseline", help="a torch_baseline.py-style PyTorch script to measure as well")
    parser.add_argument("--mirra", default=os.path.join(HERE, "..", "build", "release", "tools", "mirra", "mirra"))
    args = parser.parse_args()
    if not os.access(args.mirra, os.X_OK):
        sys.exit(f"training_vs_pytorch: no runner at {args.mirra}; build first (scripts/test.sh or scripts/demo.sh)")
    peer_runs.require_time("training_vs_pytorch")
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode != 0:
        sys.exit("training_vs_pytorch: PyTorch is missing (apt-get install python3-torch)")

    report = {"benchmark": "one-device training throughput, SGD momentum 0.9: Fashion-MNIST at batch 128 (mlp, cnn, "
                           "resnet20), synthetic 224x224x3 images at batch 32 (resnet18, resnet50)",
              "window": "examples/s over the timed steps after 20 warm-up steps (2 for resnet18 and resnet50); "
                        "medians over repeats",
              "models": {}}
    threads = [int(t) for t in args.threads.split(",")]
    for model in args.models.split(","):
        peer = lambda t, model=model: ["/usr/bin/python3", os.path.join(HERE, "peers", "torch_training.py"), model,
                                       "--threads", str(t), "--steps", str(STEPS[model])] + model_args(model)
        peers = {"pytorch": peer}
        if model in CONVOLUTIONAL:
            peers["pytorch_channels_last"] = lambda t, peer=peer: peer(t) + ["--channels-last"]
        if args.baseline:
            peers["pytorch_baseline"] = lambda t, model=model: ["/usr/bin/python3", args.baseline, model, "single",
                                                                "--threads", str(t), "--steps", str(STEPS[model])]
        runs = {(name, t): [] for name in ["mirra"] + list(peers) for t in threads}
        for _ in range(args.repeats):
            for t in threads:
                runs[("mirra", t)].append(measure([args.mirra, "bench", "training", "--model", model, "--threads", str(t),
                                                   "--steps", str(STEPS[model])] + model_args(model)))
                for name, command in peers.items():
                    runs[(name, t)].append(measure(command(t)))
        entry = {}
        for framework in ["mirra"] + list(peers):
            configs = {f"threads_{t}": summarise(runs[(framework, t)]) for t in threads}
            best = max(configs, key=lambda c: configs[c]["examples_per_s"])
            entry[framework] = {"configs": configs, "best": best,
                                "examples_per_s": configs[best]["examples_per_s"],
                                "peak_rss_mib": configs[best]["peak_rss_mib"]}
        entry["pytorch"]["version"] = runs[("pytorch", threads[0])][0]["framework"]
        fastest = max(peers, key=lambda name: entry[name]["examples_per_s"])
        entry["pytorch_best"] = fastest
        entry["throughput_ratio"] = round(entry["mirra"]["examples_per_s"] / entry[fastest]["examples_per_s"], 3)
        entry["memory_ratio"] = round(entry["mirra"]["peak_rss_mib"] / entry[fastest]["peak_rss_mib"], 3)
        if args.mirrored:
            entry["mirrored"] = mirrored_section(args, model, peers, entry)
        report["models"][model] = entry
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
