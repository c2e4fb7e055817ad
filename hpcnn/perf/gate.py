"""The noise-aware gate: a drop fails only if it is beyond the threshold AND significant.

Per-round throughputs (images/sec, higher is better) of the baseline and the
current run are compared by

* the ratio of medians, current / baseline, with a percentile-bootstrap 95%
  interval (seeded, so the verdict on the same samples never changes), and
* a one-sided Mann-Whitney U test: is the current run stochastically slower?

A regression needs the ratio below 1 - threshold and p below ``alpha``; an
improvement is the mirror image. Everything else is "unchanged" (or "noise" when
the ratio moved beyond the threshold without significance).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np
from scipy.stats import mannwhitneyu

DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.01
BOOTSTRAP_RESAMPLES = 4000

REGRESSION, IMPROVEMENT, UNCHANGED, NOISE = "REGRESSION", "improvement", "unchanged", "noise"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The gate's decision and the figures behind it."""

    baseline_median: float
    current_median: float
    ratio: float
    ci_low: float
    ci_high: float
    p_slower: float
    p_faster: float
    threshold: float
    verdict: str

    @property
    def failed(self) -> bool:
        return self.verdict == REGRESSION

    def describe(self) -> str:
        return (f"baseline {self.baseline_median:.2f}, current {self.current_median:.2f} images/sec; ratio "
                f"{self.ratio:.3f} [95% CI {self.ci_low:.3f}, {self.ci_high:.3f}]; p(slower)={self.p_slower:.4f}; "
                f"threshold {self.threshold:.0%}: {self.verdict}")


def bootstrap_ratio_ci(baseline, current, resamples=BOOTSTRAP_RESAMPLES, seed=0):
    """Percentile-bootstrap 95% interval of median(current) / median(baseline)."""
    rng = np.random.default_rng(seed)
    b = np.asarray(baseline, float)
    c = np.asarray(current, float)
    bm = np.median(rng.choice(b, (resamples, b.size)), axis=1)
    cm = np.median(rng.choice(c, (resamples, c.size)), axis=1)
    low, high = np.percentile(cm / bm, [2.5, 97.5])
    return float(low), float(high)


def smallest_p(n: int, m: int) -> float:
    """The smallest one-sided Mann-Whitney p-value that n vs m rounds can reach."""
    return 1.0 / math.comb(n + m, n)


def min_rounds(alpha: float = DEFAULT_ALPHA) -> int:
    """Fewest rounds per side (equal sides) with which a drop can be significant at ``alpha``."""
    n = 1
    while smallest_p(n, n) >= alpha:
        n += 1
    return n


def judge(baseline: Sequence[float], current: Sequence[float], threshold: float = DEFAULT_THRESHOLD,
          alpha: float = DEFAULT_ALPHA) -> Verdict:
    """Compares per-round throughputs.

    Raises:
      ValueError: non-positive samples, or too few rounds for any drop to be
        significant at ``alpha`` (a gate that could never fail).
    """
    if min(baseline, default=0) <= 0 or min(current, default=0) <= 0:
        raise ValueError("judge() needs positive throughputs on both sides")
    if smallest_p(len(baseline), len(current)) >= alpha:
        raise ValueError(f"{len(baseline)} baseline and {len(current)} current rounds cannot show a significant "
                         f"drop at alpha={alpha} (smallest p {smallest_p(len(baseline), len(current)):.4f}); "
                         f"use at least {min_rounds(alpha)} rounds on each side")
    bm, cm = float(np.median(baseline)), float(np.median(current))
    ratio = cm / bm
    low, high = bootstrap_ratio_ci(baseline, current)
    p_slower = float(mannwhitneyu(current, baseline, alternative="less").pvalue)
    p_faster = float(mannwhitneyu(current, baseline, alternative="greater").pvalue)
    if ratio < 1 - threshold and p_slower < alpha:
        verdict = REGRESSION
    elif ratio > 1 + threshold and p_faster < alpha:
        verdict = IMPROVEMENT
    elif abs(ratio - 1) > threshold:
        verdict = NOISE
    else:
        verdict = UNCHANGED
    return Verdict(bm, cm, ratio, low, high, p_slower, p_faster, threshold, verdict)
