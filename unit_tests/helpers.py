"""Small helpers shared by the unit tests."""

import os

import tensorflow as tf

from hpcnn.benchmark import Benchmark
from hpcnn.config import BenchmarkConfig
from hpcnn.data_tool import example, write_shards
from hpcnn.models.layers import initial_value
from hpcnn.model import Model

# The checkout under test: subprocesses run here import its hpcnn
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The committed baselines files, one per profile
SHIPPED_BASELINES = os.path.join(REPO, "baselines")
SHIPPED_BASELINES_FILES = sorted(f for f in os.listdir(SHIPPED_BASELINES) if f.endswith(".json"))


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


def write_bad_dataset(tmp_path, kind):
    """Two shards of six 40x40 images, one bad: an undecodable image (kind "image") or a corrupt record
    ("record"); returns the path of the shard holding it."""
    good = [example(tf.io.encode_jpeg(tf.zeros([40, 40, 3], tf.uint8)).numpy(), 1, 40, 40) for _ in range(6)]
    if kind == "image":
        good[3] = example(b"this is not a jpeg", 1, 40, 40)
    paths = write_shards(str(tmp_path), "train", good, 2)
    if kind == "record":
        shard = tmp_path / os.path.basename(paths[1])
        data = bytearray(shard.read_bytes())
        data[len(data) // 2] ^= 0xFF  # flip a byte inside a record: its CRC no longer matches
        shard.write_bytes(bytes(data))
    return paths[1]
