"""Cluster images/sec on loopback: 1 vs 2 workers, sync vs async, and distributed_replicated's cost.

Each cell is a whole local cluster (``hpcnn.distributed.launcher``): one ps (none
for collective_all_reduce) and W workers of one device each, on this machine's
loopback. The number is worker 0's ``cluster total images/sec`` (all workers'
images over the cluster's timed window). Cells run interleaved, every cell once
per round, so drift spreads over them; the table shows medians over rounds.

    python benchmarks/distributed_table.py --models=trivial,resnet50 --rounds=2 --json=results/distributed.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile

from hpcnn.distributed.launcher import LocalCluster

CELLS = {  # name -> (num_ps, num_workers, flags)
    "ps sync W=1": (1, 1, ["--variable_update=parameter_server"]),
    "ps sync W=2": (1, 2, ["--variable_update=parameter_server"]),
    "ps async W=1": (1, 1, ["--variable_update=parameter_server", "--cross_replica_sync=False"]),
    "ps async W=2": (1, 2, ["--variable_update=parameter_server", "--cross_replica_sync=False"]),
    "dr sync W=2": (1, 2, ["--variable_update=distributed_replicated"]),
    "collective W=2": (0, 2, ["--variable_update=collective_all_reduce"]),
}
# Per-device batch, timed steps, warm-up steps.
SETTINGS = {"trivial": (32, 40, 5), "resnet50": (16, 5, 2), "lenet": (32, 40, 5)}


def run_cell(model: str, cell: str) -> float:
    num_ps, workers, flags = CELLS[cell]
    batch, steps, warmup = SETTINGS[model]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "worker0.json")
        common = [f"--model={model}", f"--batch_size={batch}", f"--num_batches={steps}",
                  f"--num_warmup_batches={warmup}", f"--display_every={steps}", "--cluster_timeout_secs=600", *flags]
        with LocalCluster(num_ps, workers, common) as cluster:
            for k in range(num_ps):
                cluster.start_task("ps", k)
            cluster.start_task("worker", 0, [f"--result_json={path}"])
            for w in range(1, workers):
                cluster.start_task("worker", w)
            run = cluster.wait(1800)
        if not run.ok:
            raise SystemExit("\n".join(f"--- {t.name} exit {t.returncode}\n{t.output[-2000:]}" for t in run.tasks))
        with open(path) as f:
            return json.load(f)["distributed"]["cluster_images_per_sec"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="trivial,resnet50")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", help="write every round's numbers here")
    a = p.parse_args()
    samples = {(m, c): [] for m in a.models.split(",") for c in CELLS}
    for r in range(a.rounds):
        for model in a.models.split(","):
            for cell in CELLS:
                samples[(model, cell)].append(run_cell(model, cell))
                print(f"round {r + 1} {model:9s} {cell:15s} {samples[(model, cell)][-1]:10.2f}", flush=True)
    print()
    print(f"{'model':10s}" + "".join(f"{c:>16s}" for c in CELLS) + f"{'dr/ps cost':>12s}")
    for model in a.models.split(","):
        med = {c: statistics.median(samples[(model, c)]) for c in CELLS}
        cost = 1 - med["dr sync W=2"] / med["ps sync W=2"]
        print(f"{model:10s}" + "".join(f"{med[c]:16.2f}" for c in CELLS) + f"{cost:12.1%}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({f"{m}|{c}": v for (m, c), v in samples.items()}, f, indent=2)


if __name__ == "__main__":
    main()
