"""The Fashion-MNIST IDX files as NumPy arrays, for the peers (PyTorch, TensorFlow) of mirra's benchmarks."""
import gzip
import struct

import numpy as np

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    """An IDX file (gzip) as a uint8 array of its dimensions."""
    with gzip.open(path, "rb") as f:
        rank = struct.unpack(">I", f.read(4))[0] & 0xFF
        dims = struct.unpack(">" + "I" * rank, f.read(4 * rank))
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(dims)
