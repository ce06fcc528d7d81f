#!/usr/bin/env python3
"""Writes resnet20_torch.json: ResNet-20's loss and the gradient of every trained variable, computed by
PyTorch in float64, for tests/strategies/resnet_reference_test.cc to hold mirra's to.

The network is examples/resnet_model.cc's, narrow (stage 1 of 4 channels) on 8x8x1 images so that the
file stays small: a 3x3 stem, three stages of three basic blocks (the first of stages 2 and 3 at stride
2), batch normalisation in training mode (epsilon 1e-3, the batch's biased variance), option-A
shortcuts (the input subsampled at stride 2 and zero-padded in its channels), global average pooling,
a dense layer of 10 and the mean softmax cross-entropy. TensorFlow's SAME padding at stride 2 puts the
extra row and column after, so those convolutions pad (0, 1) explicitly. Weights (reference_weights.py) and inputs come
from formulas both sides compute, variable by variable in the order of their sorted names:

    element j of variable k: offset + scale * sin(1.3 * j + 0.7 * k)

with (offset, scale) = (1, 0.1) for a gamma, (0, 0.1) for a beta or a bias, and (0, sqrt(2 / fan_in))
for a filter or the dense weights. Image value i is sin(0.37 * i), label of example e is 3e mod 10.

    apt-get install python3-torch   # Debian's PyTorch, for Debian's /usr/bin/python3
    /usr/bin/python3 tests/strategies/reference/resnet20_torch.py tests/strategies/reference/resnet20_torch.json
"""
import json
import math
import sys

import torch
import torch.nn.functional as F

from reference_weights import initial_value

WIDTH, SIZE, BATCH, CLASSES, EPSILON = 4, 8, 5, 10, 1e-3


def variable_shapes():
    shapes = {}

    def conv_bn(name, cin, cout):
        shapes[name + "/filter"] = [3, 3, cin, cout]
        shapes[name + "/bn/gamma"] = [cout]
        shapes[name + "/bn/beta"] = [cout]

    conv_bn("stem", 1, WIDTH)
    channels = WIDTH
    for stage in range(3):
        out = WIDTH << stage
        for block in range(3):
            prefix = f"stage{stage + 1}/block{block + 1}"
            conv_bn(prefix + "/conv1", channels, out)
            conv_bn(prefix + "/conv2", out, out)
            channels = out
    shapes["logits/w"] = [channels, CLASSES]
    shapes["logits/b"] = [CLASSES]
    return shapes


def main():
    shapes = variable_shapes()
    v = {name: initial_value(name, shapes[name], k) for k, name in enumerate(sorted(shapes))}
    images = torch.tensor([math.sin(0.37 * i) for i in range(BATCH * SIZE * SIZE)], dtype=torch.float64)
    x = images.reshape(BATCH, SIZE, SIZE, 1).permute(0, 3, 1, 2)  # NCHW
    labels = torch.tensor([3 * e % CLASSES for e in range(BATCH)])

    def conv_bn(name, x, stride):
        w = v[name + "/filter"].permute(3, 2, 0, 1)  # HWIO -> OIHW
        if stride == 1:
            y = F.conv2d(x, w, padding=1)
        else:
            y = F.conv2d(F.pad(x, (0, 1, 0, 1)), w, stride=stride)
        return F.batch_norm(y, None, None, v[name + "/bn/gamma"], v[name + "/bn/beta"], training=True, eps=EPSILON)

    h = F.relu(conv_bn("stem", x, 1))
    channels = WIDTH
    for stage in range(3):
        out = WIDTH << stage
        for block in range(3):
            prefix = f"stage{stage + 1}/block{block + 1}"
            stride = 2 if stage > 0 and block == 0 else 1
            y = conv_bn(prefix + "/conv2", F.relu(conv_bn(prefix + "/conv1", h, stride)), 1)
            shortcut = h[:, :, ::stride, ::stride]
            if out != channels:
                shortcut = F.pad(shortcut, (0, 0, 0, 0, 0, out - channels))
            h = F.relu(y + shortcut)
            channels = out
    logits = h.mean(dim=(2, 3)) @ v["logits/w"] + v["logits/b"]
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    reference = {
        "producer": f"PyTorch {torch.__version__}",
        "loss": loss.item(),
        "gradients": {name: [float(g) for g in v[name].grad.reshape(-1).tolist()] for name in sorted(v)},
    }
    with open(sys.argv[1], "w") as out:
        json.dump(reference, out, separators=(",", ":"))
        out.write("\n")


if __name__ == "__main__":
    main()
