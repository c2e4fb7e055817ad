"""Input-only throughput: hpcnn's parallel pipeline against a naive sequential one.

Same shards, same work (decode, distort or central crop, resize to 224x224,
normalise, batch); the naive pipeline has no parallel reads or calls and no
prefetch. Both are built first, then timed in interleaved rounds. A third row
times hpcnn's full ``--input_only`` step (the pipeline plus staging copies).

    hpcnn-data make-synthetic --out /tmp/imagenet --num-images 1024 --height 375 --width 500
    python benchmarks/input_pipeline.py --data_dir=/tmp/imagenet
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import tensorflow as tf

from hpcnn.benchmark import Benchmark
from hpcnn.config import BenchmarkConfig
from hpcnn.inputs import pipeline, records
from hpcnn.stats import interleaved, throughput


def timed(iterator, batches, batch_size):
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)[1].numpy()
    return batch_size * batches / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data_dir", required=True)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--batches", type=int, default=8, help="batches per round")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--nodistortions", action="store_true")
    p.add_argument("--json")
    a = p.parse_args()
    shards = records.list_shards(a.data_dir)
    distort = not a.nodistortions
    ours = iter(pipeline.process_images(pipeline.read_records(shards), 224, distort, tf.float32, a.batch_size, 1))
    naive = iter(pipeline.naive_pipeline(shards, 224, distort, tf.float32, a.batch_size))
    staged = Benchmark(BenchmarkConfig(model="resnet50", data_dir=a.data_dir, input_only=True,
                                       batch_size=a.batch_size, distortions=distort, num_warmup_batches=0))
    sides = {"hpcnn pipeline": lambda: timed(ours, a.batches, a.batch_size),
             "naive sequential": lambda: timed(naive, a.batches, a.batch_size),
             "hpcnn --input_only": lambda: throughput(a.batch_size, staged.run_steps(a.batches)[0])}
    for run in sides.values():
        run()  # warm-up: tracing, file caches, autotuning
    rounds = {k: [] for k in sides}
    for r in range(a.rounds):
        for name in interleaved(list(sides), r):
            rounds[name].append(sides[name]())
            print(f"round {r + 1} {name:20s} {rounds[name][-1]:8.1f} images/sec", flush=True)
    med = {k: statistics.median(v) for k, v in rounds.items()}
    for k, v in med.items():
        print(f"{k:20s} {v:8.1f} images/sec (median of {a.rounds})")
    print(f"ratio hpcnn pipeline / naive: {med['hpcnn pipeline'] / med['naive sequential']:.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "rounds": rounds, "medians": med}, f, indent=2)


if __name__ == "__main__":
    main()
