"""The perf matrix: model x variable_update x data_format x devices x precision."""

from __future__ import annotations

import dataclasses
import itertools
from typing import List, Optional

from hpcnn import hardware
from hpcnn.config import BenchmarkConfig, ConfigError


@dataclasses.dataclass(frozen=True)
class Combination:
    """One cell of the matrix, and how many steps a timed round runs."""

    model: str
    variable_update: str
    data_format: str
    num_devices: int
    precision: str
    batch_size: int
    steps_per_round: int
    use_nccl: bool = False

    @property
    def key(self) -> str:
        """The combination's name in tests, baselines and tables."""
        nccl = "-nccl" if self.use_nccl else ""
        return (f"{self.model}-{self.variable_update}{nccl}-{self.data_format}-{self.num_devices}dev-"
                f"{self.precision}-b{self.batch_size}")

    def config(self, device: str, **overrides) -> BenchmarkConfig:
        """The ``BenchmarkConfig`` of this combination on ``device`` (``overrides`` replace fields)."""
        kw = dict(model=self.model, variable_update=self.variable_update, data_format=self.data_format,
                  num_gpus=self.num_devices, precision=self.precision, batch_size=self.batch_size,
                  device=device, use_nccl=self.use_nccl, num_warmup_batches=0)
        kw.update(overrides)
        return BenchmarkConfig(**kw)

    def skip_reason(self, device: str, available_devices: int, cpu_isa: Optional[str] = None) -> Optional[str]:
        """Why this machine cannot run the combination (or should not time it), or None.

        What the config itself refuses on ``device`` (NCCL or float16 on a CPU) is
        skipped with the config's own message; the rest is the matrix's choice.
        ``cpu_isa``: the CPU's tier (``hardware.isa_tier``); bfloat16 is not timed where it is emulated.
        """
        try:
            self.config(device)
        except ConfigError as e:
            return str(e)
        if device == "cpu" and self.data_format == "NCHW":
            return "NCHW is the GPU layout; the CPU runs NHWC"
        if device == "cpu" and self.precision == "bf16" and cpu_isa and not hardware.has_native_bf16(cpu_isa):
            return (f"bf16 is emulated on this CPU ({cpu_isa}: no AVX512-BF16 or AMX) and slower than fp32; "
                    "a figure of the emulation is not worth gating")
        if device == "gpu" and self.precision == "bf16":
            return "the GPU matrix measures float16"
        if self.num_devices > available_devices:
            return f"needs {self.num_devices} devices, this machine has {available_devices}"
        return None


# Smoke: a few minutes on a 2-core CPU, yet every mode, both device counts, a real convolutional model in
# fp32 on every CPU, and bf16 where the CPU has bfloat16 hardware.
_SMOKE = [
    Combination("trivial", "parameter_server", "NHWC", 1, "fp32", 32, 30),
    Combination("trivial", "replicated", "NHWC", 2, "fp32", 32, 20),
    Combination("trivial", "independent", "NHWC", 2, "fp32", 32, 20),
    Combination("lenet", "parameter_server", "NHWC", 1, "fp32", 32, 30),
    Combination("tiny_resnet", "replicated", "NHWC", 2, "fp32", 32, 20),
    Combination("alexnet", "parameter_server", "NHWC", 1, "fp32", 16, 3),
    Combination("alexnet", "parameter_server", "NHWC", 1, "bf16", 16, 3),
]

_FULL_MODELS = {"trivial": (64, 50), "alexnet": (128, 10), "resnet50": (64, 5), "inception3": (64, 5),
                "vgg16": (32, 5)}


def _full() -> List[Combination]:
    combos = []
    for (model, (batch, steps)), fmt, n, prec in itertools.product(
            _FULL_MODELS.items(), ("NCHW", "NHWC"), (1, 2, 4, 8), ("fp32", "fp16", "bf16")):
        modes = [("parameter_server", False)] if n == 1 else [
            ("parameter_server", False), ("replicated", False), ("replicated", True), ("independent", False)]
        combos += [Combination(model, mode, fmt, n, prec, batch, steps, nccl) for mode, nccl in modes]
    return combos


MATRICES = {"smoke": lambda: list(_SMOKE), "full": _full}


def build_matrix(name: str) -> List[Combination]:
    """The combinations of matrix ``name``; raises ValueError naming the known matrices."""
    if name not in MATRICES:
        raise ValueError(f"--perf-matrix={name!r} is not allowed; allowed: {', '.join(MATRICES)}")
    return MATRICES[name]()
