#!/usr/bin/env python3
"""gpt-tiny on the Shakespeare characters, mirra against PyTorch (bench/peers/torch_gpt.py: the same
model, initialisation, recipe and data) and TensorFlow 2.21 (bench/peers/tf_gpt.py: the same model
in Keras) in the same run.

Throughput (default): tokens/s over the steady state (steps after --warmup-steps) and peak RSS, for
mirra on one device (1 and 2 threads) and Mirrored over 2 CPU devices, PyTorch with 1 and 2 threads
and DDP over 2 processes, TensorFlow with 1 and 2 intra-op threads and MirroredStrategy over 2
logical CPUs (from the virtual environment --venv, made on first use); f32, and bf16 with --bf16
(mirra's mixed_precision, PyTorch's autocast, Keras's mixed_bfloat16). Each cell is the median of
--repeats runs; ratios are against the best peer.

Accuracy (--accuracy): nanoGPT's CPU recipe (batch 12, context 64, 2,000 iterations, learning rate
1e-3 with 100 warmup steps and cosine decay to 1e-4, dropout 0) trained by mirra (Mirrored over 2 CPU
devices) and by PyTorch; the validation loss of each over every window of val.bin, their difference,
and both training-loss curves (a moving average of 50 steps) drawn into --plot (SVG).

    python3 bench/gpt_vs_peers.py [--data DIR] [--steps 60] [--repeats 3] [--bf16] [--venv DIR]
    python3 bench/gpt_vs_peers.py --accuracy [--plot docs/gpt_tiny_curves.svg]

Prints one JSON object.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from peer_runs import cpu_model, measure, require_time, tensorflow_python

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DRIVER = "gpt_vs_peers"
BATCH, CONTEXT = 12, 64


def mirra_tools(build):
    return os.path.join(build, "tools", "mirra", "mirra"), os.path.join(build, "examples", "mirra-examples")


def mirra_run(args, work, strategy, steps, threads=None, bf16=False, evaluate=False):
    """One mirra training run: its summary, peak RSS, per-step losses and steady-state tokens/s."""
    mirra, examples = mirra_tools(args.build)
    model = os.path.join(work, "gpt-tiny.mirra")
    if not os.path.exists(model):
        subprocess.run([examples, "write", "gpt-tiny", model], check=True, capture_output=True)
    config = os.path.join(work, "gpt-tiny.json")
    with open(os.path.join(ROOT, "examples", "configs", "gpt-tiny.json")) as f:
        text = f.read().replace("/usr/local/share/mirra/shakespeare", args.data)
    with open(config, "w") as f:
        f.write(text)
    metrics = os.path.join(work, "metrics.jsonl")
    command = [mirra, "train", model, "--config", config, "--strategy", strategy, "--steps", str(steps), "--json",
               "--metrics", metrics]
    if strategy == "one_device":
        command += ["--devices", "cpu:0"]
    if threads:
        command += ["--threads", str(threads)]
    if bf16:
        command += ["--mixed-precision", "bf16"]
    if evaluate:
        command.append("--eval")
    result = measure(command, DRIVER)
    with open(metrics) as f:
        lines = [json.loads(line) for line in f]
    warm = args.warmup_steps
    seconds = lines[-1]["seconds"] - lines[warm - 1]["seconds"]
    result["tokens_per_s"] = (len(lines) - warm) * BATCH * CONTEXT / seconds
    result["losses"] = [line["loss"] for line in lines]
    return result


def peer_run(args, steps, threads=1, ddp=0, bf16=False, evaluate=False):
    command = ["/usr/bin/python3", os.path.join(HERE, "peers", "torch_gpt.py"), args.data, "--steps", str(steps),
               "--warmup-steps", str(args.warmup_steps), "--threads", str(threads)]
    if ddp:
        command += ["--ddp", str(ddp)]
    if bf16:
        command.append("--bf16")
    if evaluate:
        command.append("--eval")
    return measure(command, DRIVER)


def tensorflow_run(args, python, intra, mirrored=0, bf16=False):
    command = [python, os.path.join(HERE, "peers", "tf_gpt.py"), args.data, "--steps", str(args.steps), "--warmup-steps",
               str(args.warmup_steps), "--intra", str(intra), "--inter", str(2 if mirrored else 1)]
    if mirrored:
        command += ["--mirrored", str(mirrored)]
    if bf16:
        command.append("--bf16")
    return measure(command, DRIVER)


def cell(runs):
    return {"tokens_per_s": statistics.median(r["tokens_per_s"] for r in runs),
            "tokens_per_s_runs": [round(r["tokens_per_s"]) for r in runs],
            "peak_rss_mib": statistics.median(r["peak_rss_mib"] for r in runs)}


def throughput(args, work):
    out = {}
    for bf16 in ([False, True] if args.bf16 else [False]):
        precision = "bf16" if bf16 else "f32"
        mirra = {
            "one_device_1_thread": cell([mirra_run(args, work, "one_device", args.steps, 1, bf16) for _ in range(args.repeats)]),
            "one_device_2_threads": cell([mirra_run(args, work, "one_device", args.steps, 2, bf16) for _ in range(args.repeats)]),
            "mirrored_2": cell([mirra_run(args, work, "mirrored", args.steps, None, bf16) for _ in range(args.repeats)]),
        }
        peer = {
            "pytorch_1_thread": cell([peer_run(args, args.steps, 1, 0, bf16) for _ in range(args.repeats)]),
            "pytorch_2_threads": cell([peer_run(args, args.steps, 2, 0, bf16) for _ in range(args.repeats)]),
            "pytorch_ddp_2": cell([peer_run(args, args.steps, 1, 2, bf16) for _ in range(args.repeats)]),
        }
        python = tensorflow_python(args.venv, DRIVER)
        peer.update({
            "tensorflow_1_thread": cell([tensorflow_run(args, python, 1, 0, bf16) for _ in range(args.repeats)]),
            "tensorflow_2_threads": cell([tensorflow_run(args, python, 2, 0, bf16) for _ in range(args.repeats)]),
            "tensorflow_mirrored_2": cell([tensorflow_run(args, python, 1, 2, bf16) for _ in range(args.repeats)]),
        })
        singles = ("pytorch_1_thread", "pytorch_2_threads", "tensorflow_1_thread", "tensorflow_2_threads")
        best_single = max(singles, key=lambda k: peer[k]["tokens_per_s"])
        best_any = max(peer, key=lambda k: peer[k]["tokens_per_s"])
        best_mirra_single = max(("one_device_1_thread", "one_device_2_threads"), key=lambda k: mirra[k]["tokens_per_s"])
        out[precision] = {
            "mirra": mirra, "peers": peer, "best_single_peer": best_single, "best_peer": best_any,
            "one_device_vs_best_single_peer": mirra[best_mirra_single]["tokens_per_s"] / peer[best_single]["tokens_per_s"],
            "mirrored_vs_pytorch_ddp": mirra["mirrored_2"]["tokens_per_s"] / peer["pytorch_ddp_2"]["tokens_per_s"],
            "mirrored_vs_tensorflow_mirrored": mirra["mirrored_2"]["tokens_per_s"] / peer["tensorflow_mirrored_2"]["tokens_per_s"],
            "mirrored_vs_best_peer": mirra["mirrored_2"]["tokens_per_s"] / peer[best_any]["tokens_per_s"],
            "memory_vs_best_peer": mirra["mirrored_2"]["peak_rss_mib"] / peer[best_any]["peak_rss_mib"],
        }
    return out


def moving_average(values, width=50):
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v - (values[i - width] if i >= width else 0.0)
        out.append(total / min(i + 1, width))
    return out


def svg_plot(path, curves):
    """Training-loss curves as an SVG line chart: curves is [(label, colour, values)]."""
    width, height, left, bottom, top, right = 720, 420, 60, 40, 20, 20
    steps = max(len(v) for _, _, v in curves)
    high = max(max(v) for _, _, v in curves)
    low = min(min(v) for _, _, v in curves)
    x = lambda i: left + (width - left - right) * i / max(steps - 1, 1)
    y = lambda v: top + (height - top - bottom) * (high - v) / max(high - low, 1e-9)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
             f'<rect width="{width}" height="{height}" fill="white"/>',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="black"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="black"/>',
             f'<text x="{width / 2}" y="{height - 8}" text-anchor="middle">step</text>',
             f'<text x="14" y="{height / 2}" transform="rotate(-90 14 {height / 2})" text-anchor="middle">training loss (mean of 50 steps)</text>']
    for k in range(5):
        value = low + (high - low) * k / 4
        parts.append(f'<text x="{left - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{value:.2f}</text>')
        step = round((steps - 1) * k / 4)
        parts.append(f'<text x="{x(step):.1f}" y="{height - bottom + 16}" text-anchor="middle">{step + 1}</text>')
    for n, (label, colour, values) in enumerate(curves):
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{points}"/>')
        parts.append(f'<text x="{width - right - 280}" y="{top + 16 + 18 * n}" fill="{colour}">{label}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def accuracy(args, work):
    mirra = mirra_run(args, work, "mirrored", 2000, evaluate=True)
    peer = peer_run(args, 2000, threads=1, evaluate=True)
    result = {"mirra_val_loss": mirra["test_loss"], "pytorch_val_loss": peer["val_loss"],
              "difference": mirra["test_loss"] - peer["val_loss"],
              "mirra_final_train_loss_mean_50": moving_average(mirra["losses"])[-1],
              "pytorch_final_train_loss_mean_50": moving_average(peer["losses"])[-1]}
    if args.plot:
        svg_plot(args.plot, [(f"mirra, Mirrored over 2 CPUs (validation {mirra['test_loss']:.3f})", "#1f77b4",
                              moving_average(mirra["losses"])),
                             (f"PyTorch {peer['version']} (validation {peer['val_loss']:.3f})", "#d62728",
                              moving_average(peer["losses"]))])
        result["plot"] = args.plot
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    parser.add_argument("--data", default="/usr/local/share/mirra/shakespeare")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--accuracy", action="store_true")
    parser.add_argument("--plot")
    parser.add_argument("--venv", default=os.path.join(ROOT, "build", "tf-venv"), help="TensorFlow's virtual environment")
    args = parser.parse_args()
    require_time(DRIVER)
    if not os.path.exists(os.path.join(args.data, "val.bin")):
        sys.exit(f"{DRIVER}: no Shakespeare tokens in {args.data} (scripts/setup.sh prepares them)")
    cpu = cpu_model()
    with tempfile.TemporaryDirectory() as work:
        result = {"benchmark": "gpt_tiny_vs_peers", "cpu": cpu, "batch": BATCH, "context": CONTEXT}
        result.update(accuracy(args, work) if args.accuracy else {"throughput": throughput(args, work)})
    print(json.dumps(result))


if __name__ == "__main__":
    main()
