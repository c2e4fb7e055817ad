"""Bisect: the first commit between a good and a bad revision where a combination got slower.

The commits after ``good`` up to ``bad`` (first-parent, oldest first) are
searched by halving. A commit is judged by a paired comparison against
``good`` with the sequential gate (rounds interleaved, more rounds only while
the answer is unclear): bad when the gate calls it a REGRESSION, good
otherwise. ``bad`` itself is judged first, so a search starts only from a
regression the gate confirms. A commit that does not build or run is skipped,
saying so, and its nearest untried neighbour tried instead (as ``git bisect
skip`` does); when skips hide the answer the result names the commits it may be.

``search`` holds the logic and takes any ``judge``; ``PairedJudge`` is the real
one. ``Worktrees`` removes every worktree it made, also when the search is
interrupted, so the user's checkout and worktrees end as they began.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import time
from typing import Callable, List, Optional

from hpcnn.perf import gate, paired, sequential
from hpcnn.perf.matrix import Combination

BAD, GOOD, SKIP = "bad", "good", "skip"


class BisectError(ValueError):
    """Revisions that cannot be bisected; the message names them and why."""


@dataclasses.dataclass(frozen=True)
class Step:
    """One commit tried: ``outcome`` is BAD, GOOD or SKIP; ``verdict`` the gate's (None when skipped)."""

    commit: str
    outcome: str
    verdict: Optional[gate.Verdict] = None
    seconds: float = 0.0
    why: str = ""

    def describe(self) -> str:
        """One line: the commit, its outcome and the ratio against good (or why it was skipped)."""
        head = f"{self.commit[:12]} {self.outcome.upper():4s} ({self.seconds:.0f} s)"
        if self.verdict is None:
            return f"{head}: skipped, {self.why}"
        v = self.verdict
        return f"{head}: ratio to good {v.ratio:.3f} [95% CI {v.ci_low:.3f}, {v.ci_high:.3f}], {v.verdict}"


@dataclasses.dataclass(frozen=True)
class BisectResult:
    """The search's answer: ``candidates`` the commits the first bad one may be (one unless skips hide it)."""

    candidates: List[str]
    steps: List[Step]
    seconds: float

    @property
    def first_bad(self) -> Optional[str]:
        """The first bad commit, or None when skipped commits leave several candidates."""
        return self.candidates[0] if len(self.candidates) == 1 else None

    def step_of(self, commit: str) -> Optional[Step]:
        """The judged (not skipped) step of ``commit``, if it was tried."""
        return next((s for s in self.steps if s.commit == commit and s.outcome != SKIP), None)


Judge = Callable[[str], Step]


def git(args: List[str], cwd: Optional[str] = None) -> str:
    """Output of ``git args`` in ``cwd``; raises BisectError with git's last line when it fails."""
    p = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        lines = p.stderr.strip().splitlines()
        raise BisectError(lines[-1] if lines else f"git {' '.join(args)} failed")
    return p.stdout.strip()


def commits_between(good: str, bad: str, cwd: Optional[str] = None) -> List[str]:
    """The full hashes after ``good`` up to and including ``bad``, oldest first, along bad's first parents.

    Raises:
      BisectError: an unknown revision, ``good`` not an ancestor of ``bad``, or nothing between them.
    """
    resolved = []
    for flag, rev in (("--good", good), ("--bad", bad)):
        try:
            resolved.append(git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd))
        except BisectError:
            raise BisectError(f"{flag}={rev!r} is not a commit of this repository") from None
    g, b = resolved
    if g == b:
        raise BisectError(f"--good={good!r} and --bad={bad!r} are the same commit; nothing to bisect")
    if subprocess.run(["git", "merge-base", "--is-ancestor", g, b], cwd=cwd).returncode != 0:
        raise BisectError(f"--good={good!r} is not an ancestor of --bad={bad!r}; allowed: a good commit "
                          "that the bad one descends from")
    out = git(["rev-list", "--reverse", "--first-parent", "--ancestry-path", f"{g}..{b}"], cwd)
    return out.split()


def search(commits: List[str], judge: Judge, log: Callable[[str], None] = print) -> BisectResult:
    """The first commit of ``commits`` (oldest first, the one before them good) that ``judge`` calls bad.

    ``commits[-1]`` is judged first; if it is not bad the search ends with no
    candidates. Then the range is halved, a skipped commit replaced by the
    untried one nearest the middle, until no untried commit is left between the
    last good and the first bad.
    """
    started = time.perf_counter()
    steps: List[Step] = []

    def tried(i: int) -> Step:
        step = judge(commits[i])
        steps.append(step)
        log(step.describe())
        return step

    last = len(commits) - 1
    if tried(last).outcome != BAD:
        return BisectResult([], steps, time.perf_counter() - started)
    lo, hi, skipped = -1, last, set()  # commits[lo] good (-1: the good revision), commits[hi] bad
    while True:
        untried = [i for i in range(lo + 1, hi) if i not in skipped]
        if not untried:
            break
        middle = (lo + hi) / 2
        i = min(untried, key=lambda j: (abs(j - middle), j))
        outcome = tried(i).outcome
        if outcome == SKIP:
            skipped.add(i)
        elif outcome == BAD:
            hi = i
        else:
            lo = i
    return BisectResult(commits[lo + 1:hi + 1], steps, time.perf_counter() - started)


class Worktrees:
    """Detached worktrees of the repository at ``cwd`` under ``workdir``, all removed on exit.

    SIGTERM is turned into KeyboardInterrupt while inside, so a killed search
    still removes its worktrees and stops its workers.
    """

    def __init__(self, workdir: str, cwd: Optional[str] = None):
        self.workdir, self.cwd, self.made = workdir, cwd, []

    def source(self, spec: str) -> str:
        """The hpcnn to test: ``spec`` itself when it is a directory, else a worktree of git revision ``spec``.

        Raises:
          BisectError: ``spec`` is neither (the message says so).
        """
        if os.path.isdir(spec):
            return spec
        try:
            return self.add(spec)
        except BisectError as e:
            raise BisectError(f"{spec!r} is neither a directory nor a git revision of this repository ({e})") \
                from None

    def add(self, commit: str) -> str:
        """A worktree of ``commit``; raises BisectError when git cannot make it."""
        path = os.path.join(self.workdir, f"wt-{len(self.made)}-{commit[:12].replace('/', '_')}")
        git(["worktree", "add", "--detach", path, commit], self.cwd)
        self.made.append(path)
        return path

    def remove(self, path: str) -> None:
        """Removes a worktree this object made."""
        subprocess.run(["git", "worktree", "remove", "--force", path], cwd=self.cwd, capture_output=True)
        self.made.remove(path)

    def __enter__(self):
        self._previous = signal.signal(signal.SIGTERM, _interrupt)
        return self

    def __exit__(self, *exc):
        for path in list(self.made):
            self.remove(path)
        subprocess.run(["git", "worktree", "prune"], cwd=self.cwd, capture_output=True)
        signal.signal(signal.SIGTERM, self._previous)
        return False


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


class PairedJudge:
    """Judges a commit against a persistent worker of ``good``: a sequential paired comparison.

    ``overrides``: config fields both sides change from the combination (``data_dir`` for real data).
    ``close()`` stops the good worker. A commit whose worker fails is a SKIP; when the good revision's
    worker fails, the call raises WorkerError, since no commit can be judged without it.
    """

    def __init__(self, trees: Worktrees, good: str, combo: Combination, device: str,
                 schedule: sequential.Schedule, threshold: float, alpha: float, overrides: Optional[dict] = None,
                 restart_every: int = paired.RESTART_EVERY):
        self.trees, self.combo, self.device, self.overrides = trees, combo, device, overrides
        self.restart_every = restart_every
        self.schedule, self.threshold, self.alpha = schedule, threshold, alpha
        self.good = self._side(trees.add(good))

    def _side(self, tree: str) -> paired.Side:
        return paired.Side(tree, self.combo, self.device, paired.warmup_steps_for(self.combo),
                           overrides=self.overrides)

    def __call__(self, commit: str) -> Step:
        started = time.perf_counter()
        tree = self.trees.add(commit)
        try:
            side = self._side(tree)
        except paired.WorkerError as e:
            self.trees.remove(tree)
            return Step(commit, SKIP, None, time.perf_counter() - started, first_error_line(e))
        try:
            run_pair = paired.pair_runner(self.good, side, self.combo, restart_every=self.restart_every)
            v, _, _ = sequential.run_sequential(run_pair, self.schedule, self.threshold, self.alpha)
        except paired.WorkerError as e:
            if e.side is self.good:  # not the commit's fault, and no commit can be judged without it
                raise paired.WorkerError(f"the worker of the good revision failed while judging {commit[:12]}: "
                                         f"{first_error_line(e)}", side=self.good) from e
            return Step(commit, SKIP, None, time.perf_counter() - started, first_error_line(e))
        finally:
            side.close()
            self.trees.remove(tree)
        return Step(commit, BAD if v.failed else GOOD, v, time.perf_counter() - started)

    def close(self) -> None:
        """Stops the good revision's worker."""
        self.good.close()


def first_error_line(error: Exception) -> str:
    """The last non-empty line of a worker's error (its exception), shortened."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    return (lines[-1] if lines else "the worker failed")[:200]
