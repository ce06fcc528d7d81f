#!/usr/bin/env python3
"""Writes gpt_torch.json: gpt-tiny's loss and the gradient of every trained variable for one batch,
computed by PyTorch in float64, for tests/strategies/gpt_reference_test.cc to hold mirra's to.

The network is examples/gpt_model.cc's at gpt-tiny's shape (4 layers, 4 heads, 128 wide, context 64,
84 tokens), written here with PyTorch's functions: token and learned position embeddings, pre-norm
blocks (layer_norm with epsilon 1e-5; causal attention with the scores scaled by 1 / sqrt(head size)
and masked with -inf; the exact, erf GELU), a final layer norm, the output projection tied to the
token embedding, and the mean cross-entropy over every token. Dense weights are [in, out] (x @ w), as
mirra stores them. Weights come from reference_weights.py's formula, variable by variable in the order
of their sorted names; the token of example e at position t is (3e + 7t + t^2) mod 84, its target
(5e + 11t + 1) mod 84.

The gradients are 0.8M numbers, too many to store, so each is stored as what pins it down: its sum of
squares, four projections on fixed waves (sum over j of g_j sin(0.1 (m + 1) j + m), m = 0..3) and 16
elements spread over it (element floor(n s / 16), s = 0..15).

    apt-get install python3-torch   # Debian's PyTorch, for Debian's /usr/bin/python3
    /usr/bin/python3 tests/strategies/reference/gpt_torch.py tests/strategies/reference/gpt_torch.json
"""
import json
import math
import sys

import torch
import torch.nn.functional as F

from reference_weights import initial_value

LAYERS, HEADS, EMBEDDING, CONTEXT, VOCAB, BATCH = 4, 4, 128, 64, 84, 2


def variable_shapes():
    shapes = {"gpt/token_embedding": [VOCAB, EMBEDDING], "gpt/position_embedding": [CONTEXT, EMBEDDING]}

    def norm(name):
        shapes[name + "/gamma"] = [EMBEDDING]
        shapes[name + "/beta"] = [EMBEDDING]

    def linear(name, fan_in, fan_out):
        shapes[name + "/kernel"] = [fan_in, fan_out]
        shapes[name + "/bias"] = [fan_out]

    for layer in range(LAYERS):
        block = f"gpt/block{layer}"
        norm(block + "/norm1")
        linear(block + "/attention/qkv", EMBEDDING, 3 * EMBEDDING)
        linear(block + "/attention/projection", EMBEDDING, EMBEDDING)
        norm(block + "/norm2")
        linear(block + "/mlp/fc", EMBEDDING, 4 * EMBEDDING)
        linear(block + "/mlp/projection", 4 * EMBEDDING, EMBEDDING)
    norm("gpt/final_norm")
    return shapes


def forward(w, tokens, targets):
    def norm(name, x):
        return F.layer_norm(x, (EMBEDDING,), w[name + "/gamma"], w[name + "/beta"], eps=1e-5)

    def linear(name, x):
        return x @ w[name + "/kernel"] + w[name + "/bias"]

    head = EMBEDDING // HEADS
    mask = torch.triu(torch.ones(CONTEXT, CONTEXT, dtype=torch.bool), diagonal=1)
    x = (w["gpt/token_embedding"][tokens] + w["gpt/position_embedding"]).reshape(-1, EMBEDDING)
    for layer in range(LAYERS):
        block = f"gpt/block{layer}"
        q, k, v = linear(block + "/attention/qkv", norm(block + "/norm1", x)).split(EMBEDDING, dim=1)
        q, k, v = (t.reshape(BATCH, CONTEXT, HEADS, head).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(head))
        attended = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v
        x = x + linear(block + "/attention/projection", attended.transpose(1, 2).reshape(-1, EMBEDDING))
        x = x + linear(block + "/mlp/projection", F.gelu(linear(block + "/mlp/fc", norm(block + "/norm2", x))))
    logits = norm("gpt/final_norm", x) @ w["gpt/token_embedding"].t()
    return F.cross_entropy(logits, targets.reshape(-1))


def summary(gradient):
    g = gradient.reshape(-1)
    n = g.numel()
    j = torch.arange(n, dtype=torch.float64)
    return {"sum_of_squares": float((g * g).sum()),
            "projections": [float((g * torch.sin(0.1 * (m + 1) * j + m)).sum()) for m in range(4)],
            "samples": [float(g[n * s // 16]) for s in range(16)]}


def main():
    shapes = variable_shapes()
    weights = {name: initial_value(name, shapes[name], k) for k, name in enumerate(sorted(shapes))}
    e = torch.arange(BATCH).reshape(-1, 1)
    t = torch.arange(CONTEXT).reshape(1, -1)
    tokens = (3 * e + 7 * t + t * t) % VOCAB
    targets = (5 * e + 11 * t + 1) % VOCAB
    loss = forward(weights, tokens, targets)
    loss.backward()
    with open(sys.argv[1], "w") as out:
        json.dump({"producer": f"PyTorch {torch.__version__}", "loss": loss.item(),
                   "gradients": {name: summary(weights[name].grad) for name in sorted(shapes)}}, out, indent=1)
        out.write("\n")


if __name__ == "__main__":
    main()
