"""The real-data input pipeline: three parallel stages, software-pipelined.

Stage A (host): ``read_records`` reads shards in parallel (interleaved, several
files at once) and shuffles with a bounded buffer; ``process_images`` decodes and
distorts in parallel across cores, non-deterministically, so a slow image never
holds up the others (the guide's ``parallel_stack`` idea), and assembles one
batch per device. Stage B copies a batch from the host staging buffer to each
device's staging buffer. Stage C is the training step.

``StagedInput`` pipelines them as the guide describes. Warm-up runs A0, then
A1 B0; every step then runs C(n) B(n+1) A(n+2) together, so when a step starts
its inputs are already on its devices and the copies overlap compute. Each
staging buffer holds exactly one batch. (TF 2's StagingArea works only in
compat.v1 graphs, so the buffers are variables, which tf.function orders:
C reads a buffer before B overwrites it, B reads the host buffer before A does.)
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import tensorflow as tf

from hpcnn.inputs import preprocessing, records
from hpcnn.inputs.source import InputSource, StepInput

AUTOTUNE = tf.data.AUTOTUNE


def read_records(shards: Sequence[str], parallel_reads: int = 8, shuffle_buffer: int = 1000,
                 seed: int = 0) -> tf.data.Dataset:
    """Stage A, I/O: serialized records from ``shards``, read in parallel, shuffled, repeated."""
    files = tf.data.Dataset.from_tensor_slices(list(shards)).shuffle(len(shards), seed=seed).repeat()
    ds = files.interleave(lambda f: tf.data.TFRecordDataset(f, buffer_size=8 << 20),
                          cycle_length=min(parallel_reads, len(shards)), num_parallel_calls=AUTOTUNE,
                          deterministic=False)
    return ds.shuffle(shuffle_buffer, seed=seed)


def process_images(records_ds: tf.data.Dataset, image_size: int, distortions: bool, dtype, batch_size: int,
                   num_devices: int) -> tf.data.Dataset:
    """Stage A, processing: (images [devices, batch, H, W, 3], labels [devices, batch])."""
    ds = records_ds.map(_image_fn(image_size, distortions, dtype), num_parallel_calls=AUTOTUNE,
                        deterministic=False)
    ds = ds.batch(batch_size, drop_remainder=True).batch(num_devices, drop_remainder=True)
    return ds.prefetch(1)


def naive_pipeline(shards: Sequence[str], image_size: int, distortions: bool, dtype,
                   batch_size: int) -> tf.data.Dataset:
    """The same work done sequentially (no parallel reads or calls, no prefetch): a yardstick."""
    ds = tf.data.Dataset.from_tensor_slices(list(shards)).repeat().flat_map(tf.data.TFRecordDataset)
    options = tf.data.Options()
    options.autotune.enabled = False
    options.experimental_optimization.map_parallelization = False
    options.experimental_optimization.inject_prefetch = False
    return ds.map(_image_fn(image_size, distortions, dtype)).batch(batch_size, drop_remainder=True).with_options(
        options)


def _image_fn(image_size: int, distortions: bool, dtype):
    """record -> (normalised image, 0-based label): the per-image work of stage A."""

    def one(record):
        encoded, label, bbox = records.parse(record)
        if distortions:
            image = preprocessing.distorted(encoded, bbox, image_size)
        else:
            image = preprocessing.central(encoded, image_size)
        return preprocessing.normalize(image, dtype), label

    return one


class StagedInput(InputSource):
    """Host and device staging buffers around a dataset (stage A), one batch each.

    ``dataset`` yields a tuple whose every component has a leading device
    dimension; component 0 (the images) is transposed to NCHW on the device
    when ``data_format`` asks for it.
    """

    def __init__(self, dataset: tf.data.Dataset, devices: Sequence[str], data_format: str = "NHWC"):
        self.devices = list(devices)
        self.data_format = data_format
        specs = dataset.element_spec
        # The host is the CPU of the task that owns the devices (a cluster worker's own CPU).
        host = self.devices[0].split("/device:")[0] + "/device:CPU:0"
        with tf.device(host):
            if tf.executing_eagerly():
                self.iterator = iter(dataset)
                self.initializer = None
            else:  # a cluster worker's graph: the session runs ``initializer`` once
                self.iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
                self.initializer = self.iterator.initializer
            self.host = [tf.Variable(tf.zeros(s.shape, s.dtype), trainable=False, name=f"host_stage{k}")
                         for k, s in enumerate(specs)]
        self.staged: List[List[tf.Variable]] = []
        for i, device in enumerate(self.devices):
            with tf.device(device):
                self.staged.append([tf.Variable(tf.zeros(self._device_shape(k, s.shape[1:]), s.dtype),
                                                trainable=False, name=f"device{i}_stage{k}")
                                    for k, s in enumerate(specs)])

    def _device_shape(self, component, shape):
        if component == 0 and self.data_format == "NCHW":
            return [shape[0], shape[3], shape[1], shape[2]]
        return shape

    def _stage_a(self, after=()):
        """Host buffer <- the next element of the dataset (once ``after`` has run); returns the assigns."""
        with tf.control_dependencies(after):
            element = self.iterator.get_next()
            return [var.assign(value, read_value=False) for var, value in zip(self.host, element)]

    def _stage_b(self, after=()):
        """Each device's buffer <- its slice of the host buffer (once ``after`` has run).

        Returns (the host values read, the assigns).
        """
        with tf.control_dependencies(after):
            values = [tf.identity(v) for v in self.host]
        assigns = []
        for i, device in enumerate(self.devices):
            with tf.device(device):
                for k, (var, value) in enumerate(zip(self.staged[i], values)):
                    x = value[i]
                    if k == 0 and self.data_format == "NCHW":
                        x = tf.transpose(x, [0, 3, 1, 2])
                    assigns.append(var.assign(x, read_value=False))
        return values, assigns

    def _stage_ba(self, after=()):
        """B then A: A overwrites the host buffer only after B has read it."""
        values, assigns = self._stage_b(after)
        return assigns + self._stage_a(values)

    def warm_up_stages(self):
        """What fills the pipeline, in order: A0, then A1 B0 (each builds and returns one step's ops)."""
        return [self._stage_a, self._stage_ba]

    def next_batches(self) -> StepInput:
        """Inside the step: this step's per-device batches (C(n)), and B(n+1) then A(n+2) as its staging.

        The orders C before B and B before A are explicit, so they hold in a plain
        graph too.
        """
        batches = []
        for device, buffers in zip(self.devices, self.staged):
            with tf.device(device):
                batches.append(tuple(tf.identity(v) for v in buffers))
        return StepInput(batches, tf.group(self._stage_ba([t for b in batches for t in b])))


class ImagenetInput(StagedInput):
    """The staged pipeline over ImageNet-layout shards in ``config.data_dir``.

    Raises:
      ConfigError: a missing or empty --data_dir, or no training shards in it.
    """

    DIAGNOSE_SECONDS = 120

    def __init__(self, config, devices, image_size: int, dtype, first_replica: int = 0):
        self.shards = records.list_shards(config.data_dir, "train")
        seed = config.tf_random_seed + first_replica  # every worker reads the shards in its own order
        ds = process_images(read_records(self.shards, seed=seed), image_size, config.distortions,
                            dtype, config.batch_size, len(devices))
        super().__init__(ds, devices, config.resolved_data_format)

    def diagnose(self, error: Exception) -> Optional[str]:
        """Names the file behind a pipeline ``error`` (scanning for at most a bounded time)."""
        found = records.find_bad_record(self.shards, time_limit_s=self.DIAGNOSE_SECONDS)
        if found:
            return f"bad input data: {found}"
        return (f"bad input data ({records.first_line(error)}); `hpcnn-data check {self.shards[0].rsplit('/', 1)[0]}` "
                "scans every shard for it")
