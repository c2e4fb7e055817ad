"""What the run executed on: CPU, its ISA tier, GPUs, the CPU backend, TensorFlow and CUDA versions.

Everything above ``describe`` reads only /proc and the OS, never TensorFlow, so
the CPU backend can be decided from it before TensorFlow is imported.
"""

from __future__ import annotations

import os
import platform
from typing import FrozenSet, Iterable, Optional

# Vector/matrix ISA tiers that change CNN throughput, best first, each with the
# /proc/cpuinfo flags that make it. "avx512-bf16" and "amx" have native bfloat16;
# below "avx512" oneDNN has no bfloat16 kernels at all (TensorFlow falls back to
# Eigen's emulation).
ISA_TIERS = (
    ("amx", ("amx_tile", "amx_bf16")),
    ("avx512-bf16", ("avx512f", "avx512_bf16")),
    ("avx512", ("avx512f",)),
    ("avx2", ("avx2", "fma")),
    ("avx", ("avx",)),
)
NATIVE_BF16_TIERS = ("amx", "avx512-bf16")

# The unit tests and the CPU perf matrix split the processor into this many logical
# devices, so that multi-device code runs for real on a machine without GPUs.
LOGICAL_CPUS = 4


def _cpuinfo_field(name: str) -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(name) and ":" in line and line.split(":", 1)[0].strip() == name:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo (or the platform's best guess)."""
    return _cpuinfo_field("model name") or platform.processor() or "unknown"


def cpu_family_model() -> Optional[str]:
    """The x86 CPU's family and model numbers as ``f<family>m<model>`` (``f25m17``), else None.

    Cloud VMs report one model name ("AMD EPYC") for several microarchitectures whose
    throughput differs (Zen 3, Zen 4 and Zen 5 all do); the family and model numbers
    tell them apart. Where /proc/cpuinfo has no such fields (not x86) it is None.
    """
    family, model = _cpuinfo_field("cpu family"), _cpuinfo_field("model")
    return f"f{family}m{model}" if family.isdigit() and model.isdigit() else None


def cpu_flags() -> FrozenSet[str]:
    """The CPU's feature flags as /proc/cpuinfo lists them (empty where there is none)."""
    return frozenset(_cpuinfo_field("flags").split())


def isa_tier(flags: Iterable[str]) -> str:
    """The best tier of ``ISA_TIERS`` whose flags are all present, else "baseline"."""
    have = set(flags)
    for tier, needed in ISA_TIERS:
        if have.issuperset(needed):
            return tier
    return "baseline"


def has_native_bf16(tier: str) -> bool:
    """Whether CPUs of ``tier`` compute bfloat16 in hardware (else it is emulated, slower than fp32)."""
    return tier in NATIVE_BF16_TIERS


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def describe() -> dict:
    """A flat, JSON-serialisable description of this machine's hardware and software.

    Imports TensorFlow (the GPU list and the build's CUDA/cuDNN versions come from it).
    """
    import tensorflow as tf

    from hpcnn import backend

    build = tf.sysconfig.get_build_info()
    gpus = []
    for gpu in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(gpu)
        gpus.append(details.get("device_name", gpu.name))
    return {
        "cpu_model": cpu_model(),
        "cpu_family_model": cpu_family_model(),
        "cpu_isa": isa_tier(cpu_flags()),
        "cpu_cores": usable_cores(),
        **backend.describe(),
        "gpu_models": gpus,
        "gpu_count": len(gpus),
        "tensorflow": tf.__version__,
        "cuda": build.get("cuda_version"),
        "cudnn": build.get("cudnn_version"),
        "python": platform.python_version(),
    }
