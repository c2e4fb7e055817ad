"""One validated configuration object per benchmark run.

Everything the engine needs is here, checked once at construction; the engine
never reads flags. Errors name the bad value and what is allowed.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from hpcnn import modes

DEVICES = ("cpu", "gpu")
DATA_FORMATS = ("NHWC", "NCHW")
VARIABLE_UPDATES = modes.names()
JOB_NAMES = ("ps", "worker")
OPTIMIZERS = ("sgd", "momentum", "rmsprop", "adam")
PRECISIONS = ("fp32", "bf16", "fp16")
ONEDNN = ("auto", "on", "off")  # the CPU backend (hpcnn.backend), fixed before TensorFlow loads
DATA_NAMES = ("imagenet", "cifar10")


class ConfigError(ValueError):
    """A configuration value is invalid; the message names it and what is allowed."""


@dataclasses.dataclass(frozen=True)
class BenchmarkConfig:
    """A fully resolved benchmark run. See ``hpcnn --help`` for each field."""

    model: str = "trivial"
    batch_size: int = 32
    num_gpus: int = 1  # devices per process: GPUs, or logical CPU devices with --device=cpu (the original's name)
    device: str = "cpu"
    data_format: Optional[str] = None  # None: NCHW on gpu, NHWC on cpu
    data_dir: Optional[str] = None
    data_name: str = "imagenet"
    distortions: bool = True  # real data only (synthetic data is never distorted)
    input_only: bool = False  # run the input pipeline without a model
    num_classes: int = 1000
    variable_update: str = "parameter_server"
    local_parameter_device: Optional[str] = None  # None: the compute device type
    use_nccl: Optional[bool] = None  # None: NCCL on gpu, implicit copies on cpu
    staged_vars: bool = False
    num_batches: int = 100
    num_warmup_batches: int = 10
    display_every: int = 10
    forward_only: bool = False
    optimizer: str = "sgd"
    init_learning_rate: Optional[float] = None  # None: the model's default
    momentum: float = 0.9
    weight_decay: float = 4e-5
    rmsprop_decay: float = 0.9
    rmsprop_momentum: float = 0.9
    rmsprop_epsilon: float = 1.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-8
    precision: str = "fp32"
    fp16_loss_scale: float = 128.0
    xla_compile: bool = False
    onednn: str = "auto"  # applied by hpcnn.backend.apply before TensorFlow loads; checked by the run
    tf_random_seed: int = 1234
    num_intra_threads: int = 0
    num_inter_threads: int = 0
    result_json: Optional[str] = None
    ps_hosts: Tuple[str, ...] = ()
    worker_hosts: Tuple[str, ...] = ()
    job_name: Optional[str] = None
    task_index: int = 0
    cross_replica_sync: bool = True
    cluster_timeout_secs: float = 120.0  # longest wait for a peer task, and for any one distributed step
    check_copies: bool = False  # distributed: record the global step and copy agreement after every step

    def __post_init__(self):
        from hpcnn.models import get_model, list_models

        _choice("device", self.device, DEVICES)
        if self.model not in list_models():
            raise ConfigError(f"--model={self.model!r} is not a known model; known models: {', '.join(list_models())}")
        _positive("batch_size", self.batch_size)
        _positive("num_gpus", self.num_gpus)
        _positive("num_batches", self.num_batches)
        _positive("display_every", self.display_every)
        _positive("num_classes", self.num_classes)
        if self.num_warmup_batches < 0:
            raise ConfigError(f"--num_warmup_batches={self.num_warmup_batches} must be >= 0")
        _choice("variable_update", self.variable_update, VARIABLE_UPDATES)
        _choice("optimizer", self.optimizer, OPTIMIZERS)
        _choice("precision", self.precision, PRECISIONS)
        _choice("onednn", self.onednn, ONEDNN)
        _choice("data_name", self.data_name, DATA_NAMES)
        if self.data_format is not None:
            _choice("data_format", self.data_format, DATA_FORMATS)
        if self.local_parameter_device is not None:
            _choice("local_parameter_device", self.local_parameter_device, DEVICES)
        if self.init_learning_rate is not None and self.init_learning_rate <= 0:
            raise ConfigError(f"--init_learning_rate={self.init_learning_rate} must be > 0")
        if self.weight_decay < 0:
            raise ConfigError(f"--weight_decay={self.weight_decay} must be >= 0")
        self._check_combinations()
        self._check_cluster()
        get_model(self.model)

    def _check_combinations(self):
        if self.device == "cpu" and self.use_nccl:
            raise ConfigError("--use_nccl=True needs --device=gpu: NCCL all-reduce runs only on NVIDIA GPUs; "
                              "on the CPU use --use_nccl=False (implicit copies)")
        if self.device == "cpu" and self.local_parameter_device == "gpu":
            raise ConfigError("--local_parameter_device=gpu needs --device=gpu; allowed with --device=cpu: cpu")
        if self.device == "cpu" and self.precision == "fp16":
            raise ConfigError("--precision=fp16 is not usable on the CPU (no float16 kernels); "
                              "use --precision=bf16 (or --use_fp16, which means bf16 on the CPU)")
        if self.staged_vars and not modes.get(self.variable_update).stageable:
            allowed = ", ".join(n for n in VARIABLE_UPDATES if modes.get(n).stageable)
            raise ConfigError(f"--staged_vars needs --variable_update={allowed}; "
                              f"received --variable_update={self.variable_update}")
        if self.staged_vars and self.forward_only:
            raise ConfigError("--staged_vars stages variable updates; it has no meaning with --forward_only")
        if self.input_only and self.data_dir is None:
            raise ConfigError("--input_only measures the real-data pipeline; it needs --data_dir")
        if self.data_name != "imagenet":
            raise ConfigError(f"--data_name={self.data_name!r} is not implemented yet; allowed now: imagenet")

    def _check_cluster(self):
        """--ps_hosts/--worker_hosts/--job_name/--task_index and what a cluster run allows."""
        if not (self.ps_hosts or self.worker_hosts or self.job_name):
            if not modes.get(self.variable_update).local:
                raise ConfigError(f"--variable_update={self.variable_update} runs across processes; it needs "
                                  "--worker_hosts, --job_name and --task_index (see `hpcnn-cluster`)")
            return
        if self.job_name is None:
            raise ConfigError("--ps_hosts/--worker_hosts need --job_name; allowed: ps, worker")
        _choice("job_name", self.job_name, JOB_NAMES)
        for flag, hosts in (("ps_hosts", self.ps_hosts), ("worker_hosts", self.worker_hosts)):
            for entry in hosts:
                parse_host(flag, entry)
        everything = list(self.ps_hosts) + list(self.worker_hosts)
        for entry in everything:
            if everything.count(entry) > 1:
                raise ConfigError(f"{entry!r} appears more than once in --ps_hosts/--worker_hosts; "
                                  "every task needs its own host:port")
        if not self.worker_hosts:
            raise ConfigError("--worker_hosts is empty; a cluster needs at least one worker (host:port,...)")
        _choice("variable_update", self.variable_update, modes.cluster_names())
        needs_ps = modes.get(self.variable_update).needs_ps
        if needs_ps and not self.ps_hosts:
            raise ConfigError(f"--variable_update={self.variable_update} keeps master variables on ps tasks; "
                              "give --ps_hosts=host:port,...")
        if not needs_ps and self.ps_hosts:
            raise ConfigError(f"--variable_update={self.variable_update} has no ps tasks; leave --ps_hosts empty")
        hosts = self.ps_hosts if self.job_name == "ps" else self.worker_hosts
        if not 0 <= self.task_index < len(hosts):
            raise ConfigError(f"--task_index={self.task_index} is out of range for --job_name={self.job_name} "
                              f"with {len(hosts)} task(s); allowed: 0..{len(hosts) - 1}")
        if not self.cluster_timeout_secs > 0:
            raise ConfigError(f"--cluster_timeout_secs={self.cluster_timeout_secs} must be > 0")
        refused = [(self.staged_vars, "--staged_vars"), (self.input_only, "--input_only"),
                   (self.xla_compile, "--xla_compile"),
                   (bool(self.use_nccl), "--use_nccl=True (a worker averages its devices' gradients on its first "
                                         "device)")]
        for given, flag in refused:
            if given:
                raise ConfigError(f"{flag} is not supported in a distributed run; run it without --job_name")

    # -- derived values ---------------------------------------------------------
    @property
    def is_distributed(self) -> bool:
        """Whether this process is a task of a cluster (``--job_name`` given)."""
        return self.job_name is not None

    @property
    def num_workers(self) -> int:
        """Worker tasks in the cluster (1 outside one)."""
        return len(self.worker_hosts) if self.is_distributed else 1

    @property
    def resolved_data_format(self) -> str:
        """``--data_format``, or the device's natural layout (NCHW on GPUs, NHWC on CPUs)."""
        if self.data_format is not None:
            return self.data_format
        return "NCHW" if self.device == "gpu" else "NHWC"

    @property
    def resolved_parameter_device(self) -> str:
        """``--local_parameter_device``, or the compute device."""
        return self.local_parameter_device or self.device

    @property
    def resolved_use_nccl(self) -> bool:
        """``--use_nccl``, or True on GPUs."""
        return self.device == "gpu" if self.use_nccl is None else self.use_nccl

    @property
    def learning_rate(self) -> float:
        """``--init_learning_rate``, or the model's default."""
        from hpcnn.models import get_model

        return self.init_learning_rate or get_model(self.model).learning_rate

    @property
    def images_per_step(self) -> int:
        """Images one step of this process trains on: ``batch_size`` on each of its devices (a cluster's
        workers each take this many)."""
        return self.batch_size * self.num_gpus

    @property
    def workload(self) -> str:
        """What a step runs: ``training``, ``forward-only`` or ``input-only``."""
        return "input-only" if self.input_only else "forward-only" if self.forward_only else "training"

    @property
    def image_size(self) -> int:
        """The model's input height and width."""
        from hpcnn.models import get_model

        return get_model(self.model).image_size

    def to_dict(self) -> dict:
        """Every field plus the resolved defaults, JSON-serialisable."""
        d = dataclasses.asdict(self)
        d.update(data_format=self.resolved_data_format, local_parameter_device=self.resolved_parameter_device,
                 use_nccl=self.resolved_use_nccl, init_learning_rate=self.learning_rate,
                 ps_hosts=list(self.ps_hosts), worker_hosts=list(self.worker_hosts))
        return d

    def replace(self, **changes) -> "BenchmarkConfig":
        """A copy with ``changes`` applied, validated again."""
        return dataclasses.replace(self, **changes)


def _choice(name, value, allowed):
    if value not in allowed:
        raise ConfigError(f"--{name}={value!r} is not allowed; allowed: {', '.join(allowed)}")


def parse_host(flag: str, entry: str) -> Tuple[str, int]:
    """``host:port`` -> (host, port); ConfigError naming the entry if malformed."""
    host, sep, port = entry.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--{flag} entry {entry!r} is not host:port with a port in 1..65535")
    return host, int(port)


def _positive(name, value):
    if not isinstance(value, int) or value < 1:
        raise ConfigError(f"--{name}={value!r} must be a positive integer")
