#!/usr/bin/env python3
"""Writes a folder of images by class, and what Keras's image_dataset_from_directory makes of it, for
tests/runtime/image_folder_test.cc:

  images/cats/a.png, b.png          RGB PNGs, 7x5
  images/dogs/c.jpg                 an RGB JPEG, 9x6
  images/dogs/more/d.png            an RGBA PNG one folder down, 3x8
  images/zebras/e.PNG               a gray PNG, 4x4 (its extension in capitals)
  images/zebras/notes.txt           not an image: left out
  expected.npz                      "rgb": the images in Keras's order, 6x4 (color_mode="rgb");
                                    "gray": the same in grayscale; "labels"
  producer.txt                      the TensorFlow and Keras that computed them

    python3 -m venv tfvenv && tfvenv/bin/pip install tensorflow-cpu numpy
    tfvenv/bin/python tests/runtime/image_folder_reference/generate.py tests/runtime/image_folder_reference
"""
import os
import sys

import keras
import numpy as np
import tensorflow as tf

out = sys.argv[1]
root = f"{out}/images"
rng = np.random.default_rng(5)


def save(path, encoded):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(encoded.numpy())


save(f"{root}/cats/a.png", tf.io.encode_png(rng.integers(0, 256, (7, 5, 3), dtype=np.uint8)))
save(f"{root}/cats/b.png", tf.io.encode_png(rng.integers(0, 256, (7, 5, 3), dtype=np.uint8)))
save(f"{root}/dogs/c.jpg", tf.io.encode_jpeg(rng.integers(0, 256, (9, 6, 3), dtype=np.uint8), quality=90))
save(f"{root}/dogs/more/d.png", tf.io.encode_png(rng.integers(0, 256, (3, 8, 4), dtype=np.uint8)))
save(f"{root}/zebras/e.PNG", tf.io.encode_png(rng.integers(0, 256, (4, 4, 1), dtype=np.uint8)))
with open(f"{root}/zebras/notes.txt", "w") as f:
    f.write("not an image\n")


def load(color_mode):
    ds = keras.utils.image_dataset_from_directory(root, image_size=(6, 4), shuffle=False, batch_size=None,
                                                  color_mode=color_mode, label_mode="int")
    images, labels = zip(*[(i.numpy(), l.numpy()) for i, l in ds])
    return np.stack(images).astype(np.float32), np.array(labels, dtype=np.int64)


rgb, labels = load("rgb")
gray, _ = load("grayscale")
np.savez(f"{out}/expected.npz", rgb=rgb, gray=gray, labels=labels)
with open(f"{out}/producer.txt", "w") as f:
    f.write(f"TensorFlow {tf.__version__}, Keras {keras.__version__}\n")
