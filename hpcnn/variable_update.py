"""Where variables live and how gradients meet: one class per ``--variable_update``.

The mode is chosen once, in ``make_variable_update``; after that the engine only
calls ``build``, ``train_step`` and ``forward_step``. Each replica computes
``Model.forward_backward`` on its own device with its own batch; the classes
differ only in which copy of the weights a replica reads and how gradients are
combined and applied:

* ``ParameterServer``: one master copy (on the parameter device, or spread over
  the GPUs balanced by size); replicas read it, the mean gradient is applied once.
* ``StagedParameterServer``: the same, but each replica computes with a staged
  copy that lags one step, so the copy overlaps compute (w[n+1] = w[n] - lr g(w[n-1])).
* ``Replicated``: a copy per device; the mean gradient is all-reduced (NCCL on
  GPUs, else a sum on one device read back by every device) and applied to every
  copy, so the copies stay identical.
* ``Independent``: a copy per device, each trained on its own data, no exchange.

Gradients are averaged over replicas (summed, then divided by the replica count),
so N replicas of batch B follow one device on the global batch N*B.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Sequence, Tuple

import tensorflow as tf

from hpcnn.config import BenchmarkConfig
from hpcnn.models.layers import ParamSpec, initial_value
from hpcnn.optimizers import Optimizer, make_optimizer
from hpcnn.model import Model, StepOutput

Batch = Tuple[tf.Tensor, tf.Tensor]
Params = Dict[str, tf.Variable]


class VariableUpdate:
    """Base class: owns the variables and builds one step's graph."""

    def __init__(self, model: Model, devices: Sequence[str], config: BenchmarkConfig):
        self.model = model
        self.devices = list(devices)
        self.config = config
        self.optimizer: Optimizer = make_optimizer(config)
        self.specs: Dict[str, ParamSpec] = model.specs
        self.slots: Dict[int, Dict[str, Dict[str, tf.Variable]]] = {}

    # -- construction -----------------------------------------------------------
    def build(self) -> None:
        """Creates every variable (eagerly, before the step is traced)."""
        raise NotImplementedError

    def _create(self, spec: ParamSpec, device: str) -> tf.Variable:
        with tf.device(device):
            return tf.Variable(initial_value(spec, self.config.tf_random_seed), trainable=spec.trainable,
                               name=spec.name.replace("/", "."))

    def _create_copy(self, device: str) -> Params:
        return {name: self._create(spec, device) for name, spec in self.specs.items()}

    def _create_slots(self, params: Params) -> Dict[str, Dict[str, tf.Variable]]:
        return {n: self.optimizer.create_slots(v) for n, v in params.items() if self.specs[n].trainable}

    # -- what replicas compute with ---------------------------------------------
    def replica_params(self, i: int) -> Params:
        """The variables replica ``i`` reads its weights from."""
        raise NotImplementedError

    def copies(self) -> List[Params]:
        """Every stored copy of the model's variables (one for the master modes)."""
        raise NotImplementedError

    def _read(self, params: Params, device: str) -> Dict[str, tf.Tensor]:
        with tf.device(device):
            return {n: tf.identity(v) for n, v in params.items()}

    def _replica_outputs(self, batches: Sequence[Batch]):
        outs = []
        for i, (device, (images, labels)) in enumerate(zip(self.devices, batches)):
            with tf.device(device), tf.name_scope(f"replica{i}"):
                outs.append(self.model.forward_backward(self._read(self.replica_params(i), device), images, labels))
        return outs

    def _mean_loss(self, losses):
        with tf.device(self.devices[0]):
            return tf.add_n(losses) / len(losses) if len(losses) > 1 else tf.identity(losses[0])

    # -- steps -----------------------------------------------------------------------
    def train_step(self, batches: Sequence[Batch]) -> tf.Tensor:
        """Builds one training step on per-replica batches; returns the mean loss.

        Every mode's step is the same template: each replica's forward-backward,
        then ``_update`` (how the gradients meet and are applied: what the modes
        differ in), then the mean loss, computed once the updates have run.
        """
        outs = self._replica_outputs(batches)
        updates = self._update(outs)
        with tf.control_dependencies(updates):
            return self._mean_loss([o.loss for o in outs])

    def _update(self, outs: List[StepOutput]) -> List[tf.Operation]:
        """The ops that combine the replicas' gradients and BN statistics and apply them."""
        raise NotImplementedError

    def forward_step(self, batches: Sequence[Batch]) -> tf.Tensor:
        """Builds one inference pass on per-replica batches; returns the mean loss."""
        losses = []
        for i, (device, (images, labels)) in enumerate(zip(self.devices, batches)):
            with tf.device(device), tf.name_scope(f"replica{i}"):
                loss, _ = self.model.loss(self._read(self.replica_params(i), device), images, labels, training=False)
                losses.append(loss)
        return self._mean_loss(losses)

    def _apply(self, params: Params, slots, grads: Dict[str, tf.Tensor],
               bn: Dict[str, tf.Tensor]) -> List[tf.Operation]:
        """The updates of ``params`` by ``grads`` and the new BN statistics ``bn``."""
        return apply_gradients(self.optimizer, params, slots, grads) + assign_bn(params, bn)

    @staticmethod
    def _means(outs: List[StepOutput], device_of: Callable[[str], str]):
        """The replicas' mean gradients and mean BN statistics, each parameter's computed on ``device_of(name)``."""
        return mean_over([o.grads for o in outs], device_of), mean_over([o.bn_updates for o in outs], device_of)


class ParameterServer(VariableUpdate):
    """One master copy on the parameter device(s); the mean gradient applied once."""

    def build(self):
        self.master: Params = {}
        for name, device in self.placement().items():
            self.master[name] = self._create(self.specs[name], device)
        self.slots = {0: self._create_slots(self.master)}

    def parameter_devices(self) -> List[str]:
        if self.config.resolved_parameter_device == "cpu":
            return ["/device:CPU:0"]
        return [d for d in self.devices if "GPU" in d]

    def placement(self) -> Dict[str, str]:
        """Parameter name -> device, greedily balancing total bytes across devices."""
        devices = self.parameter_devices()
        load = {d: 0 for d in devices}
        result = {}
        for spec in sorted(self.specs.values(), key=lambda s: (-s.size, s.name)):
            target = min(devices, key=lambda d: (load[d], devices.index(d)))
            load[target] += spec.size
            result[spec.name] = target
        return {n: result[n] for n in self.specs}

    def replica_params(self, i):
        return self.master

    def copies(self):
        return [self.master]

    def _update(self, outs):
        grads, bn = self._means(outs, lambda n: self.master[n].device)
        return self._apply(self.master, self.slots[0], grads, bn)


class StagedParameterServer(ParameterServer):
    """Parameter server whose replicas compute with weights staged one step earlier.

    Each replica keeps a staging copy on its own device. In step n it computes
    with the staged weights (w[n-1]) while the current master (w[n]) is copied
    into the staging copy, overlapping that copy with compute; the update of step
    n is thus computed from w[n-1] (w[0] for the very first step).
    """

    def build(self):
        super().build()
        self.staged = [{n: self._create(self.specs[n], d) for n in self.specs} for d in self.devices]

    def replica_params(self, i):
        return self.staged[i]

    def _update(self, outs):  # the replicas have read the staged copies already
        refresh = []
        for staged, device in zip(self.staged, self.devices):
            fresh = self._read(self.master, device)
            refresh += [staged[n].assign(fresh[n], read_value=False) for n in staged]
        with tf.control_dependencies(refresh):  # the master is read before it is updated
            return super()._update(outs)


class _PerDeviceCopies(VariableUpdate):
    def build(self):
        self.replicas: List[Params] = [self._create_copy(d) for d in self.devices]
        self.slots = {i: self._create_slots(p) for i, p in enumerate(self.replicas)}

    def replica_params(self, i):
        return self.replicas[i]

    def copies(self):
        return self.replicas


class Replicated(_PerDeviceCopies):
    """A copy per device; gradients all-reduced and applied to every copy."""

    def _update(self, outs):
        names = list(outs[0].grads)
        reduced = self._all_reduce_mean([[o.grads[n] for o in outs] for n in names])
        spread = {n: self.devices[k % len(self.devices)] for k, n in enumerate(self.specs)}
        bn = mean_over([o.bn_updates for o in outs], spread.get)
        ops = []
        for i, params in enumerate(self.replicas):
            ops += self._apply(params, self.slots[i], {n: reduced[k][i] for k, n in enumerate(names)}, bn)
        return ops

    def _all_reduce_mean(self, per_param: List[List[tf.Tensor]]) -> List[List[tf.Tensor]]:
        """For each parameter, the mean of its per-device gradients, one per device."""
        n = len(self.devices)
        if n == 1:
            return per_param
        if self.config.resolved_use_nccl:
            from tensorflow.python.ops import nccl_ops  # TF's own NCCL kernels (GPU builds only)

            out = []
            for grads in per_param:
                summed = nccl_ops.all_sum(grads)
                out.append([s * (1.0 / n) for s in summed])
            return out
        # Implicit copies: the sum lives on one device (spread round-robin over
        # parameters) and every device reads it, TensorFlow inserting the copies.
        means = [_mean(grads, self.devices[k % n]) for k, grads in enumerate(per_param)]
        return [[m] * n for m in means]


class Independent(_PerDeviceCopies):
    """A copy per device, each trained on its own batch; nothing crosses devices."""

    def _update(self, outs):
        ops = []
        for i, (params, out) in enumerate(zip(self.replicas, outs)):
            ops += self._apply(params, self.slots[i], out.grads, out.bn_updates)
        return ops


def apply_gradients(optimizer: Optimizer, params: Params, slots, grads: Dict[str, tf.Tensor]) -> List[tf.Operation]:
    """The optimizer's updates of ``params`` by ``grads``, each run once every one of ``grads`` exists.

    Until then the backward pass may still hold a read of a variable (``dy @ W^T``
    needs W), and updating a resource variable whose value is still referenced
    makes TensorFlow copy the whole buffer first (151 MB per step for AlexNet's
    fc0). After the last gradient nothing reads the weights, so updates are in place.
    """
    ops = []
    with tf.control_dependencies(list(grads.values())):
        for name, grad in grads.items():
            with tf.device(params[name].device):
                ops.append(optimizer.apply(params[name], grad, slots[name]))
    return ops


def assign_bn(params: Params, updates: Dict[str, tf.Tensor]) -> List[tf.Operation]:
    """Assigns the new batch-norm moving statistics ``updates`` to ``params``."""
    ops = []
    for name, value in updates.items():
        with tf.device(params[name].device):
            ops.append(params[name].assign(value, read_value=False))
    return ops


def mean_over(replicas: List[Dict[str, tf.Tensor]], device_of: Callable[[str], str]) -> Dict[str, tf.Tensor]:
    """Per name, the mean of the replicas' tensors, computed on ``device_of(name)``."""
    return {n: _mean([r[n] for r in replicas], device_of(n)) for n in replicas[0]}


def _mean(values: List[tf.Tensor], device: str) -> tf.Tensor:
    if len(values) == 1:
        return values[0]
    with tf.device(device):
        return tf.add_n(values) * (1.0 / len(values))


_LOCAL_CLASSES = {"parameter_server": ParameterServer, "replicated": Replicated, "independent": Independent}


def make_variable_update(model: Model, devices: Sequence[str], config: BenchmarkConfig) -> VariableUpdate:
    """The one-process strategy for ``config.variable_update``: the only place the mode is read.

    Cluster runs build theirs with ``hpcnn.distributed.variable_update.make_distributed_update``.
    """
    if config.staged_vars:
        return StagedParameterServer(model, devices, config)  # the config allows staging only where it applies
    return _LOCAL_CLASSES[config.variable_update](model, devices, config)
