"""The gate's shared vocabulary: a verdict, the family-wise false-alarm level, the minimum detectable slowdown.

Two ways of judging a combination produce a ``Verdict``:

* stored (``hpcnn.perf.stored``): this session against the recorded sessions of
  the profile's baselines file, so that whole-session drift is part of the noise;
* paired (``hpcnn.perf.sequential``): rounds of revisions A and B interleaved on
  one machine, judged pair by pair, with rounds added only while it is unclear.

Either fails a combination only when its drop is beyond the threshold AND
significant at that combination's share of the family-wise level: with m
combinations judged in one session each is first tested at alpha/m (Bonferroni),
as it runs, so the chance that *any* combination of an unchanged matrix fails
stays below alpha however large the matrix. Once every combination is judged,
Holm's step-down (``step_down``, ``family``) tests the rest at alpha/(m-1),
alpha/(m-2), ... while those with smaller p-values failed: the same family-wise
level, and more power where a change slows many combinations at once, as a real
regression often does. An unchanged matrix fails exactly as often as under
Bonferroni (Holm adds failures only once one combination has failed).

In stored mode a failure must also survive a confirming re-measurement
(``confirm``): the combination is measured again after a pause and judged at
``CONFIRM_ALPHA``; only a drop that both measurements show fails. A confirmation
can clear a failure but never add one, so the family-wise level holds whatever
the confirmation's own level; what it clears is a slow spell of a shared runner
that the yardstick does not correct for (minutes long, and far deeper for some
workloads than for the yardstick).

``judge_rounds`` (Mann-Whitney on two sets of rounds) remains for a baseline of a
single recorded session, which cannot tell session drift from a regression; it
then fails only beyond ``WIDE_BOUND``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Dict, Mapping, Optional, Sequence

import numpy as np
from scipy import stats

DEFAULT_ALPHA = 0.01  # family-wise: at most a 1% chance that an unchanged session fails anywhere
STORED_THRESHOLD = 0.05  # stored mode: the smallest drop worth failing a merge for
PAIRED_THRESHOLD = 0.02  # paired mode resolves smaller drops (drift cancels within a pair)
DEFAULT_THRESHOLD = STORED_THRESHOLD
POWER = 0.8  # the MDS is the drop caught with this probability
WIDE_BOUND = 0.35  # the session-to-session drift seen on shared runners: all one session can rule out
BOOTSTRAP_RESAMPLES = 4000

# A confirmation is judged at the family-wise level itself, not a Bonferroni share: it can only clear failures,
# so its level sets how surely a real drop that failed once fails again, not how often unchanged code fails
CONFIRM_ALPHA = DEFAULT_ALPHA

REGRESSION, IMPROVEMENT, UNCHANGED, NOISE = "REGRESSION", "improvement", "unchanged", "noise"
UNCONFIRMED = "unconfirmed"  # slower at first, not on the confirming re-measurement: passes


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The gate's decision on one combination and the figures behind it.

    ``ratio`` is current / baseline throughput with a 95% interval; ``alpha`` the
    level this combination was tested at; ``mds`` the minimum detectable slowdown
    (the drop caught with probability POWER at that level, as a fraction), None
    when it cannot be computed; ``evidence`` what was compared.
    """

    baseline_median: float
    current_median: float
    ratio: float
    ci_low: float
    ci_high: float
    p_slower: float
    p_faster: float
    threshold: float
    verdict: str
    alpha: float = DEFAULT_ALPHA
    mds: Optional[float] = None
    evidence: str = ""
    note: str = ""

    @property
    def failed(self) -> bool:
        """Whether the verdict fails the gate (a significant drop beyond the threshold)."""
        return self.verdict == REGRESSION

    @property
    def weak(self) -> bool:
        """Whether a drop of the threshold's size would usually go unnoticed (MDS above the threshold)."""
        return self.mds is not None and self.mds > self.threshold

    def describe(self) -> str:
        """One line with the medians, ratio and interval, p-value, threshold, MDS and verdict."""
        mds = "MDS unknown" if self.mds is None else f"MDS {self.mds:.1%}"
        weak = " (above the threshold: smaller drops usually pass)" if self.weak else ""
        text = (f"baseline {self.baseline_median:.2f}, current {self.current_median:.2f} images/sec; ratio "
                f"{self.ratio:.3f} [95% CI {self.ci_low:.3f}, {self.ci_high:.3f}]; p(slower)={self.p_slower:.2g} "
                f"at alpha {self.alpha:.2g}; threshold {self.threshold:.0%}; {mds}{weak}; "
                f"{self.evidence}: {self.verdict}")
        return text + (f" ({self.note})" if self.note else "")


def combination_alpha(alpha: float, m: int) -> float:
    """Each of ``m`` combinations' level so that the family-wise level is ``alpha`` (Bonferroni)."""
    return alpha / max(1, m)


def step_down(p_values: Mapping[str, float], alpha: float = DEFAULT_ALPHA) -> Dict[str, float]:
    """Holm's step-down over one session's combinations: {key: the level it is rejected at} for those rejected.

    In order of p-value, the j-th smallest (from 0) of m is rejected if below alpha/(m-j) and every smaller one
    was; the first that is not ends it. The chance of rejecting any true null stays below ``alpha`` whatever
    the dependence between the p-values (a whole-session shift moves them all).
    """
    m = len(p_values)
    levels: Dict[str, float] = {}
    for j, (key, p) in enumerate(sorted(p_values.items(), key=lambda kv: (kv[1], kv[0]))):
        level = alpha / (m - j)
        if not p < level:
            break
        levels[key] = level
    return levels


def family(verdicts: Mapping[str, Verdict], p_values: Mapping[str, float], rejudge: Callable[[str, float], Verdict],
           alpha: float = DEFAULT_ALPHA) -> Dict[str, Verdict]:
    """A session's verdicts after Holm's step-down (``step_down`` over ``p_values``, each combination's
    p-value of a drop).

    A combination that did not fail and that Holm rejects at a level above the one it was judged at is judged
    again at that level (``rejudge(key, level)``, which also applies the threshold: a significant drop smaller
    than the threshold still passes). A failure found so keeps the MDS quoted at the combination's own level
    (what a drop in it alone would need) and says in its note how it was found.
    """
    out = dict(verdicts)
    levels = step_down(p_values, alpha)
    for key, level in levels.items():
        v = verdicts[key]
        if v.failed or level <= v.alpha:
            continue
        again = rejudge(key, level)
        if again.failed:
            how = (f"failed by Holm's step-down at alpha {level:.2g}: {len(p_values) - round(alpha / level)} "
                   f"combination(s) with smaller p-values were rejected first")
            out[key] = dataclasses.replace(again, mds=v.mds, note="; ".join(x for x in (again.note, how) if x))
    return out


def confirm(first: Verdict, again: Verdict, pause_s: float) -> Verdict:
    """A failure (``first``) after its confirming re-measurement (``again``, judged at ``CONFIRM_ALPHA``
    ``pause_s`` seconds after the first measurement ended): still REGRESSION if ``again`` failed too, else
    UNCONFIRMED. Either keeps the first measurement's figures and names the second's in its note."""
    if not first.failed:
        raise ValueError(f"confirm() confirms a failure, not a verdict of {first.verdict!r}")
    seen = (f"re-measured {pause_s:.0f} s later: ratio {again.ratio:.3f}, p(slower)={again.p_slower:.2g} at alpha "
            f"{again.alpha:.2g}")
    if again.failed:
        return dataclasses.replace(first, note="; ".join(x for x in (first.note, f"confirmed: {seen}") if x))
    cleared = f"not confirmed: {seen} ({again.verdict}); a slow spell of the runner, not a lasting drop"
    return dataclasses.replace(first, verdict=UNCONFIRMED, note="; ".join(x for x in (first.note, cleared) if x))


def classify(ratio: float, p_slower: float, p_faster: float, threshold: float, alpha: float) -> str:
    """REGRESSION/improvement need size and significance; a large move without significance is noise."""
    if ratio < 1 - threshold and p_slower < alpha:
        return REGRESSION
    if ratio > 1 + threshold and p_faster < alpha:
        return IMPROVEMENT
    return NOISE if abs(ratio - 1) > threshold else UNCHANGED


def classify_loosely(ratio: float, p_slower: float, p_faster: float, threshold: float, bound: float,
                     alpha: float) -> str:
    """``classify`` where only moves beyond ``bound`` may fail or improve; a move past ``threshold`` inside it
    is noise, not unchanged."""
    verdict = classify(ratio, p_slower, p_faster, max(threshold, bound), alpha)
    return NOISE if verdict == UNCHANGED and abs(ratio - 1) > threshold else verdict


def mds(se_log: float, df: float, alpha: float, power: float = POWER) -> float:
    """The drop a one-sided t test at ``alpha`` catches with probability ``power``.

    ``se_log`` is the standard error of the log-ratio under test, ``df`` its degrees of freedom.
    """
    if not math.isfinite(se_log) or df <= 0:
        return math.inf
    return 1.0 - math.exp(-(stats.t.ppf(1 - alpha, df) + stats.t.ppf(power, df)) * se_log)


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


def judge_rounds(baseline: Sequence[float], current: Sequence[float], threshold: float = DEFAULT_THRESHOLD,
                 alpha: float = DEFAULT_ALPHA) -> Verdict:
    """Two sets of rounds compared as independent samples (one-sided Mann-Whitney U).

    Raises:
      ValueError: non-positive samples, or too few rounds for any drop to be
        significant at ``alpha`` (a gate that could never fail).
    """
    if min(baseline, default=0) <= 0 or min(current, default=0) <= 0:
        raise ValueError("judge_rounds() needs positive throughputs on both sides")
    if smallest_p(len(baseline), len(current)) >= alpha:
        raise ValueError(f"{len(baseline)} baseline and {len(current)} current rounds cannot show a significant "
                         f"drop at alpha={alpha:.2g} (smallest p {smallest_p(len(baseline), len(current)):.4f}); "
                         f"use at least {min_rounds(alpha)} rounds on each side")
    return rank_verdict(baseline, current, threshold, alpha)


def rank_verdict(baseline: Sequence[float], current: Sequence[float], threshold: float, alpha: float) -> Verdict:
    """``judge_rounds`` without its checks: ratio of medians, bootstrap interval, Mann-Whitney p-values."""
    bm, cm = float(np.median(baseline)), float(np.median(current))
    ratio = cm / bm
    low, high = bootstrap_ratio_ci(baseline, current)
    p_slower = float(stats.mannwhitneyu(current, baseline, alternative="less").pvalue)
    p_faster = float(stats.mannwhitneyu(current, baseline, alternative="greater").pvalue)
    verdict = classify(ratio, p_slower, p_faster, threshold, alpha)
    return Verdict(bm, cm, ratio, low, high, p_slower, p_faster, threshold, verdict, alpha,
                   evidence=f"{len(baseline)} vs {len(current)} rounds")
