#!/usr/bin/python3
"""Training fed from files, mirra next to TensorFlow, in one run: does a step wait for its data?

The MLP and the CNN train on Fashion-MNIST's training images three ways: from memory (mirra's IDX
arrays; TensorFlow's cached tf.data pipeline, its fastest), from png.tfrecord (PNG bytes TensorFlow
wrote, decoded on the fly) and from png.tfrecord.gz (the same records as a GZIP stream, shuffled
through a buffer of 10,000). mirra is `mirra train` on one device (`--metrics`: every step's wait
for its batch); TensorFlow is bench/peers/tf_training.py (`--files`: tf.data reads the files at its
best, AUTOTUNE). Each at 1 and 2 threads, in its own process, interleaved and repeated; medians over
a steady window after warm-up steps. Reported per model and data: examples/s of each framework at
its best thread count, each one's throughput on files over its own from memory (1.0: the files cost
nothing), mirra's share of step time spent waiting for data, and mirra over TensorFlow.

Usage: bench/training_on_files.py [--repeats 2] [--threads 1,2] [--models mlp,cnn] [--mirra PATH] [--venv PATH]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import peer_runs

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = {"mlp": (1000, 100), "cnn": (150, 20)}  # timed steps, warm-up steps
BATCH = 128
FEATURES = {"image": {"type": "bytes", "shape": [28, 28, 1], "decode": "image"}, "label": {"type": "int64"}}
FIELDS = {"images": {"field": "image", "scale": 1 / 255}, "labels": "label"}


def mirra_run(command, metrics, warmup):
    """Runs `mirra train ... --metrics FILE`; examples/s and the data wait's share over the steps after warm-up."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"training_on_files: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    with open(metrics) as f:
        steps = [json.loads(line) for line in f][warmup:]
    seconds = steps[-1]["seconds"] - steps[0]["seconds"]
    examples = sum(s["examples"] for s in steps[1:])
    wait = sum(s["data_wait_ms"] for s in steps[1:]) / 1e3
    return {"examples_per_s": examples / seconds, "data_wait_share": wait / seconds,
            "max_data_wait_ms": max(s["data_wait_ms"] for s in steps[1:])}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--mirra", default=os.path.join(HERE, "..", "build", "release", "tools", "mirra", "mirra"))
    parser.add_argument("--examples", default=os.path.join(HERE, "..", "build", "release", "examples", "mirra-examples"))
    parser.add_argument("--venv", default=os.path.join(HERE, "..", "build", "tf-venv"))
    parser.add_argument("--data", default=os.path.join(HERE, "..", "build", "input-pipeline-data"))
    args = parser.parse_args()
    for program in (args.mirra, args.examples):
        if not os.access(program, os.X_OK):
            sys.exit(f"training_on_files: no {program}; build first (scripts/test.sh)")
    python = peer_runs.tensorflow_python(args.venv, "training_on_files")
    data = os.path.abspath(args.data)
    if not os.path.exists(os.path.join(data, "png.tfrecord.gz")):
        os.makedirs(data, exist_ok=True)
        subprocess.run([python, os.path.join(HERE, "peers", "tf_input_pipeline.py"), "write", data], check=True)
    work = tempfile.mkdtemp(prefix="mirra_training_on_files_")
    configs = {"memory": None}
    for kind, name in (("png", "png.tfrecord"), ("png_gzip", "png.tfrecord.gz")):
        configs[kind] = os.path.join(work, f"{kind}.json")
        with open(configs[kind], "w") as f:
            json.dump({"data": {"train": {"format": "tfrecord", "files": [os.path.join(data, name)], "features": FEATURES,
                                          "fields": FIELDS}}}, f)
    threads = [int(t) for t in args.threads.split(",")]
    runs = {}
    order = []
    for model in args.models.split(","):
        steps, warmup = STEPS[model]
        model_file = os.path.join(work, f"{model}.mirra")
        subprocess.run([args.examples, "write", model, model_file], check=True, capture_output=True)
        for kind, config in configs.items():
            for t in threads:
                metrics = os.path.join(work, f"{model}_{kind}_{t}.jsonl")
                mirra = [args.mirra, "train", model_file, "--strategy", "one_device", "--devices", "cpu:0", "--steps",
                         str(steps + warmup), "--batch-size", str(BATCH), "--threads", str(t), "--metrics", metrics]
                if config:
                    mirra += ["--config", config]
                tf = [python, os.path.join(HERE, "peers", "tf_training.py"), model, "--intra", str(t), "--inter", "1",
                      "--steps", str(steps), "--warmup-steps", str(warmup), "--batch-size", str(BATCH)]
                if config:
                    tf += ["--files", kind, data]
                order.append(((model, kind, f"mirra_threads_{t}"), lambda c=mirra, m=metrics, w=warmup: mirra_run(c, m, w)))
                order.append(((model, kind, f"tensorflow_intra_{t}"), lambda c=tf: peer_runs.measure(c, "training_on_files")))
    for _ in range(args.repeats):
        for key, run in order:
            runs.setdefault(key, []).append(run())
    report = {"benchmark": "training fed from files: Fashion-MNIST, batch 128, one device",
              "window": "steps after warm-up (mlp 1000 after 100, cnn 150 after 20); medians over repeats", "models": {}}
    for model in args.models.split(","):
        section = {}
        best = {}
        for kind in configs:
            entries = {name: r for (m, k, name), r in runs.items() if m == model and k == kind}
            summary = {name: {"examples_per_s": statistics.median(r["examples_per_s"] for r in rs),
                              "examples_per_s_runs": [round(r["examples_per_s"], 1) for r in rs]} for name, rs in entries.items()}
            for name, rs in entries.items():
                if name.startswith("mirra"):
                    summary[name]["data_wait_share"] = statistics.median(r["data_wait_share"] for r in rs)
                    summary[name]["max_data_wait_ms"] = max(r["max_data_wait_ms"] for r in rs)
            best[kind] = {fw: max((n for n in summary if n.startswith(fw)), key=lambda n: summary[n]["examples_per_s"])
                          for fw in ("mirra", "tensorflow")}
            section[kind] = {"runs": summary, "best": best[kind]}
        for kind in configs:
            b = best[kind]
            rate = {fw: section[kind]["runs"][b[fw]]["examples_per_s"] for fw in b}
            memory = {fw: section["memory"]["runs"][best["memory"][fw]]["examples_per_s"] for fw in b}
            section[kind]["ratios"] = {"mirra_vs_tensorflow": round(rate["mirra"] / rate["tensorflow"], 3),
                                       "mirra_files_vs_memory": round(rate["mirra"] / memory["mirra"], 3),
                                       "tensorflow_files_vs_memory": round(rate["tensorflow"] / memory["tensorflow"], 3),
                                       "mirra_data_wait_share": round(section[kind]["runs"][b["mirra"]]["data_wait_share"], 4)}
        report["models"][model] = section
    print(json.dumps(report))


if __name__ == "__main__":
    main()
