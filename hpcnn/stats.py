"""Throughput statistics in tf_cnn_benchmarks' conventions."""

from __future__ import annotations

import dataclasses
from typing import List, Sequence, TypeVar

import numpy as np

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Speed:
    """Per-step images/sec summarised: mean, standard error, jitter (1.4826 x MAD)."""

    mean: float
    uncertainty: float
    jitter: float

    def __str__(self):
        return f"images/sec: {self.mean:.1f} +/- {self.uncertainty:.1f} (jitter = {self.jitter:.1f})"


def throughput(batch_size: int, step_times: Sequence[float]) -> float:
    """Images/sec over a window of steps: all images divided by all their time."""
    return batch_size * len(step_times) / sum(step_times)


def speed(batch_size: int, step_times: Sequence[float]) -> Speed:
    """Summarises per-step speeds ``batch_size / t``; raises ValueError on no steps."""
    if not len(step_times):
        raise ValueError("speed() needs at least one step time")
    speeds = batch_size / np.asarray(step_times, dtype=np.float64)
    mad = np.median(np.abs(speeds - np.median(speeds)))
    return Speed(float(np.mean(speeds)), float(np.std(speeds) / np.sqrt(len(speeds))), float(1.4826 * mad))


def interleaved(sides: Sequence[T], r: int) -> List[T]:
    """Round ``r``'s running order: ``sides`` rotated by r (A B, B A for two; A B C, B C A, C A B for three).

    Every side runs first, second, ... equally often, so drift within a round hits each alike.
    """
    k = r % len(sides)
    return list(sides[k:]) + list(sides[:k])
