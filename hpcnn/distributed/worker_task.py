"""A worker task: the benchmark run as one graph in a session on TensorFlow's gRPC runtime."""

from __future__ import annotations

import time
from typing import Dict, List, Optional, Tuple

import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2

from hpcnn import backend, modes
from hpcnn.benchmark import StepRunner
from hpcnn.config import BenchmarkConfig
from hpcnn.distributed.cluster import (
    COLLECTIVE_GROUP, IMAGES_KEY, WINDOW_KEY, Cluster, ClusterError, describe_remote_error)
from hpcnn.distributed.queues import ClusterQueues
from hpcnn.distributed.variable_update import make_distributed_update
from hpcnn.inputs import make_input
from hpcnn.model import Model


class ClusterWorker(StepRunner):
    """One worker of a cluster run: its steps are one graph run in a session on the cluster's server.

    ``measure`` prints its own lines; the chief also prints the cluster's rate.

    Raises (from the constructor and the ``StepRunner`` methods):
      ConfigError: this task's port is in use.
      ClusterError: a peer was unreachable, went away, or a step exceeded the cluster timeout.
      DataError: the input pipeline met a corrupt record or image (named).
    """

    def __init__(self, config: BenchmarkConfig):
        self.config = config
        self.backend = backend.check(config.onednn)
        self.cluster = c = Cluster.from_config(config)
        self.uses_ps = modes.get(config.variable_update).needs_ps
        c.wait_for("ps", list(range(len(c.ps))))
        proto = _server_proto(config)
        if not self.uses_ps:  # collective ops find their peers through the group leader
            proto.experimental.collective_group_leader = c.task_device("worker", 0)
        self.server = c.start_server(proto)
        kind = "GPU" if config.device == "gpu" else "CPU"
        self.devices = [f"{c.task_device('worker', c.task)}/device:{kind}:{i}" for i in range(config.num_gpus)]
        self.model = Model(config)
        self.graph = tf.Graph()
        with self.graph.as_default(), tf.device(c.task_device("worker", c.task)):
            self._build_graph()  # every op without a device of its own stays on this worker
        peers = ["/job:ps"] if self.uses_ps else []
        session_proto = c.session_proto(proto, peers)
        self.session = tf.compat.v1.Session(self.server.target, graph=self.graph, config=session_proto)
        self.run_options = tf.compat.v1.RunOptions(timeout_in_ms=int(c.timeout * 1000))
        self.step_count = 0
        self.sync_checks: List[Dict[str, float]] = []
        self.cluster_rate: Optional[float] = None
        self.final_global_step: Optional[int] = None
        self._initialize()

    def _build_graph(self):
        c, cfg = self.cluster, self.config
        n = len(self.devices)
        self.input = make_input(cfg, self.devices, self.model.input_shape, self.model.compute_dtype,
                                first_replica=c.task * n, total_replicas=c.num_workers * n)
        self.strategy = make_distributed_update(self.model, self.devices, cfg, c)
        self.strategy.build()
        self.warm_up_ops = [stage() for stage in self.input.warm_up_stages()]
        batches, staging = self.input.next_batches()
        self.loss = (self.strategy.forward_step if cfg.forward_only else self.strategy.train_step)(batches)
        self.step = [self.loss] + ([staging] if staging is not None else [])
        self.checks = self.strategy.checks() if cfg.check_copies else None
        with tf.device(self.devices[0]):
            self.global_step = tf.identity(self.strategy.global_step)
        variables = self.graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
        shared = [v for v in variables if "/job:ps" in v.device]
        local = [v for v in variables if "/job:ps" not in v.device]
        self.init_shared = tf.compat.v1.variables_initializer(shared)
        if not c.is_chief:
            self.uninitialized_shared = tf.compat.v1.report_uninitialized_variables(shared)
        self.init_local = tf.group(tf.compat.v1.variables_initializer(local),
                                   *([self.input.initializer] if self.input.initializer is not None else []))
        self.stats_in = tf.compat.v1.placeholder(tf.float64, [3])  # (images, window start, window end)
        if self.uses_ps:
            self.queues = ClusterQueues(c)
            self.put_stats = self.queues.stats.enqueue(self.stats_in)
            self.take_stats = self.queues.stats.dequeue_many(c.num_workers)
            self.say_done = [q.enqueue(tf.constant(c.task, tf.int64)) for q in self.queues.done.values()]
        else:
            with tf.device(self.devices[0]):
                self.cluster_stats = _all_workers(self.stats_in, c.num_workers)

    # -- lifecycle ------------------------------------------------------------------------
    def _initialize(self):
        """The chief initialises the shared variables; the others wait until it has."""
        c = self.cluster
        deadline = time.monotonic() + c.timeout
        if c.is_chief:
            self._run(self.init_shared, "initialising the variables on the ps tasks")
        else:
            while len(self._run(self.uninitialized_shared, "waiting for the chief to initialise the variables")):
                if time.monotonic() > deadline:
                    raise ClusterError(f"the chief (worker 0, {c.workers[0]}) did not initialise the variables "
                                       f"within {c.timeout:g} s (--cluster_timeout_secs)")
                time.sleep(0.2)
        self._run(self.init_local, "initialising this worker's variables")
        for ops in self.warm_up_ops:
            self._run(ops, "filling the input pipeline")

    def run_steps(self, count: int) -> Tuple[List[float], List[float]]:
        times, losses = [], []
        for _ in range(count):
            self.step_count += 1
            start = time.perf_counter()
            loss = self._run(self.step, f"step {self.step_count}")[0]
            times.append(time.perf_counter() - start)
            losses.append(float(loss))
            if self.checks is not None:
                values = self._run(self.checks, f"checking the copies after step {self.step_count}")
                self.sync_checks.append({k: float(v) for k, v in values.items()})
        return times, losses

    def finish(self, window: Tuple[float, float]) -> List[str]:
        """Gathers every worker's (images, start, end); the chief's line is the cluster's rate."""
        cfg = self.config
        to_wall_clock = time.time() - time.perf_counter()  # workers' windows meet on the wall clock
        mine = [cfg.images_per_step * cfg.num_batches, window[0] + to_wall_clock, window[1] + to_wall_clock]
        if self.uses_ps:
            self._run(self.put_stats, "reporting this worker's images/sec", {self.stats_in: mine})
            if not self.cluster.is_chief:
                return []
            rows = self._run(self.take_stats, "waiting for every worker to finish")
            images, start, end = rows[:, 0].sum(), rows[:, 1].min(), rows[:, 2].max()
        else:
            images, neg_start, end = self._run(self.cluster_stats, "waiting for every worker to finish",
                                               {self.stats_in: mine})
            start = -neg_start
            if not self.cluster.is_chief:
                return []
        self.cluster_rate = images / (end - start)
        self.final_global_step = int(self._run(self.global_step, "reading the global step"))
        return [f"cluster total images/sec: {self.cluster_rate:.2f} ({self.cluster.num_workers} workers)"]

    def close(self) -> None:
        """Tells the ps tasks this worker is done (they serve until every worker is) and closes the session."""
        if self.uses_ps:
            self._run(self.say_done, "telling the ps tasks this worker is done")
        self.session.close()

    def record(self) -> dict:
        c = self.cluster
        return {"job": c.job, "task": c.task, "num_workers": c.num_workers, "num_ps": len(c.ps),
                "synchronous": self.config.cross_replica_sync, "cluster_images_per_sec": self.cluster_rate,
                "final_global_step": self.final_global_step, "sync_checks": self.sync_checks}

    # -- one guarded session call ---------------------------------------------------------
    def _run(self, fetches, what: str, feed_dict=None):
        try:
            return self.session.run(fetches, feed_dict=feed_dict, options=self.run_options)
        except tf.errors.DeadlineExceededError:
            raise ClusterError(f"worker {self.cluster.task}: {what} did not finish within {self.cluster.timeout:g} s "
                               "(--cluster_timeout_secs); a peer task stopped responding") from None
        except (tf.errors.CancelledError, tf.errors.OutOfRangeError, tf.errors.AbortedError):
            raise ClusterError(f"worker {self.cluster.task}: the cluster was shut down during {what} "
                               "(a peer task went away)") from None
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
            self.input.raise_if_bad_data(e, f"worker {self.cluster.task}: ")
            raise
        except tf.errors.UnavailableError as e:
            raise ClusterError(f"worker {self.cluster.task}: lost contact with a peer task during {what} "
                               f"({describe_remote_error(e)})") from None


def _server_proto(config: BenchmarkConfig) -> tf.compat.v1.ConfigProto:
    proto = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=config.num_intra_threads,
                                     inter_op_parallelism_threads=config.num_inter_threads)
    if config.device == "cpu":
        proto.device_count["CPU"] = config.num_gpus
        # Grappler's remapper fuses Conv2D+BiasAdd+Relu into _FusedConv2D, which in
        # a distributed session's partitions stays the generic kernel (no bfloat16
        # kernel at all; and for ResNet-50 fp32 batch 16, 5.4-5.7 images/sec
        # against 6.3-6.5 with the remapper off, on this 2-core CPU).
        proto.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
    return proto


def _all_workers(stats: tf.Tensor, num_workers: int) -> tf.Tensor:
    """(sum of images, max of -start, max of end) over workers, by collective ops."""
    if num_workers == 1:
        return stats * tf.constant([1.0, -1.0, 1.0], tf.float64)
    from tensorflow.python.ops import collective_ops

    images = collective_ops.all_reduce(stats[:1], num_workers, COLLECTIVE_GROUP, IMAGES_KEY, merge_op="Add",
                                       final_op="Id")
    times = collective_ops.all_reduce(stats[1:] * tf.constant([-1.0, 1.0], tf.float64), num_workers,
                                      COLLECTIVE_GROUP, WINDOW_KEY, merge_op="Max", final_op="Id")
    return tf.concat([images, times], 0)
