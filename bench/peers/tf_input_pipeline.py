"""TensorFlow's input pipeline, the peer of `mirra bench data`: the same files read into batches as
tf.data reads them at its best (shuffled, parsed a batch at a time where it can be, batched,
prefetched), for a number of timed batches after warm-up; prints one JSON line (examples/s).

  tf_input_pipeline.py write DIR                 writes DIR/png.tfrecord (Fashion-MNIST's training
                                                 images as PNG bytes, int64 labels), the same
                                                 GZIP-compressed (DIR/png.tfrecord.gz), and
                                                 DIR/floats.tfrecord (the images as 784 floats)
  tf_input_pipeline.py read png|png_gzip|floats|npz DIR --parallel N [--batches B] [--batch-size S]
                                                 N: tf.data's num_parallel_calls (0: AUTOTUNE)
"""
import argparse
import gzip
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf

FASHION = "/usr/share/datasets/fashion-mnist"


def fashion_mnist():
    with gzip.open(f"{FASHION}/train-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28, 1)
    with gzip.open(f"{FASHION}/train-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return images, labels


def write(directory):
    images, labels = fashion_mnist()
    with (tf.io.TFRecordWriter(f"{directory}/png.tfrecord") as png,
          tf.io.TFRecordWriter(f"{directory}/png.tfrecord.gz", options="GZIP") as png_gzip,
          tf.io.TFRecordWriter(f"{directory}/floats.tfrecord") as floats):
        for image, label in zip(images, labels):
            label_feature = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)]))
            encoded = tf.io.encode_png(image).numpy()
            record = tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded])), "label": label_feature})).SerializeToString()
            png.write(record)
            png_gzip.write(record)
            floats.write(tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(float_list=tf.train.FloatList(value=image.reshape(-1).astype(np.float32) / 255)),
                "label": label_feature})).SerializeToString())
    np.savez(f"{directory}/images.npz", image=images, label=labels)


def batches_of(kind, directory, parallel, batch_size):
    """The batched dataset, as TensorFlow's guide has it at its fastest: the npz's arrays sliced, the
    float records parsed a batch at a time (tf.io.parse_example), the PNG records parsed and decoded
    one at a time (a batch of images does not decode at once), num_parallel_calls at a time; the GZIP
    file through the same shuffle buffer of 10,000 records as mirra's."""
    calls = tf.data.AUTOTUNE if parallel == 0 else parallel
    if kind == "npz":
        with np.load(f"{directory}/images.npz") as archive:
            images, labels = archive["image"], archive["label"]
        return tf.data.Dataset.from_tensor_slices((images, labels)).shuffle(len(labels), seed=1).repeat().batch(batch_size)
    if kind == "png_gzip":
        records = tf.data.TFRecordDataset([f"{directory}/png.tfrecord.gz"], compression_type="GZIP")
    else:
        records = tf.data.TFRecordDataset([f"{directory}/{kind}.tfrecord"])
    records = records.shuffle(10000, seed=1).repeat()
    if kind == "floats":
        spec = {"image": tf.io.FixedLenFeature([784], tf.float32), "label": tf.io.FixedLenFeature([], tf.int64)}
        return records.batch(batch_size).map(lambda batch: tf.io.parse_example(batch, spec), num_parallel_calls=calls)
    spec = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}

    def parse(record):
        example = tf.io.parse_single_example(record, spec)
        return tf.io.decode_png(example["image"], channels=1), example["label"]
    return records.map(parse, num_parallel_calls=calls).batch(batch_size)


def read(kind, directory, parallel, batches, batch_size, warmup=10):
    data = batches_of(kind, directory, parallel, batch_size).prefetch(tf.data.AUTOTUNE)
    iterator = iter(data)
    for _ in range(warmup):
        next(iterator)
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    seconds = time.perf_counter() - start
    print(json.dumps({"framework": "tf.data", "tensorflow": tf.__version__, "data": kind, "num_parallel_calls": parallel,
                      "batches": batches, "batch_size": batch_size, "examples_per_s": batches * batch_size / seconds}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("action", choices=["write", "read"])
    parser.add_argument("kind_or_dir")
    parser.add_argument("dir", nargs="?")
    parser.add_argument("--parallel", type=int, default=0)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=128)
    args = parser.parse_args()
    if args.action == "write":
        write(args.kind_or_dir)
    else:
        tf.config.threading.set_inter_op_parallelism_threads(max(args.parallel, 1) + 1)
        read(args.kind_or_dir, args.dir, args.parallel, args.batches, args.batch_size)
