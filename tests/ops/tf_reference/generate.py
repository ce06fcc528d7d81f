#!/usr/bin/env python3
"""Writes cases.json: edge cases of mirra's TensorFlow-named ops, computed by TensorFlow itself.

Each case names a mirra op with its attributes and inputs, and holds what TensorFlow 2.21 returns for
the same computation: the outputs, or that it refuses the input, and for differentiable cases the
gradient of sum(output * upstream) for each input. tests/ops/tf_semantics_test.cc runs every case
through mirra and compares. docs/ops.md lists what is checked and where mirra differs on purpose.

    python3 -m venv tfvenv && tfvenv/bin/pip install tensorflow-cpu numpy
    tfvenv/bin/python tests/ops/tf_reference/generate.py tests/ops/tf_reference/cases.json
"""
import json
import math
import sys

import numpy as np
import tensorflow as tf

DTYPES = {"f32": tf.float32, "f64": tf.float64, "i32": tf.int32, "i64": tf.int64, "bf16": tf.bfloat16,
          "f16": tf.float16, "bool": tf.bool}


def encode_values(array):
    def one(v):
        if isinstance(v, (float, np.floating)):
            if math.isnan(v):
                return "nan"
            if math.isinf(v):
                return "inf" if v > 0 else "-inf"
            return float(v)
        return int(v)
    return [one(v) for v in np.asarray(array).reshape(-1).tolist()]


def tensor(dtype, shape, values):
    """An input as cases.json holds it: numbers, or "nan", "inf" and "-inf"."""
    return {"dtype": dtype, "shape": list(shape), "values": list(values)}


def as_json(t):
    if isinstance(t, tf.IndexedSlices):  # a gather's gradient, as TensorFlow returns it
        t = tf.convert_to_tensor(t)
    name = {tf.float32: "f32", tf.float64: "f64", tf.int32: "i32", tf.int64: "i64", tf.bool: "bool", tf.bfloat16: "bf16",
            tf.float16: "f16"}[t.dtype]
    values = t.numpy()
    if name in ("bf16", "f16"):
        values = values.astype(np.float32)  # exact: every 16-bit float is a float
    return {"dtype": name, "shape": list(t.shape), "values": encode_values(values)}


def tf_input(spec):
    dtype = DTYPES[spec["dtype"]]
    values = np.array([float(v) for v in spec["values"]], dtype=dtype.as_numpy_dtype)
    return tf.constant(values.reshape(spec["shape"]), dtype=dtype)


def case(name, op, attrs, inputs, compute, differentiate=False, exception=None):
    """compute(tf inputs) -> tf output or tuple of outputs, as TensorFlow defines the op.

    exception: (why mirra differs, mirra's outputs) where mirra deliberately departs from TensorFlow;
    the test then holds mirra to those outputs, and docs/ops.md lists the case.
    """
    entry = {"name": name, "op": op, "attrs": attrs, "inputs": inputs}
    if exception:
        entry["exception"] = exception[0]
        entry["mirra_outputs"] = exception[1]
    xs = [tf_input(i) for i in inputs]
    try:
        with tf.GradientTape(persistent=True) as tape:
            for x in xs:
                tape.watch(x)
            out = compute(*xs)
            outs = out if isinstance(out, (tuple, list)) else [out]
            if differentiate:
                upstream = tf.reshape(tf.range(1, tf.size(outs[0]) + 1, dtype=outs[0].dtype), tf.shape(outs[0]))
                objective = tf.reduce_sum(outs[0] * upstream)
        entry["outputs"] = [as_json(o) for o in outs]
        if differentiate:
            entry["upstream"] = as_json(upstream)
            # An input the output does not depend on (for TensorFlow's rule) gets zeros, as in mirra.
            entry["gradients"] = [as_json(g) for g in
                                  tape.gradient(objective, xs, unconnected_gradients=tf.UnconnectedGradients.ZERO)]
    except (tf.errors.InvalidArgumentError, ValueError) as error:
        entry["error"] = str(error).splitlines()[0][:200]
    return entry


def main():
    f23 = tensor("f32", [2, 3], [1, -2, 3, 4, 5, -6])
    cases = []

    # Reductions: an absent axis list reduces over all axes, an empty one over none.
    for op, raw, sugar in [("ReduceSum", tf.raw_ops.Sum, tf.reduce_sum), ("ReduceMean", tf.raw_ops.Mean, tf.reduce_mean),
                           ("ReduceMax", tf.raw_ops.Max, tf.reduce_max)]:
        cases.append(case(f"{op} without axes reduces every axis", op, {"keep_dims": False}, [f23],
                          lambda x, s=sugar: s(x), differentiate=True))
        for axes in ([], [-1], [0, -1], [1, 0]):
            for keep in (False, True):
                cases.append(case(f"{op} axes {axes} keep_dims {keep}", op, {"axes": axes, "keep_dims": keep}, [f23],
                                  lambda x, r=raw, a=axes, k=keep: r(input=x, axis=tf.constant(a, tf.int32), keep_dims=k),
                                  differentiate=True))
        cases.append(case(f"{op} of a scalar, keep_dims", op, {"keep_dims": True}, [tensor("f32", [], [2.5])],
                          lambda x, s=sugar: s(x, keepdims=True)))
        cases.append(case(f"{op} of a scalar over no axes", op, {"axes": [], "keep_dims": False}, [tensor("f32", [], [2.5])],
                          lambda x, r=raw: r(input=x, axis=tf.constant([], tf.int32), keep_dims=False)))
        for axes in ([0], [1]):
            cases.append(case(f"{op} of f32[0,3] over {axes}", op, {"axes": axes, "keep_dims": False}, [tensor("f32", [0, 3], [])],
                              lambda x, r=raw, a=axes: r(input=x, axis=tf.constant(a, tf.int32), keep_dims=False)))
        cases.append(case(f"{op} axis out of range", op, {"axes": [2], "keep_dims": False}, [f23],
                          lambda x, r=raw: r(input=x, axis=tf.constant([2], tf.int32), keep_dims=False)))
        for axes in ([0, 0], [1, -1]):
            cases.append(case(f"{op} with the axis {axes[0]} twice", op, {"axes": axes, "keep_dims": False}, [f23],
                              lambda x, r=raw, a=axes: r(input=x, axis=tf.constant(a, tf.int32), keep_dims=False)))
        cases.append(case(f"{op} with a NaN", op, {"axes": [1], "keep_dims": False}, [tensor("f32", [2, 2], [1, "nan", 2, 3])],
                          lambda x, r=raw: r(input=x, axis=tf.constant([1], tf.int32), keep_dims=False)))
        cases.append(case(f"{op} of i32 with negatives", op, {"axes": [1], "keep_dims": False},
                          [tensor("i32", [2, 3], [-3, -4, 2, 7, 0, 1])],
                          lambda x, r=raw: r(input=x, axis=tf.constant([1], tf.int32), keep_dims=False)))
    cases.append(case("ReduceMean of i32[0,2] over 0", "ReduceMean", {"axes": [0], "keep_dims": False}, [tensor("i32", [0, 2], [])],
                      lambda x: tf.raw_ops.Mean(input=x, axis=tf.constant([0], tf.int32), keep_dims=False)))
    cases.append(case("ReduceMax of i32[0,2] over 0", "ReduceMax", {"axes": [0], "keep_dims": False}, [tensor("i32", [0, 2], [])],
                      lambda x: tf.raw_ops.Max(input=x, axis=tf.constant([0], tf.int32), keep_dims=False)))
    cases.append(case("ReduceMax with a NaN over the leading axis", "ReduceMax", {"axes": [0], "keep_dims": False},
                      [tensor("f32", [2, 2], [1, "nan", 2, 3])],
                      lambda x: tf.raw_ops.Max(input=x, axis=tf.constant([0], tf.int32), keep_dims=False)))
    cases.append(case("ReduceMax ties share the gradient", "ReduceMax", {"axes": [1], "keep_dims": False},
                      [tensor("f32", [2, 3], [3, 1, 3, 2, 2, 2])],
                      lambda x: tf.reduce_max(x, axis=1), differentiate=True))

    # ArgMax: the first of equal values; negative axes; an empty axis is an error.
    cases.append(case("ArgMax ties take the first", "ArgMax", {"axis": 1}, [tensor("f32", [2, 3], [3, 1, 3, 2, 2, 2])],
                      lambda x: tf.raw_ops.ArgMax(input=x, dimension=1, output_type=tf.int64)))
    cases.append(case("ArgMax passes over NaN", "ArgMax", {"axis": 0}, [tensor("f32", [3], [1, "nan", 3])],
                      lambda x: tf.raw_ops.ArgMax(input=x, dimension=0, output_type=tf.int64)))
    cases.append(case("ArgMax negative axis", "ArgMax", {"axis": -2}, [f23],
                      lambda x: tf.raw_ops.ArgMax(input=x, dimension=-2, output_type=tf.int64)))
    cases.append(case("ArgMax over an empty axis", "ArgMax", {"axis": 0}, [tensor("f32", [0, 2], [])],
                      lambda x: tf.raw_ops.ArgMax(input=x, dimension=0, output_type=tf.int64)))
    cases.append(case("ArgMax along a non-empty axis of a zero-size tensor", "ArgMax", {"axis": 1}, [tensor("f32", [0, 2], [])],
                      lambda x: tf.raw_ops.ArgMax(input=x, dimension=1, output_type=tf.int64)))

    # Element-wise: Maximum's ties and NaNs, Relu at 0, integer Div, Cast to integers.
    cases.append(case("Maximum ties send the gradient to x", "Maximum", {},
                      [tensor("f32", [4], [1, 2, 3, -1]), tensor("f32", [4], [1, 3, 2, -1])],
                      lambda x, y: tf.raw_ops.Maximum(x=x, y=y), differentiate=True))
    cases.append(case("Maximum with NaN", "Maximum", {},
                      [tensor("f32", [3], ["nan", 1, "nan"]), tensor("f32", [3], [1, "nan", "nan"])],
                      lambda x, y: tf.raw_ops.Maximum(x=x, y=y)))
    cases.append(case("Maximum broadcasts", "Maximum", {}, [f23, tensor("f32", [3], [0, 0, 4])],
                      lambda x, y: tf.raw_ops.Maximum(x=x, y=y), differentiate=True))
    # The ops transformers need: Minimum as Maximum, comparisons with NaN and broadcasting, Abs and Sign
    # at the zeros and NaN, Erf, Softplus far out on both sides, Gelu both ways.
    cases.append(case("Minimum ties send the gradient to x", "Minimum", {},
                      [tensor("f32", [4], [1, 2, 3, -1]), tensor("f32", [4], [1, 3, 2, -1])],
                      lambda x, y: tf.raw_ops.Minimum(x=x, y=y), differentiate=True))
    cases.append(case("Minimum with NaN", "Minimum", {},
                      [tensor("f32", [3], ["nan", 1, "nan"]), tensor("f32", [3], [1, "nan", "nan"])],
                      lambda x, y: tf.raw_ops.Minimum(x=x, y=y)))
    cases.append(case("Minimum broadcasts", "Minimum", {}, [f23, tensor("f32", [3], [0, 0, 4])],
                      lambda x, y: tf.raw_ops.Minimum(x=x, y=y), differentiate=True))
    nan_pairs = [tensor("f32", [2, 3], [1, "nan", 2, 3, "-inf", 0]), tensor("f32", [3], [1, "nan", "inf"])]
    for op, raw in [("Equal", tf.raw_ops.Equal), ("NotEqual", tf.raw_ops.NotEqual), ("Less", tf.raw_ops.Less),
                    ("LessEqual", tf.raw_ops.LessEqual), ("Greater", tf.raw_ops.Greater), ("GreaterEqual", tf.raw_ops.GreaterEqual)]:
        cases.append(case(f"{op} with NaN and infinities, broadcast", op, {}, nan_pairs, lambda x, y, r=raw: r(x=x, y=y)))
        cases.append(case(f"{op} of i64", op, {}, [tensor("i64", [3], [-2, 0, 5]), tensor("i64", [], [0])],
                          lambda x, y, r=raw: r(x=x, y=y)))
    signed = tensor("f32", [6], [-2.5, -0.0, 0, 3, "nan", "-inf"])
    cases.append(case("Abs of zeros, NaN and infinity", "Abs", {}, [signed], lambda x: tf.raw_ops.Abs(x=x)))
    cases.append(case("Abs's gradient is the sign", "Abs", {}, [tensor("f64", [3], [-2, 0.5, 3])],
                      lambda x: tf.raw_ops.Abs(x=x), differentiate=True))
    cases.append(case("Sign of zeros, NaN and infinity", "Sign", {}, [signed], lambda x: tf.raw_ops.Sign(x=x)))
    spread = tensor("f64", [7], [-30, -4, -0.5, 0, 0.5, 4, 30])
    cases.append(case("Erf", "Erf", {}, [spread], lambda x: tf.raw_ops.Erf(x=x), differentiate=True))
    cases.append(case("Softplus far out on both sides", "Softplus", {}, [tensor("f32", [7], [-100, -20, -1, 0, 1, 20, 100])],
                      lambda x: tf.raw_ops.Softplus(features=x), differentiate=True))
    cases.append(case("Softplus in f64", "Softplus", {}, [spread], lambda x: tf.raw_ops.Softplus(features=x), differentiate=True))
    for approximate in (False, True):
        for dtype in ("f32", "f64"):
            cases.append(case(f"Gelu approximate={approximate} {dtype}", "Gelu", {"approximate": approximate},
                              [tensor(dtype, [9], [-10, -3, -1, -0.1, 0, 0.1, 1, 3, 10])],
                              lambda x, a=approximate: tf.nn.gelu(x, approximate=a), differentiate=True))
    # LeakyRelu at its kink and NaN; Pow at its edges (0^0, negative bases, 0 to negative powers) and
    # its gradients where the base is not positive; the logical ops; SelectV2 broadcasting three ways.
    kinked = tensor("f32", [6], [-3, -0.5, -0.0, 0, 2, "nan"])
    cases.append(case("LeakyRelu at its default slope", "LeakyRelu", {}, [kinked], lambda x: tf.nn.leaky_relu(x)))
    for dtype in ("f32", "f64"):
        cases.append(case(f"LeakyRelu's gradient at 0 is alpha ({dtype})", "LeakyRelu", {"alpha": 0.01},
                          [tensor(dtype, [5], [-3, -0.5, 0, 0.5, 2])], lambda x: tf.nn.leaky_relu(x, alpha=0.01), differentiate=True))
    cases.append(case("Pow at its edges", "Pow", {},
                      [tensor("f32", [8], [0, 0, -2, -8, 2, "inf", "nan", 1]), tensor("f32", [8], [0, -1, 0.5, 3, -2, -1, 0, "nan"])],
                      lambda x, y: tf.raw_ops.Pow(x=x, y=y)))
    cases.append(case("Pow's gradients where the base is 0 or negative", "Pow", {},
                      [tensor("f64", [4], [0, -2, -1.5, 3]), tensor("f64", [4], [2, 3, 2, 0.5])],
                      lambda x, y: tf.raw_ops.Pow(x=x, y=y), differentiate=True))
    cases.append(case("Pow broadcasts", "Pow", {}, [tensor("f32", [2, 3], [1, 2, 3, 4, 5, 6]), tensor("f32", [3], [2, 0.5, -1])],
                      lambda x, y: tf.raw_ops.Pow(x=x, y=y), differentiate=True))
    bools = tensor("bool", [2, 3], [1, 0, 1, 0, 0, 1])
    for op, raw in [("LogicalAnd", tf.raw_ops.LogicalAnd), ("LogicalOr", tf.raw_ops.LogicalOr)]:
        cases.append(case(f"{op} broadcasts", op, {}, [bools, tensor("bool", [3], [1, 1, 0])], lambda x, y, r=raw: r(x=x, y=y)))
    cases.append(case("LogicalNot", "LogicalNot", {}, [bools], lambda x: tf.raw_ops.LogicalNot(x=x)))
    cases.append(case("SelectV2 broadcasts its three operands", "SelectV2", {},
                      [tensor("bool", [2, 1], [1, 0]), tensor("f32", [3], [1, 2, 3]), tensor("f32", [2, 3], [-1, -2, -3, -4, -5, -6])],
                      lambda c, t, e: tf.raw_ops.SelectV2(condition=c, t=t, e=e), differentiate=True))
    cases.append(case("SelectV2 with a scalar else value", "SelectV2", {},
                      [bools, tensor("f64", [2, 3], [1, 2, 3, 4, 5, 6]), tensor("f64", [], [-7])],
                      lambda c, t, e: tf.raw_ops.SelectV2(condition=c, t=t, e=e), differentiate=True))
    cases.append(case("SelectV2 of i64", "SelectV2", {}, [bools, tensor("i64", [3], [1, 2, 3]), tensor("i64", [2, 1], [8, 9])],
                      lambda c, t, e: tf.raw_ops.SelectV2(condition=c, t=t, e=e)))
    cases.append(case("SelectV2 whose operands do not broadcast", "SelectV2", {},
                      [tensor("bool", [2], [1, 0]), tensor("f32", [3], [1, 2, 3]), tensor("f32", [3], [4, 5, 6])],
                      lambda c, t, e: tf.raw_ops.SelectV2(condition=c, t=t, e=e)))
    # Range counts as TensorFlow counts, with negative deltas, fractions in f32 and f64, and refusals.
    for start, limit, delta, dtype in [(0, 5, 1, "i32"), (5, 1, -2, "i32"), (5, 5, -2, "i64"), (-3, 4, 7, "i64"),
                                       (0, 1, 0.1, "f32"), (-3.5, 2, 1.25, "f64"), (1, 0, -0.3, "f32"), (0, 5, 1, "f64")]:
        cases.append(case(f"Range {start} to {limit} by {delta} in {dtype}", "Range",
                          {"start": start, "limit": limit, "delta": delta, "dtype": dtype}, [],
                          lambda s=start, l=limit, d=delta, t=dtype: tf.range(tf.constant(s, DTYPES[t]), tf.constant(l, DTYPES[t]),
                                                                              tf.constant(d, DTYPES[t]))))
    for start, limit, delta in [(5, 1, 1), (1, 5, -1), (0, 5, 0)]:
        cases.append(case(f"Range {start} to {limit} by {delta} is refused", "Range",
                          {"start": start, "limit": limit, "delta": delta, "dtype": "i32"}, [],
                          lambda s=start, l=limit, d=delta: tf.raw_ops.Range(start=s, limit=l, delta=d)))
    # Tile, ExpandDims, Squeeze.
    cases.append(case("Tile", "Tile", {"multiples": [2, 1, 3]}, [tensor("f32", [2, 1, 2], [1, 2, 3, 4])],
                      lambda x: tf.tile(x, [2, 1, 3]), differentiate=True))
    cases.append(case("Tile by zero", "Tile", {"multiples": [0, 2]}, [f23], lambda x: tf.tile(x, [0, 2])))
    cases.append(case("Tile with the wrong number of multiples", "Tile", {"multiples": [2]}, [f23], lambda x: tf.tile(x, [2])))
    for axis in (0, 2, -1, -3):
        cases.append(case(f"ExpandDims at {axis}", "ExpandDims", {"axis": axis}, [f23], lambda x, a=axis: tf.expand_dims(x, a),
                          differentiate=True))
    cases.append(case("ExpandDims out of range", "ExpandDims", {"axis": 3}, [f23], lambda x: tf.expand_dims(x, 3)))
    ones = tensor("f32", [1, 2, 1, 3, 1], [1, 2, 3, 4, 5, 6])
    for axes in ([], [2], [0, -1]):
        cases.append(case(f"Squeeze {axes}", "Squeeze", {"axis": axes}, [ones], lambda x, a=axes: tf.squeeze(x, a),
                          differentiate=True))
    cases.append(case("Squeeze of a dim that is not 1", "Squeeze", {"axis": [1]}, [ones], lambda x: tf.squeeze(x, [1])))
    # Gathers, segment sums and batched products (embeddings and attention).
    table = tensor("f32", [4, 3], list(range(12)))
    cases.append(case("GatherV2 with repeated indices", "GatherV2", {"axis": 0}, [table, tensor("i64", [2, 2], [3, 0, 3, 3])],
                      lambda p, i: tf.raw_ops.GatherV2(params=p, indices=i, axis=0), differentiate=True))
    cases.append(case("GatherV2 along a negative axis", "GatherV2", {"axis": -1}, [table, tensor("i32", [4], [2, 0, 2, 1])],
                      lambda p, i: tf.raw_ops.GatherV2(params=p, indices=i, axis=-1), differentiate=True))
    cases.append(case("GatherV2 of a scalar index", "GatherV2", {"axis": 0}, [table, tensor("i32", [], [1])],
                      lambda p, i: tf.raw_ops.GatherV2(params=p, indices=i, axis=0), differentiate=True))
    for bad in (4, -1):
        cases.append(case(f"GatherV2 index {bad} out of range", "GatherV2", {"axis": 0}, [table, tensor("i64", [2], [0, bad])],
                          lambda p, i: tf.raw_ops.GatherV2(params=p, indices=i, axis=0)))
    cases.append(case("UnsortedSegmentSum drops negative ids", "UnsortedSegmentSum", {"num_segments": 4},
                      [table, tensor("i32", [4], [2, -1, 0, 2])],
                      lambda d, i: tf.raw_ops.UnsortedSegmentSum(data=d, segment_ids=i, num_segments=4), differentiate=True))
    cases.append(case("UnsortedSegmentSum id past num_segments", "UnsortedSegmentSum", {"num_segments": 2},
                      [table, tensor("i32", [4], [0, 1, 2, 0])],
                      lambda d, i: tf.raw_ops.UnsortedSegmentSum(data=d, segment_ids=i, num_segments=2)))
    ramp24 = [0.1 * v - 1 for v in range(24)]
    for adj_x in (False, True):
        for adj_y in (False, True):
            cases.append(case(f"BatchMatMulV2 broadcasts batch dims, adj_x={adj_x} adj_y={adj_y}", "BatchMatMulV2",
                              {"adj_x": adj_x, "adj_y": adj_y},
                              [tensor("f64", [2, 1, 2, 2], ramp24[:8]), tensor("f64", [3, 2, 2], ramp24[:12])],
                              lambda x, y, a=adj_x, b=adj_y: tf.raw_ops.BatchMatMulV2(x=x, y=y, adj_x=a, adj_y=b),
                              differentiate=True))
    cases.append(case("BatchMatMulV2 of a matrix and a batch", "BatchMatMulV2", {},
                      [tensor("f32", [2, 3], ramp24[:6]), tensor("f32", [4, 3, 2], ramp24)],
                      lambda x, y: tf.raw_ops.BatchMatMulV2(x=x, y=y), differentiate=True))
    cases.append(case("BatchMatMulV2 batch dims that do not broadcast", "BatchMatMulV2", {},
                      [tensor("f32", [2, 2, 3], ramp24[:12]), tensor("f32", [3, 3, 2], ramp24[:18])],
                      lambda x, y: tf.raw_ops.BatchMatMulV2(x=x, y=y)))
    cases.append(case("Relu's gradient at 0 is 0", "Relu", {}, [tensor("f32", [3], [-1, 0, 1])],
                      lambda x: tf.raw_ops.Relu(features=x), differentiate=True))
    cases.append(case("Div of i32 truncates toward 0", "Div", {},
                      [tensor("i32", [4], [7, -7, 7, -7]), tensor("i32", [4], [2, 2, -2, -2])],
                      lambda x, y: tf.raw_ops.Div(x=x, y=y)))
    cases.append(case("Div of i32 by zero", "Div", {}, [tensor("i32", [2], [1, 2]), tensor("i32", [2], [1, 0])],
                      lambda x, y: tf.raw_ops.Div(x=x, y=y)))
    cases.append(case("Cast f32 to i32 truncates", "Cast", {"dtype": "i32"}, [tensor("f32", [4], [1.7, -1.7, 2.5, -0.5])],
                      lambda x: tf.raw_ops.Cast(x=x, DstT=tf.int32)))
    cases.append(case("Cast of NaN and out-of-range floats to i32", "Cast", {"dtype": "i32"},
                      [tensor("f32", [4], ["nan", 1e10, -1e10, "inf"])], lambda x: tf.raw_ops.Cast(x=x, DstT=tf.int32),
                      exception=("TensorFlow's CPU kernel returns what the x86 conversion instruction gives, INT_MIN for all "
                                 "four (a conversion C++ leaves undefined); mirra saturates to the nearest representable "
                                 "value and maps NaN to 0",
                                 [tensor("i32", [4], [0, 2147483647, -2147483648, 2147483647])])))

    # Casts to the 16-bit floats: to nearest, ties to even; f16 overflows to infinity and keeps subnormals.
    ties_and_edges = [1 + 2**-8, 1 + 3 * 2**-8, 1 / 3, -2.5, 65504, 65519.99, 65520, 1 + 2**-11, 1 + 3 * 2**-11, 2**-24,
                      2**-25, 1.5 * 2**-25, 3e38, "inf", "-inf", "nan", 0]
    for half in ("bf16", "f16"):
        cases.append(case(f"Cast f32 to {half} rounds to nearest, ties to even", "Cast", {"dtype": half},
                          [tensor("f32", [len(ties_and_edges)], ties_and_edges)],
                          lambda x, half=half: tf.raw_ops.Cast(x=x, DstT=DTYPES[half])))
        cases.append(case(f"Cast {half} to f32 is exact", "Cast", {"dtype": "f32"},
                          [tensor(half, [4], [0.333984375, -65504 if half == "f16" else -3.3895313892515355e38, 2**-24, "nan"])],
                          lambda x: tf.raw_ops.Cast(x=x, DstT=tf.float32)))

    # Windows: MaxPool's gradient goes to the first maximum of each window.
    cases.append(case("MaxPool ties send the gradient to the first", "MaxPool",
                      {"ksize": [2, 2], "strides": [2, 2], "padding": "VALID", "data_format": "NHWC"},
                      [tensor("f32", [1, 2, 4, 1], [1, 1, 2, 5, 1, 1, 5, 2])],
                      lambda x: tf.nn.max_pool2d(x, ksize=2, strides=2, padding="VALID"), differentiate=True))
    cases.append(case("MaxPool overlapping windows with ties", "MaxPool",
                      {"ksize": [2, 2], "strides": [1, 1], "padding": "VALID", "data_format": "NHWC"},
                      [tensor("f32", [1, 3, 3, 1], [1, 2, 2, 2, 2, 1, 0, 2, 2])],
                      lambda x: tf.nn.max_pool2d(x, ksize=2, strides=1, padding="VALID"), differentiate=True))
    cases.append(case("MaxPool SAME pads after", "MaxPool",
                      {"ksize": [2, 2], "strides": [2, 2], "padding": "SAME", "data_format": "NHWC"},
                      [tensor("f32", [1, 3, 3, 1], [-1, -2, -3, -4, -5, -6, -7, -8, -9])],
                      lambda x: tf.nn.max_pool2d(x, ksize=2, strides=2, padding="SAME"), differentiate=True))
    cases.append(case("AvgPool SAME counts only real elements", "AvgPool",
                      {"ksize": [2, 2], "strides": [2, 2], "padding": "SAME", "data_format": "NHWC"},
                      [tensor("f32", [1, 3, 3, 1], [1, 2, 3, 4, 5, 6, 7, 8, 9])],
                      lambda x: tf.nn.avg_pool2d(x, ksize=2, strides=2, padding="SAME"), differentiate=True))

    # Shapes: zero-size batches, negative axes, one-hot out of range.
    cases.append(case("Softmax of a zero-size batch", "Softmax", {}, [tensor("f32", [0, 3], [])], lambda x: tf.nn.softmax(x)))
    cases.append(case("LogSoftmax of a zero-size batch", "LogSoftmax", {}, [tensor("f32", [0, 3], [])], lambda x: tf.nn.log_softmax(x)))
    cases.append(case("OneHot out-of-range indices give zero rows", "OneHot", {"depth": 3},
                      [tensor("i64", [4], [-1, 0, 3, 2])], lambda i: tf.one_hot(i, 3)))
    cases.append(case("Concat negative axis", "Concat", {"axis": -1},
                      [tensor("f32", [2, 1], [1, 2]), tensor("f32", [2, 2], [3, 4, 5, 6])],
                      lambda a, b: tf.concat([a, b], axis=-1), differentiate=True))
    cases.append(case("Slice size -1 runs to the end", "Slice", {"begin": [0, 1], "size": [-1, -1]}, [f23],
                      lambda x: tf.slice(x, [0, 1], [-1, -1]), differentiate=True))
    cases.append(case("Pad", "Pad", {"paddings": [1, 0, 0, 2]}, [f23],
                      lambda x: tf.pad(x, [[1, 0], [0, 2]]), differentiate=True))
    cases.append(case("Transpose", "Transpose", {"perm": [1, 0]}, [f23], lambda x: tf.transpose(x, [1, 0]), differentiate=True))
    cases.append(case("Reshape of a zero-size tensor with -1", "Reshape", {"shape": [-1, 3]}, [tensor("f32", [0, 3], [])],
                      lambda x: tf.reshape(x, [-1, 3])))
    cases.append(case("Split negative axis", "Split", {"axis": -1, "num_split": 3}, [f23],
                      lambda x: tf.split(x, 3, axis=-1)))
    cases.append(case("SparseSoftmaxCrossEntropyWithLogits label out of range", "SparseSoftmaxCrossEntropyWithLogits", {},
                      [f23, tensor("i64", [2], [0, 3])],
                      lambda logits, labels: tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=logits, labels=labels)))
    cases.append(case("SparseSoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits", {},
                      [f23, tensor("i64", [2], [2, 0])],
                      lambda logits, labels: tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=logits, labels=labels)))
    cases.append(case("MatMul of a zero-size batch", "MatMul", {}, [tensor("f32", [0, 3], []), tensor("f32", [3, 2], [1, 2, 3, 4, 5, 6])],
                      lambda a, b: tf.matmul(a, b), differentiate=True))
    cases.append(case("MatMul transposed", "MatMul", {"transpose_a": True, "transpose_b": True},
                      [tensor("f32", [3, 2], [1, 2, 3, 4, 5, 6]), tensor("f32", [2, 3], [1, -1, 2, 0, 1, 1])],
                      lambda a, b: tf.matmul(a, b, transpose_a=True, transpose_b=True), differentiate=True))
    cases.append(case("Conv2D of a zero-size batch", "Conv2D", {"strides": [1, 1], "padding": "SAME", "data_format": "NHWC"},
                      [tensor("f32", [0, 3, 3, 1], []), tensor("f32", [2, 2, 1, 2], [1, 2, 3, 4, 5, 6, 7, 8])],
                      lambda x, f: tf.nn.conv2d(x, f, strides=1, padding="SAME"),
                      exception=("TensorFlow's CPU kernel returns its input, f32[0,3,3,1], for an empty batch; mirra returns "
                                 "f32[0,3,3,2], the shape TensorFlow's own shape function gives for this filter",
                                 [tensor("f32", [0, 3, 3, 2], [])])))
    cases.append(case("Conv2D SAME with stride 2", "Conv2D", {"strides": [2, 2], "padding": "SAME", "data_format": "NHWC"},
                      [tensor("f32", [1, 4, 4, 1], list(range(16))), tensor("f32", [3, 3, 1, 1], [1, 0, -1, 2, 0, -2, 1, 0, -1])],
                      lambda x, f: tf.nn.conv2d(x, f, strides=2, padding="SAME"), differentiate=True))
    conv_x = tensor("f32", [1, 5, 4, 2], [((i * 7) % 11) - 5 for i in range(40)])
    conv_f = tensor("f32", [3, 2, 2, 2], [((i * 5) % 7) - 3 for i in range(24)])
    cases.append(case("Conv2D EXPLICIT padding, more after than before, stride 2", "Conv2D",
                      {"strides": [2, 2], "padding": "EXPLICIT", "explicit_paddings": [0, 0, 1, 2, 0, 1, 0, 0],
                       "data_format": "NHWC"},
                      [conv_x, conv_f],
                      lambda x, f: tf.nn.conv2d(x, f, strides=2, padding=[[0, 0], [1, 2], [0, 1], [0, 0]]), differentiate=True))
    cases.append(case("Conv2D EXPLICIT padding, symmetric (the ResNets')", "Conv2D",
                      {"strides": [1, 1], "padding": "EXPLICIT", "explicit_paddings": [0, 0, 1, 1, 1, 1, 0, 0],
                       "data_format": "NHWC"},
                      [conv_x, conv_f],
                      lambda x, f: tf.nn.conv2d(x, f, strides=1, padding=[[0, 0], [1, 1], [1, 1], [0, 0]]), differentiate=True))
    cases.append(case("MaxPool of a zero-size batch", "MaxPool",
                      {"ksize": [2, 2], "strides": [2, 2], "padding": "VALID", "data_format": "NHWC"},
                      [tensor("f32", [0, 2, 2, 1], [])], lambda x: tf.nn.max_pool2d(x, ksize=2, strides=2, padding="VALID")))
    cases.append(case("SparseSoftmaxCrossEntropyWithLogits of a zero-size batch", "SparseSoftmaxCrossEntropyWithLogits", {},
                      [tensor("f32", [0, 3], []), tensor("i64", [0], [])],
                      lambda logits, labels: tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=logits, labels=labels)))
    cases.append(case("BiasAdd NCHW", "BiasAdd", {"data_format": "NCHW"},
                      [tensor("f32", [1, 2, 1, 2], [1, 2, 3, 4]), tensor("f32", [2], [10, 20])],
                      lambda x, b: tf.nn.bias_add(x, b, data_format="NCHW"), differentiate=True))

    # Batch normalisation: training (the batch's statistics, the moving update, n / (n - 1) for the
    # variance output), inference with given statistics, both layouts and 5-D, a batch of one, a
    # constant channel with epsilon 0, a large mean, an empty batch, the refusals, and the gradient.
    def batch_norm(attrs):
        def compute(x, scale, offset, mean, variance):
            return tuple(tf.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=mean, variance=variance, **attrs))
        return compute

    def batch_norm_grad(attrs):
        def compute(dy, x, scale, r1, r2, r3):
            return tuple(tf.raw_ops.FusedBatchNormGradV3(y_backprop=dy, x=x, scale=scale, reserve_space_1=r1,
                                                         reserve_space_2=r2, reserve_space_3=r3, **attrs))
        return compute

    def exact_batch_norm(inputs, epsilon):
        """FusedBatchNormV3's outputs in training (NHWC, factor 1), computed in float64."""
        x = np.array(inputs[0]["values"], dtype=np.float64).reshape(inputs[0]["shape"])
        scale, offset = (np.array(i["values"], dtype=np.float64) for i in inputs[1:3])
        axes = tuple(range(x.ndim - 1))
        mean, variance = x.mean(axis=axes), x.var(axis=axes)
        n = x.size // x.shape[-1]
        y = (x - mean) / np.sqrt(variance + epsilon) * scale + offset
        f32 = lambda a: [float(v) for v in np.asarray(a, dtype=np.float32).reshape(-1)]
        return [tensor("f32", list(x.shape), f32(y)), tensor("f32", [x.shape[-1]], f32(mean)),
                tensor("f32", [x.shape[-1]], f32(variance * n / max(n - 1, 1))), tensor("f32", [x.shape[-1]], f32(mean)),
                tensor("f32", [x.shape[-1]], f32(variance)), tensor("f32", [0], [])]

    def ramp(shape, scale=0.1, shift=0.0, dtype="f32"):
        n = int(np.prod(shape))
        return tensor(dtype, shape, [shift + scale * ((7 * i) % 11 - 5) for i in range(n)])

    params2 = [tensor("f32", [2], [1.5, -0.5]), tensor("f32", [2], [0.1, 0.2]), tensor("f32", [2], [0.3, 0.4]),
               tensor("f32", [2], [2.0, 3.0])]
    for fmt, shape in (("NHWC", [2, 2, 3, 2]), ("NCHW", [2, 2, 3, 2]), ("NDHWC", [1, 2, 2, 3, 2]), ("NCDHW", [2, 2, 1, 3, 2])):
        for training in (True, False):
            attrs = {"epsilon": 0.001, "data_format": fmt, "is_training": training}
            inputs = [ramp(shape)] + params2
            exception = None
            if len(shape) == 5:
                outputs = batch_norm(attrs)(*[tf_input(i) for i in inputs])
                mirra = [as_json(o) for o in outputs[:5]] + [tensor("f32", [0], [])]
                why = ("TensorFlow's CPU kernel returns reserve_space_3, which holds nothing, as f32[] for 5-D inputs and "
                       "as f32[0] for 4-D ones; mirra returns f32[0] for both")
                if not training:
                    mirra[1:5] = [inputs[3], inputs[4], inputs[3], inputs[4]]
                    why += (". In 5-D inference TensorFlow leaves outputs 1 to 4 (the statistics) unwritten (their values "
                            "vary from run to run); mirra returns the given mean and variance there, as TensorFlow "
                            "does for 4-D inputs")
                exception = (why, mirra)
            cases.append(case(f"FusedBatchNormV3 {fmt} {'training' if training else 'inference'}", "FusedBatchNormV3", attrs,
                              inputs, batch_norm(attrs), differentiate=True, exception=exception))
    attrs = {"epsilon": 0.001, "exponential_avg_factor": 0.25, "data_format": "NHWC", "is_training": True}
    cases.append(case("FusedBatchNormV3 moving statistics a quarter of the way", "FusedBatchNormV3", attrs,
                      [ramp([2, 2, 3, 2])] + params2, batch_norm(attrs), differentiate=True))
    attrs = {"epsilon": 0.001, "data_format": "NHWC", "is_training": True}
    cases.append(case("FusedBatchNormV3 training without given statistics", "FusedBatchNormV3", attrs,
                      [ramp([2, 2, 3, 2])] + params2[:2] + [tensor("f32", [0], []), tensor("f32", [0], [])],
                      batch_norm(attrs), differentiate=True))
    cases.append(case("FusedBatchNormV3 over a batch of one", "FusedBatchNormV3", attrs,
                      [tensor("f32", [1, 1, 1, 2], [1.0, 2.0])] + params2, batch_norm(attrs), differentiate=True))
    large = [ramp([4, 3, 3, 2], scale=0.25, shift=1000.0)] + params2
    cases.append(case("FusedBatchNormV3 large mean", "FusedBatchNormV3", attrs, large, batch_norm(attrs),
                      exception=("TensorFlow's f32 kernel loses digits to a large mean (y off by 4e-5 here); mirra is "
                                 "held to the exact values, computed in float64 and rounded once",
                                 exact_batch_norm(large, 0.001))))
    cases.append(case("FusedBatchNormV3 of an empty batch", "FusedBatchNormV3", attrs,
                      [tensor("f32", [0, 2, 2, 2], [])] + params2, batch_norm(attrs)))
    zero_eps = {"epsilon": 0.0, "data_format": "NHWC", "is_training": True}
    cases.append(case("FusedBatchNormV3 epsilon 0 on a constant channel", "FusedBatchNormV3", zero_eps,
                      [tensor("f32", [2, 1, 2, 2], [1, 3, 1, 5, 1, 2, 1, 4])] + params2, batch_norm(zero_eps)))
    cases.append(case("FusedBatchNormV3 bf16 x with f32 statistics", "FusedBatchNormV3", attrs,
                      [ramp([2, 2, 3, 2], dtype="bf16")] + params2, batch_norm(attrs)))
    cases.append(case("FusedBatchNormV3 of a 3-D input", "FusedBatchNormV3", attrs,
                      [ramp([2, 3, 2])] + params2, batch_norm(attrs)))
    cases.append(case("FusedBatchNormV3 scale of the wrong size", "FusedBatchNormV3", attrs,
                      [ramp([2, 2, 3, 2]), tensor("f32", [3], [1, 2, 3])] + params2[1:], batch_norm(attrs)))
    inference = {"epsilon": 0.001, "data_format": "NHWC", "is_training": False}
    cases.append(case("FusedBatchNormV3 inference without given statistics", "FusedBatchNormV3", inference,
                      [ramp([2, 2, 3, 2])] + params2[:2] + [tensor("f32", [0], []), tensor("f32", [0], [])],
                      batch_norm(inference)))
    moving = {"epsilon": 0.001, "exponential_avg_factor": 0.5, "data_format": "NHWC", "is_training": True}
    cases.append(case("FusedBatchNormV3 moving update without given statistics", "FusedBatchNormV3", moving,
                      [ramp([2, 2, 3, 2])] + params2[:2] + [tensor("f32", [0], []), tensor("f32", [0], [])],
                      batch_norm(moving)))
    for fmt in ("NHWC", "NCHW"):
        for training in (True, False):
            attrs = {"epsilon": 0.001, "data_format": fmt, "is_training": training}
            cases.append(case(f"FusedBatchNormGradV3 {fmt} {'training' if training else 'inference'}", "FusedBatchNormGradV3",
                              attrs, [ramp([2, 2, 3, 2], scale=0.3, shift=0.2), ramp([2, 2, 3, 2]), params2[0], params2[2],
                                      params2[3], tensor("f32", [0], [])], batch_norm_grad(attrs)))

    with open(sys.argv[1], "w") as out:
        json.dump({"producer": f"TensorFlow {tf.__version__}", "cases": cases}, out, indent=1)
        out.write("\n")


if __name__ == "__main__":
    main()
