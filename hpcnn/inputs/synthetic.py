"""Synthetic data: generated once, resident on each compute device."""

from __future__ import annotations

from typing import List, Sequence, Tuple

import tensorflow as tf

from hpcnn.inputs.source import InputSource, StepInput


class SyntheticInput(InputSource):
    """One fixed batch per replica, made once on the replica's device.

    Images are distributed like preprocessed real images (centred, within about
    [-1, 1]) so that losses stay meaningful.

    The global batch is drawn from ``seed`` and split across replicas, so N
    replicas of batch B see exactly the data one device sees with batch N*B. In a
    cluster, worker w's replicas take their slices from ``first_replica`` on, out
    of ``total_replicas`` over all workers.
    Each step reads the device-resident variables: no host work, no copies, no
    warm-up, and nothing to stage.
    """

    def __init__(self, devices: Sequence[str], batch_size: int, image_shape: Sequence[int], num_classes: int,
                 dtype=tf.float32, seed: int = 1234, first_replica: int = 0, total_replicas: int = 0):
        total = total_replicas or len(devices)
        global_shape = [batch_size * total] + list(image_shape)
        images = tf.random.stateless_truncated_normal(global_shape, [seed, 1], mean=0.0, stddev=0.5)
        labels = tf.random.stateless_uniform([batch_size * total], [seed, 2], 0, num_classes, dtype=tf.int32)
        self.batches: List[Tuple[tf.Variable, tf.Variable]] = []
        for i, device in enumerate(devices):
            r = first_replica + i
            sl = slice(r * batch_size, (r + 1) * batch_size)
            with tf.device(device):
                self.batches.append((tf.Variable(tf.cast(images[sl], dtype), trainable=False, name=f"images{i}"),
                                     tf.Variable(labels[sl], trainable=False, name=f"labels{i}")))

    def next_batches(self) -> StepInput:
        """The per-replica batches, read inside the compiled step; nothing to stage."""
        return StepInput([(tf.convert_to_tensor(x), tf.convert_to_tensor(y)) for x, y in self.batches], None)
