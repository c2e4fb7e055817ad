"""Variable updates across processes: one class per distributed ``--variable_update``.

Built by every worker into its own graph (between-graph replication). Within a
worker the replicas' gradients are averaged first, so each worker sends one
aggregated gradient per variable:

* ``DistributedParameterServer``: master copies on the ps tasks (balanced by
  size); every replica reads them directly.
* ``DistributedReplicated``: the masters plus a copy on every device of every
  worker; replicas compute with their local copy, which is refreshed from the
  master after each update.
* ``CollectiveAllReduce``: no ps; a copy on every device, the workers' gradients
  all-reduced with TensorFlow's collective ops (one packed tensor per step).

How a worker's gradient reaches the masters is the ``Exchange``, chosen once:

* ``SyncExchange`` (``--cross_replica_sync``, the default): each worker puts its
  gradients into TensorFlow ``ConditionalAccumulator``s on the ps (which average
  them); the chief waits until every worker has contributed, takes the averages,
  applies them once, advances the global step and releases the others. No worker
  starts step n+1 before step n is applied everywhere.
* ``AsyncExchange``: each worker applies its own gradient to the masters and
  advances the global step; nobody waits.
"""

from __future__ import annotations

from typing import Dict, List

import numpy as np
import tensorflow as tf

from hpcnn.distributed import cluster as cluster_lib
from hpcnn.distributed.cluster import Cluster
from hpcnn.distributed.queues import ClusterQueues
from hpcnn.variable_update import (
    ParameterServer, Params, _PerDeviceCopies, apply_gradients, assign_bn)


class DistributedUpdate:
    """What a cluster worker relies on, beside the ``VariableUpdate`` interface.

    * ``cluster``: the run's ``Cluster``;
    * ``global_step``: an int64 variable counting applied updates, the same one for
      every worker (the worker reads it to time the run and to stop);
    * ``checks()``: tensors the worker fetches with ``--check_copies`` to show that
      every copy equals its master.

    It also averages the replicas' gradients and BN statistics on the worker's
    first device, so each worker sends one aggregate per variable.
    """

    cluster: Cluster
    global_step: tf.Variable

    def checks(self) -> Dict[str, tf.Tensor]:
        raise NotImplementedError

    def _local_means(self, outs):
        return self._means(outs, lambda _: self.devices[0])


class DistributedParameterServer(DistributedUpdate, ParameterServer):
    """Master copies on the ps tasks; replicas read them; the exchange updates them."""

    def __init__(self, model, devices, config, cluster: Cluster):
        super().__init__(model, devices, config)
        self.cluster = cluster

    def parameter_devices(self) -> List[str]:
        return self.cluster.ps_devices()

    def build(self):
        super().build()
        with tf.device(self.cluster.ps_devices()[0]):
            self.global_step = tf.Variable(tf.constant(0, tf.int64), trainable=False, name="global_step")
        exchange = SyncExchange if self.config.cross_replica_sync else AsyncExchange
        self.exchange = exchange(self.master, self.slots[0], self.optimizer, self.global_step, self.cluster)

    def _update(self, outs):
        return self._after_update(self.exchange.update(*self._local_means(outs)))

    def _after_update(self, ops):
        return ops

    def checks(self) -> Dict[str, tf.Tensor]:
        """Tensors describing the copies right after a step (``--check_copies``)."""
        with tf.device(self.devices[0]):
            return {"global_step": self.global_step.read_value(), "master_digest": _digest(self.master),
                    "max_copy_diff": self._max_copy_diff()}

    def _max_copy_diff(self):
        return tf.constant(0.0, tf.float64)  # the replicas read the master itself


class DistributedReplicated(DistributedParameterServer):
    """Masters on the ps plus a local copy per device, refreshed from the master every step."""

    def build(self):
        super().build()
        self.local: List[Params] = [self._create_copy(d) for d in self.devices]

    def replica_params(self, i):
        return self.local[i]

    def copies(self):
        return [self.master] + self.local

    def _after_update(self, ops):
        with tf.control_dependencies(ops):
            fresh = self._read(self.master, self.devices[0])  # one fetch per worker
        refresh = []
        for params, device in zip(self.local, self.devices):
            with tf.device(device):
                refresh += [params[n].assign(fresh[n], read_value=False) for n in params]
        return refresh

    def _max_copy_diff(self):
        return _max_diff(self.local, self.master)


class CollectiveAllReduce(DistributedUpdate, _PerDeviceCopies):
    """A copy per device on every worker; gradients all-reduced across workers by collective ops."""

    def __init__(self, model, devices, config, cluster: Cluster):
        super().__init__(model, devices, config)
        self.cluster = cluster

    def build(self):
        super().build()
        with tf.device(self.devices[0]):
            self.global_step = tf.Variable(tf.constant(0, tf.int64), trainable=False, name="global_step")

    def _update(self, outs):
        grads, bn = self._local_means(outs)
        grads = self.all_reduce_mean(grads, instance_key=cluster_lib.GRADIENTS_KEY)
        bn = self.all_reduce_mean(bn, instance_key=cluster_lib.BATCH_NORM_KEY)
        ops = []
        for i, params in enumerate(self.replicas):
            ops += self._apply(params, self.slots[i], grads, bn)
        with tf.control_dependencies(ops):
            with tf.device(self.devices[0]):
                return ops + [self.global_step.assign_add(1, read_value=False)]

    def all_reduce_mean(self, values: Dict[str, tf.Tensor], instance_key: int) -> Dict[str, tf.Tensor]:
        """The mean over workers of each value: one collective on one packed tensor."""
        w = self.cluster.num_workers
        if w == 1 or not values:
            return values
        from tensorflow.python.ops import collective_ops  # TF's collectives (no public graph-mode API)

        names = list(values)
        with tf.device(self.devices[0]):
            packed = tf.concat([tf.reshape(values[n], [-1]) for n in names], 0)
            reduced = collective_ops.all_reduce(packed, w, cluster_lib.COLLECTIVE_GROUP, instance_key, merge_op="Add",
                                                final_op="Div")
            parts = tf.split(reduced, [int(np.prod(values[n].shape)) for n in names])
            return {n: tf.reshape(p, values[n].shape) for n, p in zip(names, parts)}

    def checks(self):
        first = self.replicas[0]
        with tf.device(self.devices[0]):
            return {"global_step": self.global_step.read_value(), "master_digest": _digest(first),
                    "max_copy_diff": _max_diff(self.replicas[1:], first)}


class SyncExchange:
    """Synchronous updates through ConditionalAccumulators and token queues on ps 0."""

    def __init__(self, master: Params, slots, optimizer, global_step: tf.Variable, cluster: Cluster):
        self.master, self.slots, self.optimizer = master, slots, optimizer
        self.global_step, self.cluster = global_step, cluster
        self.queues = ClusterQueues(cluster)
        self.accumulators = {}
        for name, var in master.items():
            with tf.device(var.device):
                self.accumulators[name] = tf.raw_ops.ResourceConditionalAccumulator(
                    dtype=var.dtype, shape=var.shape, shared_name=f"hpcnn_acc/{name}", reduction_type="MEAN")

    def update(self, grads: Dict[str, tf.Tensor], bn: Dict[str, tf.Tensor]) -> List[tf.Operation]:
        w, task = self.cluster.num_workers, self.cluster.task
        with tf.device(self.global_step.device):
            step = self.global_step.read_value()
        contributed = []
        for name, value in list(grads.items()) + list(bn.items()):
            with tf.device(self.master[name].device):
                contributed.append(tf.raw_ops.ResourceAccumulatorApplyGradient(
                    handle=self.accumulators[name], local_step=step, gradient=value))
        with tf.control_dependencies(contributed):
            if not self.cluster.is_chief:
                with tf.control_dependencies([self.queues.contributed.enqueue(task)]):
                    return [self.queues.go[task].dequeue()]
            waited = [self.queues.contributed.dequeue_many(w - 1)] if w > 1 else contributed
        with tf.control_dependencies(waited):
            applied = []
            for name in list(grads) + list(bn):
                var = self.master[name]
                with tf.device(var.device):
                    mean = tf.raw_ops.ResourceAccumulatorTakeGradient(
                        handle=self.accumulators[name], num_required=w, dtype=var.dtype)
                    if name in grads:
                        applied.append(self.optimizer.apply(var, mean, self.slots[name]))
                    else:
                        applied.append(var.assign(mean, read_value=False))
        with tf.control_dependencies(applied):
            with tf.device(self.global_step.device):
                advanced = self.global_step.assign_add(1, read_value=False)
        with tf.control_dependencies([advanced]):
            return [self.queues.go[k].enqueue(step) for k in range(1, w)] + [advanced]


class AsyncExchange:
    """Each worker applies its own gradients to the masters; nobody waits."""

    def __init__(self, master: Params, slots, optimizer, global_step: tf.Variable, cluster: Cluster):
        self.master, self.slots, self.optimizer = master, slots, optimizer
        self.global_step = global_step

    def update(self, grads, bn):
        ops = apply_gradients(self.optimizer, self.master, self.slots, grads) + assign_bn(self.master, bn)
        with tf.control_dependencies(ops):
            with tf.device(self.global_step.device):
                return [self.global_step.assign_add(1, read_value=False)]


def _max_diff(copies: List[Params], reference: Params) -> tf.Tensor:
    """The largest absolute difference between any copy's weight and the reference's, in float64."""
    diffs = [tf.reduce_max(tf.abs(tf.cast(p[n], tf.float64) - tf.cast(reference[n], tf.float64)))
             for p in copies for n in p]
    return tf.reduce_max(tf.stack(diffs)) if diffs else tf.constant(0.0, tf.float64)


def _digest(params: Params) -> tf.Tensor:
    """Sum of squares of every weight, in float64: equal copies give equal digests."""
    return tf.add_n([tf.reduce_sum(tf.square(tf.cast(v, tf.float64))) for v in params.values()])


_CLUSTER_CLASSES = {"parameter_server": DistributedParameterServer, "distributed_replicated": DistributedReplicated,
                    "collective_all_reduce": CollectiveAllReduce}


def make_distributed_update(model, devices, config, cluster: Cluster) -> DistributedUpdate:
    """A cluster worker's strategy for ``config.variable_update`` (one of ``modes.cluster_names()``)."""
    return _CLUSTER_CLASSES[config.variable_update](model, devices, config, cluster)
