"""Small helpers shared by the unit tests."""

import tensorflow as tf

from hpcnn.benchmark import Benchmark
from hpcnn.config import BenchmarkConfig
from hpcnn.models.layers import initial_value
from hpcnn.train_step import Model


def config(**kw) -> BenchmarkConfig:
    """A quick test configuration: few steps, no warm-up, printing every step."""
    base = dict(num_batches=3, num_warmup_batches=0, display_every=1)
    base.update(kw)
    return BenchmarkConfig(**base)


def build(**kw) -> Benchmark:
    return Benchmark(config(**kw))


def init_params(model: Model, seed: int = 1234) -> dict:
    """Initial parameter tensors of ``model``, as every strategy creates them."""
    return {name: initial_value(spec, seed) for name, spec in model.specs.items()}


def snapshot(params: dict) -> dict:
    """Numpy copies of a name -> variable mapping."""
    return {n: tf.convert_to_tensor(v).numpy() for n, v in params.items()}
