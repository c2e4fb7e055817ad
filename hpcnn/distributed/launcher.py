"""Starts a whole cluster on 127.0.0.1 with free ports, runs it, collects everything, tears it down.

Python::

    run = run_local_cluster(num_ps=1, num_workers=2, flags=["--model=trivial"])
    run.ok, run.worker(0).output, run.worker(0).returncode

Command line::

    hpcnn-cluster --num_ps=1 --num_workers=2 -- --model=trivial --num_batches=20
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import List, Optional, Sequence

HOST = "127.0.0.1"
KILLED_BY_LAUNCHER = -1000  # returncode recorded for a process the launcher had to kill


@dataclasses.dataclass
class TaskResult:
    """How one task of a local cluster ended: its exit code and everything it printed."""

    job: str
    task: int
    returncode: int
    output: str  # stdout and stderr together

    @property
    def name(self) -> str:
        return f"{self.job} {self.task}"


@dataclasses.dataclass
class ClusterRun:
    """Every task's result and the run's wall time."""

    tasks: List[TaskResult]
    seconds: float

    @property
    def ok(self) -> bool:
        """Whether every task exited 0."""
        return all(t.returncode == 0 for t in self.tasks)

    def worker(self, i: int) -> TaskResult:
        """Worker ``i``'s result."""
        return self._find("worker", i)

    def ps(self, i: int) -> TaskResult:
        """Ps task ``i``'s result."""
        return self._find("ps", i)

    def _find(self, job, i):
        return next(t for t in self.tasks if t.job == job and t.task == i)


class LocalCluster:
    """The processes of one cluster run; use as a context manager so nothing outlives it."""

    def __init__(self, num_ps: int, num_workers: int, flags: Sequence[str] = (), env: Optional[dict] = None):
        if num_ps < 0 or num_workers < 1:
            raise ValueError(f"need num_ps >= 0 and num_workers >= 1; got {num_ps} and {num_workers}")
        ports = free_ports(num_ps + num_workers, HOST)
        self.ps_hosts = [f"{HOST}:{p}" for p in ports[:num_ps]]
        self.worker_hosts = [f"{HOST}:{p}" for p in ports[num_ps:]]
        self.flags = list(flags)
        self.env = dict(os.environ if env is None else env)
        self._dir = tempfile.TemporaryDirectory(prefix="hpcnn-cluster-")
        self.procs = {}  # (job, task) -> (Popen, log path)
        self.start_time = time.monotonic()

    def cluster_flags(self) -> List[str]:
        """The ``--worker_hosts``/``--ps_hosts`` flags every task of this cluster gets."""
        flags = [f"--worker_hosts={','.join(self.worker_hosts)}"]
        if self.ps_hosts:
            flags.append(f"--ps_hosts={','.join(self.ps_hosts)}")
        return flags

    def start(self) -> "LocalCluster":
        """Starts every ps task, then every worker; returns self."""
        tasks = [("ps", k) for k in range(len(self.ps_hosts))] + [("worker", k) for k in range(len(self.worker_hosts))]
        for job, task in tasks:
            self.start_task(job, task)
        return self

    def start_task(self, job: str, task: int, extra_flags: Sequence[str] = ()) -> None:
        """Starts one task as an ``hpcnn`` process logging to a file of its own."""
        path = os.path.join(self._dir.name, f"{job}{task}.log")
        argv = [sys.executable, "-m", "hpcnn.cli", *self.flags, *self.cluster_flags(), f"--job_name={job}",
                f"--task_index={task}", *extra_flags]
        with open(path, "wb") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                    start_new_session=True)
        self.procs[(job, task)] = (proc, path)

    def output(self, job: str, task: int) -> str:
        """Everything task ``task`` of ``job`` has printed so far."""
        with open(self.procs[(job, task)][1], errors="replace") as f:
            return f.read()

    def kill(self, job: str, task: int) -> None:
        """SIGKILLs one task (fault tests)."""
        self.procs[(job, task)][0].kill()

    def wait(self, timeout: float) -> ClusterRun:
        """Waits for every process to exit by itself; kills what is left after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        results = []
        for (job, task), (proc, _) in self.procs.items():
            try:
                code = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                code = KILLED_BY_LAUNCHER
            results.append(TaskResult(job, task, code, self.output(job, task)))
        return ClusterRun(results, time.monotonic() - self.start_time)

    def close(self) -> None:
        """Kills every task still running (its whole process group) and removes the logs."""
        for proc, _ in self.procs.values():
            if proc.poll() is None:
                _kill_group(proc)
        self._dir.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def free_ports(count: int, host: str = "127.0.0.1") -> List[int]:
    """``count`` distinct ports free on ``host`` right now (all sockets held until all are chosen)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_local_cluster(num_ps: int, num_workers: int, flags: Sequence[str] = (), timeout: float = 600,
                      env: Optional[dict] = None) -> ClusterRun:
    """Runs ``hpcnn`` as ``num_ps`` ps and ``num_workers`` worker processes on loopback; returns every outcome."""
    with LocalCluster(num_ps, num_workers, flags, env) as cluster:
        cluster.start()
        return cluster.wait(timeout)


def main(argv: Optional[List[str]] = None) -> int:
    """``hpcnn-cluster``: exit 0 if every task exited 0, else 1 (2 for bad arguments)."""
    parser = argparse.ArgumentParser(prog="hpcnn-cluster", description=__doc__.split("\n\n")[0],
                                     epilog="Everything after -- goes to every hpcnn process.")
    parser.add_argument("--num_ps", type=int, default=1, help="ps tasks (0 for collective_all_reduce)")
    parser.add_argument("--num_workers", type=int, default=2, help="worker tasks")
    parser.add_argument("--timeout", type=float, default=1800, help="kill whatever still runs after this many s")
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    if args.num_ps < 0 or args.num_workers < 1:
        parser.error(f"--num_ps={args.num_ps} must be >= 0 and --num_workers={args.num_workers} >= 1")
    if args.timeout <= 0:
        parser.error(f"--timeout={args.timeout} must be > 0")
    run = run_local_cluster(args.num_ps, args.num_workers, argv[split + 1:], args.timeout)
    for t in run.tasks:
        print(f"==== {t.name} (exit {t.returncode}) ====")
        print(t.output.rstrip())
    print("==== summary ====")
    for t in run.tasks:
        status = "killed by the launcher (timeout)" if t.returncode == KILLED_BY_LAUNCHER else f"exit {t.returncode}"
        print(f"{t.name}: {status}")
    if any(t.returncode == 2 for t in run.tasks):
        return 2
    return 0 if run.ok else 1


if __name__ == "__main__":
    sys.exit(main())
