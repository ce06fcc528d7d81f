"""TensorFlow peer of `mirra bench training`: the same models (MLP 784-256-128-10 with ReLU; the TF
tutorial CNN conv5x5x32-pool-conv5x5x64-pool-fc1024-fc10, NHWC; ResNet-20 as examples/resnet_model.cc
builds it; Keras's ResNet50 from keras.applications on synthetic 224x224x3 images with --synthetic),
the same settings (SGD, momentum 0.9, learning rate 0.05, global batch 128) on the same Fashion-MNIST
files, timed over the same steady-state window (after warm-up steps). It runs TensorFlow at its fastest: a tf.function that takes
--steps-per-call steps per call, batches from a cached, prefetched tf.data pipeline, with --intra and
--inter op threads; with
--mirrored N, tf.distribute.MirroredStrategy over N logical CPU devices, each replica computing its
share of every global batch. With --bf16, Keras's "mixed_bfloat16" policy (bf16 computation, f32
variables; the last layer's output in f32, as TensorFlow's mixed-precision guide advises). With
--files png|png_gzip|npz DIR, the batches come from those files instead of memory, as tf.data reads
them at its fastest (bench/peers/tf_input_pipeline.py: shuffled, parsed and decoded with AUTOTUNE,
batched, prefetched). Prints one JSON line.

Runs in the virtual environment bench/training_vs_tensorflow.py makes (tensorflow-cpu from PyPI).
Usage: tf_training.py {mlp,cnn,resnet20,resnet50} [--intra T] [--inter T] [--steps N] [--warmup-steps W]
                      [--steps-per-call K] [--batch-size B] [--mirrored N] [--bf16] [--synthetic]
                      [--files png|png_gzip|npz DIR]
"""
import argparse
import json
import os
import resource
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_input_pipeline  # noqa: E402
from fashion_mnist import DATA, read_idx  # noqa: E402


def resnet20():
    """He et al.'s CIFAR ResNet-20 for 28x28x1 images with option-A shortcuts, Keras's batch
    normalisation (momentum 0.99, epsilon 1e-3), as examples/resnet_model.cc."""
    layers = tf.keras.layers

    def conv_bn(x, channels, stride):
        x = layers.Conv2D(channels, 3, stride, padding="same", use_bias=False, kernel_initializer="he_normal")(x)
        return layers.BatchNormalization()(x)

    inputs = tf.keras.Input((28, 28, 1))
    x = layers.ReLU()(conv_bn(inputs, 16, 1))
    channels = 16
    for stage in range(3):
        out = 16 << stage
        for block in range(3):
            stride = 2 if stage > 0 and block == 0 else 1
            y = conv_bn(layers.ReLU()(conv_bn(x, out, stride)), out, 1)
            shortcut = x
            if stride != 1 or out != channels:
                shortcut = layers.Lambda(lambda t, s=stride, p=out - channels: tf.pad(
                    t[:, ::s, ::s, :], [[0, 0], [0, 0], [0, 0], [0, p]]))(x)
            x = layers.ReLU()(layers.Add()([y, shortcut]))
            channels = out
    x = layers.GlobalAveragePooling2D()(x)
    return tf.keras.Model(inputs, layers.Dense(10, dtype="float32")(x))


def build_model(name):
    layers = tf.keras.layers
    if name == "resnet20":
        return resnet20()
    if name == "resnet50":
        return tf.keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3), classes=1000,
                                              classifier_activation=None)
    if name == "mlp":
        body = [layers.Flatten(), layers.Dense(256, activation="relu"), layers.Dense(128, activation="relu")]
    else:
        body = [layers.Conv2D(32, 5, padding="same", activation="relu"), layers.MaxPool2D(2),
                layers.Conv2D(64, 5, padding="same", activation="relu"), layers.MaxPool2D(2),
                layers.Flatten(), layers.Dense(1024, activation="relu")]
    model = tf.keras.Sequential([tf.keras.Input((28, 28, 1))] + body + [layers.Dense(10, dtype="float32")])
    return model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model", choices=["mlp", "cnn", "resnet20", "resnet50"])
    parser.add_argument("--intra", type=int, default=1, help="intra-op threads")
    parser.add_argument("--inter", type=int, default=1, help="inter-op threads")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup-steps", type=int, default=20)
    parser.add_argument("--steps-per-call", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--mirrored", type=int, default=0, help="replicas of MirroredStrategy (0: none)")
    parser.add_argument("--bf16", action="store_true", help="Keras's mixed_bfloat16 policy")
    parser.add_argument("--synthetic", action="store_true", help="random images of the model's shape")
    parser.add_argument("--files", nargs=2, metavar=("KIND", "DIR"), help="batches read from files by tf.data")
    args = parser.parse_args()
    if args.model == "resnet50" and not args.synthetic:
        parser.error("resnet50 reads 224x224x3 images: pass --synthetic")
    if args.bf16:
        tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
    tf.config.threading.set_intra_op_parallelism_threads(args.intra)
    tf.config.threading.set_inter_op_parallelism_threads(args.inter)
    replicas = max(args.mirrored, 1)
    if args.mirrored:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
        strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])
    else:
        strategy = tf.distribute.get_strategy()  # the default: one device, no distribution

    tf.random.set_seed(1)
    batch = args.batch_size
    if args.files:
        # The files as tf.data reads them at its best, images scaled to [0, 1] as below.
        kind, directory = args.files
        images_of = tf_input_pipeline.batches_of(kind, directory, 0, batch)
        dataset = images_of.map(lambda x, y: (tf.cast(x, tf.float32) / 255.0, tf.cast(y, tf.int64)),
                                num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    else:
        if args.synthetic:  # two batches of random images of the model's shape, as mirra's --synthetic
            shape, classes = ((224, 224, 3), 1000) if args.model == "resnet50" else ((28, 28, 1), 10)
            images = np.random.default_rng(1).random((2 * args.batch_size,) + shape, dtype=np.float32)
            labels = np.arange(2 * args.batch_size, dtype=np.int64) % classes
        else:
            images = read_idx(f"{DATA}/train-images-idx3-ubyte.gz").astype(np.float32).reshape(-1, 28, 28, 1) / 255.0
            labels = read_idx(f"{DATA}/train-labels-idx1-ubyte.gz").astype(np.int64)
        # Shuffled once up front; batches cached in memory and prefetched: TensorFlow's fastest input path.
        order = np.random.default_rng(1).permutation(images.shape[0])
        dataset = (tf.data.Dataset.from_tensor_slices((images[order], labels[order])).batch(batch, drop_remainder=True)
                   .cache().repeat().prefetch(tf.data.AUTOTUNE))
    iterator = iter(strategy.experimental_distribute_dataset(dataset))  # each replica gets its share
    with strategy.scope():
        model = build_model(args.model)
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)
        # Its momentum slots now: made lazily, they would be created inside the traced loop, which a
        # distribution strategy refuses.
        optimizer.build(model.trainable_variables)
    cross_entropy = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(cross_entropy(y, model(x, training=True)), global_batch_size=batch)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    @tf.function
    def train_steps(iterator):
        loss = tf.constant(0.0)
        for _ in tf.range(args.steps_per_call):
            losses = strategy.run(replica_step, args=next(iterator))
            loss = strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)
        return loss

    calls, warmup_calls = -(-args.steps // args.steps_per_call), -(-args.warmup_steps // args.steps_per_call)
    loss = None
    for _ in range(warmup_calls):
        loss = train_steps(iterator)
    float(loss)  # waits for the warm-up
    start = time.perf_counter()
    for _ in range(calls):
        loss = train_steps(iterator)
    final_loss = float(loss)
    seconds = time.perf_counter() - start
    steps = calls * args.steps_per_call
    print(json.dumps({"framework": "tensorflow " + tf.__version__, "model": args.model, "intra": args.intra,
                      "data": args.files[0] if args.files else "synthetic" if args.synthetic else "fashion-mnist",
                      "inter": args.inter, "mirrored": args.mirrored, "bf16": args.bf16,
                      "steps_per_call": args.steps_per_call,
                      "batch": batch, "steps": steps, "seconds": seconds, "examples_per_s": steps * batch / seconds,
                      "final_loss": final_loss,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}), flush=True)


if __name__ == "__main__":
    main()
