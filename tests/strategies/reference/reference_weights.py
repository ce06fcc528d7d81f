"""The weights the reference scripts give every trained variable, by formula, so that mirra's tests can
compute the same ones: element j of the k-th variable (by sorted name) is

    offset + scale * sin(1.3 * j + 0.7 * k)

with (offset, scale) = (1, 0.1) for a gamma, (0, 0.1) for a beta or a bias (a name ending "/b" or
"bias"), and (0, sqrt(2 / fan_in)) for a filter, dense weights or an embedding (fan_in: the product of
all dims but the last)."""
import math

import torch


def initial_value(name, shape, k):
    n = math.prod(shape)
    if name.endswith("gamma"):
        offset, scale = 1.0, 0.1
    elif name.endswith(("beta", "/b", "bias")):
        offset, scale = 0.0, 0.1
    else:
        offset, scale = 0.0, math.sqrt(2.0 / math.prod(shape[:-1]))
    values = [offset + scale * math.sin(1.3 * j + 0.7 * k) for j in range(n)]
    return torch.tensor(values, dtype=torch.float64).reshape(shape).requires_grad_()
