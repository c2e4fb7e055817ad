"""Image processing for training: decode, distort or centre-crop, resize, normalise."""

from __future__ import annotations

import tensorflow as tf

CENTRAL_FRACTION = 0.875


def distorted(encoded: tf.Tensor, bbox: tf.Tensor, size: int) -> tf.Tensor:
    """Random crop around the bounding boxes, decoding only the crop, then flip and colour."""
    shape = tf.image.extract_jpeg_shape(encoded)
    begin, crop, _ = tf.image.sample_distorted_bounding_box(
        shape, bounding_boxes=bbox, min_object_covered=0.1, aspect_ratio_range=(0.75, 1.33),
        area_range=(0.05, 1.0), max_attempts=10, use_image_if_no_bounding_boxes=True)
    window = tf.stack([begin[0], begin[1], crop[0], crop[1]])
    image = tf.io.decode_and_crop_jpeg(encoded, window, channels=3, dct_method="INTEGER_FAST")
    image = tf.image.resize(image, [size, size], method="bilinear")
    image = tf.image.random_flip_left_right(image)
    image = tf.image.random_brightness(image, 32.0)
    image = tf.image.random_saturation(image, 0.5, 1.5)
    return tf.clip_by_value(image, 0.0, 255.0)


def central(encoded: tf.Tensor, size: int) -> tf.Tensor:
    """--nodistortions: the central 87.5% of the image, resized."""
    image = tf.io.decode_jpeg(encoded, channels=3, dct_method="INTEGER_FAST")
    image = tf.image.central_crop(image, CENTRAL_FRACTION)
    return tf.image.resize(image, [size, size], method="bilinear")


def normalize(image: tf.Tensor, dtype) -> tf.Tensor:
    """[0, 255] -> [-1, 1] in ``dtype`` (the compute dtype, halving copies for 16-bit)."""
    return tf.cast(image * (1.0 / 127.5) - 1.0, dtype)
