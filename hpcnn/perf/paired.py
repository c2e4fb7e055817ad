"""Paired mode: two revisions on one machine, rounds interleaved A B B A, one gate.

Machine drift over minutes (10-40% on shared CPUs) hits both sides alike when
their rounds alternate, so the gate compares like with like. Each side is a
persistent worker process importing its own revision's hpcnn.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
from typing import List

from hpcnn.perf.matrix import Combination
from hpcnn.stats import interleaved, throughput

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
READY_TIMEOUT_S = 900


class WorkerError(RuntimeError):
    """A worker process died or stopped answering; the message has its stderr tail."""


class Side:
    """A worker process running one combination from the hpcnn at ``source_dir``."""

    def __init__(self, source_dir: str, combo: Combination, device: str, warmup_steps: int,
                 plant_slowdown: float = 0.0):
        spec = {"config": {k: v for k, v in combo.config(device).to_dict().items() if k in _FIELDS},
                "warmup_steps": warmup_steps, "plant_slowdown": plant_slowdown}
        env = dict(os.environ, PYTHONPATH=os.path.abspath(source_dir), TF_CPP_MIN_LOG_LEVEL="2")
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, WORKER, json.dumps(spec)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=env)
        self._read(READY_TIMEOUT_S)  # built and warmed up

    def run(self, steps: int, timeout_s: float = 600) -> List[float]:
        """Step times of one round of ``steps`` steps."""
        self.proc.stdin.write(json.dumps({"cmd": "run", "steps": steps}) + "\n")
        self.proc.stdin.flush()
        return self._read(timeout_s)["step_times"]

    def _read(self, timeout_s):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.close()
            self.stderr.seek(0)
            tail = self.stderr.read()[-2000:]
            raise WorkerError(f"perf worker {'gave no answer in time' if not ready else 'exited'}: {tail}")
        return json.loads(line)

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


# Only these config fields cross to the worker: older revisions know them all.
_FIELDS = {"model", "variable_update", "data_format", "num_gpus", "precision", "batch_size", "device",
           "use_nccl", "num_warmup_batches"}


def pair_runner(a: Side, b: Side, combo: Combination):
    """A function running round pair ``r`` (A then B for even r, B then A for odd) -> (A's, B's images/sec)."""
    batch = combo.batch_size * combo.num_devices

    def run_pair(r: int):
        speed = {side: throughput(batch, side.run(combo.steps_per_round)) for side in interleaved([a, b], r)}
        return speed[a], speed[b]

    return run_pair


def source_tree(spec: str, workdir: str) -> str:
    """A directory holding the hpcnn to test: ``spec`` itself, or a worktree of git rev ``spec``."""
    if os.path.isdir(spec):
        return spec
    target = os.path.join(workdir, spec.replace("/", "_"))
    result = subprocess.run(["git", "worktree", "add", "--detach", target, spec], capture_output=True, text=True)
    if result.returncode != 0:
        raise ValueError(f"{spec!r} is neither a directory nor a git revision of this repository "
                         f"({result.stderr.strip().splitlines()[-1] if result.stderr.strip() else 'git failed'})")
    return target


def remove_worktree(path: str) -> None:
    subprocess.run(["git", "worktree", "remove", "--force", path], capture_output=True)


def warmup_steps_for(combo: Combination) -> int:
    return max(3, combo.steps_per_round)


def open_pair(a_dir: str, b_dir: str, combo: Combination, device: str, plant_b: float = 0.0):
    """Starts the A and B workers one after the other (so warm-ups do not compete)."""
    warmup = warmup_steps_for(combo)
    a = Side(a_dir, combo, device, warmup)
    try:
        b = Side(b_dir, combo, device, warmup, plant_b)
    except BaseException:
        a.close()
        raise
    return a, b
