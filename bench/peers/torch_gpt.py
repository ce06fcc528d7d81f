#!/usr/bin/python3
"""PyTorch peer of mirra's GPT example (examples/gpt_model.cc), on the same Shakespeare token files.

The same model written with PyTorch's modules as nanoGPT writes it (pre-norm blocks, causal attention
from batched products and a -inf mask, the exact GELU, the output projection tied to the token
embedding), initialised by the same scheme (normal 0.02, the residual projections 0.02 / sqrt(2
layers), zero biases, unit layer-norm scales), trained by the same recipe: AdamW (betas 0.9 and 0.99,
epsilon 1e-8, weight decay 0.1 on matrices and embeddings only), gradients clipped to norm 1, mirra's
schedule (linear warmup from rate / warmup, then cosine to alpha times the rate over decay steps),
windows of context + 1 tokens at random offsets. The validation loss is the mean over every
non-overlapping window of val.bin, as `mirra train --eval` takes it.

Prints one JSON line: the steady-state tokens/s (after --warmup-steps), the peak RSS, the training loss
of every step, and with --eval the final validation loss. --ddp W runs DistributedDataParallel over W
processes (gloo) of --threads threads, each with 1/W of the batch; --bf16 runs the forward pass under
torch.autocast("cpu", torch.bfloat16).

Usage: torch_gpt.py DATA_DIR [--layers L --heads H --embedding E --context T --vocab V] [--batch-size B]
                    [--steps N] [--warmup-steps W] [--lr R] [--schedule-warmup S] [--decay-steps D]
                    [--alpha A] [--threads T] [--ddp W] [--bf16] [--eval] [--seed S]
"""
import argparse
import json
import math
import os
import resource
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, embedding, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(embedding), nn.LayerNorm(embedding)
        self.qkv, self.attention_projection = nn.Linear(embedding, 3 * embedding), nn.Linear(embedding, embedding)
        self.fc, self.mlp_projection = nn.Linear(embedding, 4 * embedding), nn.Linear(4 * embedding, embedding)

    def forward(self, x, mask):
        batch, context, embedding = x.shape
        head = embedding // self.heads
        q, k, v = self.qkv(self.norm1(x)).split(embedding, dim=2)
        q, k, v = (t.view(batch, context, self.heads, head).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(head))
        attended = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v
        x = x + self.attention_projection(attended.transpose(1, 2).reshape(batch, context, embedding))
        return x + self.mlp_projection(F.gelu(self.fc(self.norm2(x))))


class Gpt(nn.Module):
    def __init__(self, layers, heads, embedding, context, vocab):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, embedding)
        self.position_embedding = nn.Parameter(torch.zeros(context, embedding))
        self.blocks = nn.ModuleList(Block(embedding, heads) for _ in range(layers))
        self.final_norm = nn.LayerNorm(embedding)
        self.mask = torch.triu(torch.ones(context, context, dtype=torch.bool), diagonal=1)  # not a buffer: gloo broadcasts no bools
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "norm" in name:
                nn.init.ones_(p)
            elif name.endswith("projection.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, tokens, targets):
        x = self.token_embedding(tokens) + self.position_embedding
        for block in self.blocks:
            x = block(x, self.mask)
        logits = self.final_norm(x) @ self.token_embedding.weight.t()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def learning_rate(step, base, warmup, decay_steps, alpha):
    """mirra's schedule (runtime/training/learning_rate_schedule.cc): warmup, then cosine."""
    if step < warmup:
        return base * (step + 1) / warmup
    progress = min(step - warmup, decay_steps) / decay_steps if decay_steps > 0 else 0.0
    return base * (alpha + (1 - alpha) * 0.5 * (1 + math.cos(math.pi * progress)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--embedding", type=int, default=128)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=84)
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--warmup-steps", type=int, default=5, help="steps left out of the throughput")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--schedule-warmup", type=int, default=100)
    parser.add_argument("--decay-steps", type=int, default=1900)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ddp", type=int, default=0)
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--eval", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.ddp:
        torch.multiprocessing.spawn(run, args=(args,), nprocs=args.ddp)
    else:
        run(0, args)


def run(rank, args):
    torch.set_num_threads(args.threads)
    world = max(args.ddp, 1)
    if args.ddp:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(args.seed)
    model = Gpt(args.layers, args.heads, args.embedding, args.context, args.vocab)
    decayed = [p for name, p in model.named_parameters() if p.dim() >= 2]
    kept = [p for name, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decayed, "weight_decay": 0.1}, {"params": kept, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.99), eps=1e-8)
    trained = torch.nn.parallel.DistributedDataParallel(model) if args.ddp else model
    train = np.memmap(os.path.join(args.data, "train.bin"), dtype=np.uint16, mode="r")
    rng = np.random.default_rng(args.seed)
    share = args.batch_size // world + (1 if rank < args.batch_size % world else 0)
    first = sum(args.batch_size // world + (1 if r < args.batch_size % world else 0) for r in range(rank))
    losses, start = [], None
    for step in range(args.steps):
        if step == args.warmup_steps:
            start = time.perf_counter()
        offsets = rng.integers(0, len(train) - args.context - 1, size=args.batch_size)[first:first + share]
        windows = torch.from_numpy(np.stack([train[o:o + args.context + 1].astype(np.int64) for o in offsets]))
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, args.lr, args.schedule_warmup, args.decay_steps, args.alpha)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss = trained(windows[:, :-1], windows[:, 1:])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    seconds = time.perf_counter() - start
    result = {"peer": "pytorch", "version": torch.__version__, "threads": args.threads, "ddp": args.ddp, "bf16": args.bf16,
              "tokens_per_s": (args.steps - args.warmup_steps) * args.batch_size * args.context / seconds,
              "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "losses": losses}
    if args.eval and rank == 0:
        val = np.fromfile(os.path.join(args.data, "val.bin"), dtype=np.uint16).astype(np.int64)
        windows = (len(val) - 1) // args.context
        inputs = torch.from_numpy(val[:windows * args.context].reshape(windows, args.context))
        targets = torch.from_numpy(val[1:windows * args.context + 1].reshape(windows, args.context))
        model.eval()
        with torch.no_grad():
            total = sum(model(inputs[i:i + 256], targets[i:i + 256]).item() * len(inputs[i:i + 256])
                        for i in range(0, windows, 256))
        result["val_loss"] = total / windows
    if rank == 0:
        print(json.dumps(result))
    if args.ddp:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
