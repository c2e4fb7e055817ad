"""Input sources: each yields one (images, labels) batch per replica, on its device.

Every source is an ``InputSource`` (``source.py``): ``next_batches()`` gives a
step its ``StepInput``; warm-up, a graph session's initializer and the diagnosis
of bad input are the rest of the interface.
"""

from hpcnn.inputs.pipeline import ImagenetInput, StagedInput
from hpcnn.inputs.source import InputSource, StepInput
from hpcnn.inputs.synthetic import SyntheticInput


def make_input(config, devices, image_shape, dtype, first_replica: int = 0, total_replicas: int = 0):
    """Synthetic data without --data_dir, else the staged real-data pipeline.

    ``first_replica``/``total_replicas``: where this process's replicas sit among a
    cluster's (synthetic data gives each its own slice of one global batch; real
    data gives each worker its own reading order).
    """
    if config.data_dir is None:
        return SyntheticInput(devices, config.batch_size, image_shape, config.num_classes, dtype,
                              config.tf_random_seed, first_replica, total_replicas)
    return ImagenetInput(config, devices, config.image_size, dtype, first_replica)


__all__ = ["ImagenetInput", "InputSource", "StagedInput", "StepInput", "SyntheticInput", "make_input"]
