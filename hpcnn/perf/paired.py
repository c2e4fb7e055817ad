"""Paired mode: two revisions on one machine, rounds interleaved A B B A, one gate.

Machine drift over minutes (10-40% on shared CPUs) hits both sides alike when
their rounds alternate, so the gate compares like with like. Each side is a
persistent worker process importing its own revision's hpcnn.

A build of the benchmark (its model, compiled step and buffers) runs at its own
steady speed, a few percent off another build of the same code: measured here on
lenet, 5 process pairs of unchanged code gave steady offsets of +1.6, +1.7, -0.8,
-4.6 and +0.3% (se about 1%), and rebuilding inside one process moved its offset
from -1.7% to +3.3%. A test over rounds of one build would judge that build, not
the code, so both sides rebuild before every round pair after the first: each
pair then samples a fresh build offset.

A rebuild does not reach everything a process carries, though. Over 24
unchanged comparisons with fresh workers (4 runs of the smoke matrix), the mean
log-ratios spread 0.93% (sd) where their own pairs' standard errors said 0.70%:
process pairs differ by about 0.6% of their own, which no rebuild inside them
removes (two tiny_resnet comparisons sat at +2.3% and +2.7% over 20 pairs).
Judged over one process pair, that offset is a bias the rank test cannot see,
and over a matrix of hundreds of combinations some of them draw one beyond the
threshold. So both sides also restart as new processes
every ``RESTART_EVERY`` pairs: a comparison of 12 pairs spans 6 process pairs
and its estimate averages their offsets. The pairs of one process pair share
its offset, so they are not independent: the test (``sequential.signed_rank_p``)
flips each process pair's pairs as one block: exact whatever offsets they carry,
since of unchanged code swapping which process is A negates a block. (On a noisy
class, Zen 3, AMD family 25 model 1, the offset's sd was 1.2-1.9% on the trivial
models.) The sides take turns to restart first: the one restarted first sits
idle while the other starts, and when that was always A, B ran 0.1-0.7% faster
in all 7 combinations of the Zen 4 record. Rebuilds take turns in the same way
(``REBUILD_ORDER``): with restarts every 2 pairs, the rebuild before a process
pair's second pair was always B's first, and there B read faster (tiny_resnet
+1.6%, t +3.7 over 176 process pairs of the Zen 4 record, against +0.04% in the
first pair, which a restart with alternating order precedes).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
from typing import Dict, List, NoReturn, Optional, Sequence, Tuple

from hpcnn.perf import worker
from hpcnn.perf.matrix import Combination
from hpcnn.stats import interleaved, throughput

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
# A worker that sends nothing for this long has hung. A side's first process that sizes its planted slowdown
# before it is ready (``measures_while_starting``) may take far longer than this to answer (its first Zen 3 alexnet
# search, up to slowdown.SEARCH_CAP chunk pairs per try of seconds-long steps, ran past 900 s on 2026-12-03), so it
# sends a heartbeat line (``worker.HEARTBEAT``) every ``worker.HEARTBEAT_S`` as it searches, and each one restarts
# the wait: a search is bounded by itself, a hang is caught within this.
READY_TIMEOUT_S = 900


class WorkerError(RuntimeError):
    """A worker process died or stopped answering; the message has its stderr tail, ``side`` is its Side."""

    def __init__(self, message: str, side: Optional["Side"] = None):
        super().__init__(message)
        self.side = side


class Side:
    """A worker process running one combination from the hpcnn at ``source_dir``."""

    def __init__(self, source_dir: str, combo: Combination, device: str, warmup_steps: int,
                 plant_slowdown: float = 0.0, overrides: Optional[dict] = None, plant_units: int = 0):
        self.overrides = overrides or {}  # the side's own, kept by a rebuild() that names none
        combo.config(device, **self.overrides)  # a variant this hpcnn refuses fails here, not in the worker
        self._spec = {"config": {k: v for k, v in combo.config(device).to_dict().items() if k in _FIELDS},
                      "overrides": self.overrides, "warmup_steps": warmup_steps, "plant_slowdown": plant_slowdown,
                      "plant_chunk": round_chunks(combo)[0],
                      "source": os.path.abspath(source_dir)}
        if plant_slowdown and plant_units:  # an amount chosen before (a quality measurement's first run): no search
            self._spec["plant_units"] = plant_units
        self._env = dict(os.environ, PYTHONPATH=os.path.abspath(source_dir), TF_CPP_MIN_LOG_LEVEL="2")
        self.pids: List[int] = []  # every process this side has run, the current one last
        self._planted: List[float] = []  # the planted slowdown as its side's first process measured it
        self.planted_units: List[int] = []  # each process's amount of planted work: the first one's, sized there
        self.losses: List[float] = []
        self._start()

    @property
    def measures_while_starting(self) -> bool:
        """Whether a new process of this side times anything before it is ready (a planted slowdown's size)."""
        return bool(self._spec["plant_slowdown"]) and self._spec.get("measure_plant", True)

    def _start(self) -> None:
        self._spawn()
        self._await_ready()

    def _spawn(self) -> None:
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, WORKER, json.dumps(self._spec)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=self._env)
        self._answers = Answers(self.proc.stdout.fileno())
        self.pids.append(self.proc.pid)

    def _await_ready(self) -> None:
        ready = self._read(READY_TIMEOUT_S)  # warmed up
        if "planted_fraction" in ready:
            self._planted.append(ready["planted_fraction"])
        if "planted_units" in ready:  # a restart plants the same work: one code change, not a fresh draw, and
            self._spec["plant_units"] = ready["planted_units"]  # leaves it unmeasured (``PLANT``)
            self._spec["measure_plant"] = False
            self.planted_units.append(ready["planted_units"])

    @property
    def planted_fraction(self) -> float:
        """The planted slowdown as measured (0 where none): by the side's first process."""
        return sum(self._planted) / len(self._planted) if self._planted else 0.0

    def restart(self) -> None:
        """Replaces the worker by a new process of the same side (the side's own overrides; a planted
        slowdown of the same amount of work, its size measured again): a fresh draw of what a rebuild leaves
        in place."""
        self.close()
        self._start()

    def run(self, steps: int, timeout_s: float = 600) -> List[float]:
        """Step times of one round of ``steps`` steps (their losses are left in ``self.losses``)."""
        self._send({"cmd": "run", "steps": steps})
        reply = self._read(timeout_s)
        self.losses = reply["losses"]
        return reply["step_times"]

    def profile(self, steps: int, timeout_s: float = 600) -> Dict[str, float]:
        """Seconds per op type over ``steps`` steps traced by TensorFlow's profiler (``hpcnn.perf.optrace``)."""
        self._send({"cmd": "profile", "steps": steps})
        return self._read(timeout_s)["op_seconds"]

    def rebuild(self, overrides: Optional[dict] = None, timeout_s: float = READY_TIMEOUT_S) -> None:
        """A fresh build of the benchmark in the same process, warmed up (a planted slowdown keeps its size).

        ``overrides``: config fields that differ from the side's own combination in this build (a variant);
        None keeps the side's own (``data_dir`` for a real-data bisect).
        """
        overrides = self.overrides if overrides is None else overrides
        self._send({"cmd": "rebuild", "overrides": overrides})
        self._read(timeout_s)

    def _send(self, request: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except OSError:  # the worker has exited and its stdin is a broken pipe
            self._fail("exited")

    def _read(self, timeout_s):
        try:
            return self._answers.next(timeout_s)
        except TimeoutError:  # its stderr's last line is whatever it logged before: the timeout is the error
            self._fail(f"gave no answer in {timeout_s:g} s", last=True)
        except EOFError:
            self._fail("exited")

    def _fail(self, what: str, last: bool = False) -> NoReturn:
        """Raises WorkerError with the worker's stderr tail; ``what`` after it where ``last`` (the line that
        ``bisection.first_error_line`` shows), else before it (the tail ends with the worker's own exception)."""
        self.stderr.seek(0)
        tail = self.stderr.read()[-2000:]
        self.close()
        raise WorkerError(f"{tail}\nperf worker {what}" if last else f"perf worker {what}: {tail}", side=self)

    def close(self):
        """Ends the worker (closing its stdin), killing it if it does not exit within 30 s; closes its pipes."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.stderr):
            try:
                stream.close()
            except OSError:  # a stdin whose write failed still holds the request: the pipe is broken
                pass


class Answers:
    """A worker's answers, one JSON object a line, read from the pipe ``fd``. Lines are split here, not by a
    buffered reader: one read may bring a heartbeat and the answer after it, and ``select`` cannot see what a
    reader's buffer holds."""

    def __init__(self, fd: int):
        self._fd, self._pending = fd, b""

    def next(self, timeout_s: float) -> dict:
        """The next answer that is not a heartbeat. Raises TimeoutError where nothing (not even a heartbeat)
        came for ``timeout_s``, EOFError where the worker closed its end first."""
        while True:
            while b"\n" not in self._pending:
                ready, _, _ = select.select([self._fd], [], [], timeout_s)
                if not ready:
                    raise TimeoutError
                data = os.read(self._fd, 65536)
                if not data:
                    raise EOFError
                self._pending += data
            line, _, self._pending = self._pending.partition(b"\n")
            answer = json.loads(line)
            if answer != worker.HEARTBEAT:
                return answer


def restart_all(sides: Sequence[Side]) -> None:
    """Restarts ``sides`` as new processes, started in this order. Where none of them times anything while
    starting, all start at once (on 2 cores, a pair's restart took 13-16 s one after the other); a side that
    measures its planted slowdown as it starts gets the machine to itself."""
    if any(side.measures_while_starting for side in sides):
        for side in sides:
            side.restart()
        return
    for side in sides:
        side.close()
        side._spawn()
    for side in sides:
        side._await_ready()


# Only these config fields cross to the worker: older revisions know them all.
_FIELDS = {"model", "variable_update", "data_format", "num_gpus", "precision", "batch_size", "device",
           "use_nccl", "num_warmup_batches"}


CHUNKS = 10
# A process that has just started, or sat idle while the other side started, runs its next step slow. In a
# run of the smoke matrix here (7 combinations x 3 levels, 88 process pairs), the first pair of a process
# pair strayed from its comparison's median log-ratio by 2.4% (median) against 1.2-1.8% for the pairs after
# it, 11 of 88 by over 6% against 3-6; A, restarted first and idle while B started, ran over 5% slow in 12
# of 67 first pairs after a restart. On alexnet (3 steps a round) it was 2.5-3.4% against 1.0-1.2%; on 20-30
# step rounds, where one step is diluted, 1.4-2.3% against 1.0-2.9%. So before a fresh process pair's first
# timed chunk, each side runs this many untimed chunks.
SETTLE_CHUNKS = 1
# How a side's planted slowdown is sized, written in a quality record as its "plant" (records of another
# sizing are another measurement, not resumed): the first process to plant a slowdown sizes the work in chunks
# timed as a pair's are, after a settle, each measurement of the search precise to a tenth of the slowdown
# (``slowdown.PlantedSlowdown.calibrate``); every later process of the side, and of every later run of the
# measurement, plants that same amount, and a side's first process measures its size afresh; the side's
# restarts plant it unmeasured, and so start beside the other side (``restart_all``): with restarts every 2
# pairs, measuring in every process made a pair of tiny_resnet's planted comparisons take 13.6-14.4 s on a
# Zen 3, against 6.1 s unchanged. Before 2026-12-02 every process measured it; before that, every run searched
# anew (from 10-pair measurements) and the side's size was a fresh draw each run; before that, every process did.
PLANT = "one amount per combination and level, searched precisely once, measured by the first process of each side"
RESTART_EVERY = 2  # round pairs per process pair: the test's block (``sequential.Schedule.block``)
# How the sides' rebuilds between a process pair's pairs are ordered, written in a quality record as its
# "rebuild_order" (records without it are another measurement, not resumed). The side that rebuilt first read
# faster in the pair after it, on tiny_resnet: in the 13 paired records made before 2026-12-04, where the order
# was the pair's number's parity (so the same side at a given place in every process pair), its unchanged pairs
# after a B-first rebuild read B faster in 11 (t +2.6 to +3.9 in six of them, on Zen 3, Zen 4 and Xeon), after an
# A-first one A faster in 8 of 10 (Xeon -2.3%, t -4.4); the other combinations do not lean with the order. Each place's
# order flips from one process pair to the next, as restarts' do, so that the blocked test meets the lean as a
# process pair's offset, of either sign equally often.
REBUILD_ORDER = "flips each process pair"


def first_to_go(r: int, restart_every: int) -> int:
    """The side (0: A, 1: B) that restarts or rebuilds first before round pair ``r`` (``REBUILD_ORDER``): a
    process pair's sides restart A first, then B first for the next, and rebuild in the order of the pair's
    place in its process pair, flipped every other process pair."""
    process_pair, place = divmod(r, restart_every) if restart_every else (0, r)
    return (process_pair + place) % 2


def pair_runner(a: Side, b: Side, combo: Combination, chunks: int = CHUNKS, restart_every: int = RESTART_EVERY):
    """A function running round pair ``r`` -> (A's, B's images/sec); its ``processes`` lists the (A, B) pids
    of every pair it ran.

    Before every pair but the first, both sides rebuild, or restart as new
    processes before every ``restart_every``-th pair (0: never). A restart's
    order flips each process pair; so does a rebuild's at each place in a
    process pair (``REBUILD_ORDER``; see the module's docstring). Before the first pair
    and after a restart, each side first runs ``SETTLE_CHUNKS`` untimed chunks. Each side's round of
    ``round_steps`` steps is cut into up to ``chunks`` chunks run
    A B B A A B ... (B first for odd r), so the machine's drift over
    a second or two hits both sides alike. Measured on trivial-ps here, unchanged
    code: the spread of a pair's log-ratio was 6.6% with whole rounds run A B,
    5.1% with 2 chunks and 1.6-2.2% with 6-30 chunks of the same 60 steps.
    """
    batch = combo.batch_size * combo.num_devices
    sizes = round_chunks(combo, chunks)

    def run_pair(r: int):
        fresh = r == 0 or bool(restart_every and r % restart_every == 0)  # a new process pair: settle it first
        # the side restarted first idles while the other starts, and the one rebuilt first read faster: the blocked
        # test flips a process pair's pairs as one, so no side may be first in every process pair
        first = first_to_go(r, restart_every)
        if r and fresh:
            restart_all(interleaved([a, b], first))
        elif r:
            for side in interleaved([a, b], first):
                side.rebuild()
        run_pair.processes.append((a.pids[-1], b.pids[-1]))
        if fresh:
            for _ in range(SETTLE_CHUNKS):
                for side in interleaved([a, b], first):
                    side.run(sizes[0])
        times = alternate(a, b, sizes, r)
        return throughput(batch, times[a]), throughput(batch, times[b])

    run_pair.processes = []
    return run_pair


def chunk_leader(r: int) -> int:
    """The side (0: A, 1: B) that runs round pair ``r``'s first timed chunk in ``alternate``."""
    return interleaved((0, 1), r)[0]


def alternate(a: Side, b: Side, sizes: Sequence[int], r: int) -> Dict[Side, List[float]]:
    """Round pair ``r``'s timed chunks of ``sizes`` steps, run A B B A A B ... (B first for odd r);
    returns each side's step times."""
    times = {a: [], b: []}
    for i, steps in enumerate(sizes):
        for side in interleaved([a, b], r + i):
            times[side] += side.run(steps)
    return times


def round_steps(combo: Combination, chunks: int = CHUNKS) -> int:
    """The steps of one side's timed round in a pair: the combination's own, but at least one per chunk, so
    that every round alternates in ``chunks`` chunks, as finely as the chunk measurement above asks.

    Alexnet's smoke rounds are 3 steps (1-1.6 s a side on a 2-core CPU), so they alternated in 3 chunks, and
    in the paired quality records its pairs spread most (4.5% on Zen 4 against 3.0-3.6%). Measured on the
    Zen 4 runner (2026-11-28 15:04-15:42, unchanged code, two comparisons of 20 pairs per model and length,
    the lengths interleaved): the robust spread of a pair's log-ratio was 1.38% and 1.31% at 3 steps, 0.66%
    and 0.91% at 10 (fp32); 2.49% and 2.37% against 1.25% and 1.72% (bf16), where the sd fell from 8.8-11.3%
    (single pairs 19-35% off) to 1.6-1.8%; a 5% drop resampled from those pairs at 0.01/7 was caught in 69%
    and 100% of draws (bf16). A pair takes 1.5-1.7x as long. Stored mode keeps ``steps_per_round``: its
    baselines were recorded in those rounds.
    """
    return max(combo.steps_per_round, chunks)


def round_chunks(combo: Combination, chunks: int = CHUNKS) -> List[int]:
    """The chunks one side's timed round in a pair is run in (``round_steps`` cut by ``chunk_sizes``)."""
    return chunk_sizes(round_steps(combo, chunks), chunks)


def chunk_sizes(steps: int, chunks: int) -> List[int]:
    """``steps`` cut into ``min(chunks, steps)`` near-equal positive parts."""
    n = max(1, min(chunks, steps))
    return [steps // n + (i < steps % n) for i in range(n)]


def warmup_steps_for(combo: Combination) -> int:
    """Untimed steps before a side's first round: tracing and first-step costs."""
    return max(3, combo.steps_per_round)


def open_pair(a_dir: str, b_dir: str, combo: Combination, device: str, plant_b: float = 0.0):
    """Starts the A and B workers one after the other (so warm-ups do not compete)."""
    a, bs = open_sides(a_dir, b_dir, combo, device, [plant_b])
    return a, bs[plant_b]


def open_sides(a_dir: str, b_dir: str, combo: Combination, device: str, plants: Sequence[float],
               units: Optional[Dict[float, int]] = None) -> Tuple[Side, Dict[float, Side]]:
    """Starts A, then one B per planted slowdown in ``plants``, one after the other; if one fails to start,
    those already started are closed. ``units``: the amount of work to plant for a slowdown, where it was
    chosen before (otherwise its B searches one)."""
    warmup = warmup_steps_for(combo)
    started: List[Side] = []
    try:
        started.append(Side(a_dir, combo, device, warmup))
        for plant in plants:
            started.append(Side(b_dir, combo, device, warmup, plant, plant_units=(units or {}).get(plant, 0)))
    except BaseException:
        for side in started:
            side.close()
        raise
    return started[0], dict(zip(plants, started[1:]))
