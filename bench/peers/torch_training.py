#!/usr/bin/python3
"""PyTorch peer of `mirra bench training`: the same two models (MLP 784-256-128-10 with ReLU; the TF
tutorial CNN conv5x5x32-pool-conv5x5x64-pool-fc1024-fc10), the same settings (SGD, momentum 0.9,
learning rate 0.05, batch 128) on the same Fashion-MNIST files, timed over the same steady-state
window (after warm-up steps). With --ddp W it runs DistributedDataParallel over W processes (gloo),
each with --threads threads and 1/W of the global batch. With --bf16 the forward pass and the loss
run under torch.autocast("cpu", torch.bfloat16) (PyTorch's mixed precision: bf16 products and
convolutions, f32 weights). With --adam the optimizer is Adam (learning rate 0.001); with --zero (and
--ddp) it is wrapped in ZeroRedundancyOptimizer, PyTorch's ZeRO stage 1: each process keeps the state of
its share of the parameters. Prints one JSON line, with the optimizer state's bytes in process 0.

Usage: torch_training.py {mlp,cnn} [--threads T] [--steps N] [--warmup-steps W] [--batch-size B] [--ddp W]
                         [--bf16] [--adam] [--zero]
"""
import argparse
import json
import os
import resource
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fashion_mnist import DATA, read_idx


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden1, self.hidden2, self.out = nn.Linear(784, 256), nn.Linear(256, 128), nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.hidden1(x.flatten(1)))
        return self.out(F.relu(self.hidden2(x)))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 32, 5, padding=2), nn.Conv2d(32, 64, 5, padding=2)
        self.fc1, self.fc2 = nn.Linear(7 * 7 * 64, 1024), nn.Linear(1024, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def train(rank, args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    world = args.ddp or 1
    model = Mlp() if args.model == "mlp" else Cnn()
    if args.ddp:
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29541")
        dist.init_process_group("gloo", rank=rank, world_size=world)
        model = nn.parallel.DistributedDataParallel(model)
    images = torch.from_numpy(read_idx(f"{DATA}/train-images-idx3-ubyte.gz").astype(np.float32) / 255.0)
    images = images.reshape(-1, 1, 28, 28)
    labels = torch.from_numpy(read_idx(f"{DATA}/train-labels-idx1-ubyte.gz").astype(np.int64))
    kind, settings = (torch.optim.Adam, {"lr": 0.001}) if args.adam else (torch.optim.SGD, {"lr": 0.05, "momentum": 0.9})
    if args.zero:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=kind, **settings)
    else:
        optimizer = kind(model.parameters(), **settings)
    # Shuffled once up front, so each batch is a contiguous slice (a view): PyTorch at its fastest.
    order = torch.randperm(images.shape[0], generator=torch.Generator().manual_seed(1))
    images, labels = images[order].contiguous(), labels[order].contiguous()
    batches = images.shape[0] // args.batch_size
    share = args.batch_size // world
    start, loss = None, None
    for step in range(args.warmup_steps + args.steps):
        if step == args.warmup_steps:
            start = time.perf_counter()
        first = (step % batches) * args.batch_size + rank * share
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss = F.cross_entropy(model(images[first:first + share]), labels[first:first + share])
        loss.backward()
        optimizer.step()
    seconds = time.perf_counter() - start
    local = optimizer.optim if args.zero else optimizer  # ZeRO: the optimizer of this process's share
    state_bytes = sum(value.numel() * value.element_size() for state in local.state.values()
                      for value in state.values() if torch.is_tensor(value) and value.dim() > 0)
    if rank == 0:
        print(json.dumps({"framework": "pytorch " + torch.__version__, "model": args.model, "threads": args.threads,
                          "ddp_world": world if args.ddp else 0, "bf16": args.bf16, "batch": args.batch_size,
                          "optimizer": "adam" if args.adam else "momentum", "zero": args.zero,
                          "optimizer_state_bytes": state_bytes,
                          "warmup_steps": args.warmup_steps, "steps": args.steps, "seconds": seconds,
                          "examples_per_s": args.steps * args.batch_size / seconds, "final_loss": float(loss),
                          "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}),
              flush=True)
    if args.ddp:
        import torch.distributed as dist
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model", choices=["mlp", "cnn"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup-steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--ddp", type=int, default=0, help="processes for DistributedDataParallel (0: none)")
    parser.add_argument("--bf16", action="store_true", help="autocast the forward pass and loss to bf16")
    parser.add_argument("--adam", action="store_true", help="Adam (learning rate 0.001) instead of SGD with momentum")
    parser.add_argument("--zero", action="store_true", help="with --ddp: ZeroRedundancyOptimizer (ZeRO stage 1)")
    args = parser.parse_args()
    if args.zero and not args.ddp:
        parser.error("--zero needs --ddp")
    if args.ddp:
        import torch.multiprocessing as mp
        mp.spawn(train, args=(args,), nprocs=args.ddp, join=True)
    else:
        train(0, args)


if __name__ == "__main__":
    main()
