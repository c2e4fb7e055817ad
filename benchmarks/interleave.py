"""Two hpcnn configurations in one process, timed in interleaved rounds (A B B A ...).

Each side takes hpcnn's own flags; both are built and warmed up first, then their
rounds alternate so the machine's drift hits both alike. Prints per-round
images/sec, the medians and the ratio B / A.

    python benchmarks/interleave.py --common="--model=resnet50 --batch_size=16" \
        --a="--precision=fp32" --b="--precision=bf16" --rounds=4 --steps=5
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics

from hpcnn.benchmark import Benchmark
from hpcnn.cli import parse_config
from hpcnn.stats import interleaved, throughput


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--common", default="", help="hpcnn flags for both sides")
    p.add_argument("--a", default="", help="hpcnn flags for side A")
    p.add_argument("--b", default="", help="hpcnn flags for side B")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=5, help="timed steps per round")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--json", help="write the figures here")
    a = p.parse_args()
    sides = {}
    for name, flags in (("A", a.a), ("B", a.b)):
        config = parse_config(shlex.split(a.common) + shlex.split(flags))
        sides[name] = (Benchmark(config), config.images_per_step)
        sides[name][0].run_steps(a.warmup)
    rounds = {"A": [], "B": []}
    for r in range(a.rounds):
        for name in interleaved(["A", "B"], r):
            bench, batch = sides[name]
            times, _ = bench.run_steps(a.steps)
            rounds[name].append(throughput(batch, times))
            print(f"round {r + 1} {name}: {rounds[name][-1]:.2f} images/sec", flush=True)
    med = {k: statistics.median(v) for k, v in rounds.items()}
    print(f"A [{a.common} {a.a}]: {med['A']:.2f}  B [{a.common} {a.b}]: {med['B']:.2f} images/sec "
          f"(medians of {a.rounds}); B/A = {med['B'] / med['A']:.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "rounds": rounds, "medians": med, "ratio_b_over_a": med["B"] / med["A"]},
                      f, indent=2)


if __name__ == "__main__":
    main()
