"""Run in a fresh process by test_backend.py: a model's logits under one CPU backend and layout.

    python -m unit_tests.backend_probe --onednn=on --data_format=NCHW --model=tiny_resnet --out=F.npz

Writes the logits of the same weights and images (made in NHWC, transposed for
NCHW) in inference and training mode, and whether oneDNN really ran.
"""

import argparse


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--onednn", required=True)
    p.add_argument("--data_format", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    from hpcnn import backend

    backend.apply(a.onednn)  # before TensorFlow loads
    import numpy as np
    import tensorflow as tf

    from hpcnn.model import Model
    from unit_tests.helpers import config, init_params

    model = Model(config(model=a.model, data_format=a.data_format, num_classes=10))
    params = init_params(model)
    size = model.spec.image_size
    images = tf.random.stateless_normal([2, size, size, 3], [1, 2])
    if a.data_format == "NCHW":
        images = tf.transpose(images, [0, 3, 1, 2])
    out = {f"training_{t}": model.logits(params, images, t)[0].numpy() for t in (False, True)}
    np.savez(a.out, onednn=backend.onednn_enabled(), **out)


if __name__ == "__main__":
    main()
