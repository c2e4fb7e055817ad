"""The cluster of one run: who is who, TensorFlow servers, and liveness probes.

Training traffic goes over TensorFlow's own gRPC runtime (``tf.distribute.Server``
and graph-mode sessions, TensorFlow's mechanism for between-graph replication:
variables made with the same name on a ps task are the same variable for every
worker). The only other traffic is a TCP connect to a task's own port, to tell
whether it is up yet and whether it is still there.
"""

from __future__ import annotations

import dataclasses
import re
import socket
import time
from typing import List, Tuple

import tensorflow as tf

from hpcnn.config import BenchmarkConfig, ConfigError, parse_host
from hpcnn.errors import RunError


# Collective ops across the workers: one group holding every worker, and one instance
# key per reduction a step makes, so concurrent all-reduces never pair up wrongly.
COLLECTIVE_GROUP = 1
GRADIENTS_KEY, BATCH_NORM_KEY = 1, 2  # collective_all_reduce's per-step means
IMAGES_KEY, WINDOW_KEY = 10, 11  # the end-of-run cluster throughput


class ClusterError(RunError):
    """A peer task could not be reached, went away, or a step timed out; the message says which."""


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The cluster a task belongs to: every task's host:port, this task's job and index, the step timeout."""

    ps: Tuple[str, ...]
    workers: Tuple[str, ...]
    job: str
    task: int
    timeout: float

    @classmethod
    def from_config(cls, config: BenchmarkConfig) -> "Cluster":
        """The cluster described by ``--ps_hosts``/``--worker_hosts``/``--job_name``/``--task_index``."""
        return cls(tuple(config.ps_hosts), tuple(config.worker_hosts), config.job_name, config.task_index,
                   config.cluster_timeout_secs)

    @property
    def is_chief(self) -> bool:
        """Worker 0: it initialises the shared variables and reports the cluster's rate."""
        return self.job == "worker" and self.task == 0

    @property
    def num_workers(self) -> int:
        return len(self.workers)

    def hosts(self, job: str) -> Tuple[str, ...]:
        """The host:port of every task of ``job`` (``ps`` or ``worker``)."""
        return self.ps if job == "ps" else self.workers

    @property
    def address(self) -> str:
        """This task's own host:port."""
        return self.hosts(self.job)[self.task]

    def spec(self) -> tf.train.ClusterSpec:
        """TensorFlow's ClusterSpec of this cluster (no ps job where there are no ps tasks)."""
        jobs = {"worker": list(self.workers)}
        if self.ps:
            jobs["ps"] = list(self.ps)
        return tf.train.ClusterSpec(jobs)

    @staticmethod
    def task_device(job: str, task: int) -> str:
        """The device prefix of task ``task`` of ``job``."""
        return f"/job:{job}/replica:0/task:{task}"

    def ps_devices(self) -> List[str]:
        """The CPU of every ps task, where master variables live."""
        return [self.task_device("ps", k) + "/device:CPU:0" for k in range(len(self.ps))]

    def describe(self, job: str, task: int) -> str:
        """A task as messages name it: job, index and address."""
        return f"{job} {task} ({self.hosts(job)[task]})"

    # -- servers and sessions -------------------------------------------------------
    def start_server(self, proto: tf.compat.v1.ConfigProto) -> tf.distribute.Server:
        """Starts this task's TensorFlow server.

        Raises:
          ConfigError: this task's port is already in use.
        """
        _, port = parse_host("worker_hosts" if self.job == "worker" else "ps_hosts", self.address)
        if not _port_is_free(port):
            raise ConfigError(f"port {port} of --{self.job}_hosts entry {self.address!r} is already in use; "
                              "pick a free port")
        try:
            return tf.distribute.Server(self.spec(), job_name=self.job, task_index=self.task, config=proto,
                                        start=True)
        except tf.errors.OpError as e:
            raise ConfigError(f"cannot start the TensorFlow server at {self.address!r} ({e.message.strip()}); "
                              "pick a free port") from None

    def session_proto(self, proto: tf.compat.v1.ConfigProto, peers: List[str]) -> tf.compat.v1.ConfigProto:
        """``proto`` limited to this task and ``peers``: a session never waits for tasks it does not use."""
        limited = tf.compat.v1.ConfigProto()
        limited.CopyFrom(proto)
        del limited.device_filters[:]
        limited.device_filters.extend([f"/job:{self.job}/task:{self.task}"] + peers)
        return limited

    # -- liveness ------------------------------------------------------------------------
    def wait_for(self, job: str, tasks: List[int]) -> None:
        """Waits until every listed task accepts connections.

        Raises:
          ClusterError: one did not within the cluster timeout (named, with the flag).
        """
        deadline = time.monotonic() + self.timeout
        for k in tasks:
            while not is_listening(self.hosts(job)[k]):
                if time.monotonic() > deadline:
                    raise ClusterError(f"cannot reach {self.describe(job, k)} within {self.timeout:g} s "
                                       "(--cluster_timeout_secs); is it running?")
                time.sleep(0.2)


def is_listening(address: str) -> bool:
    """True if something accepts TCP connections at ``host:port``."""
    host, port = parse_host("hosts", address)
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _port_is_free(port: int) -> bool:
    # TensorFlow's gRPC server listens on every interface for its port, so the
    # port must be free on all of them.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def describe_remote_error(error: Exception) -> str:
    """The meaningful part of a TensorFlow error: "<task>: <reason>" where the runtime names the task."""
    text = getattr(error, "message", None) or str(error)
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not line.startswith("=") and line.strip() != "Graph execution error:"]
    reason = lines[0] if lines else type(error).__name__
    for i, line in enumerate(lines[:-1]):
        if "From /job:" in line:
            reason = lines[i + 1]
            break
    remote = re.search(r"remote target (/job:[^ ]+)", text)
    return f"{remote.group(1)}: {reason}" if remote else reason
