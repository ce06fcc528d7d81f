"""Writes Fashion-MNIST's first 600 test images and labels (Debian's dataset-fashion-mnist) as an npz,
DIR/fashion_mnist_600.npz ("images" u8[600,28,28,1], "labels" u8[600]): the examples
tests/runtime/tfrecord_reference/fashion_mnist_600.tfrecord holds, which TensorFlow wrote.

  fashion_mnist_600_npz.py SOURCE_DIR DIR
"""
import gzip
import sys

import numpy as np

source, out = sys.argv[1], sys.argv[2]
with gzip.open(f"{source}/t10k-images-idx3-ubyte.gz") as f:
    images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28, 1)[:600]
with gzip.open(f"{source}/t10k-labels-idx1-ubyte.gz") as f:
    labels = np.frombuffer(f.read(), np.uint8, offset=8)[:600]
np.savez(f"{out}/fashion_mnist_600.npz", images=images, labels=labels)
