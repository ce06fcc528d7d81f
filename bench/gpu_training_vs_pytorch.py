#!/usr/bin/env python3
"""Training throughput and GPU memory on one GPU, mirra next to PyTorch, in one run.

For each model (MLP, CNN) and batch size (128, 1024, 8192) it runs `mirra bench training --devices
gpu:0` four ways: TF32 off, TF32 on, its steps captured as a CUDA graph (`--cuda-graph`, TF32 off),
and bf16 mixed precision (`--mixed-precision bf16`), the data streamed from the host through mirra's
input pipeline. Then it runs the PyTorch peer (bench/peers/torch_gpu_training.py: eager with TF32
off, eager with TF32, the step as a CUDA graph with TF32 off, eager under bf16 autocast; its data set
held on the GPU). It reports mirra's examples/s over each PyTorch mode's (>1 is faster): TF32 against
TF32, bf16 against bf16 autocast (`bf16_vs_bf16`), mirra's CUDA graph against PyTorch's eager and
CUDA graph (`graph_vs_fp32`, `graph_vs_graph`); mirra's bf16 over its own f32 (`bf16_vs_own_fp32`);
mirra's peak device memory over torch.cuda.max_memory_allocated (<1 is leaner); and for the MLP the
time its step's matrix products take through cuBLAS alone over mirra's step (the floor, at most 1).
One JSON line per configuration, a summary last. At global batches 128 and 1024 it also runs
Mirrored over 2 and 4 logical GPUs of gpu:0 at the same global batch, reported over one GPU's
examples/s (`mirrored_logical_vs_one_gpu`, 1 is par).

Usage: bench/gpu_training_vs_pytorch.py --mirra PATH --data DIR [--python python3] [--models mlp,cnn]
                                        [--batches 128,1024,8192]
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def last_json(command):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return None, done.stderr.strip()[-500:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")], None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mirra", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--batches", default="128,1024,8192")
    args = parser.parse_args()
    rows = []
    for model in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            steps = (400 if model == "mlp" else 200) // (4 if batch >= 8192 else 1)
            row = {"model": model, "batch": batch}
            for name, extra in (("mirra", []), ("mirra_tf32", ["--allow-tf32"]), ("mirra_graph", ["--cuda-graph"]),
                                ("mirra_bf16", ["--mixed-precision", "bf16"])):
                lines, error = last_json([args.mirra, "bench", "training", "--model", model, "--devices", "gpu:0",
                                          "--batch-size", str(batch), "--steps", str(steps), "--warmup-steps", "20",
                                          "--data", args.data] + extra)
                row[name] = lines[-1] if lines else {"error": error}
            if "examples_per_s" in row["mirra_bf16"] and "examples_per_s" in row["mirra"]:
                row["bf16_vs_own_fp32"] = row["mirra_bf16"]["examples_per_s"] / row["mirra"]["examples_per_s"]
            for replicas in (2, 4) if batch in (128, 1024) else ():
                devices = ",".join(f"gpu:{i}" for i in range(replicas))
                lines, error = last_json([args.mirra, "bench", "training", "--model", model, "--strategy", "mirrored",
                                          "--devices", devices, "--logical-gpus-per-gpu", str(replicas),
                                          "--batch-size", str(batch), "--steps", str(steps), "--warmup-steps", "20",
                                          "--data", args.data])
                mirrored = lines[-1] if lines else {"error": error}
                row[f"mirra_mirrored_{replicas}"] = mirrored
                if "examples_per_s" in mirrored and "examples_per_s" in row["mirra"]:
                    row[f"mirrored_{replicas}_vs_one_gpu"] = mirrored["examples_per_s"] / row["mirra"]["examples_per_s"]
            rows.append(row)
    peer, error = last_json([args.python, os.path.join(HERE, "peers", "torch_gpu_training.py"), args.data, "--models",
                             args.models, "--batches", args.batches])
    for row in rows:
        mirra = row["mirra"]
        for figure in peer or []:
            if figure.get("model") != row["model"] or figure.get("batch") != row["batch"] or "examples_per_s" not in figure:
                continue
            row[f"pytorch_{figure['mode']}"] = figure
            # TF32 against TF32, bf16 against bf16; mirra's f32 against PyTorch's f32 eager and CUDA graph.
            ours = {"tf32": row["mirra_tf32"], "bf16": row["mirra_bf16"]}.get(figure["mode"], mirra)
            if "examples_per_s" in ours:
                row[f"speed_vs_{figure['mode']}"] = ours["examples_per_s"] / figure["examples_per_s"]
            if figure["mode"] in ("fp32", "graph") and "examples_per_s" in row["mirra_graph"]:
                row[f"graph_vs_{figure['mode']}"] = row["mirra_graph"]["examples_per_s"] / figure["examples_per_s"]
                peak = mirra.get("gpu_memory", {}).get("gpu:0", {}).get("peak_bytes_in_use")
                if peak is not None and figure["mode"] == "fp32" and figure["max_memory_allocated"] > 0:
                    row["memory_vs_pytorch"] = peak / figure["max_memory_allocated"]
        print(json.dumps(row), flush=True)
    summary = {"benchmark": "gpu_training_vs_pytorch",
               "peer": peer[0] if peer else {"error": error},
               "speed_vs_fp32": {f"{r['model']}/{r['batch']}": r.get("speed_vs_fp32") for r in rows},
               "speed_vs_tf32": {f"{r['model']}/{r['batch']}": r.get("speed_vs_tf32") for r in rows},
               "speed_vs_graph": {f"{r['model']}/{r['batch']}": r.get("speed_vs_graph") for r in rows},
               # mirra's bf16 mixed precision against PyTorch's bf16 autocast, and against mirra's f32.
               "bf16_vs_bf16": {f"{r['model']}/{r['batch']}": r.get("speed_vs_bf16") for r in rows},
               "bf16_vs_own_fp32": {f"{r['model']}/{r['batch']}": r.get("bf16_vs_own_fp32") for r in rows},
               # mirra's steps as a CUDA graph against PyTorch eager (f32) and PyTorch's CUDA graph.
               "graph_vs_fp32": {f"{r['model']}/{r['batch']}": r.get("graph_vs_fp32") for r in rows},
               "graph_vs_graph": {f"{r['model']}/{r['batch']}": r.get("graph_vs_graph") for r in rows},
               "memory_vs_pytorch": {f"{r['model']}/{r['batch']}": r.get("memory_vs_pytorch") for r in rows},
               # Mirrored over 2 and 4 logical GPUs of gpu:0 over one GPU, at the same global batch.
               "mirrored_logical_vs_one_gpu": {f"{r['model']}/{r['batch']}/{k}": r.get(f"mirrored_{k}_vs_one_gpu")
                                               for r in rows for k in (2, 4) if f"mirra_mirrored_{k}" in r},
               # The MLP step's matrix products alone through cuBLAS, over mirra's whole step (1 is the floor).
               "mlp_cublas_floor_over_step": {r["batch"]: r["mirra"].get("floor_over_step") for r in rows if r["model"] == "mlp"}}
    print(json.dumps(summary))
    return 0 if all("examples_per_s" in r["mirra"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
