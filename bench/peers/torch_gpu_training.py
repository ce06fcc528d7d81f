#!/usr/bin/env python3
"""PyTorch peer of `mirra bench training --devices gpu:0`: the benchmark MLP (784-256-128-10, ReLU) and
the TF-tutorial CNN (conv5x5x32-pool-conv5x5x64-pool-fc1024-fc10) with SGD, momentum 0.9, learning
rate 0.05 on Fashion-MNIST, on one GPU, with the data set held in GPU memory (PyTorch's best case).
For each model and batch size it times four modes after 20 warm-up steps: eager with TF32 off
(mirra's arithmetic), eager with TF32, the whole step captured as a CUDA graph (TF32 off), and eager
under torch.autocast("cuda", torch.bfloat16) (bf16 mixed precision, f32 weights); and records
torch.cuda.max_memory_allocated for each. Prints one JSON line per configuration.

Usage: torch_gpu_training.py DATA_DIR [--models mlp,cnn] [--batches 128,1024,8192]
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.nn.functional as F

# The IDX reader and the models of the CPU peer beside this file.
from fashion_mnist import read_idx
from torch_training import Cnn, Mlp


def measure(model_name, batch, mode, images, labels, steps):
    tf32 = mode == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.manual_seed(1)
    model = (Mlp() if model_name == "mlp" else Cnn()).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    batches = images.shape[0] // batch
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()

    def step(x, y):
        optimizer.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode == "bf16"):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    if mode == "graph":
        static_x, static_y = images[:batch].clone(), labels[:batch].clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step(static_x, static_y)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step(static_x, static_y)

        def run(i):
            static_x.copy_(images[i * batch:(i + 1) * batch])
            static_y.copy_(labels[i * batch:(i + 1) * batch])
            graph.replay()
    else:
        def run(i):
            step(images[i * batch:(i + 1) * batch], labels[i * batch:(i + 1) * batch])

    for i in range(20):
        run(i % batches)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(steps):
        run(i % batches)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return {"framework": "pytorch", "model": model_name, "batch": batch, "mode": mode, "steps": steps,
            "seconds": seconds, "examples_per_s": steps * batch / seconds,
            "max_memory_allocated": torch.cuda.max_memory_allocated()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--batches", default="128,1024,8192")
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    images = torch.from_numpy(read_idx(f"{args.data}/train-images-idx3-ubyte.gz").astype(np.float32) / 255.0)
    images = images.reshape(-1, 1, 28, 28).cuda()
    labels = torch.from_numpy(read_idx(f"{args.data}/train-labels-idx1-ubyte.gz").astype(np.int64)).cuda()
    print(json.dumps({"framework": "pytorch", "version": torch.__version__, "cuda": torch.version.cuda,
                      "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name()}), flush=True)
    for model_name in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            steps = (400 if model_name == "mlp" else 200) // (4 if batch >= 8192 else 1)
            for mode in ("fp32", "tf32", "graph", "bf16"):
                try:
                    print(json.dumps(measure(model_name, batch, mode, images, labels, steps)), flush=True)
                except RuntimeError as e:  # a failed capture must not lose the other figures
                    print(json.dumps({"framework": "pytorch", "model": model_name, "batch": batch, "mode": mode,
                                      "error": str(e)[:300]}), flush=True)


if __name__ == "__main__":
    main()
