"""Writes Fashion-MNIST (Debian's dataset-fashion-mnist) as NumPy archives, as a user with numpy would:
DIR/train.npz (np.savez: "images" u8[60000,28,28,1] and "labels" u8[60000], named as the example
classifiers' placeholders) and DIR/test.npz (np.savez_compressed: "x" f32[10000,28,28,1] scaled to
[0, 1] and "y" i64[10000]).

  fashion_mnist_npz.py SOURCE_DIR DIR
"""
import gzip
import sys

import numpy as np


def read(path, header):
    with gzip.open(path) as f:
        return np.frombuffer(f.read(), np.uint8, offset=header)


source, out = sys.argv[1], sys.argv[2]
np.savez(f"{out}/train.npz", images=read(f"{source}/train-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28, 1),
         labels=read(f"{source}/train-labels-idx1-ubyte.gz", 8))
np.savez_compressed(f"{out}/test.npz",
                    x=read(f"{source}/t10k-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28, 1).astype(np.float32) / 255,
                    y=read(f"{source}/t10k-labels-idx1-ubyte.gz", 8).astype(np.int64))
