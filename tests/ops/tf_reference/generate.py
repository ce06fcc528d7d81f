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
          "f16": tf.float16}


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
            entry["gradients"] = [as_json(g) for g in tape.gradient(objective, xs)]
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
    cases.append(case("MaxPool of a zero-size batch", "MaxPool",
                      {"ksize": [2, 2], "strides": [2, 2], "padding": "VALID", "data_format": "NHWC"},
                      [tensor("f32", [0, 2, 2, 1], [])], lambda x: tf.nn.max_pool2d(x, ksize=2, strides=2, padding="VALID")))
    cases.append(case("SparseSoftmaxCrossEntropyWithLogits of a zero-size batch", "SparseSoftmaxCrossEntropyWithLogits", {},
                      [tensor("f32", [0, 3], []), tensor("i64", [0], [])],
                      lambda logits, labels: tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=logits, labels=labels)))
    cases.append(case("BiasAdd NCHW", "BiasAdd", {"data_format": "NCHW"},
                      [tensor("f32", [1, 2, 1, 2], [1, 2, 3, 4]), tensor("f32", [2], [10, 20])],
                      lambda x, b: tf.nn.bias_add(x, b, data_format="NCHW"), differentiate=True))

    with open(sys.argv[1], "w") as out:
        json.dump({"producer": f"TensorFlow {tf.__version__}", "cases": cases}, out, indent=1)
        out.write("\n")


if __name__ == "__main__":
    main()
