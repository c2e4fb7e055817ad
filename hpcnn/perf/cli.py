"""``hpcnn-perf``: the hardware profile, paired A/B comparisons, and the gate's quality.

    hpcnn-perf [--onednn=auto|on|off] profile [--json]
    hpcnn-perf compare --baseline=REV_OR_DIR --candidate=REV_OR_DIR [--perf-matrix=smoke] [--only=SUBSTR]
    hpcnn-perf gate-quality [--runs=20] [--slowdowns=0.10,0.25] [--only=SUBSTR] [--json=PATH]

Exit codes: 0 no regression, 1 a regression (compare), 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import List

from hpcnn.perf import gate, paired
from hpcnn.perf.matrix import Combination, build_matrix

USAGE_ERROR = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        print(f"hpcnn-perf: error: {message}", file=sys.stderr)
        sys.exit(USAGE_ERROR)


def _parser():
    p = _Parser(prog="hpcnn-perf", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--onednn", choices=["auto", "on", "off"], default="auto",
                   help="CPU backend for this command and every worker it starts (as hpcnn --onednn)")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    prof = sub.add_parser("profile", help="print this machine's hardware profile id")
    prof.add_argument("--json", action="store_true", help="print the whole profile")
    for name in ("compare", "gate-quality"):
        s = sub.add_parser(name)
        s.add_argument("--perf-matrix", default="smoke")
        s.add_argument("--only", default="", help="only combinations whose key contains this")
        s.add_argument("--rounds", type=int, default=6, help="rounds per side (interleaved A B B A)")
        s.add_argument("--threshold", type=float, default=gate.DEFAULT_THRESHOLD)
        s.add_argument("--device", choices=["cpu", "gpu"], default=None)
    cmp_ = sub.choices["compare"]
    cmp_.add_argument("--baseline", required=True, help="git revision or directory (side A)")
    cmp_.add_argument("--candidate", default=".", help="git revision or directory (side B); default: this tree")
    cmp_.add_argument("--plant-slowdown", type=float, default=0.0, help=argparse.SUPPRESS)
    q = sub.choices["gate-quality"]
    q.add_argument("--runs", type=int, default=20)
    q.add_argument("--slowdowns", default="0.10,0.25")
    q.add_argument("--json", help="write every round's figures here")
    return p


def _combos(args, device) -> List[Combination]:
    import tensorflow as tf

    available = len(tf.config.list_physical_devices("GPU")) if device == "gpu" else 4
    try:
        combos = [c for c in build_matrix(args.perf_matrix) if args.only in c.key]
    except ValueError as e:
        _usage(str(e))
    from hpcnn import hardware

    isa = hardware.isa_tier(hardware.cpu_flags())
    runnable = [c for c in combos if c.skip_reason(device, available, isa) is None]
    if not runnable:
        _usage(f"--only={args.only!r} leaves no combination this machine can run in matrix {args.perf_matrix!r}")
    return runnable


def _usage(message):
    print(f"hpcnn-perf: error: {message}", file=sys.stderr)
    sys.exit(USAGE_ERROR)


def _device(args):
    import tensorflow as tf

    return args.device or ("gpu" if tf.config.list_physical_devices("GPU") else "cpu")


def cmd_profile(args):
    from hpcnn.perf.profile import detect, profile_id

    p = detect()
    print(json.dumps({"id": profile_id(p), **p}, indent=2) if args.json else profile_id(p))
    return 0


def cmd_compare(args):
    from hpcnn.perf.report import format_table

    device = _device(args)
    combos = _combos(args, device)
    rows, failed = [], False
    with tempfile.TemporaryDirectory() as work:
        try:
            a_dir, b_dir = (paired.source_tree(s, work) for s in (args.baseline, args.candidate))
        except ValueError as e:
            _usage(str(e))
        try:
            for combo in combos:
                a, b = paired.open_pair(a_dir, b_dir, combo, device, args.plant_slowdown)
                try:
                    base, cur = paired.interleaved_rounds([a, b], combo, args.rounds)
                finally:
                    a.close()
                    b.close()
                v = gate.judge(base, cur, args.threshold)
                failed |= v.failed
                rows.append((combo.key, v, ""))
                print(f"{combo.key}: {v.describe()}", flush=True)
        finally:
            for d in (a_dir, b_dir):
                if d.startswith(work):
                    paired.remove_worktree(d)
    print("\n".join(format_table(rows, f"paired: A={args.baseline} B={args.candidate}")))
    return 1 if failed else 0


def cmd_gate_quality(args):
    """Unchanged vs unchanged, and unchanged vs planted slowdowns, ``runs`` times each."""
    device = _device(args)
    combos = _combos(args, device)
    slowdowns = [0.0] + [float(x) for x in args.slowdowns.split(",") if x]
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    record = {"args": vars(args), "combinations": {}}
    failures = {s: [0] * args.runs for s in slowdowns}  # per slowdown, per run: any combination failed
    for combo in combos:
        sides = {}
        a = paired.Side(here, combo, device, paired.warmup_steps_for(combo))
        for s in slowdowns:
            sides[s] = paired.Side(here, combo, device, paired.warmup_steps_for(combo), s)
        per = record["combinations"][combo.key] = {str(s): [] for s in slowdowns}
        try:
            for run in range(args.runs):
                for s in slowdowns:  # strictly pairwise, as `compare` runs: A B B A ...
                    base, cur = paired.interleaved_rounds([a, sides[s]], combo, args.rounds)
                    v = gate.judge(base, cur, args.threshold)
                    failures[s][run] += v.failed
                    per[str(s)].append({"baseline": base, "current": cur, "ratio": v.ratio,
                                        "verdict": v.verdict})
                print(f"{combo.key} run {run + 1}: " + ", ".join(
                    f"{s:.0%}: {per[str(s)][-1]['ratio']:.3f} {per[str(s)][-1]['verdict']}" for s in slowdowns),
                    flush=True)
        finally:
            for side in [a] + [sides[s] for s in slowdowns]:
                side.close()
    print(f"\ngate quality over {args.runs} runs of {len(combos)} combination(s), {args.rounds} rounds a side:")
    for s in slowdowns:
        flagged = sum(1 for f in failures[s] if f)
        what = "false failures" if s == 0 else "detected"
        print(f"  planted slowdown {s:4.0%}: {flagged}/{args.runs} runs {what}")
    record["runs_flagged"] = {str(s): sum(1 for f in failures[s] if f) for s in slowdowns}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
    return 0


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    from hpcnn import backend
    from hpcnn.config import ConfigError

    try:
        backend.apply(args.onednn)  # before TensorFlow loads; paired workers inherit the environment it sets
    except ConfigError as e:
        _usage(str(e))
    if getattr(args, "rounds", None) is not None and args.rounds < gate.min_rounds():
        _usage(f"--rounds={args.rounds} is too few for the gate to detect anything; "
               f"allowed: {gate.min_rounds()} or more")
    if hasattr(args, "threshold") and not 0 < args.threshold < 1:
        _usage(f"--threshold={args.threshold} must be a fraction between 0 and 1")
    return {"profile": cmd_profile, "compare": cmd_compare, "gate-quality": cmd_gate_quality}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
