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

Sessions recorded within an hour share more than the yardstick corrects for (the
same VM, host and neighbours): a file recorded in one sitting holds no drift
between days, and a 10% gate built on it failed 2 of 5 unchanged sessions the
next day. Sessions are therefore grouped into *occasions* (each within
``OCCASION_GAP_HOURS`` of the one before); the spread between sessions is
measured within occasions, and a session on a new occasion is judged with an
occasion term added: its spread (``Drift``) pooled over the file's combinations
where the file holds two or more occasions, moderated towards ``ASSUMED_DRIFT``,
the between-day spread measured on our own runners, which stands alone until a
file holds a second occasion.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy as np
from scipy import stats

from hpcnn.perf import gate

PRIOR_DF = 4
OCCASION_GAP_HOURS = 6.0  # sessions closer than this ran under the same conditions
# The spread of log session level between occasions beyond the spread within one, on the yardstick, and the
# number of independent day-to-day contrasts it rests on (set from the measurements named in baselines/README.md)
ASSUMED_DRIFT_SIGMA = 0.05
ASSUMED_DRIFT_DF = 12
# How far beyond the range of runner speeds its baselines saw a session's yardstick still corrects: a runner far
# slower than ever recorded slows the models less than the yardstick, so a correction from 0.6x read unchanged
# sessions up to 20% fast, and a planted 10% slowdown as a 14% "improvement"
RUNNER_MARGIN = 0.10

Sessions = Sequence[Sequence[float]]  # per recorded session, its rounds' images/sec


@dataclasses.dataclass(frozen=True)
class Noise:
    """The between-session standard deviation of log session medians, and its degrees of freedom."""

    sigma: float
    df: float


@dataclasses.dataclass(frozen=True)
class Drift:
    """The standard deviation of a whole occasion's offset (log scale), its degrees of freedom, and how many of
    the file's occasion contrasts measured it (0: ``ASSUMED_DRIFT_SIGMA`` alone)."""

    sigma: float
    df: float
    measured_df: int = 0


ASSUMED_DRIFT = Drift(ASSUMED_DRIFT_SIGMA, ASSUMED_DRIFT_DF)


def occasions(dates: Sequence[Optional[str]], gap_hours: float = OCCASION_GAP_HOURS) -> List[int]:
    """The occasion of each session (dates ISO, oldest first): a new one after a gap over ``gap_hours``.

    A session without a date joins the one before it (the conservative reading: no drift measured).
    """
    out: List[int] = []
    last = None
    for d in dates:
        t = _parse(d)
        new = bool(out) and t is not None and last is not None and (t - last).total_seconds() > gap_hours * 3600
        out.append(0 if not out else out[-1] + new)
        last = t if t is not None else last
    return out


def on_new_occasion(dates: Sequence[Optional[str]], now: datetime.datetime,
                    gap_hours: float = OCCASION_GAP_HOURS) -> bool:
    """Whether a session at ``now`` runs on another occasion than the newest recorded one (True if undated)."""
    newest = max((t for t in map(_parse, dates) if t is not None), default=None)
    return newest is None or (now - newest).total_seconds() > gap_hours * 3600


def _parse(date: Optional[str]) -> Optional[datetime.datetime]:
    if not date:
        return None
    t = datetime.datetime.fromisoformat(date)
    return t if t.tzinfo else t.replace(tzinfo=datetime.timezone.utc)


def on_yardstick(samples: Sequence[float], rate: float, reference: float) -> List[float]:
    """``samples`` (images/sec) as they would read with the yardstick at ``reference`` instead of ``rate``."""
    if rate <= 0 or reference <= 0:
        raise ValueError(f"on_yardstick() needs positive rates, got rate={rate} reference={reference}")
    return [x * reference / rate for x in samples]


def levels(sessions: Sessions) -> np.ndarray:
    """The log of each session's median throughput."""
    return np.log([float(np.median(s)) for s in sessions])


def _within(sessions: Sessions, occasion: Optional[Sequence[int]]) -> Tuple[float, int]:
    """The sum of squares of log session levels about their occasion's mean, and its degrees of freedom."""
    x = levels(sessions)
    groups = np.asarray(occasion if occasion is not None else [0] * len(x))
    ss = sum(float(np.sum((x[groups == g] - x[groups == g].mean()) ** 2)) for g in np.unique(groups))
    return ss, len(x) - len(np.unique(groups))


def _occasion_means(sessions: Sessions, occasion: Optional[Sequence[int]]) -> Tuple[np.ndarray, np.ndarray]:
    """Per occasion: the mean log session level and the number of sessions."""
    x = levels(sessions)
    groups = np.asarray(occasion if occasion is not None else [0] * len(x))
    ids = np.unique(groups)
    return np.array([x[groups == g].mean() for g in ids]), np.array([np.sum(groups == g) for g in ids])


def pooled_noise(every_combination: Iterable[Sessions],
                 every_occasion: Optional[Iterable[Sequence[int]]] = None) -> Optional[Noise]:
    """The spread between sessions of one occasion, pooled over combinations; None without 2+ such sessions.

    ``every_occasion``: each combination's session occasions (``occasions``); None: one occasion each.
    """
    ss, df = 0.0, 0
    combos = list(every_combination)
    for sessions, occasion in zip(combos, every_occasion if every_occasion is not None else [None] * len(combos)):
        s, d = _within(sessions, occasion)
        ss, df = ss + s, df + d
    return Noise(math.sqrt(ss / df), df) if df else None


def pooled_drift(every_combination: Iterable[Sessions], every_occasion: Iterable[Sequence[int]],
                 within: Optional[Noise]) -> Drift:
    """The spread of occasion offsets: the file's occasion means pooled over combinations, moderated towards
    ``ASSUMED_DRIFT``; the assumption alone where no combination has two occasions.

    Occasion means scatter by the drift plus the within-occasion spread over each occasion's sessions; that
    share (``within``) is taken out before pooling (a random-effects ANOVA, its estimate floored at 0).
    """
    excess, df = 0.0, 0
    w2 = within.sigma ** 2 if within else 0.0
    for sessions, occasion in zip(every_combination, every_occasion):
        means, counts = _occasion_means(sessions, occasion)
        if len(means) >= 2:
            excess += float(np.sum((means - means.mean()) ** 2)) - (len(means) - 1) * w2 * float(np.mean(1 / counts))
            df += len(means) - 1
    var = (ASSUMED_DRIFT.df * ASSUMED_DRIFT.sigma ** 2 + max(0.0, excess)) / (ASSUMED_DRIFT.df + df)
    return Drift(math.sqrt(var), ASSUMED_DRIFT.df + df, df)


def moderated_noise(sessions: Sessions, prior: Optional[Noise],
                    occasion: Optional[Sequence[int]] = None) -> Optional[Noise]:
    """One combination's spread within occasions, its own sessions combined with ``prior``; None if neither
    says anything."""
    own_ss, own_df = _within(sessions, occasion)
    d0 = min(prior.df, PRIOR_DF) if prior else 0
    if own_df + d0 == 0:
        return None
    var = (d0 * (prior.sigma ** 2 if prior else 0.0) + own_ss) / (d0 + own_df)
    return Noise(math.sqrt(var), d0 + own_df)


def _prediction_se(sessions: Sessions, noise: Noise, occasion: Optional[Sequence[int]],
                   drift: Optional[Drift]) -> Tuple[float, float, float]:
    """The level the next session is judged against (log), the standard error of that session's log-ratio to
    it, and the error's degrees of freedom (Welch-Satterthwaite).

    On a new occasion (``drift`` given) the level is the mean of the occasion means, each occasion one draw of
    the drift. With ``drift`` None the next session shares the newest occasion (a session run within hours of
    the recording): the level is that occasion's mean, and only the spread within it counts."""
    means, counts = _occasion_means(sessions, occasion)
    if not drift:
        return float(means[-1]), noise.sigma * math.sqrt(1 + 1 / counts[-1]), noise.df
    k = len(means)
    var_w = noise.sigma ** 2 * (1 + float(np.mean(1 / counts)) / k)
    var_d = drift.sigma ** 2 * (1 + 1 / k)
    var = var_w + var_d
    return float(means.mean()), math.sqrt(var), var ** 2 / (var_w ** 2 / noise.df + var_d ** 2 / drift.df)


def next_session_mds(sessions: Sessions, prior: Optional[Noise], alpha: float,
                     occasion: Optional[Sequence[int]] = None, drift: Optional[Drift] = None) -> Optional[float]:
    """The minimum detectable slowdown of the next session against ``sessions`` at ``alpha``; None if unknown.

    ``drift``: that session runs on a new occasion with this spread of occasion offsets; None: the same one."""
    noise = moderated_noise(sessions, prior, occasion)
    if noise is None:
        return None
    _, se, df = _prediction_se(sessions, noise, occasion, drift)
    return gate.mds(se, df, alpha)


def judge_sessions(sessions: Sessions, current: Sequence[float], threshold: float = gate.STORED_THRESHOLD,
                   alpha: float = gate.DEFAULT_ALPHA, prior: Optional[Noise] = None,
                   runner_speed: Optional[float] = None, occasion: Optional[Sequence[int]] = None,
                   drift: Optional[Drift] = None, runner_seen: Optional[Tuple[float, float]] = None) -> gate.Verdict:
    """This session's rounds against the recorded ``sessions``, at level ``alpha``.

    ``runner_speed``: where both are on the yardstick, this session's yardstick rate
    over the recorded one, named in the verdict's evidence (a runner far from its
    recorded speed, or a change that slows TensorFlow process-wide, shows there).
    ``occasion``: each recorded session's occasion (``occasions``; None: all one).
    ``drift``: this session runs on a new occasion, whose offset has this spread;
    None: it shares the newest recorded occasion (a session run within hours of it),
    and is judged against that occasion's sessions alone.
    ``runner_seen``: the lowest and highest runner speed of the recorded sessions
    (relative to ``runner_speed``'s reference); a ``runner_speed`` beyond them by
    more than ``RUNNER_MARGIN`` fails only drops beyond ``gate.WIDE_BOUND``.

    Raises:
      ValueError: no recorded session, or non-positive throughputs.
    """
    if not sessions or min(min(s) for s in sessions) <= 0 or min(current, default=0) <= 0:
        raise ValueError("judge_sessions() needs recorded sessions and positive throughputs")
    noise = moderated_noise(sessions, prior, occasion)
    on = "" if runner_speed is None else f" on the yardstick (runner at {runner_speed:.2f}x its recorded speed)"
    if noise is None:
        v = _single_session(sessions[0], current, threshold, alpha)
        return dataclasses.replace(v, evidence=v.evidence + on)
    level, se, df = _prediction_se(sessions, noise, occasion, drift)
    base, cur = math.exp(level), float(np.median(current))
    log_ratio = math.log(cur / base)
    score = log_ratio / se if se > 0 else math.copysign(math.inf, log_ratio)
    p_slower, p_faster = float(stats.t.cdf(score, df)), float(stats.t.sf(score, df))
    half = float(stats.t.ppf(0.975, df)) * se
    ratio = cur / base
    k = len(set(occasion)) if occasion is not None else 1
    where = f" on {k} occasion(s)" if drift else ""
    notes = ["one session of its own; spread pooled from the profile's others"] if len(sessions) == 1 else []
    if drift:
        notes.append(f"a new occasion: drift between occasions {drift.sigma:.1%} "
                     + ("assumed (record sessions on other days to measure this runner's)" if not drift.measured_df
                        else f"measured on {drift.measured_df} occasion contrast(s)"))
    verdict, mds = gate.classify(ratio, p_slower, p_faster, threshold, alpha), gate.mds(se, df, alpha)
    if runner_speed is not None and runner_seen and not _within_reach(runner_speed, runner_seen):
        bound = max(threshold, gate.WIDE_BOUND)
        verdict, mds = gate.classify_loosely(ratio, p_slower, p_faster, threshold, bound, alpha), max(mds, bound)
        notes.append(f"the runner at {runner_speed:.2f}x is beyond the {runner_seen[0]:.2f}-{runner_seen[1]:.2f}x "
                     f"its baselines saw, where the yardstick does not correct every workload alike: only drops "
                     f"beyond {bound:.0%} fail (record sessions on this runner as it is now, or compare in paired "
                     "mode)")
    return gate.Verdict(base, cur, ratio, math.exp(log_ratio - half), math.exp(log_ratio + half), p_slower, p_faster,
                        threshold, verdict, alpha, mds, f"{len(sessions)} recorded session(s){where}{on}",
                        "; ".join(notes))


def _within_reach(speed: float, seen: Tuple[float, float]) -> bool:
    """Whether ``speed`` lies within the recorded range ``seen`` widened by RUNNER_MARGIN on either side."""
    return seen[0] * (1 - RUNNER_MARGIN) <= speed <= seen[1] * (1 + RUNNER_MARGIN)


def _single_session(recorded: Sequence[float], current: Sequence[float], threshold: float,
                    alpha: float) -> gate.Verdict:
    """One recorded session and nothing to pool: rounds against rounds, failing only beyond WIDE_BOUND."""
    bound = max(threshold, gate.WIDE_BOUND)
    note = (f"one session cannot tell session drift from a regression: only drops beyond {bound:.0%} fail; "
            "record more sessions with --update-baselines")
    if gate.smallest_p(len(recorded), len(current)) >= alpha:
        note += f"; {len(recorded)} vs {len(current)} rounds cannot reach alpha {alpha:.2g} at all"
    v = gate.rank_verdict(recorded, current, bound, alpha)
    verdict = gate.classify_loosely(v.ratio, v.p_slower, v.p_faster, threshold, bound, alpha)
    return dataclasses.replace(v, verdict=verdict, threshold=threshold, mds=bound, evidence="1 recorded session",
                               note=note)
