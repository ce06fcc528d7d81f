#!/usr/bin/env python3
"""Writes resnet18_torch.json and resnet50_torch.json: the loss of a narrow ResNet-18 and ResNet-50 and
the gradient of every trained variable, computed by PyTorch in float64, for
tests/strategies/resnet_reference_test.cc to hold mirra's to.

The networks are examples/resnet_imagenet_model.cc's, which are torchvision's (v1.5) with the stem's
and stage 1's width a parameter: 4 channels for ResNet-18 and 2 for ResNet-50 here, on 32x32x3 images,
so that the files stay small. A 7x7/2 stem, batch normalisation and ReLU, 3x3/2 max-pooling padded by
one, four stages (ResNet-18: two basic blocks each; ResNet-50: 3, 4, 6, 3 bottleneck blocks, the 3x3
convolution at the block's stride, the last 1x1 four times wider), the first block of stages 2-4 at
stride 2, projection shortcuts (1x1 convolution and batch normalisation) where the shape changes, global
average pooling, a dense layer of 10 and the mean softmax cross-entropy. Every convolution pads
(k - 1) / 2 on each side, as torchvision's do. Batch normalisation is in training mode with epsilon
1e-3 (Keras's, which mirra's layer takes), on the batch's biased variance. Weights come from reference_weights.py's
formula, inputs from resnet20_torch.py's (image value i is sin(0.37 i), example e's label 3e mod 10).

    apt-get install python3-torch   # Debian's PyTorch, for Debian's /usr/bin/python3
    /usr/bin/python3 tests/strategies/reference/resnet_imagenet_torch.py tests/strategies/reference
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

from reference_weights import initial_value

SIZE, BATCH, CLASSES, EPSILON = 32, 5, 10, 1e-3
NETWORKS = {"resnet18": ([2, 2, 2, 2], False, 4), "resnet50": ([3, 4, 6, 3], True, 2)}


def block_layers(bottleneck, channels, width, stride):
    """(name, kernel, in, out, stride) of a block's convolutions, and its output channels."""
    if bottleneck:
        out = 4 * width
        layers = [("conv1", 1, channels, width, 1), ("conv2", 3, width, width, stride), ("conv3", 1, width, out, 1)]
    else:
        out = width
        layers = [("conv1", 3, channels, width, stride), ("conv2", 3, width, width, 1)]
    if stride != 1 or channels != out:
        layers.append(("shortcut", 1, channels, out, stride))
    return layers, out


def architecture(blocks, bottleneck, width):
    """Every convolution as (name, kernel, in, out, stride), by block."""
    stem = ("stem", 7, 3, width, 2)
    stages, channels = [], width
    for stage, count in enumerate(blocks):
        for block in range(count):
            stride = 2 if stage > 0 and block == 0 else 1
            layers, out = block_layers(bottleneck, channels, width << stage, stride)
            prefix = f"stage{stage + 1}/block{block + 1}/"
            stages.append([(prefix + name, k, cin, cout, s) for name, k, cin, cout, s in layers])
            channels = out
    return stem, stages, channels


def reference(blocks, bottleneck, width):
    stem, stages, channels = architecture(blocks, bottleneck, width)
    shapes = {}
    for name, k, cin, cout, _ in [stem] + [layer for block in stages for layer in block]:
        shapes[name + "/filter"] = [k, k, cin, cout]
        shapes[name + "/bn/gamma"] = [cout]
        shapes[name + "/bn/beta"] = [cout]
    shapes["logits/w"] = [channels, CLASSES]
    shapes["logits/b"] = [CLASSES]
    v = {name: initial_value(name, shapes[name], k) for k, name in enumerate(sorted(shapes))}

    images = torch.tensor([math.sin(0.37 * i) for i in range(BATCH * SIZE * SIZE * 3)], dtype=torch.float64)
    x = images.reshape(BATCH, SIZE, SIZE, 3).permute(0, 3, 1, 2)  # NCHW
    labels = torch.tensor([3 * e % CLASSES for e in range(BATCH)])

    def conv_bn(layer, x):
        name, k, _, _, stride = layer
        w = v[name + "/filter"].permute(3, 2, 0, 1)  # HWIO -> OIHW
        y = F.conv2d(x, w, stride=stride, padding=(k - 1) // 2)
        return F.batch_norm(y, None, None, v[name + "/bn/gamma"], v[name + "/bn/beta"], training=True, eps=EPSILON)

    h = F.max_pool2d(F.relu(conv_bn(stem, x)), 3, stride=2, padding=1)
    for block in stages:
        main = [layer for layer in block if not layer[0].endswith("shortcut")]
        shortcut = [layer for layer in block if layer[0].endswith("shortcut")]
        y = h
        for i, layer in enumerate(main):
            y = conv_bn(layer, y)
            if i + 1 < len(main):
                y = F.relu(y)
        h = F.relu(y + (conv_bn(shortcut[0], h) if shortcut else h))
    logits = h.mean(dim=(2, 3)) @ v["logits/w"] + v["logits/b"]
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    return {
        "producer": f"PyTorch {torch.__version__}",
        "loss": loss.item(),
        "gradients": {name: [float(g) for g in v[name].grad.reshape(-1).tolist()] for name in sorted(v)},
    }


def main():
    for name, (blocks, bottleneck, width) in NETWORKS.items():
        with open(os.path.join(sys.argv[1], name + "_torch.json"), "w") as out:
            json.dump(reference(blocks, bottleneck, width), out, separators=(",", ":"))
            out.write("\n")


if __name__ == "__main__":
    main()
