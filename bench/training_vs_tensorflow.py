#!/usr/bin/python3
"""Training throughput and peak memory, mirra next to TensorFlow, in one run.

For each model (MLP, CNN, ResNet-20 on Fashion-MNIST; Keras's ResNet50 on synthetic 224x224x3 images
at batch 32) and thread count (1, 2) it runs `mirra bench training` and the TensorFlow
peer (bench/peers/tf_training.py: same models, settings, data and timing window; TensorFlow at its
fastest, 10 steps per tf.function call, intra-op threads 1 or 2), each in its own process under
/usr/bin/time -v, interleaved and repeated; it reports the median examples/s of every configuration,
each framework at its best thread count, the throughput ratio (mirra / TensorFlow, >1 is faster) and
the peak-RSS ratio (mirra / TensorFlow, <1 is leaner), as one JSON object.

With --mirrored it also trains with MirroredStrategy over cpu:0, cpu:1 (global batch 128, 2 threads)
next to TensorFlow's MirroredStrategy over 2 logical CPU devices (intra-op 1 and 2, inter-op 2) and
reports mirra's Mirrored against TensorFlow's best Mirrored and against TensorFlow's best single device.

TensorFlow comes from PyPI into a virtual environment this script makes on first use (--venv, default
build/tf-venv: `python3 -m venv`, then `pip install tensorflow-cpu==2.21.* numpy`).
Needs: a built runner (build/release/tools/mirra/mirra, or --mirra), python3-venv, time, the network
once (PyPI).
Usage: bench/training_vs_tensorflow.py [--models mlp,cnn,resnet20,resnet50] [--repeats 3] [--threads 1,2] [--mirrored]
                                       [--mirra PATH] [--venv PATH]
"""
import argparse
import json
import os
import sys

import peer_runs
from peer_runs import best_of, summarise

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = {"mlp": 400, "cnn": 40, "resnet20": 40, "resnet50": 4}
STEPS_PER_CALL = 10  # TensorFlow's fastest loop: several steps per tf.function call
# What both sides add for a model (ResNet-50 trains on synthetic images, batch 32, 2 warm-up steps),
# and TensorFlow's steps per call for it.
MODEL_ARGS = {"resnet50": ["--synthetic", "--batch-size", "32", "--warmup-steps", "2"]}
MODEL_STEPS_PER_CALL = {"resnet50": 2}


def measure(command):
    return peer_runs.measure(command, "training_vs_tensorflow")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--mirrored", action="store_true", help="also Mirrored over 2 devices on both sides")
    parser.add_argument("--mirra", default=os.path.join(HERE, "..", "build", "release", "tools", "mirra", "mirra"))
    parser.add_argument("--venv", default=os.path.join(HERE, "..", "build", "tf-venv"))
    args = parser.parse_args()
    if not os.access(args.mirra, os.X_OK):
        sys.exit(f"training_vs_tensorflow: no runner at {args.mirra}; build first (scripts/test.sh or scripts/demo.sh)")
    peer_runs.require_time("training_vs_tensorflow")
    python = peer_runs.tensorflow_python(args.venv, "training_vs_tensorflow")
    peer = [python, os.path.join(HERE, "peers", "tf_training.py")]

    report = {"benchmark": "training throughput, SGD momentum 0.9: Fashion-MNIST at global batch 128 (mlp, cnn, "
                           "resnet20), synthetic 224x224x3 images at batch 32 (resnet50)",
              "window": "examples/s over the timed steps after 20 warm-up steps (2 for resnet50); medians over repeats",
              "models": {}}
    threads = [int(t) for t in args.threads.split(",")]
    for model in args.models.split(","):
        steps = ["--steps", str(STEPS[model])] + MODEL_ARGS.get(model, [])
        per_call = str(MODEL_STEPS_PER_CALL.get(model, STEPS_PER_CALL))
        commands = {}
        for t in threads:
            commands[f"mirra_threads_{t}"] = [args.mirra, "bench", "training", "--model", model, "--threads", str(t)] + steps
            commands[f"tensorflow_intra_{t}"] = peer + [model, "--intra", str(t), "--inter", "1",
                                                        "--steps-per-call", per_call] + steps
        if args.mirrored:
            commands["mirra_mirrored"] = [args.mirra, "bench", "training", "--model", model, "--strategy", "mirrored",
                                          "--threads", "2"] + steps
            for t in (1, 2):
                commands[f"tensorflow_mirrored_intra_{t}"] = peer + [model, "--mirrored", "2", "--intra", str(t),
                                                                     "--inter", "2", "--steps-per-call",
                                                                     per_call] + steps
        runs = {name: [] for name in commands}
        for _ in range(args.repeats):
            for name, command in commands.items():
                runs[name].append(measure(command))
        section = {name: summarise(r) for name, r in runs.items()}
        mirra_single = [f"mirra_threads_{t}" for t in threads]
        tf_single = [f"tensorflow_intra_{t}" for t in threads]
        best_mirra, best_tf = best_of(section, mirra_single), best_of(section, tf_single)
        entry = {"configs": section, "tensorflow": runs[tf_single[0]][0]["framework"],
                 "mirra_onednn": runs[mirra_single[0]][0]["onednn"],
                 "mirra_best": best_mirra, "tensorflow_best": best_tf,
                 "throughput_ratio": round(section[best_mirra]["examples_per_s"] / section[best_tf]["examples_per_s"], 3),
                 "memory_ratio": round(section[best_mirra]["peak_rss_mib"] / section[best_tf]["peak_rss_mib"], 3)}
        if args.mirrored:
            tf_mirrored = best_of(section, ["tensorflow_mirrored_intra_1", "tensorflow_mirrored_intra_2"])
            mirrored = section["mirra_mirrored"]["examples_per_s"]
            entry["mirrored"] = {
                "tensorflow_best": tf_mirrored,
                "ratio_vs_tensorflow_mirrored": round(mirrored / section[tf_mirrored]["examples_per_s"], 3),
                "ratio_vs_tensorflow_best_single_device": round(mirrored / section[best_tf]["examples_per_s"], 3)}
        report["models"][model] = entry
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
