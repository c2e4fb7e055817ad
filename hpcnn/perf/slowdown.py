"""A planted slowdown for measuring the gate: real extra work inside the step.

Test-only. ``PlantedSlowdown.hook`` is a step hook that, after the step's loss
is computed, runs a chain of matrix multiplications; ``calibrate`` sizes the
chain to cost a chosen fraction of the step's own time. The work is real compute inside the compiled
step (the loss depends on it numerically as ``loss + 0 * work``), not a sleep or a
fake clock, so it slows the step the way a slower kernel would.
"""

from __future__ import annotations

import statistics
import time
from typing import Sequence

import tensorflow as tf

_N = 256  # matrix size of one unit of work


def _work(loss, units):
    m = tf.eye(_N) * 0.5 + 0.001
    x = m * (1.0 + 0.0 * tf.cast(loss, tf.float32))  # starts after the loss exists

    def body(i, x):
        y = tf.matmul(x, m)
        return i + 1, y / (tf.reduce_max(tf.abs(y)) + 1.0)

    _, x = tf.while_loop(lambda i, _: i < units, body, (tf.constant(0), x))
    return loss + 0.0 * tf.cast(tf.reduce_sum(x), loss.dtype)


def unit_seconds(probe_units: int = 400) -> float:
    """Measured seconds of one unit of work on this machine."""
    fn = tf.function(lambda: _work(tf.constant(0.0), tf.constant(probe_units)), autograph=False)
    fn()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        fn().numpy()
        best = min(best, time.perf_counter() - start)
    return best / probe_units


class PlantedSlowdown:
    """A step hook whose amount of work is set after warm-up, without retracing."""

    def __init__(self):
        self.units = tf.Variable(0, trainable=False, name="planted_slowdown_units")

    def hook(self, loss):
        return _work(loss, self.units)

    def calibrate(self, fraction: float, step_times: Sequence[float]) -> int:
        """Makes each step do work worth ``fraction`` x the median of ``step_times`` (warm-up steps); returns the units.
        """
        units = max(1, round(fraction * statistics.median(step_times) / unit_seconds())) if fraction > 0 else 0
        self.units.assign(units)
        return units
