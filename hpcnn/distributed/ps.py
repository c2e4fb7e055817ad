"""A ps task: serves its variables until every worker is done, then exits by itself."""

from __future__ import annotations

import time
from typing import Callable, Set

import tensorflow as tf

from hpcnn.config import BenchmarkConfig
from hpcnn.distributed.cluster import Cluster, ClusterError, is_listening
from hpcnn.distributed.queues import ClusterQueues

POLL_SECONDS = 0.25
ABORT_GRACE_SECONDS = 10  # after closing its queues, how long a ps waits for the workers to leave


def run_ps(config: BenchmarkConfig, log: Callable[[str], None] = print) -> None:
    """Serves until every worker has said it is done.

    Raises:
      ConfigError: this task's port is in use.
      ClusterError: a worker never came up within the cluster timeout, or went away
        before finishing. The ps first closes its queues, so that every worker
        blocked on them fails at once instead of waiting for its timeout.
    """
    cluster = Cluster.from_config(config)
    proto = tf.compat.v1.ConfigProto()
    server = cluster.start_server(proto)
    graph = tf.Graph()
    with graph.as_default():
        queues = ClusterQueues(cluster, ps_task=cluster.task)
        done_queue = queues.done[cluster.task]
        waiting = done_queue.size()
        count = tf.compat.v1.placeholder(tf.int32, [])
        take_done = done_queue.dequeue_many(count)
        close = [q.close(cancel_pending_enqueues=True) for q in queues.own]
    session = tf.compat.v1.Session(server.target, graph=graph, config=cluster.session_proto(proto, []))
    name = f"ps {cluster.task}"
    log(f"{name}: serving at {cluster.address} for {cluster.num_workers} worker(s)")
    done: Set[int] = set()
    seen: Set[int] = set()
    deadline = time.monotonic() + cluster.timeout
    try:
        while len(_finished(session, waiting, take_done, count, done)) < cluster.num_workers:
            for w in range(cluster.num_workers):
                if w in done:
                    continue
                if is_listening(cluster.workers[w]):
                    seen.add(w)
                elif w in seen and w not in _finished(session, waiting, take_done, count, done):
                    _abort(session, close, cluster, f"{name}: {cluster.describe('worker', w)} went away before "
                                                    "finishing; shutting the cluster down")
            missing = [w for w in range(cluster.num_workers) if w not in seen and w not in done]
            if missing and time.monotonic() > deadline:
                _abort(session, close, cluster,
                       f"{name}: worker(s) {', '.join(map(str, missing))} did not come up within "
                       f"{cluster.timeout:g} s (--cluster_timeout_secs); shutting the cluster down")
            time.sleep(POLL_SECONDS)
        log(f"{name}: all {cluster.num_workers} worker(s) done; exiting")
    finally:
        session.close()


def _finished(session, waiting, take_done, count, done: Set[int]) -> Set[int]:
    """``done`` plus whoever said so since the last look (a worker exits right after saying it)."""
    ready = int(session.run(waiting))
    if ready:
        done.update(int(w) for w in session.run(take_done, {count: ready}))
    return done


def _abort(session, close, cluster: Cluster, message: str):
    """Closes this task's queues, stays up while the workers take that in (bounded), then fails."""
    session.run(close)
    deadline = time.monotonic() + min(cluster.timeout, ABORT_GRACE_SECONDS)
    while any(is_listening(a) for a in cluster.workers) and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
    raise ClusterError(message)
