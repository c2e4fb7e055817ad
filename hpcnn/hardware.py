"""What the run executed on: CPU, GPUs, TensorFlow and CUDA versions."""

from __future__ import annotations

import os
import platform

import tensorflow as tf


def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo (or the platform's best guess)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def describe() -> dict:
    """A flat, JSON-serialisable description of this machine's hardware and software."""
    build = tf.sysconfig.get_build_info()
    gpus = []
    for gpu in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(gpu)
        gpus.append(details.get("device_name", gpu.name))
    return {
        "cpu_model": cpu_model(),
        "cpu_cores": usable_cores(),
        "gpu_models": gpus,
        "gpu_count": len(gpus),
        "tensorflow": tf.__version__,
        "cuda": build.get("cuda_version"),
        "cudnn": build.get("cudnn_version"),
        "python": platform.python_version(),
    }
