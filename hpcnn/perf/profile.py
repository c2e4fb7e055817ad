"""Hardware profiles: which hardware and software a throughput figure belongs to."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Optional

from hpcnn import hardware

_CPU_NOISE = r"\((r|tm)\)|\bintel\b|\bcpu\b|\bprocessor\b|@.*$|\b\d+-core\b|\b(platinum|gold|silver|bronze)\b"
_GPU_NOISE = r"\bnvidia\b|\btesla\b|\bgeforce\b|\bhbm\d*e?\b|\bpcie\b|\bsxm\d*\b"
ISA_FEATURES = ("avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def slug(name: str, noise: str) -> str:
    """Lower-case, dash-separated short form of a hardware name."""
    s = re.sub(noise, " ", name.lower())
    return "-".join(re.findall(r"[a-z0-9]+", s)) or "unknown"


def cpu_isa() -> list:
    """The vector/matrix ISA extensions of this CPU that change CNN throughput."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    except OSError:
        flags = []
    return [x for x in ISA_FEATURES if x in flags]


def gpu_driver() -> Optional[str]:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0] if out else None


def detect() -> dict:
    """The profile of this machine: hardware.describe() plus ISA and GPU driver."""
    p = hardware.describe()
    p["cpu_isa"] = cpu_isa()
    p["gpu_driver"] = gpu_driver() if p["gpu_count"] else None
    return p


def profile_id(p: dict) -> str:
    """A stable, readable id, e.g. ``cpu-xeon-8481c-2c-tf2.21`` or ``gpu-h100-80gb-x8-tf2.21-cuda12.5``."""
    tf_version = "tf" + ".".join(p["tensorflow"].split(".")[:2])
    if p.get("gpu_count"):
        gpu = slug(p["gpu_models"][0], _GPU_NOISE)
        cuda = f"-cuda{p['cuda']}" if p.get("cuda") else ""
        return f"gpu-{gpu}-x{p['gpu_count']}-{tf_version}{cuda}"
    return f"cpu-{slug(p['cpu_model'], _CPU_NOISE)}-{p['cpu_cores']}c-{tf_version}"
