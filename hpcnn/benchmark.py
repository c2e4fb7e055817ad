"""A benchmark run: build, warm up, time, and return one result object."""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, List, Optional, Tuple

import tensorflow as tf

from hpcnn import backend
from hpcnn import devices as devices_lib
from hpcnn import hardware, jsonfile
from hpcnn.config import BenchmarkConfig
from hpcnn.inputs import make_input
from hpcnn.stats import speed
from hpcnn.model import Model
from hpcnn.variable_update import make_variable_update

RULE = "-" * 64


@dataclasses.dataclass
class BenchmarkResult:
    """Everything a run measured; flat and JSON-serialisable via ``to_dict``."""

    model: str
    workload: str  # training, forward-only or input-only
    images_per_sec: float  # this process's images over the timed window
    mean_step_images_per_sec: float
    uncertainty: float
    jitter: float
    images_per_step: int
    num_devices: int
    step_times: List[float]
    losses: List[float]
    config: dict
    hardware: dict
    distributed: Optional[dict] = None  # cluster runs: job, task, cluster rate, per-step sync checks

    def to_dict(self) -> dict:
        """The result as plain JSON-serialisable values."""
        return dataclasses.asdict(self)

    def write_json(self, path: str) -> None:
        """Writes the result atomically (a temp file renamed into place)."""
        jsonfile.write_atomically(path, self.to_dict(), indent=2)


class StepRunner:
    """A built benchmark that runs steps; ``measure`` times it. Nothing here prints or keeps time windows.

    Two implementations: ``Benchmark`` (one process, the step a ``tf.function``)
    and ``hpcnn.distributed.worker_task.ClusterWorker`` (a cluster worker, the step
    a graph run in a session). ``config``, ``devices`` (the replicas' devices) and
    ``backend`` (the CPU backend in use) are set by the constructor.
    """

    config: BenchmarkConfig
    devices: List[str]
    backend: backend.Decision

    def run_steps(self, count: int) -> Tuple[List[float], List[float]]:
        """Runs ``count`` steps; returns (per-step seconds, per-step losses)."""
        raise NotImplementedError

    def finish(self, window: Tuple[float, float]) -> List[str]:
        """Called once after the timed window (``time.perf_counter`` start, end); returns lines to print under
        the total (a cluster's total on its chief)."""
        return []

    def record(self) -> Optional[dict]:
        """The result's ``distributed`` field: None outside a cluster."""
        return None

    def close(self) -> None:
        """Releases what the runner holds once it has been measured."""

    def run(self, log: Callable[[str], None] = print) -> BenchmarkResult:
        """Warms up, runs the timed steps printing tf_cnn_benchmarks' lines, returns the result."""
        return measure(self, log)


class Benchmark(StepRunner):
    """One process: the compiled step and the devices it runs on.

    ``step_hook`` (tests and the perf-gate's planted slowdowns only) is called
    inside the compiled step with the loss and must return a tensor to return.
    """

    def __init__(self, config: BenchmarkConfig, step_hook: Optional[Callable] = None):
        self.config = config
        self.backend = backend.check(config.onednn)
        self.devices = devices_lib.setup_devices(config)
        self.model = Model(config)
        self.input = make_input(config, self.devices, self.model.input_shape, self.model.compute_dtype)
        if config.input_only:
            self.strategy = None
            build = _consume
        else:
            self.strategy = make_variable_update(self.model, self.devices, config)
            self.strategy.build()
            build = self.strategy.forward_step if config.forward_only else self.strategy.train_step
        hook = step_hook or (lambda loss: loss)
        # The input's staging ops are stateful: the tf.function runs them with the step by itself.
        self.step = tf.function(lambda: hook(build(self.input.next_batches().batches)), autograph=False,
                                jit_compile=config.xla_compile or None)
        self._guarded(self.input.warm_up)

    def run_steps(self, count: int) -> Tuple[List[float], List[float]]:
        """Runs ``count`` steps; returns (per-step seconds, per-step losses).

        Raises:
          DataError: the input pipeline met a corrupt record or image (named).
        """
        times, losses = [], []
        for _ in range(count):
            start = time.perf_counter()
            loss = float(self._guarded(self.step))  # fetching the loss waits for the step to finish
            times.append(time.perf_counter() - start)
            losses.append(loss)
        return times, losses

    def _guarded(self, fn):
        try:
            return fn()
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
            self.input.raise_if_bad_data(e)
            raise


def measure(runner: StepRunner, log: Callable[[str], None] = print) -> BenchmarkResult:
    """Warms ``runner`` up, times ``num_batches`` steps printing tf_cnn_benchmarks' lines, closes it, returns
    the result."""
    c = runner.config
    print_header(runner, log)
    log("Running warm up")
    runner.run_steps(c.num_warmup_batches)
    log("Done warm up")
    log("Step\tImg/sec\ttotal_loss")
    times, losses = [], []
    window_start = time.perf_counter()
    for step in range(1, c.num_batches + 1):
        t, step_losses = runner.run_steps(1)
        times += t
        losses += step_losses
        if step % c.display_every == 0 or step == c.num_batches and step < c.display_every:
            log(f"{step}\t{speed(c.images_per_step, times)}\t{losses[-1]:.3f}")
    window = (window_start, time.perf_counter())
    total = c.images_per_step * c.num_batches / (window[1] - window[0])
    log(RULE)
    log(f"total images/sec: {total:.2f}")
    for line in runner.finish(window):
        log(line)
    log(RULE)
    s = speed(c.images_per_step, times)
    result = BenchmarkResult(model=c.model, workload=c.workload, images_per_sec=total, mean_step_images_per_sec=s.mean,
                             uncertainty=s.uncertainty, jitter=s.jitter, images_per_step=c.images_per_step,
                             num_devices=len(runner.devices), step_times=times, losses=losses, config=c.to_dict(),
                             hardware=hardware.describe(), distributed=runner.record())
    runner.close()
    return result


def print_header(runner: StepRunner, log: Callable[[str], None]) -> None:
    """The lines before warm-up: what runs, on what, how."""
    c = runner.config
    log(f"TensorFlow:  {tf.__version__}")
    log(f"Model:       {c.model}")
    log(f"Dataset:     {c.data_name} ({c.data_dir or 'synthetic'})")
    log(f"Mode:        {c.workload}")
    if c.is_distributed:
        log(f"Batch size:  {c.images_per_step} per worker, {c.images_per_step * c.num_workers} "
            f"across {c.num_workers} workers")
    else:
        log(f"Batch size:  {c.images_per_step} global")
    log(f"             {c.batch_size} per device")
    log(f"Num batches: {c.num_batches}")
    log(f"Devices:     {runner.devices}")
    log(f"Data format: {c.resolved_data_format}")
    log(f"CPU backend: {runner.backend.line()}")
    log(f"Precision:   {c.precision}{_precision_note(c)}")
    log(f"Optimizer:   {c.optimizer}")
    log(f"Variables:   {c.variable_update}" + (" (staged)" if c.staged_vars else ""))
    if c.is_distributed:
        log(f"Cluster:     worker {c.task_index} of {c.num_workers}, {len(c.ps_hosts)} ps, "
            + ("synchronous" if c.cross_replica_sync else "asynchronous"))
    log(RULE)


def _precision_note(c: BenchmarkConfig) -> str:
    """Says when bfloat16 runs on a CPU without bfloat16 hardware (emulated, slower than fp32)."""
    tier = hardware.isa_tier(hardware.cpu_flags())
    if c.device == "cpu" and c.precision == "bf16" and not hardware.has_native_bf16(tier):
        return (f" (emulated: this CPU ({tier}) has no AVX512-BF16 or AMX, so bf16 trains slower than fp32 here; "
                "see the README)")
    return ""


def _consume(batches):
    """The input-only step: touches every batch so the pipeline must deliver it."""
    touched = [tf.cast(tf.reduce_sum(labels), tf.float32) + tf.cast(tf.reduce_sum(images[:, :1, :1]), tf.float32)
               for images, labels in batches]
    return tf.add_n(touched)


def run_benchmark(config: BenchmarkConfig, log: Callable[[str], None] = print) -> Optional[BenchmarkResult]:
    """Runs what ``config`` asks of this process and writes ``config.result_json`` if set.

    One process, or a cluster worker (``--job_name=worker``): measured, the result
    returned. A ps task (``--job_name=ps``) serves until the workers are done and
    returns None. Cluster failures raise ``hpcnn.distributed.cluster.ClusterError``.
    """
    if config.job_name == "ps":
        from hpcnn.distributed.ps import run_ps

        run_ps(config, log)
        return None
    if config.is_distributed:
        from hpcnn.distributed.worker_task import ClusterWorker

        runner: StepRunner = ClusterWorker(config)
    else:
        runner = Benchmark(config)
    result = measure(runner, log)
    if config.result_json:
        result.write_json(config.result_json)
    return result
