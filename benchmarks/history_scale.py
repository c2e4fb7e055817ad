"""The history commands at scale: ingest N runs of M combinations, find their steps, draw the report.

The runs are made from the rounds of the sessions recorded in a baselines file
(real noise of this project's runner): each generated combination cycles through
the recorded ones, each commit gets two runs drawn from its recorded sessions, and
every tenth combination steps 10% down at one commit and back at another. Each
command runs as a user runs it (``python -m hpcnn.perf.cli ...``), timed whole;
``report`` runs with each ``--jobs`` value in turn, ``--repeats`` times interleaved
(A B B A ...), on ``--report-only``'s combinations, then once on all of them.

    python benchmarks/history_scale.py --runs=1000 --combinations=100
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIPPED = os.path.join(REPO, "baselines", "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21.json")
PROFILE = "scale-test"
START = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def write_runs(directory: str, runs: int, combinations: int, seed: int = 0) -> list:
    """``runs`` benchmark-json files (two per commit), each with ``combinations`` combinations."""
    with open(SHIPPED) as f:
        recorded = [[s["samples"] for s in c["sessions"]] for c in json.load(f)["combinations"].values()]
    rng = np.random.default_rng(seed)
    commits = runs // 2
    paths = []
    for r in range(runs):
        c = r // 2
        benches = []
        for k in range(combinations):
            sessions = recorded[k % len(recorded)]
            rounds = np.asarray(sessions[rng.integers(len(sessions))]) * (1 + k / combinations)
            if k % 10 == 0 and commits // 3 <= c < 2 * commits // 3:
                rounds = rounds * 0.9  # a planted step and its removal
            benches.append({"name": f"test_throughput[combo{k:02d}]", "extra_info": {
                "combination": f"combo{k:02d}", "images_per_sec_rounds": [float(x) for x in rounds],
                "profile_id": PROFILE, "verdict": "unchanged"}})
        when = START + datetime.timedelta(hours=c)
        data = {"commit_info": {"id": f"{c:040x}", "time": when.isoformat()},
                "datetime": (when + datetime.timedelta(minutes=r % 2)).isoformat(), "benchmarks": benches}
        paths.append(os.path.join(directory, f"run{r:04d}.json"))
        with open(paths[-1], "w") as f:
            json.dump(data, f)
    return paths


def timed(args) -> float:
    start = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "hpcnn.perf.cli", *args], cwd=REPO, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"hpcnn-perf {' '.join(args[:2])} exited {p.returncode}: {p.stderr[-2000:]}")
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--combinations", type=int, default=100)
    p.add_argument("--jobs", default="1,2", help="the report's --jobs values compared")
    p.add_argument("--repeats", type=int, default=2, help="interleaved repeats of each --jobs value")
    p.add_argument("--report-only", default="combo0", help="the combinations of the --jobs comparison")
    p.add_argument("--json", help="write the figures here")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as work:
        paths = write_runs(work, a.runs, a.combinations)
        db = os.path.join(work, "h.sqlite")
        figures = {"runs": a.runs, "combinations": a.combinations,
                   "ingest_s": timed(["history", "add", f"--db={db}", *paths]),
                   "changes_s": timed(["history", "changes", f"--db={db}"])}
        jobs = [int(j) for j in a.jobs.split(",")]
        report = {j: [] for j in jobs}
        for r in range(a.repeats):
            for j in (jobs if r % 2 == 0 else jobs[::-1]):
                report[j].append(timed(["report", f"--db={db}", f"--out={work}/r{j}", f"--jobs={j}",
                                        f"--only={a.report_only}"]))
        figures["report_subset"] = {"only": a.report_only, **{f"jobs={j}": t for j, t in report.items()}}
        figures["report_all_s"] = timed(["report", f"--db={db}", f"--out={work}/all"])
    print(f"{a.runs} runs x {a.combinations} combinations: history add {figures['ingest_s']:.1f} s, "
          f"history changes {figures['changes_s']:.1f} s, report (all, default --jobs) {figures['report_all_s']:.1f} s")
    for j, t in report.items():
        print(f"report --only={a.report_only} --jobs={j}: {', '.join(f'{x:.1f}' for x in t)} s "
              f"(median {statistics.median(t):.1f})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
