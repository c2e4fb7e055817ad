"""``hpcnn``: tf_cnn_benchmarks' flags in, one BenchmarkConfig out, one library call.

The CPU backend (``--onednn``) must be fixed before TensorFlow loads, so flags
are parsed first (absl needs no TensorFlow), the backend is applied, and only
then are TensorFlow and the engine imported.
"""

from __future__ import annotations

import os
import sys
from typing import List, Optional

from absl import flags

from hpcnn import backend
from hpcnn.config import (
    DATA_FORMATS, DEVICES, ONEDNN, OPTIMIZERS, PRECISIONS, VARIABLE_UPDATES, BenchmarkConfig, ConfigError)
from hpcnn.errors import RunError
from hpcnn.usage import USAGE_ERROR


def _import_tensorflow_quietly():
    """Imports TensorFlow with its native start-up notices silenced.

    TF 2.21 writes oneDNN and CPU-feature notices straight to file descriptor 2
    during import, ignoring TF_CPP_MIN_LOG_LEVEL; they would bury our one-line
    errors. A user who sets TF_CPP_MIN_LOG_LEVEL themselves sees everything.
    """
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ or "tensorflow" in sys.modules:
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    sys.stderr.flush()
    os.dup2(devnull, 2)
    try:
        import tensorflow  # noqa: F401
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _define_flags() -> flags.FlagValues:
    f = flags.FlagValues()
    d = BenchmarkConfig
    flags.DEFINE_string("model", d.model, "Model name (see the registry).", flag_values=f)
    flags.DEFINE_integer("batch_size", d.batch_size, "Batch size per device.", flag_values=f)
    flags.DEFINE_integer("num_gpus", d.num_gpus, "Number of devices (logical CPU devices with --device=cpu).",
                         flag_values=f)
    flags.DEFINE_string("device", d.device, f"Compute device: {'|'.join(DEVICES)}.", flag_values=f)
    flags.DEFINE_string("data_format", None, f"{'|'.join(DATA_FORMATS)}; default NCHW on gpu, NHWC on cpu.",
                        flag_values=f)
    flags.DEFINE_string("data_dir", None, "TFRecord directory; synthetic data when unset.", flag_values=f)
    flags.DEFINE_string("data_name", d.data_name, "imagenet|cifar10.", flag_values=f)
    flags.DEFINE_boolean("distortions", d.distortions, "Distort real images (no effect on synthetic data).",
                         flag_values=f)
    flags.DEFINE_boolean("input_only", d.input_only, "Run only the input pipeline (needs --data_dir).",
                         flag_values=f)
    flags.DEFINE_string("variable_update", d.variable_update, "|".join(VARIABLE_UPDATES), flag_values=f)
    flags.DEFINE_string("local_parameter_device", None, "cpu|gpu: where parameter_server keeps variables.",
                        flag_values=f)
    flags.DEFINE_boolean("use_nccl", None, "All-reduce with NCCL in replicated mode (GPU only).", flag_values=f)
    flags.DEFINE_boolean("staged_vars", d.staged_vars, "Stage variable reads/updates (parameter_server).",
                         flag_values=f)
    flags.DEFINE_integer("num_batches", d.num_batches, "Timed steps.", flag_values=f)
    flags.DEFINE_integer("num_warmup_batches", d.num_warmup_batches, "Untimed warm-up steps.", flag_values=f)
    flags.DEFINE_integer("display_every", d.display_every, "Print every N steps.", flag_values=f)
    flags.DEFINE_boolean("forward_only", d.forward_only, "Inference only.", flag_values=f)
    flags.DEFINE_string("optimizer", d.optimizer, "|".join(OPTIMIZERS), flag_values=f)
    flags.DEFINE_float("init_learning_rate", None, "Learning rate; default per model.", flag_values=f)
    flags.DEFINE_float("momentum", d.momentum, "Momentum (momentum optimizer).", flag_values=f)
    flags.DEFINE_float("weight_decay", d.weight_decay, "L2 weight decay.", flag_values=f)
    for name in ("rmsprop_decay", "rmsprop_momentum", "rmsprop_epsilon", "adam_beta1", "adam_beta2",
                 "adam_epsilon", "fp16_loss_scale"):
        flags.DEFINE_float(name, getattr(d, name), name.replace("_", " ") + ".", flag_values=f)
    flags.DEFINE_string("precision", None, f"{'|'.join(PRECISIONS)} (default fp32).", flag_values=f)
    flags.DEFINE_boolean("use_fp16", False, "Mixed precision: float16 on gpu, bfloat16 on cpu.", flag_values=f)
    flags.DEFINE_boolean("xla_compile", d.xla_compile, "Compile the step with XLA.", flag_values=f)
    flags.DEFINE_string("onednn", d.onednn, f"CPU backend: {'|'.join(ONEDNN)} (auto: oneDNN where it is faster; "
                        "see the README).", flag_values=f)
    flags.DEFINE_boolean("mkl", None, "tf_cnn_benchmarks' name: --mkl is --onednn=on, --nomkl --onednn=off.",
                         flag_values=f)
    flags.DEFINE_integer("tf_random_seed", d.tf_random_seed, "Seed for weights and synthetic data.",
                         flag_values=f)
    flags.DEFINE_integer("num_intra_threads", 0, "Intra-op threads (0: TensorFlow's choice).", flag_values=f)
    flags.DEFINE_integer("num_inter_threads", 0, "Inter-op threads (0: TensorFlow's choice).", flag_values=f)
    flags.DEFINE_string("result_json", None, "Write the result object here as JSON.", flag_values=f)
    flags.DEFINE_list("ps_hosts", [], "host:port,... of the ps tasks.", flag_values=f)
    flags.DEFINE_list("worker_hosts", [], "host:port,... of the worker tasks.", flag_values=f)
    flags.DEFINE_string("job_name", None, "ps|worker.", flag_values=f)
    flags.DEFINE_integer("task_index", 0, "Index of this task in its job.", flag_values=f)
    flags.DEFINE_boolean("cross_replica_sync", True, "Synchronous distributed updates.", flag_values=f)
    flags.DEFINE_float("cluster_timeout_secs", d.cluster_timeout_secs,
                       "Distributed: longest wait for a peer task to answer, and for any one step.", flag_values=f)
    flags.DEFINE_boolean("check_copies", d.check_copies, "Distributed: after every step record the global step "
                         "and whether every copy of the weights agrees (one extra fetch per step).", flag_values=f)
    return f


def parse_flags(argv: List[str]) -> dict:
    """Parses tf_cnn_benchmarks-style ``argv`` (without the program name) into config fields.

    Imports no TensorFlow, so the CPU backend can be applied from the result.

    Raises:
      ConfigError: unknown flag, unparsable value, or contradicting flags.
    """
    f = _define_flags()
    try:
        rest = f(["hpcnn"] + list(argv))
    except flags.Error as e:
        raise ConfigError(str(e)) from None
    if len(rest) > 1:
        raise ConfigError(f"unexpected argument {rest[1]!r}; flags look like --name=value")
    values = {name: f[name].value for name in f}
    precision = values.pop("precision")
    use_fp16 = values.pop("use_fp16")
    if precision is None:
        precision = ("fp16" if values["device"] == "gpu" else "bf16") if use_fp16 else "fp32"
    elif use_fp16 and precision == "fp32":
        raise ConfigError("--use_fp16 contradicts --precision=fp32; give one of them")
    values["precision"] = precision
    mkl = values.pop("mkl")
    if mkl is not None:
        implied = "on" if mkl else "off"
        if f["onednn"].present and values["onednn"] != implied:
            raise ConfigError(f"--{'' if mkl else 'no'}mkl contradicts --onednn={values['onednn']}; give one of them")
        values["onednn"] = implied
    values["ps_hosts"] = tuple(values["ps_hosts"])
    values["worker_hosts"] = tuple(values["worker_hosts"])
    return values


def parse_config(argv: List[str]) -> BenchmarkConfig:
    """``parse_flags`` then the validated config (which imports TensorFlow for the model registry).

    Raises:
      ConfigError: unknown flag, unparsable value, or an invalid configuration.
    """
    return BenchmarkConfig(**parse_flags(argv))


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the ``hpcnn`` console script; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if "--help" in argv or "-h" in argv or "--helpfull" in argv:
        print("usage: hpcnn [--flag=value ...]  (tf_cnn_benchmarks' flags)\n")
        print(_define_flags().get_help())
        return 0
    config = None
    try:
        values = parse_flags(argv)
        backend.apply(values["onednn"])
        _import_tensorflow_quietly()
        config = BenchmarkConfig(**values)
        from hpcnn.benchmark import run_benchmark

        run_benchmark(config)
    except ConfigError as e:
        return _fail(e, USAGE_ERROR, config)
    except RunError as e:
        return _fail(e, 1, config)
    return 0


def _fail(error: Exception, code: int, config: Optional[BenchmarkConfig]) -> int:
    """Prints the one error line; a cluster task then leaves at once.

    TensorFlow's server cannot be stopped and may block interpreter exit while
    its peers are gone, so a task that started one exits with output flushed.
    """
    print(f"hpcnn: error: {error}", file=sys.stderr)
    if config is not None and config.is_distributed:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
