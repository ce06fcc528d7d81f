#!/usr/bin/env python3
"""Reads a mirra model file from Python with flatc-generated code and the `flatbuffers` package, and
checks it on its own terms: identifier, format version, nodes in topological order, every weight's
size, CRC-32 (zlib) and 64-byte alignment. Prints a JSON summary; exits non-zero on any mismatch.

    read_model.py GENERATED_PYTHON_DIR MODEL.mirra [EXPECTED_PARAMETERS]
"""
import json
import sys
import zlib

sys.path.insert(0, sys.argv[1])
import flatbuffers  # noqa: E402
from mirra.fb.Model import Model  # noqa: E402

DTYPE_SIZES = {0: 4, 1: 8, 2: 4, 3: 8, 4: 1, 5: 1}


def main():
    path = sys.argv[2]
    data = bytearray(open(path, "rb").read())
    if not Model.ModelBufferHasIdentifier(data, 0):
        sys.exit(f"{path}: no MIRA identifier")
    model = Model.GetRootAs(data, 0)
    if model.FormatVersion() not in (1, 2, 3, 4):
        sys.exit(f"{path}: format version {model.FormatVersion()}")
    graph = model.Graph()
    ops = {}
    for i in range(graph.NodesLength()):
        node = graph.Nodes(i)
        ops[node.Op().decode()] = ops.get(node.Op().decode(), 0) + 1
        for k in range(node.InputsLength()):
            if node.Inputs(k).Node() >= i:
                sys.exit(f"node {i} reads a later node")
    parameters = 0
    for i in range(model.WeightsLength()):
        tensor = model.Weights(i)
        name = tensor.Name().decode()
        elements = 1
        for d in range(tensor.ShapeLength()):
            elements *= tensor.Shape(d)
        start = tensor._tab.Vector(tensor._tab.Offset(10)) if tensor.DataLength() else 0  # the `data` field
        payload = bytes(data[start:start + tensor.DataLength()])
        if len(payload) != elements * DTYPE_SIZES[tensor.Dtype()]:
            sys.exit(f"weight {name}: {len(payload)} bytes for {elements} elements")
        if zlib.crc32(payload) != tensor.Crc32():
            sys.exit(f"weight {name}: CRC-32 mismatch")
        if start % 64 != 0:
            sys.exit(f"weight {name}: data at offset {start}, not 64-byte aligned")
        parameters += elements
    metadata = model.Metadata()
    summary = {"nodes": graph.NodesLength(), "weights": model.WeightsLength(), "parameters": parameters,
               "optimizer": model.Signature().Optimizer().Kind().decode(), "producer": metadata.Producer().decode(),
               "ops": ops}
    print(json.dumps(summary, sort_keys=True))
    if len(sys.argv) > 3 and parameters != int(sys.argv[3]):
        sys.exit(f"{parameters} parameters, expected {sys.argv[3]}")


if __name__ == "__main__":
    main()
