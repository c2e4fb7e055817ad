"""Hardware profiles: which hardware and software a throughput figure belongs to.

A profile is a flat dict (``detect``). Its *identity* is every field that changes
throughput: on a CPU runner the CPU model, its family and model numbers (cloud VMs
give several microarchitectures one model name), its vector/matrix ISA tier, the CPU
backend (oneDNN on or off), the usable cores and TensorFlow's version; on a GPU
runner the GPU model, memory, count, compute capability, MIG mode, driver major
version, and the TensorFlow, CUDA and cuDNN versions. Every identity field shows
in the id, and a baselines file recorded on one identity never judges another
(``differences``).

A profile names a kind of machine, not one machine: two VMs of one profile can run one
workload 15-25% apart where another workload runs alike on both. ``machine_id`` names the
one machine (``HPCNN_MACHINE_ID`` where its owner names it, else this boot of it), so
that a baselines file knows which machines its sessions ran on.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from typing import Dict, List, Optional

from hpcnn import hardware

_CPU_NOISE = r"\((r|tm)\)|\bintel\b|\bcpu\b|\bprocessor\b|@.*$|\b\d+-core\b|\b(platinum|gold|silver|bronze)\b"
_GPU_NOISE = r"\bnvidia\b|\btesla\b|\bgeforce\b|\bhbm\d*e?\b|\bpcie\b|\bsxm\d*\b"
NVIDIA_SMI_QUERY = "name,memory.total,driver_version,compute_cap,mig.mode.current"


def slug(name: str, noise: str) -> str:
    """Lower-case, dash-separated short form of a hardware name."""
    s = re.sub(noise, " ", name.lower())
    return "-".join(re.findall(r"[a-z0-9]+", s)) or "unknown"


def parse_nvidia_smi(text: str) -> List[dict]:
    """One dict per GPU from ``nvidia-smi --query-gpu=NVIDIA_SMI_QUERY --format=csv,noheader,nounits``.

    Fields nvidia-smi cannot report ("[N/A]", "[Not Supported]") come back as None.
    """
    gpus = []
    for line in text.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 5:
            continue
        cells = [None if c.startswith("[") or not c else c for c in cells]
        name, memory, driver, cc, mig = cells
        gpus.append({"name": name, "memory_mib": int(float(memory)) if memory else None, "driver": driver,
                     "compute_capability": cc, "mig": mig})
    return gpus


def _nvidia_smi() -> List[dict]:
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_nvidia_smi(out)


def gpu_fields(tf_names: List[str], smi: List[dict]) -> dict:
    """The GPU part of a profile from TensorFlow's visible GPUs and nvidia-smi's rows (the first GPU's details)."""
    first = smi[0] if smi else {}
    memory = first.get("memory_mib")
    driver = first.get("driver")
    return {
        "gpu_model": tf_names[0] if tf_names else first.get("name"),
        "gpu_memory_gb": round(memory / 1024) if memory else None,
        "gpu_compute_capability": first.get("compute_capability"),
        "gpu_mig": (first.get("mig") or "").lower() == "enabled",
        "gpu_driver_major": driver.split(".")[0] if driver else None,
    }


def detect() -> dict:
    """The profile of this machine: ``hardware.describe()`` plus the GPU details nvidia-smi gives."""
    p = hardware.describe()
    if p["gpu_count"]:
        p.update(gpu_fields(p["gpu_models"], _nvidia_smi()))
    return p


MACHINE_ENV = "HPCNN_MACHINE_ID"
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def machine_id(env: Optional[Dict[str, str]] = None, boot_id_path: str = BOOT_ID) -> Optional[str]:
    """This machine: ``$HPCNN_MACHINE_ID`` if set (a runner that keeps its identity across reboots), else a
    short hash of this boot's id (a cloud VM is a new machine after it restarts: it may land on another host),
    else None (unknown)."""
    env = os.environ if env is None else env
    named = env.get(MACHINE_ENV, "").strip()
    if named:
        return named
    try:
        with open(boot_id_path) as f:
            boot = f.read().strip()
    except OSError:
        return None
    return "boot-" + hashlib.sha256(boot.encode()).hexdigest()[:12] if boot else None


def _major_minor(version: Optional[str]) -> Optional[str]:
    return ".".join(str(version).split(".")[:2]) if version else None


def identity(p: dict) -> Dict[str, object]:
    """The throughput-relevant fields of profile ``p``, normalised (versions to major.minor, cuDNN to major)."""
    if p.get("gpu_count"):
        return {"gpu_model": slug(p.get("gpu_model") or "", _GPU_NOISE), "gpu_memory_gb": p.get("gpu_memory_gb"),
                "gpu_count": p["gpu_count"], "gpu_compute_capability": p.get("gpu_compute_capability"),
                "gpu_mig": bool(p.get("gpu_mig")), "gpu_driver_major": p.get("gpu_driver_major"),
                "tensorflow": _major_minor(p.get("tensorflow")), "cuda": _major_minor(p.get("cuda")),
                "cudnn": str(p["cudnn"]).split(".")[0] if p.get("cudnn") else None}
    return {"cpu_model": slug(p.get("cpu_model") or "", _CPU_NOISE), "cpu_family_model": p.get("cpu_family_model"),
            "cpu_isa": p.get("cpu_isa"),
            "onednn": p.get("onednn"), "cpu_cores": p.get("cpu_cores"),
            "tensorflow": _major_minor(p.get("tensorflow"))}


def profile_id(p: dict) -> str:
    """A short, readable id in which every identity field shows.

    e.g. ``cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21`` (family 25 model 1: Zen 3) or
    ``gpu-h100-80gb-x8-cc9.0-tf2.21-cuda12.5-cudnn9-drv550``.
    """
    i = identity(p)
    if p.get("gpu_count"):
        model, mem = i["gpu_model"], i["gpu_memory_gb"]
        if mem is not None and f"{mem}gb" not in model:
            model += f"-{mem}gb"
        parts = [f"gpu-{model}-x{i['gpu_count']}", "mig" if i["gpu_mig"] else None,
                 f"cc{i['gpu_compute_capability']}" if i["gpu_compute_capability"] else None, f"tf{i['tensorflow']}",
                 f"cuda{i['cuda']}" if i["cuda"] else None, f"cudnn{i['cudnn']}" if i["cudnn"] else None,
                 f"drv{i['gpu_driver_major']}" if i["gpu_driver_major"] else None]
        return "-".join(x for x in parts if x)
    backend = "-onednn" if i["onednn"] else ""
    model = "-".join(x for x in (i["cpu_model"], i["cpu_family_model"]) if x)
    return f"cpu-{model}-{i['cpu_isa']}{backend}-{i['cpu_cores']}c-tf{i['tensorflow']}"


def differences(recorded: dict, detected: dict) -> List[str]:
    """Each identity field in which ``detected`` differs from ``recorded``, as 'field: recorded X, here Y'."""
    a, b = identity(recorded), identity(detected)
    if bool(recorded.get("gpu_count")) != bool(detected.get("gpu_count")):
        return [f"kind: recorded on a {'GPU' if recorded.get('gpu_count') else 'CPU'} runner, "
                f"here a {'GPU' if detected.get('gpu_count') else 'CPU'} runner"]
    return [f"{k}: recorded {a[k]!r}, here {b[k]!r}" for k in a if a[k] != b[k]]
