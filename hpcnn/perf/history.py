"""The throughput history of a branch: perf-suite runs in one SQLite file, and the commits where it stepped.

``hpcnn-perf history add RUN.json`` stores a run of ``pytest perf_tests
--benchmark-json=RUN.json`` (pytest-benchmark's file with hpcnn's ``extra_info``):
per combination, the rounds' images/sec, keyed by profile, combination and
commit. A run is identified by a digest of what it measured, so adding it again
is a no-op; a file that is not such a run is refused whole, in one transaction,
so nothing stored is lost.

``find_changes`` locates steps in one combination's series of commits (E-Divisive
means, as MongoDB and Apache Otava use it: binary segmentation whose every split
must pass a permutation test).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import sqlite3
import statistics
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from hpcnn.perf import yardstick

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,   -- digest of the run's measurements
    profile_id TEXT NOT NULL,
    commit_id TEXT NOT NULL,
    commit_time TEXT,          -- ISO 8601, the commit's (orders the series)
    run_time TEXT,             -- ISO 8601, when pytest-benchmark wrote the file
    refresh INTEGER NOT NULL,  -- 1: a --update-baselines session (baselines recorded, nothing judged)
    source TEXT NOT NULL       -- the file it came from
);
CREATE TABLE IF NOT EXISTS samples (
    run_id TEXT NOT NULL REFERENCES runs (run_id),
    combination TEXT NOT NULL,
    rounds TEXT NOT NULL,      -- JSON list of images/sec
    median REAL NOT NULL,
    verdict TEXT,              -- the gate's, where the run was judged
    yardstick REAL,            -- median steps/sec of hpcnn.perf.yardstick beside the rounds (NULL: not timed)
    yardstick_version INTEGER, -- its hpcnn.perf.yardstick.VERSION: rates of two versions are never compared
    PRIMARY KEY (run_id, combination)
);
CREATE INDEX IF NOT EXISTS samples_by_combination ON samples (combination);
"""


class HistoryError(ValueError):
    """A file that is not a perf-suite run, or a history database that cannot be used; the message names it."""


@dataclasses.dataclass(frozen=True)
class Run:
    """One perf-suite run as stored: where and on what it ran, and each combination's rounds."""

    run_id: str
    profile_id: str
    commit: str
    commit_time: Optional[str]
    run_time: Optional[str]
    refresh: bool
    rounds: Dict[str, List[float]]
    verdicts: Dict[str, Optional[str]]
    source: str
    yardsticks: Dict[str, Tuple[float, int]] = dataclasses.field(default_factory=dict)  # (median rate, VERSION)


@dataclasses.dataclass(frozen=True)
class Point:
    """One commit of a combination's series: every round stored for it, pooled over its runs."""

    commit: str
    commit_time: Optional[str]
    median: float  # median of the runs' medians
    rounds: List[float]
    runs: int
    refresh: bool  # a baseline recording happened at this commit


@dataclasses.dataclass(frozen=True)
class Change:
    """A step in a series: ``after`` is the first commit of the new level."""

    index: int
    before: str
    after: str
    ratio: float  # new level / old level
    ci_low: float
    ci_high: float
    commits_before: int
    commits_after: int

    def describe(self) -> str:
        direction = "slower" if self.ratio < 1 else "faster"
        return (f"{self.after[:12]}: {abs(1 - self.ratio):.1%} {direction} (ratio {self.ratio:.3f} "
                f"[95% CI {self.ci_low:.3f}, {self.ci_high:.3f}]) after {self.before[:12]}; "
                f"{self.commits_before} commit(s) before, {self.commits_after} after")


def parse_run(path: str) -> Run:
    """Reads a ``pytest --benchmark-json`` file of the perf suite.

    Raises:
      HistoryError: unreadable, not JSON, or without perf-suite benchmarks (the message names ``path``).
    """
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        raise HistoryError(f"{path}: cannot read it ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise HistoryError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
    benches = data.get("benchmarks") if isinstance(data, dict) else None
    if not isinstance(benches, list):
        raise HistoryError(f"{path}: no 'benchmarks' list; expected the file of pytest perf_tests --benchmark-json")
    rounds: Dict[str, List[float]] = {}
    verdicts: Dict[str, Optional[str]] = {}
    yardsticks: Dict[str, Tuple[float, int]] = {}
    profiles = set()
    for b in benches:
        info = b.get("extra_info", {}) if isinstance(b, dict) else {}
        key, samples = info.get("combination"), info.get("images_per_sec_rounds")
        if not key or not isinstance(samples, list) or not samples or \
                not all(isinstance(x, (int, float)) and x > 0 for x in samples):
            name = b.get("name", "?") if isinstance(b, dict) else repr(b)
            raise HistoryError(f"{path}: benchmark {name} has no combination and positive images_per_sec_rounds "
                               "in extra_info; not a perf-suite run")
        rounds[key] = [float(x) for x in samples]
        verdicts[key] = info.get("verdict")
        rates, version = info.get("yardstick_rates"), info.get("yardstick_version")
        if isinstance(version, int) and isinstance(rates, list) and rates and \
                all(isinstance(x, (int, float)) and x > 0 for x in rates):
            yardsticks[key] = (statistics.median(rates), version)
        profiles.add(info.get("profile_id"))
    if not rounds:
        raise HistoryError(f"{path}: no perf-suite benchmarks in it (every combination skipped?)")
    if len(profiles) != 1 or None in profiles:
        raise HistoryError(f"{path}: benchmarks of {len(profiles)} profiles; a run has exactly one profile_id")
    commit_info = data.get("commit_info") or {}
    commit = commit_info.get("id") or "unknown"
    profile = profiles.pop()
    digest = hashlib.sha256(json.dumps([profile, commit, sorted(rounds.items())]).encode()).hexdigest()[:20]
    return Run(digest, profile, commit, commit_info.get("time"), data.get("datetime"),
               all(v is None for v in verdicts.values()), rounds, verdicts, path, yardsticks)


class History:
    """A history database (an SQLite file, created on first use)."""

    def __init__(self, path: str):
        self.path = path
        try:
            self.db = sqlite3.connect(path)
            self.db.executescript(SCHEMA)
            columns = [row[1] for row in self.db.execute("PRAGMA table_info(samples)")]
            with self.db:
                if "yardstick" not in columns:  # a database made before runs timed the yardstick
                    self.db.execute("ALTER TABLE samples ADD COLUMN yardstick REAL")
                if "yardstick_version" not in columns:
                    # Such a database stored only rates of version 1, the one version there was then.
                    self.db.execute("ALTER TABLE samples ADD COLUMN yardstick_version INTEGER")
                    self.db.execute("UPDATE samples SET yardstick_version = 1 WHERE yardstick IS NOT NULL")
        except sqlite3.DatabaseError as e:
            raise HistoryError(f"{path}: not a usable history database ({e})") from None

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "History":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def add(self, run: Run) -> bool:
        """Stores ``run`` in one transaction; False if it was already stored."""
        with self.db:
            if self.db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run.run_id,)).fetchone():
                return False
            self.db.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (run.run_id, run.profile_id, run.commit, run.commit_time, run.run_time,
                             int(run.refresh), run.source))
            self.db.executemany("INSERT INTO samples (run_id, combination, rounds, median, verdict, yardstick, "
                                "yardstick_version) VALUES (?, ?, ?, ?, ?, ?, ?)",
                                [(run.run_id, key, json.dumps(r), statistics.median(r), run.verdicts[key],
                                  *run.yardsticks.get(key, (None, None))) for key, r in run.rounds.items()])
        return True

    def profiles(self) -> List[str]:
        return [r[0] for r in self.db.execute("SELECT DISTINCT profile_id FROM runs ORDER BY profile_id")]

    def combinations(self, profile_id: str) -> List[str]:
        return [r[0] for r in self.db.execute(
            "SELECT DISTINCT s.combination FROM samples s JOIN runs r USING (run_id) WHERE r.profile_id = ? "
            "ORDER BY s.combination", (profile_id,))]

    def selected(self, profile: str = "", only: str = "",
                 by_yardstick: Optional[bool] = None) -> Iterator[Tuple[str, str, List[Point], bool]]:
        """(profile id, combination, its series, whether the series is on the yardstick) of every stored
        combination, or of ``profile``'s only, and only those whose key contains ``only``.

        ``by_yardstick``: see ``series``; None (the default) reads a combination on the yardstick where every
        one of its runs timed the current yardstick and raw otherwise, so no run is left out.
        """
        for pid in self.profiles():
            if profile and pid != profile:
                continue
            for key in self.combinations(pid):
                if only in key:
                    rows = self._rows(pid, key)
                    on = all(map(_timed, rows)) if by_yardstick is None else by_yardstick
                    yield pid, key, self._points(rows, pid, key, on), on

    def series(self, profile_id: str, combination: str, by_yardstick: bool = False) -> List[Point]:
        """The combination's points, one per commit, in commit-time order (first run's time for ties).

        ``by_yardstick``: each run's images/sec divided by the yardstick rate timed beside it, times the
        series' median rate, so runs made while the runner was slower or faster compare as if made at a
        typical moment; only runs that timed the current yardstick (``yardstick.VERSION``) count.

        Raises:
          HistoryError: ``by_yardstick`` and no run of the combination timed the yardstick.
        """
        return self._points(self._rows(profile_id, combination), profile_id, combination, by_yardstick)

    def _rows(self, profile_id: str, combination: str) -> List[tuple]:
        return self.db.execute(
            "SELECT r.commit_id, r.commit_time, r.run_time, r.refresh, s.rounds, s.median, s.yardstick, "
            "s.yardstick_version FROM samples s JOIN runs r USING (run_id) WHERE r.profile_id = ? "
            "AND s.combination = ? ORDER BY r.commit_time, r.run_time", (profile_id, combination)).fetchall()

    def _points(self, rows: List[tuple], profile_id: str, combination: str, by_yardstick: bool) -> List[Point]:
        """``series`` of the combination's ``rows``."""
        scale = 1.0
        if by_yardstick:
            rows = [row for row in rows if _timed(row)]
            if not rows:
                raise HistoryError(f"{self.path}: no run of {combination} ({profile_id}) timed the yardstick "
                                   f"(version {yardstick.VERSION}); runs record it from perf suites that have "
                                   "hpcnn.perf.yardstick")
            scale = statistics.median(row[6] for row in rows)
        by_commit: Dict[str, dict] = {}
        for commit, commit_time, _, refresh, rounds, median, rate, _ in rows:
            factor = scale / rate if by_yardstick else 1.0
            p = by_commit.setdefault(commit, {"time": commit_time, "medians": [], "rounds": [], "refresh": False})
            p["medians"].append(median * factor)
            p["rounds"] += [x * factor for x in json.loads(rounds)]
            p["refresh"] |= bool(refresh)
        return [Point(c, p["time"], statistics.median(p["medians"]), p["rounds"], len(p["medians"]), p["refresh"])
                for c, p in by_commit.items()]


def _timed(row: tuple) -> bool:
    """Whether a ``History._rows`` row timed the current yardstick (``yardstick.VERSION``)."""
    return bool(row[6]) and row[7] == yardstick.VERSION


def find_changes(points: Sequence[Point], alpha: float = 0.01, min_size: int = 2, draws: int = 2000,
                 seed: int = 0) -> List[Change]:
    """The steps in a series of commits, oldest first: E-Divisive means by binary segmentation.

    On the log of each commit's median. In a window between the steps found so
    far, the best split (``_best_split``: one level before, one after that may
    end again) is kept if the drop in squared error it brings, over the residual
    variance of the whole series with that split added (an F ratio), exceeds all
    but ``alpha`` of the same ratio for ``draws`` simulated windows drawn from the
    series' own residuals (``_resampled_null``); the search then goes on in both
    halves. Taking the best split in every simulated window too makes the test
    fair to the search, and resampling the residuals makes it fair to their
    shape: a shared runner's sessions have heavy tails (a session at 0.5x), and
    against normal noise a 500-commit series of unchanged code showed a step in
    30% of series. Of a split's two cuts, the one that carries its gain is kept.
    Finally, steps whose 95% t interval (levels' means, the spread of every
    point around its level) includes no change are merged away, weakest first.
    ``min_size``: the fewest commits a level spans.

    (A permutation test, as E-Divisive's authors use, cannot reach p = 0.01 for a
    level of 5 commits in 14; ruptures has the search but no significance test;
    MongoDB's signal-processing-algorithms has both but requires numpy < 2,
    which TensorFlow 2.21 cannot use.)
    """
    n = len(points)
    y = np.log([p.median for p in points])
    breaks: List[int] = []
    todo = [(0, n)]
    while todo:
        start, end = todo.pop()
        if end - start < 2 * min_size:
            continue
        tau, kappa, gain = _best_split(y[None, start:end], min_size)
        at, until = start + int(tau[0]), start + int(kappa[0])
        if until < end and _step_gain(y[start:end], until - start) > _step_gain(y[start:end], at - start):
            # The test is of the split's two cuts together; keep the one that carries it. Keeping the first
            # often put a false step a few commits before a real one (a small dip that rode along with it).
            at, until = until, at
        fitted = sorted(set(breaks + [at] + ([until] if until < end else [])))
        df = n - len(fitted) - 1
        variance = _sse(y, fitted) / df if df > 0 else 0.0
        if variance <= 0:
            continue
        m = end - start
        # The null's cost grows as draws * m^2: long windows get fewer draws (never fewer than 1/alpha permits).
        null = _resampled_null(_residuals(y, fitted), m, n - m - len(breaks), min_size,
                               max(min(draws, int(4e7 / m ** 2)), int(2 / alpha)), [seed, n, start, end])
        if (1 + len(null) - int(np.searchsorted(null, gain[0] / variance))) / (len(null) + 1) <= alpha:
            breaks.append(at)
            todo += [(start, at), (at, end)]
    breaks.sort()
    while True:
        changes = _describe(points, y, breaks)
        weak = [c for c in changes if c.ci_low <= 1 <= c.ci_high]
        if not weak:
            return changes
        breaks.remove(min(weak, key=lambda c: abs(math.log(c.ratio))).index)


def _step_gain(y: np.ndarray, at: int) -> float:
    """Squared error that one step at ``at`` removes from ``y`` taken as one level."""
    return _sse(y, []) - _sse(y, [at])


def _sse(y: np.ndarray, breaks: Sequence[int]) -> float:
    """Squared error of ``y`` around the means of the levels ``breaks`` cut it into."""
    return float(np.sum(_residuals(y, breaks) ** 2))


def _describe(points: Sequence[Point], y: np.ndarray, breaks: Sequence[int]) -> List[Change]:
    """Each step's ratio of neighbouring levels' means, with its 95% t interval."""
    from scipy import stats

    n = len(y)
    bounds = [0] + list(breaks) + [n]
    levels = [y[a:b] for a, b in zip(bounds, bounds[1:])]
    df = n - len(levels)
    spread = math.sqrt(_sse(y, breaks) / df) if df > 0 else 0.0
    changes = []
    for k in range(1, len(levels)):
        before, after = levels[k - 1], levels[k]
        diff = float(after.mean() - before.mean())
        half = float(stats.t.ppf(0.975, max(df, 1))) * spread * math.sqrt(1 / len(before) + 1 / len(after))
        at = bounds[k]
        changes.append(Change(at, points[at - 1].commit, points[at].commit, math.exp(diff), math.exp(diff - half),
                              math.exp(diff + half), len(before), len(after)))
    return changes


def _residuals(y: np.ndarray, breaks: Sequence[int]) -> np.ndarray:
    """``y`` less the mean of the level each point lies in."""
    bounds = [0] + list(breaks) + [len(y)]
    return np.concatenate([y[a:b] - y[a:b].mean() for a, b in zip(bounds, bounds[1:])])


def _resampled_null(residuals: np.ndarray, m: int, df_outside: int, min_size: int, draws: int,
                    seed) -> np.ndarray:
    """Sorted F ratios of ``find_changes``'s test under no change: windows of ``m`` points drawn with
    replacement from the series' ``residuals``, each its best split's gain over the residual variance of its
    fitted levels and of ``df_outside`` more drawn points outside it."""
    rng = np.random.default_rng(seed)
    z = rng.choice(residuals, size=(draws, m))
    _, kappa, gain = _best_split(z, min_size)
    levels = 2 + (kappa < m)
    sse = np.sum((z - z.mean(axis=1, keepdims=True)) ** 2, axis=1) - gain
    outside = np.sum(rng.choice(residuals, size=(draws, df_outside)) ** 2, axis=1) if df_outside > 0 else 0.0
    df = m - levels + max(df_outside, 0)
    return np.sort(gain / ((sse + outside) / np.maximum(df, 1)))


def _best_split(rows: np.ndarray, min_size: int):
    """Per row (a window), E-Divisive's split: the first step tau of levels [:tau], [tau:kappa], [kappa:]
    (kappa = the window's end allowed, so one step or a level that comes and goes) that removes the most
    squared error from the window taken as one level. Returns (tau, kappa, that drop) per row.
    """
    count, m = rows.shape
    c1 = np.concatenate([np.zeros((count, 1)), np.cumsum(rows, axis=1)], axis=1)
    best = np.full(count, -1.0)
    split = np.zeros(count, dtype=int)
    end = np.zeros(count, dtype=int)
    one_level = c1[:, [m]] ** 2 / m
    for kappa in range(2 * min_size, m + 1):
        rest = m - kappa
        if 0 < rest < min_size:
            continue
        tau = np.arange(min_size, kappa - min_size + 1)
        s1, s2, s3 = c1[:, tau], c1[:, [kappa]] - c1[:, tau], c1[:, [m]] - c1[:, [kappa]]
        gain = s1 ** 2 / tau + s2 ** 2 / (kappa - tau) + (s3 ** 2 / rest if rest else 0.0) - one_level
        i = np.argmax(gain, axis=1)
        value = gain[np.arange(count), i]
        better = value > best
        best[better], split[better], end[better] = value[better], tau[i[better]], kappa
    return split, end, best
