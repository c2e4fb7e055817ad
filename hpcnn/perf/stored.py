"""Stored mode: this session against the recorded sessions of a baselines file.

A combination's baseline holds the rounds of several sessions (separate
processes, spread over time). On shared runners whole sessions drift by 10-35%,
so the rounds of one session are not independent draws and a session's own
spread says nothing of the next one. The unit of evidence is therefore the
session median: on the log scale the recorded session medians give a level and
a between-session spread, and an unchanged session falls inside the t prediction
interval around that level.

A combination's spread rests on few sessions, so it is moderated towards the
profile's pooled spread (every combination's sessions), as limma moderates
per-gene variances: the pooled figure counts as ``PRIOR_DF`` degrees of freedom.
With a single recorded session and nothing to pool, the gate says that it cannot
tell drift from a regression and fails only beyond ``gate.WIDE_BOUND``.

Most of that drift is the runner's speed, shared by every workload of a session,
so where the sessions timed ``hpcnn.perf.yardstick`` beside their rounds the
gate judges throughput on the yardstick (``on_yardstick``): each session's
images/sec times a reference rate over its own. On 16 sessions of one commit,
half of them beside a process burning a core, that cut the spread of log session
medians from 0.22-0.31 to 0.02-0.09 (quiet sessions alone: 0.04-0.06 to 0.02-0.05).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable, List, Optional, Sequence

import numpy as np
from scipy import stats

from hpcnn.perf import gate

PRIOR_DF = 4

Sessions = Sequence[Sequence[float]]  # per recorded session, its rounds' images/sec


@dataclasses.dataclass(frozen=True)
class Noise:
    """The between-session standard deviation of log session medians, and its degrees of freedom."""

    sigma: float
    df: float


def on_yardstick(samples: Sequence[float], rate: float, reference: float) -> List[float]:
    """``samples`` (images/sec) as they would read with the yardstick at ``reference`` instead of ``rate``."""
    if rate <= 0 or reference <= 0:
        raise ValueError(f"on_yardstick() needs positive rates, got rate={rate} reference={reference}")
    return [x * reference / rate for x in samples]


def levels(sessions: Sessions) -> np.ndarray:
    """The log of each session's median throughput."""
    return np.log([float(np.median(s)) for s in sessions])


def pooled_noise(every_combination: Iterable[Sessions]) -> Optional[Noise]:
    """The between-session spread pooled over combinations (each about its own mean); None without 2+ sessions."""
    ss, df = 0.0, 0
    for sessions in every_combination:
        x = levels(sessions)
        if len(x) >= 2:
            ss += float(np.sum((x - x.mean()) ** 2))
            df += len(x) - 1
    return Noise(math.sqrt(ss / df), df) if df else None


def moderated_noise(sessions: Sessions, prior: Optional[Noise]) -> Optional[Noise]:
    """One combination's spread, its own sessions combined with ``prior``; None if neither says anything."""
    x = levels(sessions)
    own_df = len(x) - 1
    d0 = min(prior.df, PRIOR_DF) if prior else 0
    if own_df + d0 == 0:
        return None
    own_ss = float(np.sum((x - x.mean()) ** 2))
    var = (d0 * (prior.sigma ** 2 if prior else 0.0) + own_ss) / (d0 + own_df)
    return Noise(math.sqrt(var), d0 + own_df)


def next_session_mds(sessions: Sessions, prior: Optional[Noise], alpha: float) -> Optional[float]:
    """The minimum detectable slowdown of the next session against ``sessions`` at ``alpha``; None if unknown."""
    noise = moderated_noise(sessions, prior)
    if noise is None:
        return None
    return gate.mds(noise.sigma * math.sqrt(1 + 1 / len(sessions)), noise.df, alpha)


def judge_sessions(sessions: Sessions, current: Sequence[float], threshold: float = gate.STORED_THRESHOLD,
                   alpha: float = gate.DEFAULT_ALPHA, prior: Optional[Noise] = None,
                   runner_speed: Optional[float] = None) -> gate.Verdict:
    """This session's rounds against the recorded ``sessions``, at level ``alpha``.

    ``runner_speed``: where both are on the yardstick, this session's yardstick rate
    over the recorded one, named in the verdict's evidence (a runner far from its
    recorded speed, or a change that slows TensorFlow process-wide, shows there).

    Raises:
      ValueError: no recorded session, or non-positive throughputs.
    """
    if not sessions or min(min(s) for s in sessions) <= 0 or min(current, default=0) <= 0:
        raise ValueError("judge_sessions() needs recorded sessions and positive throughputs")
    noise = moderated_noise(sessions, prior)
    on = "" if runner_speed is None else f" on the yardstick (runner at {runner_speed:.2f}x its recorded speed)"
    if noise is None:
        v = _single_session(sessions[0], current, threshold, alpha)
        return dataclasses.replace(v, evidence=v.evidence + on)
    x = levels(sessions)
    base, cur = math.exp(x.mean()), float(np.median(current))
    se = noise.sigma * math.sqrt(1 + 1 / len(x))
    log_ratio = math.log(cur / base)
    score = log_ratio / se if se > 0 else math.copysign(math.inf, log_ratio)
    p_slower, p_faster = float(stats.t.cdf(score, noise.df)), float(stats.t.sf(score, noise.df))
    half = float(stats.t.ppf(0.975, noise.df)) * se
    ratio = cur / base
    return gate.Verdict(base, cur, ratio, math.exp(log_ratio - half), math.exp(log_ratio + half), p_slower, p_faster,
                        threshold, gate.classify(ratio, p_slower, p_faster, threshold, alpha), alpha,
                        gate.mds(se, noise.df, alpha), f"{len(x)} recorded session(s){on}",
                        "" if len(x) > 1 else "one session of its own; spread pooled from the profile's others")


def _single_session(recorded: Sequence[float], current: Sequence[float], threshold: float,
                    alpha: float) -> gate.Verdict:
    """One recorded session and nothing to pool: rounds against rounds, failing only beyond WIDE_BOUND."""
    bound = max(threshold, gate.WIDE_BOUND)
    note = (f"one session cannot tell session drift from a regression: only drops beyond {bound:.0%} fail; "
            "record more sessions with --update-baselines")
    if gate.smallest_p(len(recorded), len(current)) >= alpha:
        note += f"; {len(recorded)} vs {len(current)} rounds cannot reach alpha {alpha:.2g} at all"
    v = gate.rank_verdict(recorded, current, bound, alpha)  # classified against the wide bound
    return dataclasses.replace(v, threshold=threshold, mds=bound, evidence="1 recorded session", note=note)
