"""Input sources: each yields one (images, labels) batch per replica, on its device.

Every source offers ``warm_up()``, ``next_batches()`` (called inside the compiled
step) and ``diagnose(error)`` (a message naming bad input, or None).
"""

from hpcnn.inputs.pipeline import ImagenetInput, StagedInput
from hpcnn.inputs.synthetic import SyntheticInput


def make_input(config, devices, image_shape, dtype):
    """Synthetic data without --data_dir, else the staged real-data pipeline."""
    if config.data_dir is None:
        return SyntheticInput(devices, config.batch_size, image_shape, config.num_classes, dtype,
                              config.tf_random_seed)
    return ImagenetInput(config, devices, config.image_size, dtype)


__all__ = ["ImagenetInput", "StagedInput", "SyntheticInput", "make_input"]
