"""``hpcnn-data``: build small ImageNet-layout TFRecord datasets on any machine.

    hpcnn-data make-synthetic --out DIR [--num-images 512] [--num-classes 10] [--shards 4]
    hpcnn-data make-imagenet --out DIR --from IMAGE_DIR [--shards 4]   # class = sub-folder
    hpcnn-data check DIR                                               # names the first bad record

Shards are ``train-NNNNN-of-NNNNN`` (and one ``validation-`` shard per
``--validation-shards``) with the features of the usual ImageNet build scripts:
JPEG ``image/encoded``, 1-based ``image/class/label``, ``image/object/bbox/*``,
``image/height``, ``image/width``. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Iterator, List, Tuple

from hpcnn.usage import Parser, report_usage_error

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")

PROG = "hpcnn-data"


def example(jpeg: bytes, label: int, height: int, width: int, bbox=None):
    """A tf.train.Example in the ImageNet layout; ``bbox`` is (ymin, xmin, ymax, xmax) in [0, 1]."""
    import tensorflow as tf

    def floats(v):
        return tf.train.Feature(float_list=tf.train.FloatList(value=v))

    def ints(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v))

    boxes = [bbox] if bbox else []
    feature = {
        "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg])),
        "image/format": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"JPEG"])),
        "image/class/label": ints([label]),
        "image/height": ints([height]),
        "image/width": ints([width]),
        "image/channels": ints([3]),
        **{f"image/object/bbox/{k}": floats([b[i] for b in boxes])
           for i, k in enumerate(("ymin", "xmin", "ymax", "xmax"))},
        "image/object/bbox/label": ints([label] * len(boxes)),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature))


def write_shards(out: str, subset: str, examples: List, shards: int) -> List[str]:
    """Writes ``examples`` round-robin into ``shards`` files; returns their paths."""
    import tensorflow as tf

    os.makedirs(out, exist_ok=True)
    paths = [os.path.join(out, f"{subset}-{i:05d}-of-{shards:05d}") for i in range(shards)]
    writers = [tf.io.TFRecordWriter(p) for p in paths]
    try:
        for i, ex in enumerate(examples):
            writers[i % shards].write(ex.SerializeToString())
    finally:
        for w in writers:
            w.close()
    return paths


def synthetic_examples(n: int, num_classes: int, height: int, width: int, seed: int) -> Iterator:
    """Smooth random JPEGs (natural-image-like sizes) with a random bounding box each."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    for i in range(n):
        coarse = rng.uniform(0, 255, (1, 6, 8, 3)).astype("float32")
        image = tf.image.resize(coarse, [height, width], method="bicubic")[0]
        image = image + rng.normal(0, 8, (height, width, 3)).astype("float32")
        jpeg = tf.io.encode_jpeg(tf.cast(tf.clip_by_value(image, 0, 255), tf.uint8), quality=90).numpy()
        y0, x0 = rng.uniform(0, 0.4, 2)
        y1, x1 = rng.uniform(0.6, 1.0, 2)
        yield example(jpeg, int(rng.integers(1, num_classes + 1)), height, width, (y0, x0, y1, x1))


def folder_examples(root: str) -> Tuple[List, List[str]]:
    """Examples from IMAGE_DIR/<class>/<image>; classes sorted, labels 1-based."""
    import tensorflow as tf

    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    if not classes:
        raise ValueError(f"--from={root!r} has no class sub-folders (expected IMAGE_DIR/<class>/<image>)")
    examples = []
    for label, name in enumerate(classes, start=1):
        for fname in sorted(os.listdir(os.path.join(root, name))):
            if not fname.lower().endswith(IMAGE_EXTENSIONS):
                continue
            path = os.path.join(root, name, fname)
            data = tf.io.read_file(path)
            try:
                image = tf.io.decode_image(data, channels=3, expand_animations=False)
            except tf.errors.InvalidArgumentError:
                raise ValueError(f"{path}: not a decodable image") from None
            jpeg = data.numpy() if fname.lower().endswith((".jpg", ".jpeg")) else tf.io.encode_jpeg(image).numpy()
            examples.append(example(jpeg, label, int(image.shape[0]), int(image.shape[1])))
    if not examples:
        raise ValueError(f"--from={root!r}: no images ({', '.join(IMAGE_EXTENSIONS)}) in its class sub-folders")
    return examples, classes


def _parser():
    p = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    syn = sub.add_parser("make-synthetic", help="N random JPEGs in ImageNet-layout shards")
    syn.add_argument("--num-images", type=int, default=512)
    syn.add_argument("--num-classes", type=int, default=10)
    syn.add_argument("--height", type=int, default=300)
    syn.add_argument("--width", type=int, default=400)
    syn.add_argument("--seed", type=int, default=0)
    img = sub.add_parser("make-imagenet", help="shards from IMAGE_DIR/<class>/<image>")
    img.add_argument("--from", dest="source", required=True)
    for s in (syn, img):
        s.add_argument("--out", required=True)
        s.add_argument("--shards", type=int, default=4)
        s.add_argument("--validation-shards", type=int, default=1)
    chk = sub.add_parser("check", help="scan every shard; name the first bad record")
    chk.add_argument("data_dir")
    return p


def main(argv=None) -> int:
    """Entry point of the ``hpcnn-data`` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    least = {} if args.command == "check" else {"shards": 1, "validation_shards": 1}
    if args.command == "make-synthetic":  # a 0-pixel side failed in encode_jpeg, a negative seed in numpy
        least.update(num_images=1, num_classes=1, height=1, width=1, seed=0)
    for name, low in least.items():  # before TensorFlow loads: its start-up lines would bury this one
        if getattr(args, name) < low:
            return report_usage_error(PROG, f"--{name.replace('_', '-')}={getattr(args, name)} must be at least {low}")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from hpcnn.config import ConfigError
    from hpcnn.inputs import records

    if args.command == "check":
        try:
            shards = records.list_shards(args.data_dir, "train") + sorted(
                p for p in records.glob.glob(os.path.join(args.data_dir, "validation-*-of-*")))
        except ConfigError as e:
            return report_usage_error(PROG, str(e))
        bad = records.find_bad_record(shards)
        print(f"{PROG}: {bad}" if bad else f"{len(shards)} shard(s) read cleanly")
        return 1 if bad else 0
    if args.command == "make-synthetic":
        examples = list(synthetic_examples(args.num_images, args.num_classes, args.height, args.width, args.seed))
        summary = f"{len(examples)} synthetic images, {args.num_classes} classes"
    else:
        try:
            examples, classes = folder_examples(args.source)
        except (OSError, ValueError) as e:
            return report_usage_error(PROG, str(e))
        summary = f"{len(examples)} images, {len(classes)} classes ({', '.join(classes[:5])}...)"
    n_val = max(1, len(examples) // 10)
    train = write_shards(args.out, "train", examples[n_val:], args.shards)
    val = write_shards(args.out, "validation", examples[:n_val], args.validation_shards)
    print(f"wrote {summary}: {len(train)} train and {len(val)} validation shard(s) in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
