#!/usr/bin/python3
"""Input pipeline throughput, mirra next to tf.data and PyTorch's DataLoader, in one run.

On the same files (Fashion-MNIST's 60,000 training images, written once by TensorFlow into
build/input-pipeline-data: png.tfrecord, the images as PNG bytes; png.tfrecord.gz, the same
GZIP-compressed, read as a stream through a shuffle buffer of 10,000 records; floats.tfrecord, as
784 floats; images.npz) it times 200 batches of 128 after 10 warm-up batches: `mirra bench data` (shuffled,
converted, prefetched, assembled on --data-threads T), tf.data (TFRecordDataset, shuffle, parse and
decode with num_parallel_calls T, batch, prefetch; the npz as from_tensor_slices) at T and at
AUTOTUNE, and for the npz PyTorch's DataLoader (num_workers 0, 1, 2; Debian's python3-torch, where
installed). Each in its own process, interleaved and repeated; medians; for each file and thread
count mirra over the faster peer with the same threads, and over the peers' best at any setting.

Usage: bench/input_pipeline_vs_peers.py [--repeats 3] [--threads 1,2] [--mirra PATH] [--venv PATH]
"""
import argparse
import json
import os
import subprocess
import sys

import peer_runs
from peer_runs import summarise

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ["png", "png_gzip", "floats", "npz"]
# mirra's configs of the four files: every field as it is.
SPECS = {
    "png": {"format": "tfrecord", "files": ["png.tfrecord"],
            "features": {"image": {"type": "bytes", "shape": [28, 28, 1], "decode": "image"}, "label": {"type": "int64"}}},
    "png_gzip": {"format": "tfrecord", "files": ["png.tfrecord.gz"], "compression": "gzip",
                 "features": {"image": {"type": "bytes", "shape": [28, 28, 1], "decode": "image"}, "label": {"type": "int64"}}},
    "floats": {"format": "tfrecord", "files": ["floats.tfrecord"],
               "features": {"image": {"type": "float", "shape": [784]}, "label": {"type": "int64"}}},
    "npz": {"format": "numpy", "files": ["images.npz"]},
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--mirra", default=os.path.join(HERE, "..", "build", "release", "tools", "mirra", "mirra"))
    parser.add_argument("--venv", default=os.path.join(HERE, "..", "build", "tf-venv"))
    parser.add_argument("--data", default=os.path.join(HERE, "..", "build", "input-pipeline-data"))
    args = parser.parse_args()
    if not os.access(args.mirra, os.X_OK):
        sys.exit(f"input_pipeline_vs_peers: no runner at {args.mirra}; build first (scripts/test.sh)")
    peer_runs.require_time("input_pipeline_vs_peers")
    python = peer_runs.tensorflow_python(args.venv, "input_pipeline_vs_peers")
    tf_peer = [python, os.path.join(HERE, "peers", "tf_input_pipeline.py")]
    data = os.path.abspath(args.data)
    if not all(os.path.exists(os.path.join(data, f)) for f in ("images.npz", "png.tfrecord.gz")):
        os.makedirs(data, exist_ok=True)
        subprocess.run(tf_peer + ["write", data], check=True)
    has_torch = subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0
    threads = [int(t) for t in args.threads.split(",")]
    commands = {}
    for kind in KINDS:
        spec = dict(SPECS[kind])
        spec["files"] = [os.path.join(data, f) for f in spec["files"]]
        config = os.path.join(data, f"{kind}.json")
        with open(config, "w") as f:
            json.dump({"data": {"train": spec}}, f)
        for t in threads:
            commands[(kind, f"mirra_threads_{t}")] = [args.mirra, "bench", "data", "--config", config, "--data-threads", str(t)]
            commands[(kind, f"tf_data_parallel_{t}")] = tf_peer + ["read", kind, data, "--parallel", str(t)]
        commands[(kind, "tf_data_autotune")] = tf_peer + ["read", kind, data, "--parallel", "0"]
        if kind == "npz" and has_torch:
            for workers in (0, 1, 2):
                commands[(kind, f"torch_workers_{workers}")] = ["/usr/bin/python3", os.path.join(HERE, "peers", "torch_input_pipeline.py"),
                                                                data, "--workers", str(workers)]
    runs = {key: [] for key in commands}
    for _ in range(args.repeats):
        for key, command in commands.items():
            runs[key].append(peer_runs.measure(command, "input_pipeline_vs_peers"))
    report = {"benchmark": "input pipeline: Fashion-MNIST's training images, batches of 128, shuffled",
              "window": "examples/s over 200 batches after 10; medians over repeats", "files": {}}
    for kind in KINDS:
        section = {name: summarise(r) for (k, name), r in runs.items() if k == kind}
        peers = [name for name in section if not name.startswith("mirra")]
        ratios = {}
        for t in threads:
            same = [name for name in peers if name.endswith(f"_{t}") and not name.startswith("torch_workers")]
            same += [name for name in peers if name == f"torch_workers_{t}"]
            faster = max(same, key=lambda name: section[name]["examples_per_s"])
            ratios[f"threads_{t}_vs_{faster}"] = section[f"mirra_threads_{t}"]["examples_per_s"] / section[faster]["examples_per_s"]
        best_peer = max(peers, key=lambda name: section[name]["examples_per_s"])
        best_mirra = max((n for n in section if n.startswith("mirra")), key=lambda name: section[name]["examples_per_s"])
        ratios[f"best_{best_mirra}_vs_best_{best_peer}"] = section[best_mirra]["examples_per_s"] / section[best_peer]["examples_per_s"]
        report["files"][kind] = {"runs": section, "ratios": ratios}
    if not has_torch:
        report["pytorch"] = "not installed (apt-get install python3-torch): the DataLoader was not run"
    print(json.dumps(report))


if __name__ == "__main__":
    main()
