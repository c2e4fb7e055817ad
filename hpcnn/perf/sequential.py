"""Paired mode's sequential rounds: more rounds only while A against B is unclear.

Rounds come in pairs run back to back (A B, then B A, ...), so drift over
minutes hits both members of a pair alike and a pair's log-ratio log(B/A) is
nearly free of it. A disturbance that hits one round of a pair makes these
log-ratios heavy-tailed (on trivial-ps here their spread is 7%, with outliers),
so they are judged by rank: the one-sided Wilcoxon signed-rank test, the
Hodges-Lehmann estimate of the ratio and a rank-based 95% interval. The pairs
that one process pair runs (``Schedule.block``) share its offset, so the test
flips them as one block (``signed_rank_p``) and its interval is the shifts that
blocked test keeps (``shift_interval``).

Looks are taken after ``min_pairs`` pairs and then every ``step`` pairs up to
``max_pairs`` (as Chromium's Pinpoint adds attempts while a difference is
unclear). The combination's level alpha is spent half on the last look and half,
in equal parts, on the early looks that can spend their part: k blocks all one
way give the exact test's smallest p, 1/2^k, so at alpha 0.01 over 7
combinations a look at 24 pairs in blocks of 2 (1/4096) can never reject and
its part would be lost. The parts sum to alpha, so the false-alarm rate stays
below it however a run stops. A look stops the combination when

* the drop is beyond the threshold and significant at the look's level (REGRESSION),
* an improvement beyond the threshold is significant at it, or
* the 95% interval of the ratio lies inside +/- threshold (clearly unchanged).

Over a matrix, each combination runs at its Bonferroni share of the family-wise
level; once all are judged, Holm's step-down (``family_verdicts``) judges the
rest again at the larger levels it allows. A sequential comparison's p-value for
that is the smallest over its looks of p / (the look's share of the level):
below a level exactly when some look would have failed at it. Which looks spend
is fixed by the combination's own level, so Holm's larger levels scale every
look's share alike and its tests stay nested.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from scipy import stats

from hpcnn.perf import gate


MIN_PAIRS = 3  # the fewest round pairs a rank test and a spread can be computed from


@dataclasses.dataclass(frozen=True)
class Schedule:
    """When to look: after ``min_pairs`` pairs, then every ``step`` pairs, at most ``max_pairs``."""

    min_pairs: int = 8
    step: int = 4
    max_pairs: int = 48
    # Early looks share the early half only where they can spend it (``weights``); False: every early look
    # had an equal part, reachable or not (records made before 2026-11-27 have no such field).
    reachable_only: bool = True
    # Consecutive pairs one process pair runs (``paired.RESTART_EVERY``): the test flips whole blocks. 1: every
    # pair a unit of its own, as if pairs were independent (records made before 2026-12-02 have no such field).
    block: int = 2

    @classmethod
    def recorded(cls, fields: Mapping[str, object]) -> "Schedule":
        """The schedule a record's ``vars(schedule)`` describes; a record without ``reachable_only`` ran with
        equal parts for every early look, one without ``block`` tested pairs as independent."""
        return cls(**{"reachable_only": False, "block": 1, **fields})

    def __post_init__(self):
        if not MIN_PAIRS <= self.min_pairs <= self.max_pairs or self.step < 1 or self.block < 1:
            raise ValueError(f"a schedule needs {MIN_PAIRS} <= min_pairs <= max_pairs, step >= 1 and block >= 1; "
                             f"received min_pairs={self.min_pairs}, step={self.step}, max_pairs={self.max_pairs}, "
                             f"block={self.block}")

    def smallest_p(self, pairs: int) -> float:
        """The smallest one-sided p-value the test can give ``pairs`` pairs (``smallest_p``)."""
        return smallest_p(pairs, self.block)

    def looks(self) -> List[int]:
        """The pair counts after which the gate looks."""
        points = list(range(self.min_pairs, self.max_pairs + 1, self.step))
        return points if points[-1] == self.max_pairs else points + [self.max_pairs]

    def weights(self, level: float) -> List[float]:
        """Each look's part of a combination's level ``level``: half for the last look, half in equal parts
        for the most early looks whose part each of them can spend (``smallest_p`` below it: the latest looks
        first), none for the rest; all for the last where no early look can spend."""
        looks = self.looks()
        early = looks[:-1]
        if not early:
            return [1.0]
        if not self.reachable_only:
            return [0.5 / len(early)] * len(early) + [0.5]
        for m in range(len(early), 0, -1):
            if self.smallest_p(early[-m]) < level * 0.5 / m:
                return [0.0] * (len(early) - m) + [0.5 / m] * m + [0.5]
        return [0.0] * len(early) + [1.0]

    def alpha_at(self, look: int, alpha: float, level: Optional[float] = None) -> float:
        """The part of ``alpha`` spent at look ``look`` (0-based), the looks' parts fixed by the combination's
        own level ``level`` (default: ``alpha``)."""
        return alpha * self.weights(alpha if level is None else level)[look]


# Log-ratios closer than this are one value to the interval's search (last-bit differences between CPUs are
# about 1e-18 on these log-ratios of a few percent)
WALSH_TOLERANCE = 1e-12


def smallest_p(pairs: int, block: int) -> float:
    """The smallest one-sided p-value ``signed_rank_p`` can give ``pairs`` pairs in blocks of ``block``: every
    block's sign one way, one chance in 2^blocks."""
    return 0.5 ** math.ceil(pairs / block)


def judge_pairs(a: Sequence[float], b: Sequence[float], threshold: float = gate.PAIRED_THRESHOLD,
                alpha: float = gate.DEFAULT_ALPHA, mds_alpha: Optional[float] = None, block: int = 1) -> gate.Verdict:
    """B's rounds against A's, pair by pair (round i of each was run back to back), each ``block`` consecutive
    pairs from one process pair (``signed_rank_p``).

    ``mds_alpha``: the level the MDS is quoted at (default ``alpha``).

    Raises:
      ValueError: sides of different lengths, fewer than 3 pairs, or non-positive throughputs.
    """
    if len(a) != len(b) or len(a) < MIN_PAIRS:
        raise ValueError(f"judge_pairs() needs two equal sides of {MIN_PAIRS} or more rounds; "
                         f"received {len(a)} and {len(b)}")
    if min(a) <= 0 or min(b) <= 0:
        raise ValueError("judge_pairs() needs positive throughputs on both sides")
    d = np.log(np.asarray(b, float) / np.asarray(a, float))
    if block > 1:  # the interval of the test that judges: its blocks flip whole
        estimate, (low, high) = float(np.median(_walsh(d))), shift_interval(d, block)
    else:
        estimate, low, high = hodges_lehmann(d)
    p_slower, p_faster = signed_rank_p(d, block)
    ratio = math.exp(estimate)
    # The MDS of the rank test: a normal-theory t test over the blocks' means on a robust spread, at the
    # signed-rank test's asymptotic efficiency (3/pi against the normal, higher with heavy tails).
    means = block_means(d, block)
    k = len(means)
    spread = 1.4826 * float(np.median(np.abs(means - np.median(means))))
    se = spread / math.sqrt(k * 3 / math.pi)
    evidence = f"{len(d)} paired rounds" + (f" in {k} process pairs" if block > 1 else "")
    return gate.Verdict(float(np.median(a)), float(np.median(b)), ratio, math.exp(low), math.exp(high),
                        p_slower, p_faster, threshold,
                        gate.classify(ratio, p_slower, p_faster, threshold, alpha), alpha,
                        gate.mds(se, k - 1, alpha if mds_alpha is None else mds_alpha), evidence)


def block_means(d: Sequence[float], block: int) -> np.ndarray:
    """The mean of each ``block`` consecutive values of ``d`` (the last block may be short)."""
    d = np.asarray(d, float)
    starts = np.arange(0, len(d), block)
    return np.add.reduceat(d, starts) / np.diff(np.append(starts, len(d)))


def hodges_lehmann(d: Sequence[float]) -> Tuple[float, float, float]:
    """The Hodges-Lehmann estimate of the centre of paired differences ``d`` and its rank-based 95% interval.

    The estimate is the median of the Walsh averages (d_i + d_j) / 2, i <= j; the
    interval runs between the k-th smallest and k-th largest of them, k from the
    signed-rank statistic's normal approximation.
    """
    d = np.asarray(d, float)
    n = len(d)
    walsh = _walsh(d)
    k = int(math.floor(len(walsh) / 2 - stats.norm.ppf(0.975) * math.sqrt(n * (n + 1) * (2 * n + 1) / 24)))
    k = min(max(k, 0), len(walsh) // 2)
    return float(np.median(walsh)), float(walsh[k]), float(walsh[len(walsh) - 1 - k])


def _walsh(d: np.ndarray) -> np.ndarray:
    i, j = np.triu_indices(len(d))
    return np.sort((d[i] + d[j]) / 2)


def shift_interval(d: Sequence[float], block: int, confidence: float = 0.95) -> Tuple[float, float]:
    """The shifts c of log-ratios ``d`` that the blocked test (``signed_rank_p``) of d - c rejects neither way
    at (1 - confidence) / 2: its interval, with ends among the Walsh averages (where the statistic changes),
    found by bisection. (-inf, inf) where even every block one way is not rejected at that level (fewer than
    6 blocks at 95%: 2^-5 is above 2.5%).

    The test is asked between Walsh averages, never at one: at c = (d_i + d_j) / 2, |d_i - c| and |d_j - c|
    tie in exact arithmetic and may or may not in floating point, and ``np.log`` differs in the last bit
    between CPUs (AVX-512 machines take another code path), so asked there a look's interval, and whether it
    stopped, could differ between CPU classes on the same recorded pairs. Walsh averages within
    ``WALSH_TOLERANCE`` of each other count as one."""
    d = np.asarray(d, float)
    tail = (1 - confidence) / 2
    if smallest_p(len(d), block) >= tail:
        return -math.inf, math.inf
    walsh = _walsh(d)
    walsh = walsh[np.r_[True, np.diff(walsh) > WALSH_TOLERANCE]]
    if len(walsh) == 1:
        return float(walsh[0]), float(walsh[0])
    gaps = (walsh[:-1] + walsh[1:]) / 2  # below the smallest Walsh average every d - c is above 0: rejected
    low = _first(gaps, lambda c: signed_rank_p(d - c, block)[1] >= tail)
    high = _first(gaps[::-1], lambda c: signed_rank_p(d - c, block)[0] >= tail)
    return float(walsh[low]), float(walsh[::-1][high])


def _first(values: np.ndarray, accepted: Callable[[float], bool]) -> int:
    """The first index of ``values`` where ``accepted`` holds, it holding from there to the last value."""
    if accepted(values[0]):
        return 0
    lo, hi = 0, len(values) - 1  # rejected at lo, accepted at hi (d less its largest value is never above 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if accepted(values[mid]) else (mid, hi)
    return hi


def _doubled_midranks(x: np.ndarray) -> np.ndarray:
    """Twice the ranks of ``x`` (1 for the smallest), ties sharing their mean rank: integers."""
    order = np.argsort(x, kind="stable")
    xs = x[order]
    first = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])  # where each run of equal values starts
    ends = np.r_[first[1:], len(x)]
    out = np.empty(len(x), int)
    out[order] = np.repeat(first + ends + 1, ends - first)  # ranks first+1 .. ends: twice their mean
    return out


def signed_rank_p(d: Sequence[float], block: int = 1) -> Tuple[float, float]:
    """One-sided p-values of the Wilcoxon signed-rank statistic of ``d`` (slower: d below 0, faster: above),
    exact, each ``block`` consecutive values of d a unit whose signs flip together.

    Zeros are dropped; tied magnitudes get mid-ranks. A block's statistic is the
    sum of its values' signed ranks. Under the null hypothesis every pattern of
    block signs is equally likely: A and B run the same code, so swapping which
    process is A flips a whole block, whatever offset its process pair carries,
    while its pairs' signs need not be independent of each other. The p-values
    come from that permutation distribution, counted by dynamic programming over
    the blocks' doubled, hence integer, sums: no normal approximation and no
    resampling at any size. With ``block`` 1 this is the plain signed-rank test.
    """
    d = np.asarray(d, float)
    nonzero = d != 0
    if not nonzero.any():
        return 1.0, 1.0
    doubled = np.zeros(len(d), int)
    doubled[nonzero] = _doubled_midranks(np.abs(d[nonzero]))
    sums = np.add.reduceat(np.sign(d).astype(int) * doubled, np.arange(0, len(d), block))
    units = np.abs(sums[sums != 0])
    if len(units) == 0:
        return 1.0, 1.0
    top = int(units.sum())
    counts = np.zeros(top + 1)
    counts[0] = 1.0
    for r in units:  # counts[w]: sign patterns whose positive units sum to w
        counts[r:] = counts[r:] + counts[:-r].copy()
    cdf = np.cumsum(counts) / counts.sum()
    w = int(sums[sums > 0].sum())
    return float(cdf[w]), float(cdf[top - w])  # P(W+ <= w), P(W+ >= w) = P(W+ <= top - w) by symmetry


def decide(a: Sequence[float], b: Sequence[float], look: int, schedule: Schedule, threshold: float,
           alpha: float) -> Tuple[gate.Verdict, bool]:
    """The verdict at look ``look`` and whether the combination stops there."""
    last = look == len(schedule.looks()) - 1
    v = judge_pairs(a, b, threshold, schedule.alpha_at(look, alpha), mds_alpha=schedule.alpha_at(
        len(schedule.looks()) - 1, alpha), block=schedule.block)
    clear_same = 1 - threshold < v.ci_low and v.ci_high < 1 + threshold
    stop = last or v.verdict in (gate.REGRESSION, gate.IMPROVEMENT) or clear_same
    return v, stop


def family_p(a: Sequence[float], b: Sequence[float], schedule: Schedule, level: float) -> float:
    """The comparison's p-value of a drop over the looks its ``len(a)`` pairs reached: min of p / the look's
    part of the level (``schedule.weights(level)``, ``level`` the combination's own). It is below a level
    exactly when a look's signed-rank test is significant at its part of that level, and stopping early only
    removes looks, so it is a valid p-value for Holm's step-down."""
    d = np.log(np.asarray(b, float) / np.asarray(a, float))
    weights = schedule.weights(level)
    return min((min(1.0, signed_rank_p(d[:n], schedule.block)[0] / weights[k])
                for k, n in enumerate(schedule.looks()) if n <= len(d) and weights[k]), default=1.0)


def judge_at(a: Sequence[float], b: Sequence[float], schedule: Schedule, threshold: float, alpha: float,
             level: Optional[float] = None) -> gate.Verdict:
    """The verdict of recorded pairs ``a``, ``b`` at ``alpha``: the first look that fails at its part of it,
    else the last look the pairs reached. ``level``: the combination's own (default: ``alpha``), which fixes
    the looks' parts (``Schedule.weights``) and the level the MDS is quoted at."""
    reached = [(k, n) for k, n in enumerate(schedule.looks()) if n <= len(a)]
    if not reached:
        raise ValueError(f"judge_at() needs at least {schedule.min_pairs} pairs for the first look; received {len(a)}")
    level = alpha if level is None else level
    last = schedule.alpha_at(len(schedule.looks()) - 1, level)
    for k, n in reached:
        v = judge_pairs(a[:n], b[:n], threshold, schedule.alpha_at(k, alpha, level), mds_alpha=last,
                        block=schedule.block)
        if v.failed:
            return v
    return v


def family_verdicts(comparisons: Mapping[str, Tuple[Sequence[float], Sequence[float]]], schedule: Schedule,
                    threshold: float, alpha: float = gate.DEFAULT_ALPHA) -> Dict[str, gate.Verdict]:
    """Every comparison of one matrix run (key -> its A and B rounds, as ``run_sequential`` returned them)
    judged at its Bonferroni share of ``alpha``, then Holm's step-down over their ``family_p``."""
    each = gate.combination_alpha(alpha, len(comparisons))
    verdicts = {k: judge_at(a, b, schedule, threshold, each) for k, (a, b) in comparisons.items()}
    p_values = {k: family_p(a, b, schedule, each) for k, (a, b) in comparisons.items()}
    return gate.family(verdicts, p_values,
                       lambda k, at: judge_at(*comparisons[k], schedule, threshold, at, level=each), alpha)


PairRunner = Callable[[int], Tuple[float, float]]  # round index -> (A's throughput, B's throughput)


def run_sequential(run_pair: PairRunner, schedule: Schedule = Schedule(), threshold: float = gate.PAIRED_THRESHOLD,
                   alpha: float = gate.DEFAULT_ALPHA) -> Tuple[gate.Verdict, List[float], List[float]]:
    """Runs pairs until a look stops; returns the verdict and both sides' rounds."""
    a: List[float] = []
    b: List[float] = []
    for look, pairs in enumerate(schedule.looks()):
        while len(a) < pairs:
            x, y = run_pair(len(a))
            a.append(x)
            b.append(y)
        v, stop = decide(a, b, look, schedule, threshold, alpha)
        if stop:
            return v, a, b
    raise AssertionError("unreachable: the last look always stops")
