#!/usr/bin/env python3
"""Trains with `mirra train --logdir` and reads the event files with TensorBoard's own reader
(EventAccumulator), checking what a user would look at against independent references:

- the step scalars against the run's --metrics lines, the epoch figures against its JSON summary;
- the graph: every node of both replicas with its device, inputs that name nodes of the graph, the
  collectives and the output shapes;
- the histograms: present every --histogram-every steps for each variable and its gradient, and the
  variables' last ones equal, bucket for bucket, to TensorFlow's default bucketing (computed here with
  numpy) of the weights the run saved;
- fp16's loss scale and skipped steps;
- a file cut short anywhere in its last record (a killed run) reads up to the record before.

    read_event_files.py MIRRA MODELS_DIR WORK_DIR PYTHON_SCHEMA_DIR
"""
import glob
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader

MIRRA, MODELS, WORK, SCHEMA = sys.argv[1:5]
sys.path.insert(0, SCHEMA)
from mirra.fb.Model import Model  # noqa: E402

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def close(a, b, rel=1e-6, abs_tol=0.0):
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_tol)


def train(name, model, *flags):
    logdir = os.path.join(WORK, name)
    shutil.rmtree(logdir, ignore_errors=True)
    metrics = os.path.join(WORK, name + ".jsonl")
    command = [MIRRA, "train", os.path.join(MODELS, model), "--logdir", logdir, "--metrics", metrics, "--json",
               "--threads", "2", *flags]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    lines = [json.loads(line) for line in open(metrics)]
    return logdir, summary, lines


def accumulator(directory):
    files = glob.glob(os.path.join(directory, "events.out.tfevents.*"))
    check(len(files) == 1, f"{directory}: one event file, not {len(files)}")
    a = ea.EventAccumulator(directory, size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0, ea.TENSORS: 0})
    a.Reload()
    return a


def weights_of(path):
    data = bytearray(open(path, "rb").read())
    model = Model.GetRootAs(data, 0)
    weights = {}
    for i in range(model.WeightsLength()):
        tensor = model.Weights(i)
        shape = [tensor.Shape(d) for d in range(tensor.ShapeLength())]
        start = tensor._tab.Vector(tensor._tab.Offset(10)) if tensor.DataLength() else 0  # the `data` field
        if tensor.Dtype() == 0:  # f32
            weights[tensor.Name().decode()] = np.frombuffer(bytes(data[start:start + tensor.DataLength()]),
                                                            dtype=np.float32).reshape(shape)
    return weights


def tensorflow_buckets():
    """TensorFlow's default histogram bucket limits: +-1e-12 growing by 10% below 1e20, 0, +-DBL_MAX."""
    positive = []
    v = 1e-12
    while v < 1e20:
        positive.append(v)
        v *= 1.1
    positive.append(sys.float_info.max)
    return [-x for x in reversed(positive)] + [0.0] + positive


def reference_histogram(values):
    limits = tensorflow_buckets()
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    counts = np.bincount(np.searchsorted(limits, values, side="right"), minlength=len(limits))
    encoded_limits, encoded_counts = [], []
    i = 0
    while i < len(limits):  # runs of empty buckets collapse into one, ending at the run's last limit
        limit, count = limits[i], counts[i]
        i += 1
        if count == 0:
            while i < len(limits) and counts[i] == 0:
                limit = limits[i]
                i += 1
        encoded_limits.append(limit)
        encoded_counts.append(float(count))
    return {"min": values.min(), "max": values.max(), "num": float(values.size), "sum": float(values.sum()),
            "sum_squares": float((values * values).sum()), "bucket_limit": encoded_limits, "bucket": encoded_counts}


def check_mirrored_cnn():
    saved = os.path.join(WORK, "cnn_trained.mirra")
    logdir, summary, lines = train("cnn", "cnn.mirra", "--strategy", "mirrored", "--devices", "cpu:0,cpu:1",
                                   "--steps", "10", "--batch-size", "64", "--histogram-every", "5", "--eval",
                                   "--save", saved)
    train_log = accumulator(os.path.join(logdir, "train"))
    tags = train_log.Tags()
    # Every step's scalars, as the metrics lines have them.
    loss = train_log.Scalars("loss")
    check([e.step for e in loss] == list(range(1, 11)), f"loss at steps {[e.step for e in loss]}")
    for event, line in zip(loss, lines):
        check(close(event.value, line["loss"]), f"step {event.step}: loss {event.value} vs {line['loss']}")
    for event, line in zip(train_log.Scalars("learning_rate"), lines):
        check(close(event.value, line["learning_rate"]), f"step {event.step}: learning rate {event.value}")
    for event, line in zip(train_log.Scalars("examples_per_second"), lines):
        check(close(event.value, line["examples_per_s"]), f"step {event.step}: examples/s {event.value}")
    steps_ms = {e.step: e.value for e in train_log.Scalars("step_time/step_ms")}
    for tag in ("step_time/compute_ms", "step_time/exposed_communication_ms", "step_time/waiting_for_data_ms"):
        events = train_log.Scalars(tag)
        check(len(events) == 10, f"{tag}: {len(events)} steps")
        for e in events:
            check(0 <= e.value <= steps_ms[e.step] * 1.01 or tag.endswith("data_ms"), f"{tag} at step {e.step}: {e.value}")
    check(any(e.value > 0 for e in train_log.Scalars("step_time/compute_ms")), "no compute time")
    # The epoch's figures in train/, the evaluation's in validation/.
    epoch_loss = train_log.Scalars("epoch_loss")
    check(len(epoch_loss) == 1 and epoch_loss[0].step == 0, f"epoch_loss {epoch_loss}")
    validation = accumulator(os.path.join(logdir, "validation"))
    check(close(validation.Scalars("epoch_loss")[0].value, summary["test_loss"]), "validation epoch_loss")
    check(close(validation.Scalars("epoch_accuracy")[0].value, summary["test_accuracy"]), "validation epoch_accuracy")
    # The graph, by name scope and device.
    graph = train_log.Graph()
    names = {node.name for node in graph.node}
    devices = {node.device for node in graph.node}
    check({"cpu:0", "cpu:1"} <= devices, f"devices {devices}")
    check(any(n.startswith("replica_0/conv1/") for n in names) and any(n.startswith("replica_1/conv1/") for n in names),
          "both replicas' conv1 scopes")
    check(any("AllReduce" in node.op for node in graph.node), "an all-reduce node")
    for node in graph.node:
        for name in node.input:
            check(name.lstrip("^").split(":")[0] in names, f"{node.name} reads {name}, not a node")
        check("_output_shapes" in node.attr, f"{node.name} without _output_shapes")
    config = train_log.Tensors("config")[0].tensor_proto.string_val[0].decode()
    check('"strategy": "mirrored"' in config, "the config text names the strategy")
    # Histograms every 5 steps, each variable's last one equal to the saved weights' bucketing.
    weights = weights_of(saved)
    check(len(weights) >= 8, f"{len(weights)} saved weights")
    for name, value in weights.items():
        for tag in (name, name + "/gradient"):
            check(tag in tags["histograms"], f"histogram {tag}")
            if tag not in tags["histograms"]:
                continue
            events = train_log.Histograms(tag)
            check([e.step for e in events] == [5, 10], f"{tag} at steps {[e.step for e in events]}")
            h = events[-1].histogram_value
            check(h.num == value.size and sum(h.bucket_limit and h.bucket) == value.size, f"{tag}: {h.num} values")
        h = train_log.Histograms(name)[-1].histogram_value
        reference = reference_histogram(value)
        check(h.min == reference["min"] and h.max == reference["max"], f"{name}: min/max {h.min} {h.max}")
        check(close(h.sum, reference["sum"], 1e-9, 1e-12) and close(h.sum_squares, reference["sum_squares"], 1e-9),
              f"{name}: sum {h.sum} vs {reference['sum']}")
        check(list(h.bucket_limit) == reference["bucket_limit"] and list(h.bucket) == reference["bucket"],
              f"{name}: buckets differ from TensorFlow's")
        gradient = train_log.Histograms(name + "/gradient")[-1].histogram_value
        check(gradient.sum_squares > 0, f"{name}/gradient is all zeros")
    return os.path.join(logdir, "train")


def check_fp16_mlp():
    logdir, summary, lines = train("mlp_fp16", "mlp.mirra", "--strategy", "one_device", "--devices", "cpu:0",
                                   "--steps", "4", "--batch-size", "32", "--mixed-precision", "fp16")
    train_log = accumulator(os.path.join(logdir, "train"))
    scale = train_log.Scalars("loss_scale")
    skipped = train_log.Scalars("skipped_steps")
    check(len(scale) == 4 and len(skipped) == 4, f"{len(scale)} loss scales, {len(skipped)} skipped counts")
    check(close(scale[-1].value, summary["loss_scale"]), f"loss scale {scale[-1].value} vs {summary['loss_scale']}")
    check(skipped[-1].value == summary["skipped_steps"], f"skipped {skipped[-1].value} vs {summary['skipped_steps']}")
    check(train_log.Tags()["histograms"] == [], "histograms without --histogram-every")


def check_cut_short(directory):
    path = glob.glob(os.path.join(directory, "events.out.tfevents.*"))[0]
    whole = list(RawEventFileLoader(path).Load())
    data = open(path, "rb").read()
    # The last record's length: find where the record before it ends by reading record headers.
    offsets, at = [], 0
    while at < len(data):
        length = int.from_bytes(data[at:at + 8], "little")
        offsets.append(at)
        at += 12 + length + 4
    check(at == len(data) and len(offsets) == len(whole), f"{len(offsets)} records framed, {len(whole)} read")
    last = offsets[-1]
    cut_path = os.path.join(WORK, "cut", "events.out.tfevents.cut")
    os.makedirs(os.path.dirname(cut_path), exist_ok=True)
    for cut in sorted({last + 1, last + 8, last + 12, last + 13, (last + len(data)) // 2, len(data) - 1}):
        with open(cut_path, "wb") as f:
            f.write(data[:cut])
        events = list(RawEventFileLoader(cut_path).Load())
        check(len(events) == len(whole) - 1, f"cut at byte {cut} of {len(data)}: {len(events)} events, not {len(whole) - 1}")


def main():
    train_dir = check_mirrored_cnn()
    check_fp16_mlp()
    check_cut_short(train_dir)
    if failures:
        sys.exit(f"{len(failures)} checks failed")
    print("TensorBoard reads every event file: scalars, graph, histograms, config; cut files up to their last record")


if __name__ == "__main__":
    main()
