#!/usr/bin/python3
"""PyTorch peer of `mirra bench training`: the same models (MLP 784-256-128-10 with ReLU; the TF
tutorial CNN conv5x5x32-pool-conv5x5x64-pool-fc1024-fc10; ResNet-20 as examples/resnet_model.cc builds
it; torchvision's ResNet-18 and ResNet-50 on synthetic 224x224x3 images with --synthetic), the same
settings (SGD, momentum 0.9, learning rate 0.05, batch 128) on the same Fashion-MNIST files, timed over
the same steady-state window (after warm-up steps). With --channels-last the images and the
convolutional models are in channels-last memory (oneDNN's fastest layout for PyTorch on a CPU). With --ddp W it runs DistributedDataParallel over W processes (gloo),
each with --threads threads and 1/W of the global batch. With --bf16 the forward pass and the loss
run under torch.autocast("cpu", torch.bfloat16) (PyTorch's mixed precision: bf16 products and
convolutions, f32 weights). With --adam the optimizer is Adam (learning rate 0.001); with --zero (and
--ddp) it is wrapped in ZeroRedundancyOptimizer, PyTorch's ZeRO stage 1: each process keeps the state of
its share of the parameters. Prints one JSON line, with the optimizer state's bytes in process 0.

Usage: torch_training.py {mlp,cnn,resnet20,resnet18,resnet50} [--threads T] [--steps N] [--warmup-steps W]
                         [--batch-size B] [--ddp W] [--bf16] [--adam] [--zero] [--synthetic] [--channels-last]
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


class ResNet20(nn.Module):
    """He et al.'s CIFAR ResNet-20 for 28x28x1 images, as examples/resnet_model.cc: option-A shortcuts
    (subsampled, zero-padded channels), batch normalisation with Keras's epsilon and momentum."""

    def __init__(self):
        super().__init__()

        def conv_bn(cin, cout, stride):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
                                 nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01))

        self.stem = conv_bn(1, 16, 1)
        self.blocks = nn.ModuleList()
        channels = 16
        for stage in range(3):
            out = 16 << stage
            for block in range(3):
                stride = 2 if stage > 0 and block == 0 else 1
                self.blocks.append(nn.ModuleList([conv_bn(channels, out, stride), conv_bn(out, out, 1)]))
                channels = out
        self.fc = nn.Linear(channels, 10)

    def forward(self, x):
        x = F.relu(self.stem(x))
        for conv1, conv2 in self.blocks:
            y = conv2(F.relu(conv1(x)))
            shortcut = x
            if y.shape[2] != x.shape[2]:
                shortcut = shortcut[:, :, ::2, ::2]
            if y.shape[1] != x.shape[1]:
                shortcut = F.pad(shortcut, (0, 0, 0, 0, 0, y.shape[1] - x.shape[1]))
            x = F.relu(y + shortcut)
        return self.fc(x.mean(dim=(2, 3)))


def make_model(name):
    if name in ("resnet18", "resnet50"):
        import torchvision
        return getattr(torchvision.models, name)(num_classes=1000)
    return {"mlp": Mlp, "cnn": Cnn, "resnet20": ResNet20}[name]()


def train(rank, args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    world = args.ddp or 1
    model = make_model(args.model)
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    if args.channels_last:
        model = model.to(memory_format=memory_format)
    if args.ddp:
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29541")
        dist.init_process_group("gloo", rank=rank, world_size=world)
        model = nn.parallel.DistributedDataParallel(model)
    if args.synthetic:  # two batches of random images of the model's shape, as mirra's --synthetic
        shape, classes = ((3, 224, 224), 1000) if args.model in ("resnet18", "resnet50") else ((1, 28, 28), 10)
        images = torch.rand((2 * args.batch_size,) + shape, generator=torch.Generator().manual_seed(1))
        labels = torch.arange(2 * args.batch_size) % classes
    else:
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
    images, labels = images[order].contiguous(memory_format=memory_format), labels[order].contiguous()
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
                          "data": "synthetic" if args.synthetic else "fashion-mnist", "channels_last": args.channels_last,
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
    parser.add_argument("model", choices=["mlp", "cnn", "resnet20", "resnet18", "resnet50"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup-steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--ddp", type=int, default=0, help="processes for DistributedDataParallel (0: none)")
    parser.add_argument("--bf16", action="store_true", help="autocast the forward pass and loss to bf16")
    parser.add_argument("--adam", action="store_true", help="Adam (learning rate 0.001) instead of SGD with momentum")
    parser.add_argument("--zero", action="store_true", help="with --ddp: ZeroRedundancyOptimizer (ZeRO stage 1)")
    parser.add_argument("--synthetic", action="store_true", help="random images of the model's shape")
    parser.add_argument("--channels-last", action="store_true", help="channels-last images and model")
    args = parser.parse_args()
    if args.model in ("resnet18", "resnet50") and not args.synthetic:
        parser.error(f"{args.model} reads 224x224x3 images: pass --synthetic")
    if args.zero and not args.ddp:
        parser.error("--zero needs --ddp")
    if args.ddp:
        import torch.multiprocessing as mp
        mp.spawn(train, args=(args,), nprocs=args.ddp, join=True)
    else:
        train(0, args)


if __name__ == "__main__":
    main()
