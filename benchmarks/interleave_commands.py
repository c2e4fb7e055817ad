"""Whole commands timed in interleaved rounds, each run a fresh process.

For what cannot share a process: two CPU backends (oneDNN is fixed when
TensorFlow loads), or hpcnn against another program such as the original
tf_cnn_benchmarks. Every side is a shell command printing tf_cnn_benchmarks'
``total images/sec: X`` line; round r runs every side once, in an order that
rotates each round, so the machine's drift hits all sides alike. Prints each
run's figure, per side the median, and per side the median over rounds of its
ratio to the first side (pairs taken within one round).

    python benchmarks/interleave_commands.py --rounds=3 \\
        --side "onednn=hpcnn --onednn=on --model=resnet50 --batch_size=16 --num_batches=10" \\
        --side "default=hpcnn --onednn=off --model=resnet50 --batch_size=16 --num_batches=10"
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time

from hpcnn.stats import interleaved

TOTAL = re.compile(r"^total images/sec: ([0-9.]+)", re.M)


def run_once(command: str, timeout_s: float) -> float:
    """Runs ``command`` in a shell; returns its ``total images/sec``.

    Raises:
      RuntimeError: it failed, timed out, or printed no total (with its output's tail).
    """
    try:
        p = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{command!r} ran longer than {timeout_s:g} s") from None
    found = TOTAL.findall(p.stdout)
    if p.returncode != 0 or not found:
        tail = (p.stdout + p.stderr)[-1500:]
        raise RuntimeError(f"{command!r} exited {p.returncode} without a total images/sec line:\n{tail}")
    return float(found[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--side", action="append", required=True, metavar="NAME=COMMAND",
                   help="a side: its name and a shell command (repeat; the first is the reference)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--timeout", type=float, default=1800, help="seconds one run may take")
    p.add_argument("--json", help="write every run's figure here")
    a = p.parse_args(argv)
    sides = {}
    for spec in a.side:
        name, sep, command = spec.partition("=")
        if not sep or not name or not command.strip():
            p.error(f"--side {spec!r} is not NAME=COMMAND")
        if name in sides:
            p.error(f"--side name {name!r} given twice")
        sides[name] = command
    if a.rounds < 1:
        p.error(f"--rounds={a.rounds} must be at least 1")
    names = list(sides)
    figures = {n: [] for n in names}
    started = time.time()
    for r in range(a.rounds):
        for name in interleaved(names, r):
            figures[name].append(run_once(sides[name], a.timeout))
            print(f"round {r + 1} {name}: {figures[name][-1]:.2f} images/sec", flush=True)
    ref = names[0]
    medians = {n: statistics.median(v) for n, v in figures.items()}
    ratios = {n: statistics.median(x / y for x, y in zip(figures[n], figures[ref])) for n in names}
    print(f"\n{'side':<24} {'median':>10}  {'ratio to ' + ref:>14}   (medians of {a.rounds} rounds)")
    for n in names:
        print(f"{n:<24} {medians[n]:>10.2f}  {ratios[n]:>14.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"sides": sides, "rounds": a.rounds, "images_per_sec": figures, "medians": medians,
                       "median_ratio_to_first": ratios, "wall_s": time.time() - started}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
