"""Baselines per hardware profile: ``baselines/<profile-id>.json``, several sessions each, written atomically.

Schema 2::

    {"schema": 2, "profile": {...the whole profile it was recorded on...},
     "combinations": {KEY: {"sessions": [{"samples": [...], "median": M, "rounds": R,
                                          "commit": SHA, "date": ISO, "machine": ID,
                                          "yardstick": {"version": V, "rate": STEPS_PER_SEC}}, ...],  # oldest first
                            "threshold": 0.05,          # optional, kept across refreshes
                            "mds": 0.07, "alpha": 0.0017,     # derived: for review, recomputed on save
                            "mds_other_machine": 0.4,         #   (on a new occasion; and on a machine not held)
                            "slope": 0.31,                    # derived, where every session timed the yardstick:
                            "occasion_slope": 0.53}}}         #   within an occasion, and for a new occasion

A recording session appends one session per combination and keeps ``keep``: when
over, it drops the oldest session of the occasion with the most sessions, so that a
refresh on a new day keeps the days before it (the gate needs the drift between
them). Schema-1 files (one ``samples`` list per combination) read as one session.

``yardstick`` (optional) is the rate of ``hpcnn.perf.yardstick`` timed beside the
session's rounds: the runner's speed at the time. When every session of a
combination has one of the current version, the gate judges that combination's
throughput relative to it (``judged_sessions``, with the file's ``slope``), which
cancels most of the whole-session drift that otherwise dominates the stored
gate's noise. ``Baselines.judge`` is the stored gate for one combination.

``machine`` (optional) names the machine the session ran on (``profile.machine_id``):
a session is judged against its own machine's sessions where the file holds them,
and with the spread between machines added where it does not (``stored.OtherMachine``).
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import json
import os
import statistics
import subprocess
from typing import Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

import numpy as np

from hpcnn import jsonfile
from hpcnn.perf import gate, stored, yardstick

SCHEMA_VERSION = 2
DEFAULT_KEEP = 10
T = TypeVar("T")


class BaselineError(ValueError):
    """A baselines file is malformed; the message names the file and what is wrong."""


def session_record(samples: Sequence[float], commit: Optional[str], yardstick_rate: Optional[float] = None,
                   machine: Optional[str] = None) -> dict:
    """One recorded session of one combination; ``yardstick_rate``: the yardstick's rate timed beside it;
    ``machine``: the machine it ran on (``profile.machine_id``; None: unknown)."""
    record = {"samples": list(samples), "median": statistics.median(samples), "rounds": len(samples),
              "commit": commit, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    if machine is not None:
        record["machine"] = machine
    if yardstick_rate is not None:
        record["yardstick"] = {"version": yardstick.VERSION, "rate": yardstick_rate}
    return record


def path_for(directory: str, profile_id: str) -> str:
    """The baselines file of profile ``profile_id`` in ``directory``."""
    return os.path.join(directory, f"{profile_id}.json")


@dataclasses.dataclass
class Baselines:
    """A baselines file: the profile it was recorded on (None for a new file) and its combinations.

    Figures pooled over the combinations (``prior``, ``drift``, ``slope``), and what they are computed from,
    are computed once, each in time linear in the file's sessions: change ``combinations`` through ``save``,
    which returns a new object."""

    profile: Optional[dict]
    combinations: Dict[str, dict]
    _cache: Dict[object, object] = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

    def sessions(self, key: str) -> List[List[float]]:
        """The recorded sessions' rounds of combination ``key``, oldest first ([] if none)."""
        return [s["samples"] for s in self.combinations.get(key, {}).get("sessions", [])]

    def judged_sessions(self, key: str, new_occasion: bool = False) -> Tuple[List[List[float]], Optional[float]]:
        """What the gate judges ``key`` against, and the yardstick rate the figures are expressed at.

        When every recorded session of ``key`` timed the current yardstick, each
        session's rounds are scaled by the median of those rates over the session's
        own, to the power of its ``slope`` (images/sec at the runner's typical recorded
        speed; for a session on a new occasion, or within the hour of the newest one),
        and that median is returned; otherwise the raw rounds and None.
        """
        sessions, rates = self._yardstick_rates(key)
        if not rates:
            return self.sessions(key), None
        reference, beta = statistics.median(rates), self.slope(key, new_occasion).beta
        return [stored.on_yardstick(s["samples"], r, reference, beta) for s, r in zip(sessions, rates)], reference

    def _yardstick_rates(self, key: str) -> Tuple[List[dict], List[float]]:
        """``key``'s sessions and their yardstick rates; no rates unless every session timed the current version."""
        sessions = self.combinations.get(key, {}).get("sessions", [])
        rates = [_current_yardstick_rate(s) for s in sessions]
        return sessions, ([] if not sessions or None in rates else rates)

    def runner(self, key: str, rate: float, new_occasion: bool = False) -> Optional[stored.Runner]:
        """A session of ``key`` whose yardstick ran at ``rate`` (on a new occasion, or within the hour of the
        newest one), against the runner speeds of ``key``'s recorded sessions (relative to the reference
        ``judged_sessions`` returns); None where they are not all on the yardstick."""
        rates = self._yardstick_rates(key)[1]
        if not rates:
            return None
        reference = statistics.median(rates)
        return stored.Runner(rate / reference, tuple(r / reference for r in rates), self.slope(key, new_occasion))

    def slope(self, key: Optional[str] = None, new_occasion: bool = False) -> stored.Slope:
        """How far throughput follows the yardstick within an occasion: pooled over the combinations whose
        sessions all timed it (``stored.pooled_slope``); with ``key``, that combination's own: its sessions'
        fit combined with the slope pooled over the others (``stored.combination_slope``), or the pooled slope
        where its sessions did not all time the yardstick. With ``new_occasion``, as it holds for a session on
        a new occasion: steeper by the file's ``extra``."""
        within = self._cached(("slope", key), lambda: self._slope(key))
        return stored.across_occasions(within, self.extra()) if new_occasion else within

    def extra(self) -> stored.Extra:
        """How much further than within an occasion throughput follows the yardstick across the file's
        occasions (``stored.occasion_extra``), pooled over the combinations whose sessions all timed it, each
        at its own slope within an occasion, on the file's occasions (``file_occasions``)."""
        return self._cached("extra", self._extra)

    def _extra(self) -> stored.Extra:
        occasion, sums = self.file_occasions(), collections.defaultdict(lambda: np.zeros(2))
        for key in self.combinations:
            rates = self._yardstick_rates(key)[1]
            if rates:
                for o, pair in stored.occasion_sums(self._levels(key), rates, occasion[key],
                                                    self.slope(key).beta).items():
                    sums[o] += pair
        return stored.occasion_extra({o: (float(num), float(den)) for o, (num, den) in sums.items()})

    def file_occasions(self) -> Dict[str, List[int]]:
        """Each combination's sessions' occasions within the whole file (``stored.occasions`` over every dated
        session of every combination), so that an occasion is the same hour for every combination, also for one
        added to the matrix later; an undated session joins the one before it, as ``stored.occasions`` has it."""
        return self._cached("file occasions", self._file_occasions)

    def _file_occasions(self) -> Dict[str, List[int]]:
        dates = sorted({s["date"] for c in self.combinations.values() for s in c.get("sessions", []) if s.get("date")},
                       key=stored.parse_date)
        of = dict(zip(dates, stored.occasions(dates)))
        out = {}
        for key, rec in self.combinations.items():
            seq: List[int] = []
            for s in rec.get("sessions", []):
                seq.append(of[s["date"]] if s.get("date") else (seq[-1] if seq else 0))
            out[key] = seq
        return out

    def _slope(self, key: Optional[str]) -> stored.Slope:
        total = self._cached("slope sums", lambda: sum(map(self._slope_sums, self.combinations), stored.SlopeSums()))
        if key is None:
            return stored.slope_of(total)
        rates = self._yardstick_rates(key)[1]
        if not rates:
            return self.slope()
        return stored.combination_slope(stored.slope_of(total - self._slope_sums(key)), self._levels(key), rates,
                                        self.occasions(key))

    def _slope_sums(self, key: str) -> stored.SlopeSums:
        """What ``key``'s sessions add to the pooled slope (nothing unless they all timed the yardstick)."""
        rates = self._yardstick_rates(key)[1]
        return self._cached(("slope sums", key), lambda: stored.slope_sums(self._levels(key), rates,
                                                                           self.occasions(key))
                            if rates else stored.SlopeSums())

    def _levels(self, key: str):
        """The log median of each recorded session of ``key``, raw (``stored.levels``)."""
        return self._cached(("levels", key), lambda: stored.levels(self.sessions(key)))

    def _cached(self, name: object, compute: Callable[[], T]) -> T:
        """``compute()``, once per ``name``: the file's figures do not change (see the class)."""
        if name not in self._cache:
            self._cache[name] = compute()
        return self._cache[name]

    def fitted(self, key: str) -> float:
        """The degrees of freedom ``key``'s sessions spent on its own slope (0 where it is not on the yardstick)."""
        return self.slope(key).fitted if self._yardstick_rates(key)[1] else 0.0

    def occasions(self, key: str) -> List[int]:
        """The occasion of each recorded session of ``key``, numbered from 0 among its own: the file's occasions
        (``file_occasions``), so that the gate and the slope across occasions group sessions alike, also where
        another combination's sessions ran in a gap of this one's."""
        def numbered() -> List[int]:
            seq = self.file_occasions().get(key, [])
            rank = {g: i for i, g in enumerate(sorted(set(seq)))}
            return [rank[g] for g in seq]
        return list(self._cached(("occasions", key), numbered))

    def on_new_occasion(self, key: str, now: Optional[datetime.datetime] = None) -> bool:
        """Whether a session of ``key`` at ``now`` (default: now) runs on another occasion than its newest one."""
        now = now or datetime.datetime.now(datetime.timezone.utc)
        return stored.on_new_occasion([s.get("date") for s in self.combinations.get(key, {}).get("sessions", [])],
                                      now)

    def machines(self, key: str) -> List[Optional[str]]:
        """The machine each recorded session of ``key`` ran on (None where it names none), oldest first."""
        return [s.get("machine") for s in self.combinations.get(key, {}).get("sessions", [])]

    def of_machine(self, machine: str) -> "Baselines":
        """The file as the sessions recorded on ``machine`` alone hold it (combinations without one dropped)."""
        def own() -> Baselines:
            combos = {}
            for key, rec in self.combinations.items():
                kept = [s for s in rec.get("sessions", []) if s.get("machine") == machine]
                if kept:
                    combos[key] = {**rec, "sessions": kept}
            return Baselines(self.profile, combos)
        return self._cached(("machine", machine), own)

    def judging(self, key: str, machine: Optional[str]) -> "Baselines":
        """What judges a session of ``key`` on ``machine``: that machine's own sessions (``of_machine``) where the
        file holds them beside other machines', else the whole file."""
        held = self.machines(key)
        if machine is not None and machine in held and any(m != machine for m in held):
            return self.of_machine(machine)
        return self

    def other_machine(self) -> stored.OtherMachine:
        """What a session on a machine the file does not hold is judged with: the spread of a machine's offset
        pooled over the combinations (``stored.pooled_machines``, at the slopes of a new occasion) and how many
        machines the file's sessions ran on (sessions that name none count as one)."""
        keys = list(self.combinations)

        def compute() -> stored.OtherMachine:
            spread = stored.pooled_machines([self.judged_sessions(k, True)[0] for k in keys],
                                            [self.machines(k) for k in keys], self.drift(), self.prior(True))
            return stored.OtherMachine(spread, max(1, len({m for k in keys for m in self.machines(k)})))
        return self._cached("other_machine", compute)

    def last_commit(self, key: str) -> Optional[str]:
        """The commit of the newest session of ``key`` that recorded one, or None."""
        commits = [s.get("commit") for s in self.combinations.get(key, {}).get("sessions", [])]
        return next((c for c in reversed(commits) if c), None)

    def prior(self, new_occasion: bool = False) -> Optional[stored.Noise]:
        """The spread between sessions of one occasion pooled over every combination, as the gate judges each
        (for a session on a new occasion, or within the hour of the newest one)."""
        keys = list(self.combinations)
        return self._cached(("prior", new_occasion), lambda: stored.pooled_noise(
            [self.judged_sessions(k, new_occasion)[0] for k in keys], [self.occasions(k) for k in keys],
            [self.fitted(k) for k in keys]))

    def drift(self) -> stored.Drift:
        """The spread of occasion offsets pooled over every combination (the assumed one until two occasions),
        at the slopes a session on a new occasion is judged at."""
        keys = list(self.combinations)
        return self._cached("drift", lambda: stored.pooled_drift(
            [self.judged_sessions(k, True)[0] for k in keys], [self.occasions(k) for k in keys], self.prior(True)))

    def next_session_mds(self, key: str, alpha: float, new_occasion: bool = True,
                         other_machine: bool = False) -> Optional[float]:
        """The MDS of ``key``'s next session at ``alpha``, on a new occasion or within the hour of the newest one
        (``other_machine``: on a new occasion of a machine the file does not hold), with the runner at the median
        of its recorded speeds (None: unknown)."""
        new_occasion = new_occasion or other_machine
        sessions, reference = self.judged_sessions(key, new_occasion)
        return stored.next_session_mds(sessions, self.prior(new_occasion), alpha, self.occasions(key),
                                       self.drift() if new_occasion else None,
                                       self.runner(key, reference, new_occasion) if reference else None,
                                       self.other_machine() if other_machine else None)

    def judge(self, key: str, samples: Sequence[float], rates: Sequence[float] = (),
              alpha: float = gate.DEFAULT_ALPHA, now: Optional[datetime.datetime] = None,
              machine: Optional[str] = None) -> gate.Verdict:
        """The stored gate: this session's rounds of ``key`` (images/sec, and the yardstick rates timed beside
        them) against its recorded sessions, at level ``alpha``.

        On the yardstick where every recorded session and this one timed it; with the drift between occasions,
        and the slopes that hold across them, where ``now`` (default: now) is on another occasion than the newest
        recorded one; at the combination's own threshold if the file sets one. ``machine``: the machine this
        session runs on (None: unknown, judged as if the file held it): judged against that machine's own sessions
        where the file holds them beside other machines', and on a new occasion with the spread between machines
        added (``other_machine``) where it holds none of that machine's.

        Raises:
          ValueError: ``key`` has no recorded session, or a throughput is not positive.
        """
        own = self.judging(key, machine)
        if own is not self:
            return own.judge(key, samples, rates, alpha, now, machine)
        other = self.other_machine() if machine is not None and machine not in self.machines(key) else None
        new = other is not None or self.on_new_occasion(key, now)
        sessions, reference = self.judged_sessions(key, new)
        runner = self.runner(key, statistics.median(rates), new) if rates and reference else None
        if runner is None:
            sessions, current = self.sessions(key), list(samples)
        else:
            current = stored.on_yardstick(samples, statistics.median(rates), reference, runner.slope.beta)
        threshold = self.combinations.get(key, {}).get("threshold", gate.STORED_THRESHOLD)
        return stored.judge_sessions(sessions, current, threshold, alpha, self.prior(new), runner, self.occasions(key),
                                     self.drift() if new else None, other)


def load(path: str) -> Baselines:
    """The file at ``path``; no profile and no combinations when it does not exist.

    Raises:
      BaselineError: the file is not JSON or not of the baselines schema.
    """
    if not os.path.exists(path):
        return Baselines(None, {})
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise BaselineError(f"baselines file {path}: not readable JSON ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("combinations"), dict):
        raise BaselineError(f"baselines file {path}: expected an object with a 'combinations' object")
    combinations = {}
    for key, rec in data["combinations"].items():
        if isinstance(rec, dict) and "samples" in rec and "sessions" not in rec:  # schema 1: one session
            rec = {**{k: v for k, v in rec.items() if k == "threshold"}, "sessions": [rec]}
        sessions = rec.get("sessions") if isinstance(rec, dict) else None
        if not (isinstance(sessions, list) and sessions and all(_valid_samples(s) for s in sessions)):
            raise BaselineError(f"baselines file {path}: combination {key!r} needs 'sessions', a non-empty list of "
                                "sessions each with 'samples', a non-empty list of positive images/sec figures")
        if not all(_valid_yardstick(s.get("yardstick")) for s in sessions):
            raise BaselineError(f"baselines file {path}: combination {key!r} has a session whose 'yardstick' is not "
                                "{'version': an integer, 'rate': a positive number of steps/sec}")
        t = rec.get("threshold")
        if t is not None and not (isinstance(t, (int, float)) and 0 < t < 1):
            raise BaselineError(f"baselines file {path}: combination {key!r} has threshold={t!r}; "
                                "allowed: a fraction between 0 and 1")
        combinations[key] = rec
    profile = data.get("profile")
    if not isinstance(profile, dict):
        raise BaselineError(f"baselines file {path}: expected the 'profile' it was recorded on (an object)")
    return Baselines(profile, combinations)


def _valid_samples(session) -> bool:
    samples = session.get("samples") if isinstance(session, dict) else None
    return (isinstance(samples, list) and bool(samples)
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in samples))


def _current_yardstick_rate(session: dict) -> Optional[float]:
    """The session's yardstick rate if it timed this version of the yardstick, else None."""
    timed = session.get("yardstick") or {}
    return timed["rate"] if timed.get("version") == yardstick.VERSION else None


def _valid_yardstick(value) -> bool:
    if value is None:
        return True
    rate = value.get("rate") if isinstance(value, dict) else None
    return (isinstance(value, dict) and isinstance(value.get("version"), int) and isinstance(rate, (int, float))
            and not isinstance(rate, bool) and rate > 0)


def save(path: str, profile: dict, new_sessions: Dict[str, dict], keep: int = DEFAULT_KEEP,
         alpha: float = gate.DEFAULT_ALPHA) -> Baselines:
    """Appends one session per combination to the file at ``path`` (keeping the newest ``keep``), atomically.

    Thresholds are kept; every combination's MDS is recomputed for a session judging all
    of the file's combinations at family-wise ``alpha``, and its slopes on the yardstick. The new content goes to a
    temporary file in the same directory, then is renamed over the old one, so an
    interrupted save never leaves half a file. Returns what was written.
    """
    if keep < 1:
        raise ValueError(f"keep={keep} must be at least 1")
    combos = load(path).combinations
    for key, session in new_sessions.items():
        rec = dict(combos.get(key, {}))
        rec["sessions"] = thinned(rec.get("sessions", []) + [session], keep)
        combos[key] = rec
    result = Baselines(profile, dict(sorted(combos.items())))
    each = gate.combination_alpha(alpha, len(combos))
    for key, rec in result.combinations.items():
        rec["alpha"] = each
        rec["mds"] = result.next_session_mds(key, each)  # for a session on another day, as CI's are
        rec["mds_other_machine"] = result.next_session_mds(key, each, other_machine=True)  # an ephemeral runner's
        rec.pop("slope", None)
        rec.pop("occasion_slope", None)
        if result.judged_sessions(key)[1]:
            rec["slope"] = round(result.slope(key).beta, 3)
            rec["occasion_slope"] = round(result.slope(key, new_occasion=True).beta, 3)
    jsonfile.write_atomically(path, {"schema": SCHEMA_VERSION, "profile": profile, "combinations": result.combinations})
    return result


def thinned(sessions: List[dict], keep: int) -> List[dict]:
    """``sessions`` (oldest first) cut to ``keep`` by dropping the oldest of the occasion with the most sessions
    (the older occasion on a tie): every occasion stays while there is room for one session each."""
    sessions = list(sessions)
    while len(sessions) > keep:
        occasion = stored.occasions([s.get("date") for s in sessions])
        sizes = {g: occasion.count(g) for g in occasion}
        crowded = max(sizes, key=lambda g: (sizes[g], -g))
        sessions.pop(occasion.index(crowded))
    return sessions


def current_commit(cwd: Optional[str] = None) -> Optional[str]:
    """The git commit of the checkout at ``cwd`` (default: this package's), or None."""
    cwd = cwd or os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None
