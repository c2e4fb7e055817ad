"""A registered model bound to a run's layout, precision and classes: one replica's forward, loss and gradients.

It never sees where a batch came from or where its weights live.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Mapping

import tensorflow as tf

from hpcnn.config import BenchmarkConfig
from hpcnn.models import ModelSpec, get_model
from hpcnn.models.layers import ApplyNet, ParamSpec, SpecNet

COMPUTE_DTYPES = {"fp32": tf.float32, "bf16": tf.bfloat16, "fp16": tf.float16}


@dataclasses.dataclass
class StepOutput:
    """What one replica's step produced (graph tensors)."""

    loss: tf.Tensor
    grads: Dict[str, tf.Tensor]
    bn_updates: Dict[str, tf.Tensor]


class Model:
    """A registered model bound to a run's layout, precision and class count."""

    def __init__(self, config: BenchmarkConfig):
        self.spec: ModelSpec = get_model(config.model)
        self.data_format = config.resolved_data_format
        self.compute_dtype = COMPUTE_DTYPES[config.precision]
        self.num_classes = config.num_classes
        self.weight_decay = config.weight_decay
        self.loss_scale = config.fp16_loss_scale if config.precision == "fp16" else 1.0
        self.specs: Dict[str, ParamSpec] = self.param_specs()

    @property
    def input_shape(self):
        """One image's shape in this run's data format."""
        s = self.spec.image_size
        return [s, s, 3] if self.data_format == "NHWC" else [3, s, s]

    def param_specs(self) -> Dict[str, ParamSpec]:
        """Every parameter of the model, traced symbolically (no compute)."""
        net = SpecNet(self.data_format, training=True, compute_dtype=self.compute_dtype)
        fn = tf.function(lambda x: self.spec.forward(net, x, self.num_classes), autograph=False)
        fn.get_concrete_function(tf.TensorSpec([1] + self.input_shape, self.compute_dtype))
        return net.specs

    def logits(self, params: Mapping[str, tf.Tensor], images, training: bool):
        """Returns (float32 logits, new batch-norm moving statistics)."""
        net = ApplyNet(params, self.data_format, training, self.compute_dtype)
        logits = self.spec.forward(net, images, self.num_classes)
        return tf.cast(logits, tf.float32), net.bn_updates

    def loss(self, params, images, labels, training=True):
        """Mean softmax cross-entropy plus weight decay; returns (loss, bn_updates)."""
        logits, bn_updates = self.logits(params, images, training)
        xent = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        decayed = [tf.nn.l2_loss(params[n]) for n, s in self.specs.items() if s.weight_decay and s.trainable]
        if self.weight_decay and decayed:
            xent = xent + self.weight_decay * tf.add_n(decayed)
        return xent, bn_updates

    def forward_backward(self, params: Mapping[str, tf.Tensor], images, labels) -> StepOutput:
        """Loss and gradients with respect to every trainable parameter in ``params``."""
        trainable = {n: params[n] for n, s in self.specs.items() if s.trainable}
        with tf.GradientTape() as tape:
            tape.watch(list(trainable.values()))
            loss, bn_updates = self.loss(params, images, labels)
            scaled = loss * self.loss_scale if self.loss_scale != 1.0 else loss
        grads = tape.gradient(scaled, trainable)
        if self.loss_scale != 1.0:
            grads = {n: g / self.loss_scale for n, g in grads.items()}
        return StepOutput(loss, grads, bn_updates)
