"""Compute devices: logical CPU devices per replica, or real GPUs."""

from __future__ import annotations

from typing import List

import tensorflow as tf

from hpcnn import backend
from hpcnn.config import BenchmarkConfig, ConfigError


def setup_devices(config: BenchmarkConfig) -> List[str]:
    """Returns one device name per replica, creating logical CPU devices if needed.

    With ``--device=cpu --num_gpus=N`` the CPU is split into N logical devices so
    multi-device code really runs multi-device. The split can only happen before
    TensorFlow initialises its runtime; later, an existing split with at least N
    devices is reused.

    Raises:
      ConfigError: more GPUs asked for than exist, or the split is impossible.
    """
    n = config.num_gpus
    if config.device == "gpu":
        gpus = tf.config.list_physical_devices("GPU")
        if len(gpus) < n:
            raise ConfigError(f"--num_gpus={n} but this machine has {len(gpus)} GPU(s) visible to TensorFlow"
                              + ("" if gpus else "; use --device=cpu to run on the CPU"))
        names = [f"/device:GPU:{i}" for i in range(n)]
    else:
        ensure_logical_cpus(n)
        names = [f"/device:CPU:{i}" for i in range(n)]
    if config.num_intra_threads:
        _set_threads(tf.config.threading.set_intra_op_parallelism_threads, config.num_intra_threads)
    if config.num_inter_threads:
        _set_threads(tf.config.threading.set_inter_op_parallelism_threads, config.num_inter_threads)
    if config.resolved_data_format == "NCHW" and config.device == "cpu":
        _check_nchw_on_cpu()
    return names


def ensure_logical_cpus(n: int) -> None:
    """Makes at least ``n`` logical CPU devices exist; raises ConfigError if it cannot."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    existing = tf.config.get_logical_device_configuration(cpu)
    if existing is not None and len(existing) >= n:
        return
    if existing is None and n == 1:
        return
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
    except RuntimeError:
        have = len(tf.config.list_logical_devices("CPU"))
        if have >= n:
            return
        raise ConfigError(f"--num_gpus={n} with --device=cpu needs {n} logical CPU devices, but TensorFlow was "
                          f"already initialised with {have} in this process") from None


def _set_threads(setter, value):
    try:
        setter(value)
    except RuntimeError:
        pass  # already initialised in this process (tests); the earlier setting stands


def cpu_runs_nchw() -> bool:
    """Whether this process's CPU backend has NCHW convolutions and pooling (oneDNN does; Eigen does not)."""
    x = tf.zeros([1, 3, 4, 4])
    try:
        with tf.device("/device:CPU:0"):
            y = tf.nn.conv2d(x, tf.zeros([1, 1, 3, 3]), 1, "SAME", data_format="NCHW")
            tf.nn.max_pool2d(y, 2, 2, "VALID", data_format="NCHW")
    except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError):
        return False
    return True


def _check_nchw_on_cpu():
    if cpu_runs_nchw():
        return
    if not backend.onednn_enabled():
        raise ConfigError("--data_format=NCHW on the CPU needs oneDNN (TensorFlow's default CPU kernels have only "
                          "NHWC convolutions), and this run has it off; use --onednn=on or --data_format=NHWC")
    raise ConfigError("--data_format=NCHW is not supported by this TensorFlow build on the CPU; "
                      "allowed on this machine: NHWC")
