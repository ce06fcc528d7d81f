#!/usr/bin/env python3
"""Writes TFRecord files of tf.train.Example with TensorFlow itself, and the values they hold, for
tests/runtime/tfrecord_file_test.cc (which reads them with mirra and compares):

  every_kind.tfrecord      6 Examples: "f" float [3], "i" int64 [2] (64-bit extremes among them),
                           "raw" bytes of 4 u8 values, "png" an RGB PNG [5, 4, 3], "gray" a gray PNG
                           [5, 4, 1], "jpeg" a gray JPEG [8, 6, 1]
  every_kind.tfrecord.gz   the same, GZIP-compressed (TFRecordWriter's compression_type="GZIP")
  shard-0000{0,1}-of-00002 the same 6 records cut in two files (4 and 2)
  expected.npz             each feature's values per example; "jpeg" as tf.io.decode_jpeg decodes it
  fashion_mnist_600.tfrecord  Fashion-MNIST's first 600 test images (Debian's dataset-fashion-mnist) as
                           a classifier's data: "image" a gray PNG [28, 28, 1], "label" int64
  producer.txt             the TensorFlow that wrote them

    python3 -m venv tfvenv && tfvenv/bin/pip install tensorflow-cpu numpy
    tfvenv/bin/python tests/runtime/tfrecord_reference/generate.py tests/runtime/tfrecord_reference
"""
import gzip
import sys

import numpy as np
import tensorflow as tf

out = sys.argv[1]
rng = np.random.default_rng(3)
n = 6
values = {
    "f": rng.normal(size=(n, 3)).astype(np.float32),
    "i": np.array([[-(2**63) + 1, 2**62], [0, -1], [7, 11], [2**31, -(2**31)], [5, 6], [12345678901, -3]], dtype=np.int64),
    "raw": rng.integers(0, 256, size=(n, 4), dtype=np.uint8),
    "png": rng.integers(0, 256, size=(n, 5, 4, 3), dtype=np.uint8),
    "gray": rng.integers(0, 256, size=(n, 5, 4, 1), dtype=np.uint8),
}
jpeg_sources = rng.integers(0, 256, size=(n, 8, 6, 1), dtype=np.uint8)


def example(k):
    jpeg = tf.io.encode_jpeg(jpeg_sources[k], quality=90).numpy()
    features = {
        "f": tf.train.Feature(float_list=tf.train.FloatList(value=values["f"][k])),
        "i": tf.train.Feature(int64_list=tf.train.Int64List(value=values["i"][k])),
        "raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[values["raw"][k].tobytes()])),
        "png": tf.train.Feature(bytes_list=tf.train.BytesList(value=[tf.io.encode_png(values["png"][k]).numpy()])),
        "gray": tf.train.Feature(bytes_list=tf.train.BytesList(value=[tf.io.encode_png(values["gray"][k]).numpy()])),
        "jpeg": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg])),
    }
    return tf.train.Example(features=tf.train.Features(feature=features)), tf.io.decode_jpeg(jpeg, channels=1).numpy()


records, decoded = zip(*(example(k) for k in range(n)))
serialized = [r.SerializeToString() for r in records]
for name, options in [("every_kind.tfrecord", None), ("every_kind.tfrecord.gz", tf.io.TFRecordOptions(compression_type="GZIP"))]:
    with tf.io.TFRecordWriter(f"{out}/{name}", options) as writer:
        for s in serialized:
            writer.write(s)
for shard, part in enumerate([serialized[:4], serialized[4:]]):
    with tf.io.TFRecordWriter(f"{out}/shard-{shard:05d}-of-00002") as writer:
        for s in part:
            writer.write(s)
np.savez(f"{out}/expected.npz", jpeg=np.stack(decoded), **values)
fashion = "/usr/share/datasets/fashion-mnist"
with gzip.open(f"{fashion}/t10k-images-idx3-ubyte.gz") as f:
    images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28, 1)[:600]
with gzip.open(f"{fashion}/t10k-labels-idx1-ubyte.gz") as f:
    labels = np.frombuffer(f.read(), np.uint8, offset=8)[:600]
with tf.io.TFRecordWriter(f"{out}/fashion_mnist_600.tfrecord") as writer:
    for image, label in zip(images, labels):
        features = {"image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[tf.io.encode_png(image).numpy()])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)]))}
        writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())
with open(f"{out}/producer.txt", "w") as f:
    f.write(f"TensorFlow {tf.__version__}\n")
