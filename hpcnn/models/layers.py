"""The network builder every model is written against.

A model is a plain function ``forward(net, images) -> logits``. It never creates
variables itself: ``net`` hands it parameters by name. This keeps models pure
functions of a flat parameter dict, so the variable-update strategy alone decides
where parameters live (one master copy, one copy per device, ...), in the spirit
of tf_cnn_benchmarks' ConvNetBuilder and Flax's ``apply``.

Two kinds of ``Net`` share this interface:

* ``SpecNet`` records the name, shape and initializer of every parameter while
  the forward pass is traced symbolically (no compute, no memory).
* ``ApplyNet`` reads parameters from a dict and runs the real computation,
  collecting the new batch-norm moving statistics as it goes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Dict
import zlib

import tensorflow as tf

BN_EPSILON = 1.001e-5
BN_MOMENTUM = 0.9


@dataclasses.dataclass(frozen=True)
class ParamSpec:
    """What a parameter is: enough to create and initialise it anywhere."""

    name: str
    shape: tuple
    init: str  # "he_normal" | "glorot_uniform" | "zeros" | "ones"
    trainable: bool = True
    weight_decay: bool = True

    @property
    def size(self) -> int:
        return int(math.prod(self.shape)) if self.shape else 1


class Net:
    """Layer vocabulary shared by ``SpecNet`` and ``ApplyNet``.

    Args:
      data_format: "NHWC" or "NCHW"; every layer honours it.
      training: batch norm uses batch statistics when True.
      compute_dtype: dtype of activations (float32, bfloat16 or float16);
        parameters are stored in float32 and cast on read.
    """

    def __init__(self, data_format: str, training: bool, compute_dtype=tf.float32):
        if data_format not in ("NHWC", "NCHW"):
            raise ValueError(f"data_format must be NHWC or NCHW. Received: data_format={data_format!r}")
        self.data_format = data_format
        self.training = training
        self.compute_dtype = tf.as_dtype(compute_dtype)

    # -- parameter access, specialised by subclasses --------------------------
    def param(self, spec: ParamSpec) -> tf.Tensor:
        raise NotImplementedError

    def _read(self, name, shape, init, trainable=True, weight_decay=True, cast=True):
        value = self.param(ParamSpec(name, tuple(int(d) for d in shape), init, trainable, weight_decay))
        return tf.cast(value, self.compute_dtype) if cast and value.dtype != self.compute_dtype else value

    def batch_norm_update(self, name: str, mean: tf.Tensor, variance: tf.Tensor) -> None:
        """Receives the new moving statistics of batch norm layer ``name``."""

    # -- layout helpers --------------------------------------------------------
    @property
    def channel_axis(self) -> int:
        return 3 if self.data_format == "NHWC" else 1

    def channels(self, x) -> int:
        return int(x.shape[self.channel_axis])

    def _strides(self, s):
        return [1, s, s, 1] if self.data_format == "NHWC" else [1, 1, s, s]

    # -- layers ----------------------------------------------------------------
    def conv(self, name, x, filters, kernel, stride=1, padding="SAME", activation="relu",
             use_batch_norm=True, bn_scale=True):
        """Convolution, then fused batch norm (or, without it, a bias), then the activation."""
        kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
        w = self._read(f"{name}/kernel", (kh, kw, self.channels(x), filters), "he_normal")
        if padding == "SAME_RESNET" and stride > 1:
            # Explicit padding so that strided convolutions do not depend on input
            # parity, as in the reference ResNet implementation.
            x = self.pad(x, (kh - 1) // 2, kh - 1 - (kh - 1) // 2)
            padding = "VALID"
        elif padding == "SAME_RESNET":
            padding = "SAME"
        y = tf.nn.conv2d(x, w, self._strides(stride), padding, data_format=self.data_format)
        if use_batch_norm:
            y = self.batch_norm(f"{name}/bn", y, scale=bn_scale)
        else:
            b = self._read(f"{name}/bias", (filters,), "zeros", weight_decay=False)
            y = tf.nn.bias_add(y, b, data_format=self.data_format)
        return self.activate(y, activation)

    def batch_norm(self, name, x, scale=True):
        """Fused batch normalization (the FusedBatchNormV3 op in the graph).

        ``scale=False`` leaves out the learned gamma, as Inception-v3 does.
        """
        c = self.channels(x)
        if scale:
            gamma = self._read(f"{name}/gamma", (c,), "ones", weight_decay=False, cast=False)
        else:
            gamma = tf.ones([c])
        beta = self._read(f"{name}/beta", (c,), "zeros", weight_decay=False, cast=False)
        moving_mean = self._read(f"{name}/moving_mean", (c,), "zeros", trainable=False, weight_decay=False, cast=False)
        moving_var = self._read(f"{name}/moving_variance", (c,), "ones", trainable=False, weight_decay=False,
                                cast=False)
        if self.training:
            y, mean, var, *_ = tf.raw_ops.FusedBatchNormV3(
                x=x, scale=gamma, offset=beta, mean=tf.zeros([0]), variance=tf.zeros([0]),
                epsilon=BN_EPSILON, data_format=self.data_format, is_training=True)
            m = BN_MOMENTUM
            self.batch_norm_update(name, m * moving_mean + (1 - m) * mean,
                                   m * moving_var + (1 - m) * var)
        else:
            y, *_ = tf.raw_ops.FusedBatchNormV3(
                x=x, scale=gamma, offset=beta, mean=moving_mean, variance=moving_var,
                epsilon=BN_EPSILON, data_format=self.data_format, is_training=False)
        return y

    def activate(self, x, activation):
        if activation in (None, "linear"):
            return x
        if activation == "relu":
            return tf.nn.relu(x)
        raise ValueError(f"Unknown activation. Received: activation={activation!r}")

    def dense(self, name, x, units, activation="relu", init="glorot_uniform"):
        w = self._read(f"{name}/kernel", (int(x.shape[-1]), units), init)
        b = self._read(f"{name}/bias", (units,), "zeros", weight_decay=False)
        return self.activate(tf.matmul(x, w) + b, activation)

    def max_pool(self, x, size, stride, padding="VALID"):
        return tf.nn.max_pool2d(x, size, self._strides(stride), padding, data_format=self.data_format)

    def avg_pool(self, x, size, stride, padding="VALID"):
        return tf.nn.avg_pool2d(x, size, self._strides(stride), padding, data_format=self.data_format)

    def global_avg_pool(self, x):
        axes = [1, 2] if self.data_format == "NHWC" else [2, 3]
        return tf.reduce_mean(x, axes)

    def flatten(self, x):
        """Flattens in NHWC order whatever the layout, so weights are layout-free."""
        if self.data_format == "NCHW":
            x = tf.transpose(x, [0, 2, 3, 1])
        return tf.reshape(x, [-1, int(math.prod(x.shape[1:]))])

    def pad(self, x, before, after):
        spatial = [[before, after], [before, after]]
        paddings = [[0, 0]] + spatial + [[0, 0]] if self.data_format == "NHWC" else [[0, 0], [0, 0]] + spatial
        return tf.pad(x, paddings)

    def concat(self, xs):
        return tf.concat(xs, self.channel_axis)


class SpecNet(Net):
    """Records parameter specs; returns zeros so shapes propagate symbolically."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.specs: Dict[str, ParamSpec] = {}

    def param(self, spec):
        if spec.name in self.specs:
            raise ValueError(f"Parameter name used twice in one model: {spec.name!r}")
        self.specs[spec.name] = spec
        return tf.zeros(spec.shape, tf.float32)


class ApplyNet(Net):
    """Runs the model on real parameters given as a name -> tensor mapping."""

    def __init__(self, params, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.params = params
        self.bn_updates: Dict[str, tf.Tensor] = {}

    def param(self, spec):
        return self.params[spec.name]

    def batch_norm_update(self, name, mean, variance):
        self.bn_updates[f"{name}/moving_mean"] = mean
        self.bn_updates[f"{name}/moving_variance"] = variance


def initial_value(spec: ParamSpec, seed: int) -> tf.Tensor:
    """Deterministic initial value of ``spec``: a function of (seed, name) only.

    Every copy of a parameter, on any device and in any process, therefore starts
    identical, which is what lets variable-update modes be compared step by step.
    """
    key = tf.constant([seed, _name_hash(spec.name)], tf.int64)
    shape = spec.shape
    if spec.init == "zeros":
        return tf.zeros(shape)
    if spec.init == "ones":
        return tf.ones(shape)
    fan_in = int(math.prod(shape[:-1])) if len(shape) > 1 else shape[0]
    fan_out = shape[-1]
    if spec.init == "he_normal":
        std = math.sqrt(2.0 / fan_in)
        return tf.random.stateless_truncated_normal(shape, key, stddev=std / 0.8796)
    if spec.init == "glorot_uniform":
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        return tf.random.stateless_uniform(shape, key, -limit, limit)
    raise ValueError(f"Unknown initializer. Received: init={spec.init!r}")


def _name_hash(name: str) -> int:
    return zlib.crc32(name.encode())


ForwardFn = Callable[[Net, tf.Tensor], tf.Tensor]
