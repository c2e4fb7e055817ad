"""The machine's measured matmul rate: the yardstick for a model's achieved GFLOP/s.

Times a square float32 (or bfloat16) matmul under the CPU backend given, best of
several runs, and prints GFLOP/s. Run it once per backend (oneDNN is fixed when
TensorFlow loads):

    python benchmarks/matmul_peak.py --onednn=on --size=4096
    python benchmarks/matmul_peak.py --onednn=off --dtype=bfloat16
"""

from __future__ import annotations

import argparse
import json
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--onednn", choices=["auto", "on", "off"], default="auto")
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args(argv)
    from hpcnn import backend

    decision = backend.apply(a.onednn)
    import tensorflow as tf

    x = tf.cast(tf.random.stateless_normal([a.size, a.size], [1, 2]), a.dtype)
    y = tf.cast(tf.random.stateless_normal([a.size, a.size], [3, 4]), a.dtype)
    product = tf.function(lambda: tf.reduce_sum(tf.cast(tf.matmul(x, y), tf.float32)))
    product().numpy()
    best = float("inf")
    for _ in range(a.repeats):
        start = time.perf_counter()
        product().numpy()
        best = min(best, time.perf_counter() - start)
    gflops = 2 * a.size ** 3 / best / 1e9
    print(json.dumps({"onednn": decision.onednn, "dtype": a.dtype, "size": a.size, "gflop_per_s": round(gflops, 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
