"""The cluster's shared queues: TensorFlow FIFOQueues living on the ps tasks.

Every process builds the same queues with the same shared names, so they refer
to one queue on the ps. They carry no data, only order:

* ``contributed`` (ps 0): a non-chief worker's token "my gradients of step n are in".
* ``go[w]`` (ps 0): the chief's token to worker w "step n is applied, go on".
* ``stats`` (ps 0): each worker's (images, window start, window end) at the end.
* ``done[k]`` (ps k): each worker's index once it has finished; ps k exits when all are in.

A ps task closes its queues if a worker goes away, which fails every blocked peer at once.
"""

from __future__ import annotations

from typing import List, Optional

import tensorflow as tf

from hpcnn.distributed.cluster import Cluster

CAPACITY = 1024


class ClusterQueues:
    """The queues as a worker sees them (all), or as ps task ``ps_task`` does (only its own)."""

    def __init__(self, cluster: Cluster, ps_task: Optional[int] = None):
        devices = cluster.ps_devices()
        w = cluster.num_workers
        self.own: List[tf.queue.FIFOQueue] = []
        if ps_task in (None, 0):
            with tf.device(devices[0]):
                self.contributed = _queue(tf.int64, "contributed")
                self.go = [_queue(tf.int64, f"go_{k}") for k in range(w)]
                self.stats = tf.queue.FIFOQueue(CAPACITY, [tf.float64], shapes=[[3]], shared_name="hpcnn_stats",
                                                name="hpcnn_stats")
            self.own += [self.contributed, self.stats] + self.go
        self.done = {}
        for k, device in enumerate(devices):
            if ps_task in (None, k):
                with tf.device(device):
                    self.done[k] = _queue(tf.int64, f"done_{k}")
                self.own.append(self.done[k])


def _queue(dtype, name):
    return tf.queue.FIFOQueue(CAPACITY, [dtype], shapes=[[]], shared_name=f"hpcnn_{name}", name=f"hpcnn_{name}")
