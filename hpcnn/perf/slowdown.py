"""A planted slowdown for measuring the gate: real extra work inside the step.

Test-only. ``PlantedSlowdown.hook`` is a step hook that, after the step's loss
is computed, runs a chain of matrix multiplications; ``calibrate`` sizes the
chain so the step takes a chosen fraction longer, measured in place. The work
is real compute inside the compiled step (the loss depends on it numerically as
``loss + 0 * work``), not a sleep or a fake clock, so it slows the step the way
a slower kernel would.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Callable, Sequence

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
        """The step hook: ``loss`` after the planted work."""
        return _work(loss, self.units)

    def calibrate(self, fraction: float, run_steps: Callable[[int], Sequence[float]], adjustments: int = 2) -> float:
        """Sizes the work so a step takes ``1 + fraction`` times as long as without it; returns the measured fraction.

        ``run_steps(n)`` runs n steps and returns their times. The first guess (the
        work alone, timed outside the step) misses the mark because the work
        overlaps the step's own ops, so the fraction is measured in place, steps
        with and without the work alternating, and the work rescaled
        ``adjustments`` times.
        """
        if fraction <= 0:
            self.units.assign(0)
            return 0.0
        step = statistics.median(run_steps(3))
        chunk = max(1, math.ceil(0.2 / step))  # steps per on/off chunk: about 0.2 s
        units = max(1, round(fraction * step / unit_seconds()))
        for _ in range(adjustments):
            achieved = self._measure(units, run_steps, chunk)
            units = max(1, round(units * fraction / max(achieved, 0.01)))
        return self._measure(units, run_steps, chunk)

    def _measure(self, units: int, run_steps, chunk: int, alternations: int = 10) -> float:
        """The fraction ``units`` of work adds to a step: chunks off and on alternate, median of their ratios."""
        ratios = []
        for i in range(alternations):
            spent = {}
            for on in ((False, True) if i % 2 == 0 else (True, False)):
                self.units.assign(units if on else 0)
                spent[on] = sum(run_steps(chunk))
            ratios.append(spent[True] / spent[False])
        self.units.assign(units)
        return statistics.median(ratios) - 1.0
