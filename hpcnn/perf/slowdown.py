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
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
from scipy import stats
from scipy.stats import mstats

from hpcnn.stats import interleaved

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


TOLERANCE = 0.2  # the search ends at a measurement within a fifth of the fraction asked
# Off/on chunk pairs per measurement while searching: at least SEARCH_ALTERNATIONS, then more until the
# measurement's standard error is under half the tolerance, at most SEARCH_CAP. trivial-independent on the
# Xeon, 2-step chunks after a settle: one pair's log-ratio scattered by 9-14% (sd, 100 pairs at each of 0-4
# units; 20 pairs measured 2 units at 3.7%, sd 1.5 over five repeats), so 100 pairs left a standard error of
# 0.9-1.1 points; half of a 5% plant's tolerance would take ~400, and the cap (about 40 s there) ends at ~0.7.
SEARCH_ALTERNATIONS = 10
SEARCH_CAP = 200
MEASURE_ALTERNATIONS = 20  # ... for the size reported, measured afresh in every process
TRIM = 0.2  # the measurement: the mean of the pairs' log-ratios, a fifth trimmed off either end


class PlantedSlowdown:
    """A step hook whose amount of work is set after warm-up, without retracing."""

    def __init__(self):
        self.units = tf.Variable(0, trainable=False, name="planted_slowdown_units")

    def hook(self, loss):
        """The step hook: ``loss`` after the planted work."""
        return _work(loss, self.units)

    def calibrate(self, fraction: float, run_steps: Callable[[int], Sequence[float]], tries: int = 5,
                  chunk: Optional[int] = None, before_chunk: Callable[[], object] = lambda: None,
                  progress: Callable[[], object] = lambda: None) -> float:
        """Sizes the work so a step takes ``1 + fraction`` times as long as without it; returns its size.

        ``run_steps(n)`` runs n steps and returns their times. The added time is
        not proportional to the work (a little of it hides in a core the step
        leaves idle) and depends on how the steps are timed, so it is measured
        in place, in chunks of ``chunk`` steps (None: about 0.2 s) each after
        ``before_chunk()`` (a paired worker's chunks follow an idle wait), with
        and without the work alternating until the measurement is precise to half
        the tolerance (at most ``SEARCH_CAP`` pairs). The amount is searched by secant steps
        until a measurement is within ``TOLERANCE`` of ``fraction``, ``tries`` are
        spent or the step repeats an amount, the closest kept. The size returned is
        not that measurement: one picked for landing near ``fraction`` overstates
        how near it is, so it is measured afresh (``measure``). ``progress()`` is
        called after every chunk pair (a paired worker's heartbeat).
        """
        if fraction <= 0:
            self.units.assign(0)
            return 0.0
        step = statistics.median(run_steps(3))
        chunk = chunk or max(1, math.ceil(0.2 / step))
        units = max(1, round(fraction * step / unit_seconds()))
        tolerance = TOLERANCE * fraction
        tried: List[Tuple[int, float]] = []  # (units, measured fraction)
        for _ in range(tries):
            measured, _ = self.alternate(units, run_steps, chunk, before_chunk, SEARCH_ALTERNATIONS,
                                         tolerance / 2, SEARCH_CAP, progress)
            tried.append((units, measured))
            units = next_units(tried, fraction)
            if abs(measured - fraction) <= tolerance or units in (u for u, _ in tried):
                break
        units = min(tried, key=lambda t: abs(t[1] - fraction))[0]
        return self.measure(units, run_steps, chunk, before_chunk, progress=progress)

    def measure(self, units: int, run_steps, chunk: int, before_chunk: Callable[[], object] = lambda: None,
                alternations: int = MEASURE_ALTERNATIONS, progress: Callable[[], object] = lambda: None) -> float:
        """Plants ``units`` of work and returns the fraction it adds to a chunk of ``chunk`` steps timed after
        ``before_chunk()`` (``alternate``, ``alternations`` pairs). A restarted worker, or a later run of a
        quality measurement, plants the same amount again and measures it so (a code change is the same work
        in every process)."""
        return self.alternate(units, run_steps, chunk, before_chunk, alternations, progress=progress)[0]

    def alternate(self, units: int, run_steps, chunk: int, before_chunk: Callable[[], object] = lambda: None,
                  alternations: int = MEASURE_ALTERNATIONS, precision: float = math.inf,
                  cap: int = 0, progress: Callable[[], object] = lambda: None) -> Tuple[float, float]:
        """(fraction, its standard error): chunks off and on alternate, ``alternations`` pairs and then more
        until the standard error is under ``precision`` or ``cap`` pairs have run, ``progress()`` after each
        pair; ``units`` stay planted."""
        ratios: List[float] = []
        while True:
            spent = {}
            for on in interleaved([False, True], len(ratios)):
                self.units.assign(units if on else 0)
                before_chunk()
                spent[on] = sum(run_steps(chunk))
            ratios.append(spent[True] / spent[False])
            progress()
            if len(ratios) >= alternations:
                fraction, se = fraction_and_error(ratios)
                if se <= precision or len(ratios) >= max(cap, alternations):
                    break
        self.units.assign(units)
        return fraction, se


def fraction_and_error(ratios: Sequence[float]) -> Tuple[float, float]:
    """The fraction on/off chunk-time ``ratios`` add, and its standard error: the ``TRIM``-trimmed mean of their
    logs (a chunk after an idle wait now and then runs far slow or fast) and Tukey and McLaughlin's error."""
    logs = np.log(np.asarray(ratios, dtype=float))
    se = float(mstats.trimmed_stde(logs, limits=(TRIM, TRIM))) if len(logs) > 2 else math.inf
    return math.expm1(float(stats.trim_mean(logs, TRIM))), se


def next_units(tried: Sequence[Tuple[int, float]], target: float) -> int:
    """The next amount of work to try: a secant step through the last two (units, measured fraction),
    a proportional one from a single measurement, never more than 4x or less than 1/4 of the last."""
    units, measured = tried[-1]
    guess = units * target / max(measured, target / 4)
    if len(tried) > 1:
        before, measured_before = tried[-2]
        if units != before and (measured - measured_before) / (units - before) > 0:
            guess = units + (target - measured) * (units - before) / (measured - measured_before)
    return int(min(max(round(guess), max(1, units // 4)), units * 4))
