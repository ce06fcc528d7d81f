"""TensorFlow peer of mirra's GPT example (examples/gpt_model.cc): the same model as a Keras model
(token and learned position embeddings, pre-norm blocks of causal attention from batched products and
a -inf mask, the exact GELU, the output projection tied to the token embedding), the same optimizer
(Keras's AdamW: betas 0.9 and 0.99, epsilon 1e-8, weight decay 0.1 but for biases and layer-norm
parameters, global norm clipped to 1), batches of windows at random offsets of train.bin, at
TensorFlow's fastest: a tf.function of --steps-per-call steps, batches cached and prefetched by
tf.data, --intra and --inter op threads; --mirrored N runs tf.distribute.MirroredStrategy over N
logical CPU devices; --bf16 Keras's "mixed_bfloat16" policy. Prints one JSON line (tokens/s over the
steps after the warm-up).

Runs in the virtual environment the benchmark driver makes (tensorflow-cpu from PyPI).
Usage: tf_gpt.py DATA_DIR [--intra T] [--inter T] [--steps N] [--warmup-steps W] [--steps-per-call K]
                 [--batch-size B] [--mirrored N] [--bf16]
"""
import argparse
import json
import math
import os
import resource
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

LAYERS, HEADS, EMBEDDING, CONTEXT, VOCAB = 4, 4, 128, 64, 84


class Block(tf.keras.layers.Layer):
    def __init__(self):
        super().__init__()
        normal = tf.keras.initializers.RandomNormal(stddev=0.02)
        projection = tf.keras.initializers.RandomNormal(stddev=0.02 / math.sqrt(2 * LAYERS))
        self.norm1 = tf.keras.layers.LayerNormalization(epsilon=1e-5)
        self.norm2 = tf.keras.layers.LayerNormalization(epsilon=1e-5)
        self.qkv = tf.keras.layers.Dense(3 * EMBEDDING, kernel_initializer=normal)
        self.attention_projection = tf.keras.layers.Dense(EMBEDDING, kernel_initializer=projection)
        self.fc = tf.keras.layers.Dense(4 * EMBEDDING, kernel_initializer=normal)
        self.mlp_projection = tf.keras.layers.Dense(EMBEDDING, kernel_initializer=projection)

    def call(self, x, mask):
        head = EMBEDDING // HEADS
        q, k, v = tf.split(self.qkv(self.norm1(x)), 3, axis=-1)
        q, k, v = (tf.transpose(tf.reshape(t, [-1, CONTEXT, HEADS, head]), [0, 2, 1, 3]) for t in (q, k, v))
        scores = tf.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(head)) + tf.cast(mask, q.dtype)
        attended = tf.matmul(tf.nn.softmax(scores, axis=-1), v)
        merged = tf.reshape(tf.transpose(attended, [0, 2, 1, 3]), [-1, CONTEXT, EMBEDDING])
        x = x + self.attention_projection(merged)
        return x + self.mlp_projection(tf.nn.gelu(self.fc(self.norm2(x)), approximate=False))


class Gpt(tf.keras.Model):
    def __init__(self):
        super().__init__()
        normal = tf.keras.initializers.RandomNormal(stddev=0.02)
        self.token_embedding = self.add_weight(name="token_embedding", shape=(VOCAB, EMBEDDING), initializer=normal)
        self.position_embedding = self.add_weight(name="position_embedding", shape=(CONTEXT, EMBEDDING), initializer=normal)
        self.blocks = [Block() for _ in range(LAYERS)]
        self.final_norm = tf.keras.layers.LayerNormalization(epsilon=1e-5)
        self.mask = tf.constant(np.triu(np.full((CONTEXT, CONTEXT), -np.inf, dtype=np.float32), k=1))

    def call(self, tokens):
        dtype = self.compute_dtype
        x = tf.cast(tf.gather(self.token_embedding, tokens) + self.position_embedding, dtype)
        for block in self.blocks:
            x = block(x, self.mask)
        logits = tf.matmul(self.final_norm(x), tf.cast(self.token_embedding, dtype), transpose_b=True)
        return tf.cast(logits, tf.float32)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("--intra", type=int, default=1)
    parser.add_argument("--inter", type=int, default=1)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--steps-per-call", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument("--mirrored", type=int, default=0)
    parser.add_argument("--bf16", action="store_true")
    args = parser.parse_args()
    if args.bf16:
        tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
    tf.config.threading.set_intra_op_parallelism_threads(args.intra)
    tf.config.threading.set_inter_op_parallelism_threads(args.inter)
    if args.mirrored:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * args.mirrored)
        strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(args.mirrored)])
    else:
        strategy = tf.distribute.get_strategy()
    tf.random.set_seed(1)
    train = np.memmap(os.path.join(args.data, "train.bin"), dtype=np.uint16, mode="r")
    offsets = np.random.default_rng(1).integers(0, len(train) - CONTEXT - 1, size=64 * args.batch_size)
    windows = np.stack([train[o:o + CONTEXT + 1].astype(np.int32) for o in offsets])
    dataset = (tf.data.Dataset.from_tensor_slices((windows[:, :-1], windows[:, 1:])).batch(args.batch_size, drop_remainder=True)
               .cache().repeat().prefetch(tf.data.AUTOTUNE))
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    with strategy.scope():
        model = Gpt()
        model(windows[:1, :-1])  # builds the variables
        optimizer = tf.keras.optimizers.AdamW(learning_rate=1e-3, weight_decay=0.1, beta_1=0.9, beta_2=0.99, epsilon=1e-8,
                                              global_clipnorm=1.0)
        optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
        optimizer.build(model.trainable_variables)
    cross_entropy = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            per_token = tf.reduce_mean(cross_entropy(y, model(x)), axis=-1)
            loss = tf.nn.compute_average_loss(per_token, global_batch_size=args.batch_size)
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
    float(loss)
    start = time.perf_counter()
    for _ in range(calls):
        loss = train_steps(iterator)
    final_loss = float(loss)
    seconds = time.perf_counter() - start
    steps = calls * args.steps_per_call
    print(json.dumps({"peer": "tensorflow " + tf.__version__, "intra": args.intra, "inter": args.inter, "mirrored": args.mirrored,
                      "bf16": args.bf16, "steps": steps, "tokens_per_s": steps * args.batch_size * CONTEXT / seconds,
                      "final_loss": final_loss, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}),
          flush=True)


if __name__ == "__main__":
    main()
