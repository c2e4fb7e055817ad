"""Input sources: each yields one (images, labels) batch per replica, on its device.

Every source offers ``warm_up()``, ``next_batches()`` (called inside the compiled
step) and ``diagnose(error)`` (a message naming bad input, or None). For a graph
session (a cluster worker) also ``warm_up_stages()``, ``initializer`` and, after
``next_batches()``, ``staging_ops`` (each None or empty where nothing applies).
"""

from hpcnn.inputs.pipeline import ImagenetInput, StagedInput
from hpcnn.inputs.synthetic import SyntheticInput


def make_input(config, devices, image_shape, dtype, first_replica: int = 0, total_replicas: int = 0):
    """Synthetic data without --data_dir, else the staged real-data pipeline.

    ``first_replica``/``total_replicas``: where this process's replicas sit among a
    cluster's (synthetic data gives each its own slice of one global batch).
    """
    if config.data_dir is None:
        return SyntheticInput(devices, config.batch_size, image_shape, config.num_classes, dtype,
                              config.tf_random_seed, first_replica, total_replicas)
    return ImagenetInput(config, devices, config.image_size, dtype)


__all__ = ["ImagenetInput", "StagedInput", "SyntheticInput", "make_input"]
