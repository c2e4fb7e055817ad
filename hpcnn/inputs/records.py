"""ImageNet-layout TFRecords: shard discovery, parsing, and naming the bad file.

Shards are named ``train-00000-of-01024`` / ``validation-00000-of-00128`` with the
features written by the usual ImageNet build scripts: ``image/encoded`` (JPEG),
``image/class/label`` (1-based, 0 being background), ``image/object/bbox/*``,
``image/height``, ``image/width``. Labels are shifted to 0-based here.
"""

from __future__ import annotations

import glob
import os
import time
from typing import List, Optional

import tensorflow as tf

from hpcnn.config import ConfigError
from hpcnn.errors import RunError

LABEL_OFFSET = 1  # ImageNet build scripts reserve 0 for "background"

FEATURES = {
    "image/encoded": tf.io.FixedLenFeature([], tf.string),
    "image/class/label": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
    "image/height": tf.io.FixedLenFeature([], tf.int64, default_value=0),
    "image/width": tf.io.FixedLenFeature([], tf.int64, default_value=0),
    **{f"image/object/bbox/{k}": tf.io.VarLenFeature(tf.float32) for k in ("xmin", "ymin", "xmax", "ymax")},
}


class DataError(RunError):
    """A record or image cannot be read; the message names the file."""


def list_shards(data_dir: Optional[str], subset: str = "train") -> List[str]:
    """The sorted shard files of ``subset`` in ``data_dir``.

    Raises:
      ConfigError: the directory is missing or empty, or has no shards of ``subset``.
    """
    if not data_dir or not os.path.isdir(data_dir):
        raise ConfigError(f"--data_dir={data_dir!r} is not a directory")
    if not os.listdir(data_dir):
        raise ConfigError(f"--data_dir={data_dir!r} is empty; make a dataset with `hpcnn-data`")
    shards = sorted(glob.glob(os.path.join(data_dir, f"{subset}-*-of-*")))
    if not shards:
        raise ConfigError(f"--data_dir={data_dir!r} has no {subset}-NNNNN-of-NNNNN TFRecord shards")
    return shards


def parse(record: tf.Tensor):
    """Returns (jpeg bytes, 0-based label, bbox [1, n, 4] as ymin, xmin, ymax, xmax)."""
    f = tf.io.parse_single_example(record, FEATURES)
    box = [tf.sparse.to_dense(f[f"image/object/bbox/{k}"]) for k in ("ymin", "xmin", "ymax", "xmax")]
    bbox = tf.expand_dims(tf.stack(box, axis=1), 0)
    label = tf.cast(f["image/class/label"], tf.int32) - LABEL_OFFSET
    return f["image/encoded"], label, bbox


def find_bad_record(shards: List[str], time_limit_s: Optional[float] = None) -> Optional[str]:
    """Scans ``shards`` in order; describes the first unreadable record or image, or None.

    With ``time_limit_s`` the scan gives up (returning None) after that long.
    """
    deadline = None if time_limit_s is None else time.monotonic() + time_limit_s
    for path in shards:
        if deadline is not None and time.monotonic() > deadline:
            return None
        records = iter(tf.data.TFRecordDataset(path))
        index = 0
        while True:
            try:
                record = next(records)
            except StopIteration:
                break
            except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
                return f"{path}: corrupt record {index} ({first_line(e)})"
            try:
                encoded, label, _ = parse(record)
                tf.io.decode_jpeg(encoded, channels=3)
            except tf.errors.InvalidArgumentError as e:
                return f"{path}: record {index} holds an unreadable example or image ({first_line(e)})"
            if label < 0:
                return f"{path}: record {index} has no image/class/label"
            index += 1
    return None


def first_line(error) -> str:
    """The first line of a TensorFlow error's message, at most 160 characters."""
    return str(getattr(error, "message", error)).strip().splitlines()[0][:160]
