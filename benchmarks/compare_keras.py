"""hpcnn against keras.applications + model.fit: same model, data, batch and precision.

Both trainers are built once in this process, then timed in interleaved rounds
(hpcnn, Keras, hpcnn, Keras, ...) so that the machine's drift hits both alike.
Prints per-round images/sec, the medians and the ratio of medians.

    python benchmarks/compare_keras.py --model=resnet50 --batch_size=16 --precision=fp32
    python benchmarks/compare_keras.py --model=resnet50 --batch_size=16 --precision=bf16
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import tensorflow as tf

from hpcnn.benchmark import Benchmark
from hpcnn.config import BenchmarkConfig
from hpcnn.stats import throughput

KERAS_MODELS = {"resnet50": "ResNet50", "vgg16": "VGG16", "inception3": "InceptionV3"}


def keras_trainer(name, batch_size, precision, images, labels, lr):
    """A compiled keras.applications model and a function timing ``steps`` fit steps."""
    import keras

    keras.mixed_precision.set_global_policy("mixed_bfloat16" if precision == "bf16" else "float32")
    size = int(images.shape[1])
    model = getattr(keras.applications, KERAS_MODELS[name])(weights=None, input_shape=(size, size, 3),
                                                            classes=1000, classifier_activation=None)
    model.compile(optimizer=keras.optimizers.SGD(lr), loss=keras.losses.SparseCategoricalCrossentropy(
        from_logits=True))
    data = tf.data.Dataset.from_tensors((images, labels)).repeat().prefetch(2)

    def run(steps):
        times = []

        class Timer(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                self.start = time.perf_counter()

            def on_train_batch_end(self, batch, logs=None):
                times.append(time.perf_counter() - self.start)

        model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0, callbacks=[Timer()])
        return times

    return run


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="resnet50", choices=sorted(KERAS_MODELS))
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    p.add_argument("--steps", type=int, default=8, help="timed steps per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--json", help="write the figures here")
    a = p.parse_args()

    config = BenchmarkConfig(model=a.model, batch_size=a.batch_size, precision=a.precision, num_warmup_batches=0)
    ours = Benchmark(config)
    images, labels = (tf.cast(t, tf.float32) for t in ours.input.next_batches().batches[0])
    theirs = keras_trainer(a.model, a.batch_size, a.precision, images, labels, config.learning_rate)
    ours.run_steps(a.warmup)
    theirs(a.warmup)

    rounds = {"hpcnn": [], "keras_fit": []}
    for r in range(a.rounds):
        for name, run in (("hpcnn", lambda: ours.run_steps(a.steps)[0]), ("keras_fit", lambda: theirs(a.steps))):
            times = run()
            rounds[name].append(throughput(a.batch_size, times))
            print(f"round {r + 1} {name:9s} {rounds[name][-1]:8.2f} images/sec", flush=True)
    medians = {k: statistics.median(v) for k, v in rounds.items()}
    ratio = medians["hpcnn"] / medians["keras_fit"]
    print(f"{a.model} batch {a.batch_size} {a.precision}: hpcnn {medians['hpcnn']:.2f}, "
          f"keras model.fit {medians['keras_fit']:.2f} images/sec (medians of {a.rounds}); ratio {ratio:.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "rounds": rounds, "medians": medians, "ratio": ratio}, f, indent=2)


if __name__ == "__main__":
    main()
