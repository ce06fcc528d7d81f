#!/usr/bin/env python3
"""`mirra inspect --dot` pictures a person can read: the Mirrored MLP and CNN over 2 devices, collapsed
by default, are valid DOT that Graphviz renders smaller than 2,000 x 2,000 pixels, with a cluster per
device, the batch split and the all-reduce buckets drawn apart; --collapse-below 0 keeps every node of
the training graph; --svg renders through Graphviz, and says how to install it when `dot` is missing.

    graph_pictures.py MIRRA MODELS_DIR WORK_DIR
"""
import os
import re
import struct
import subprocess
import sys

MIRRA, MODELS, WORK = sys.argv[1:4]
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def run(*args, env=None):
    return subprocess.run([MIRRA, *args], capture_output=True, text=True, env=env)


def inspect(model, *flags):
    r = run("inspect", os.path.join(MODELS, model), "--strategy", "mirrored", "--devices", "cpu:0,cpu:1", *flags)
    if r.returncode != 0:
        sys.exit(f"mirra inspect {model} {flags} failed: {r.stderr}")
    return r.stdout


def png_size(dot_text, name):
    path = os.path.join(WORK, name + ".png")
    r = subprocess.run(["dot", "-Tpng", "-o", path], input=dot_text, capture_output=True, text=True)
    check(r.returncode == 0, f"{name}: dot failed: {r.stderr}")
    header = open(path, "rb").read(24)
    return struct.unpack(">II", header[16:24])  # the IHDR chunk's width and height


os.makedirs(WORK, exist_ok=True)
for model in ("mlp.mirra", "cnn.mirra"):
    collapsed = inspect(model, "--dot")
    width, height = png_size(collapsed, model + ".collapsed")
    check(width < 2000 and height < 2000, f"{model}: collapsed picture is {width} x {height} pixels")
    check('label="cpu:0"' in collapsed and 'label="cpu:1"' in collapsed, f"{model}: a cluster per device")
    check(collapsed.count("shape=invtrapezium") == 2, f"{model}: the images' and labels' batch splits")
    check(re.search(r'AllReduce x2\\n[0-9.]+ [KM]B", shape=hexagon', collapsed) is not None, f"{model}: a bucket's two ranks with its size")
    # Every node of the training graph in the uncollapsed picture.
    text_nodes = [line for line in inspect(model).splitlines() if " = " in line and not line.startswith("#")]
    full = inspect(model, "--dot", "--collapse-below", "0")
    drawn = re.findall(r"^\s+n[0-9]+ \[label=", full, re.MULTILINE)
    check(len(drawn) == len(text_nodes), f"{model}: {len(drawn)} nodes drawn of {len(text_nodes)}")
    png_size(full, model + ".full")

svg = os.path.join(WORK, "mlp.svg")
r = run("inspect", os.path.join(MODELS, "mlp.mirra"), "--strategy", "mirrored", "--devices", "cpu:0,cpu:1", "--dot", "--svg", svg)
check(r.returncode == 0 and open(svg).read().lstrip().startswith("<?xml") and "<svg" in open(svg).read(), f"--svg: {r.stderr}")
# Without Graphviz on the PATH: a clear error, exit 2.
r = run("inspect", os.path.join(MODELS, "mlp.mirra"), "--dot", "--svg", svg, env={"PATH": "/nonexistent"})
check(r.returncode == 2 and "apt install graphviz" in r.stderr, f"--svg without dot: {r.returncode} {r.stderr}")
r = run("inspect", os.path.join(MODELS, "mlp.mirra"), "--svg", svg)
check(r.returncode == 2 and "--dot" in r.stderr, f"--svg without --dot: {r.returncode} {r.stderr}")
if failures:
    sys.exit(f"{len(failures)} checks failed")
print("the pictures render, fit 2,000 x 2,000 pixels collapsed, and keep every node uncollapsed")
