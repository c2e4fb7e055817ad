"""Optimizers as TensorFlow's own fused apply kernels on explicitly placed slots.

Each optimizer keeps its slot variables beside the variable it updates, so a
variable-update strategy places one thing (the variable) and the rest follows.
"""

from __future__ import annotations

from typing import Dict, List

import tensorflow as tf

from hpcnn.config import BenchmarkConfig


class Optimizer:
    """Applies one gradient to one variable; ``slot_names`` lists its state."""

    slot_names: List[str] = []

    def __init__(self, config: BenchmarkConfig):
        self.config = config
        self.lr = config.learning_rate

    slot_ones: List[str] = []  # slots that start at one rather than zero

    def create_slots(self, var: tf.Variable) -> Dict[str, tf.Variable]:
        """Slots on ``var``'s device, zero-initialised (or one for ``slot_ones``)."""
        with tf.device(var.device):
            return {s: tf.Variable((tf.ones_like if s in self.slot_ones else tf.zeros_like)(var), trainable=False,
                                   name=f"{var.name.split(':')[0]}/{s}")
                    for s in self.slot_names}

    def apply(self, var: tf.Variable, grad: tf.Tensor, slots: Dict[str, tf.Variable]) -> tf.Operation:
        raise NotImplementedError


class SGD(Optimizer):
    """Plain gradient descent."""

    def apply(self, var, grad, slots):
        return tf.raw_ops.ResourceApplyGradientDescent(var=var.handle, alpha=_f(self.lr), delta=grad)


class Momentum(Optimizer):
    """Gradient descent with momentum (``--momentum``)."""

    slot_names = ["momentum"]

    def apply(self, var, grad, slots):
        return tf.raw_ops.ResourceApplyMomentum(var=var.handle, accum=slots["momentum"].handle, lr=_f(self.lr),
                                                grad=grad, momentum=_f(self.config.momentum))


class RMSProp(Optimizer):
    """RMSProp as tf_cnn_benchmarks sets it up (``--rmsprop_decay``, ``--rmsprop_momentum``, ``--rmsprop_epsilon``)."""

    slot_names = ["rms", "momentum"]
    slot_ones = ["rms"]  # tf_cnn_benchmarks' RMSProp starts the mean square at 1

    def apply(self, var, grad, slots):
        c = self.config
        return tf.raw_ops.ResourceApplyRMSProp(var=var.handle, ms=slots["rms"].handle, mom=slots["momentum"].handle,
                                               lr=_f(self.lr), rho=_f(c.rmsprop_decay), momentum=_f(c.rmsprop_momentum),
                                               epsilon=_f(c.rmsprop_epsilon), grad=grad)


class Adam(Optimizer):
    """Adam (``--adam_beta1``, ``--adam_beta2``), its bias correction kept in per-variable power slots."""

    slot_names = ["m", "v", "beta1_power", "beta2_power"]

    def create_slots(self, var):
        slots = super().create_slots(var)
        with tf.device(var.device):
            slots["beta1_power"] = tf.Variable(_f(self.config.adam_beta1), trainable=False)
            slots["beta2_power"] = tf.Variable(_f(self.config.adam_beta2), trainable=False)
        return slots

    def apply(self, var, grad, slots):
        c = self.config
        b1, b2 = slots["beta1_power"], slots["beta2_power"]
        update = tf.raw_ops.ResourceApplyAdam(var=var.handle, m=slots["m"].handle, v=slots["v"].handle,
                                              beta1_power=b1, beta2_power=b2, lr=_f(self.lr),
                                              beta1=_f(c.adam_beta1), beta2=_f(c.adam_beta2),
                                              epsilon=_f(c.adam_epsilon), grad=grad)
        with tf.control_dependencies([update]):
            return tf.group(b1.assign(b1 * c.adam_beta1), b2.assign(b2 * c.adam_beta2))


_OPTIMIZERS = {"sgd": SGD, "momentum": Momentum, "rmsprop": RMSProp, "adam": Adam}


def make_optimizer(config: BenchmarkConfig) -> Optimizer:
    """The optimizer named by ``config.optimizer`` (validated by the config)."""
    return _OPTIMIZERS[config.optimizer](config)


def _f(x):
    return tf.constant(x, tf.float32)
