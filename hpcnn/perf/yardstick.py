"""The runner's speed at the moment: a fixed TensorFlow workload timed beside every round of the perf suite.

A shared runner's speed drifts by 10-40% between sessions, and within one
session every combination drifts together: on the real 15-commit history of
issue 13 (3 combinations x 75 sessions), the combinations' deviations from their
commit's median correlated 0.77-0.87 across sessions. A workload that no hpcnn
commit changes, timed in the same session, measures that shared factor, so a
combination's images/sec divided by it compares runs made at different times.

The workload is a small convolutional training step written with TensorFlow's
ops alone (two 3x3 convolutions, a dense layer, softmax cross-entropy, plain
SGD; fixed shapes and seeds), so its speed depends on the machine, TensorFlow
and the backend, which the hardware profile pins, and on nothing in hpcnn.
``VERSION`` names it: figures of two versions are never divided by each other.
"""

from __future__ import annotations

import time

VERSION = 1
BATCH, SIDE, CHANNELS, WIDTH, CLASSES = 32, 32, 3, 32, 10


class Yardstick:
    """The fixed workload, built once (traced, warmed up); ``rate`` times a short chunk of its steps."""

    def __init__(self, warmup_steps: int = 5):
        import tensorflow as tf

        rng = tf.random.Generator.from_seed(1234)
        self._images = rng.normal((BATCH, SIDE, SIDE, CHANNELS))
        self._labels = rng.uniform((BATCH,), 0, CLASSES, dtype=tf.int32)
        self._weights = [tf.Variable(rng.normal(shape) * 0.1) for shape in
                         ((3, 3, CHANNELS, WIDTH), (3, 3, WIDTH, WIDTH), (WIDTH, CLASSES))]
        self._step = tf.function(self._train_step, autograph=False)
        for _ in range(warmup_steps):
            self._step()

    def _train_step(self):
        import tensorflow as tf

        with tf.GradientTape() as tape:
            x = tf.nn.relu(tf.nn.conv2d(self._images, self._weights[0], 1, "SAME"))
            x = tf.nn.relu(tf.nn.conv2d(x, self._weights[1], 1, "SAME"))
            logits = tf.matmul(tf.reduce_mean(x, axis=[1, 2]), self._weights[2])
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(self._labels, logits))
        for w, g in zip(self._weights, tape.gradient(loss, self._weights)):
            w.assign_sub(0.01 * g)
        return loss

    def rate(self, steps: int = 10) -> float:
        """Steps per second over ``steps`` steps, each waited for (as the perf suite's steps are), after one
        untimed step (the first after another workload pays for caches and thread pools that workload left)."""
        self._step().numpy()
        start = time.perf_counter()
        for _ in range(steps):
            self._step().numpy()
        return steps / (time.perf_counter() - start)

