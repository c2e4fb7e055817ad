"""images/sec of every --variable_update mode at N = 1 and N = 2 devices, side by side.

Each cell is one `hpcnn` process (its own logical-device split), run in an
interleaved order (all modes of one model and N one after another, repeated for
``--rounds``) so drift spreads over the modes; the table shows medians. The last
column is the cost of aggregation: 1 - replicated / independent.

    python benchmarks/variable_update_table.py --models=trivial,alexnet,resnet50 --rounds=1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MODES = {"ps": ["--variable_update=parameter_server"],
         "ps_staged": ["--variable_update=parameter_server", "--staged_vars"],
         "replicated": ["--variable_update=replicated"],
         "independent": ["--variable_update=independent"]}
# Per-device batch, timed steps and warm-up steps per model on this 2-core CPU.
SETTINGS = {"trivial": (32, 50, 5), "alexnet": (32, 8, 2), "resnet50": (16, 5, 2), "lenet": (32, 50, 5)}


def run_cell(model, n, mode, extra):
    batch, steps, warmup = SETTINGS[model]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "r.json")
        cmd = ["hpcnn", f"--model={model}", f"--batch_size={batch}", f"--num_gpus={n}", "--device=cpu",
               f"--num_batches={steps}", f"--num_warmup_batches={warmup}", f"--display_every={steps}",
               f"--result_json={path}", *MODES[mode], *extra]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(path) as f:
            return json.load(f)["images_per_sec"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="trivial,alexnet,resnet50")
    p.add_argument("--devices", default="1,2")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--json", help="write the table here")
    p.add_argument("extra", nargs="*", help="further hpcnn flags, e.g. --precision=bf16")
    a = p.parse_args()
    table = {}
    for model in a.models.split(","):
        for n in (int(x) for x in a.devices.split(",")):
            cells = {m: [] for m in MODES}
            for _ in range(a.rounds):
                for mode in MODES:
                    cells[mode].append(run_cell(model, n, mode, a.extra))
                    print(f"{model} N={n} {mode}: {cells[mode][-1]:.2f}", file=sys.stderr, flush=True)
            table[f"{model} N={n}"] = {m: statistics.median(v) for m, v in cells.items()}
    head = f"{'model':<16}" + "".join(f"{m:>13}" for m in MODES) + f"{'aggr. cost':>12}"
    print(head)
    for key, row in table.items():
        cost = 1 - row["replicated"] / row["independent"]
        print(f"{key:<16}" + "".join(f"{row[m]:13.2f}" for m in MODES) + f"{cost:12.1%}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(table, f, indent=2)


if __name__ == "__main__":
    main()
