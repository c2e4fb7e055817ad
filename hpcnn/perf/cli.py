"""``hpcnn-perf``: the hardware profile, paired A/B comparisons, and the gate's quality.

    hpcnn-perf [--onednn=auto|on|off] profile [--json]
    hpcnn-perf review [BASELINES.json]     (default: baselines/<this machine's profile id>.json)
    hpcnn-perf compare --baseline=REV_OR_DIR [--candidate=REV_OR_DIR] [--perf-matrix=smoke] [--only=SUBSTR]
                       [--min-rounds=8] [--max-rounds=48] [--threshold=0.02] [--restart-every=2]
    hpcnn-perf bisect --good=REV [--bad=HEAD] --only=COMBINATION [--max-rounds=48] [--threshold=0.02]
    hpcnn-perf explain --baseline=REV_OR_DIR [--candidate=REV_OR_DIR] --only=COMBINATION [--pairs=8] [--data_dir=DIR]
    hpcnn-perf gate-quality --mode=paired [--runs=20] [--slowdowns=0.05,0.10] [--json=PATH [--resume]]
    hpcnn-perf gate-quality --mode=stored --baselines-dir=DIR [--runs=20] [--slowdowns=0.10,0.25]
    hpcnn-perf gate-quality --mode=simulate --baselines-file=FILE [--paired-json=PATH] [--combinations=400]
    hpcnn-perf history add RUN.json [...] [--db=perf-history.sqlite]
    hpcnn-perf history changes [--db=...] [--profile=ID] [--only=SUBSTR]
    hpcnn-perf report --out=DIR [--db=...] [--profile=ID] [--only=SUBSTR]

Exit codes: 0 no regression (compare) or the first bad commit named (bisect); 1 a regression (compare)
or no single first bad commit (bisect); 2 usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from typing import List, Optional

from hpcnn import jsonfile
from hpcnn.config import ONEDNN
from hpcnn.perf import gate, history_cli, paired
from hpcnn.perf.bisection import BisectError, Worktrees
from hpcnn.usage import Parser, usage_error
from hpcnn.perf.matrix import Combination, build_matrix

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _usage(message):
    usage_error("hpcnn-perf", message)


def _fraction(text):
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a fraction between 0 and 1")
    return value


def _slowdowns(text):
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        values = []
    if not values or not all(0 <= v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"{text} is not a comma-separated list of fractions, each 0 <= f < 1 "
                                         "(0 alone: unchanged code only)")
    return values


def _pairs_per_process(text):
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text} is not a whole number of round pairs (0: never restart)")
    return int(text)


def _count(noun):
    """An argparse type for a count of ``noun`` that must be a whole number, at least 1."""
    def parse(text):
        if not text.isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError(f"{text} is not a whole number of {noun}, at least 1")
        return int(text)
    return parse


def _at_least_zero(what):
    """An argparse type for a finite number, at least 0, that is ``what`` (nan and inf are refused)."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value >= 0):
            raise argparse.ArgumentTypeError(f"{text} is not {what}, at least 0")
        return value
    return parse


def _parser():
    p = Parser(prog="hpcnn-perf", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--onednn", choices=ONEDNN, default="auto",
                   help="CPU backend for this command and every worker it starts (as hpcnn --onednn)")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    prof = sub.add_parser("profile", help="print this machine's hardware profile id")
    prof.add_argument("--json", action="store_true", help="print the whole profile")
    rev = sub.add_parser("review", help="what a baselines file lets the stored gate see, per combination")
    rev.add_argument("file", nargs="?", help="a baselines file (default: baselines/<this machine's profile>.json)")
    for name in ("compare", "gate-quality", "bisect", "explain"):
        s = sub.add_parser(name)
        s.add_argument("--perf-matrix", default="smoke")
        s.add_argument("--only", default="", help="only combinations whose key contains this")
        s.add_argument("--device", choices=["cpu", "gpu"], default=None)
        if name == "explain":
            continue
        s.add_argument("--min-rounds", type=int, default=8, help="round pairs before the first look (then every 4)")
        s.add_argument("--max-rounds", type=int, default=48, help="most round pairs per combination")
        s.add_argument("--threshold", type=_fraction, default=gate.PAIRED_THRESHOLD,
                       help="smallest drop that fails (paired mode)")
        s.add_argument("--restart-every", type=_pairs_per_process, default=paired.RESTART_EVERY,
                       help="both sides restart as new processes every N round pairs, so that a comparison "
                            "spans several process pairs, and the test flips each process pair's N pairs as one "
                            "(0: never, and the test takes pairs as independent; default %(default)s)")
    cmp_ = sub.choices["compare"]
    cmp_.add_argument("--baseline", required=True, help="git revision or directory (side A)")
    cmp_.add_argument("--candidate", default=".", help="git revision or directory (side B); default: this tree")
    cmp_.add_argument("--plant-slowdown", type=_at_least_zero("a fraction of a step"), default=0.0,
                      help=argparse.SUPPRESS)  # test-only; nan reached round() in the worker's plant search
    bis = sub.choices["bisect"]
    bis.add_argument("--good", required=True, help="a git revision where the combination was fast")
    bis.add_argument("--bad", default="HEAD", help="a later revision where it is slow (default HEAD)")
    bis.add_argument("--data_dir", default=None, help="time the combination on these real-data shards")
    exp = sub.choices["explain"]
    exp.add_argument("--baseline", required=True, help="git revision or directory (side A)")
    exp.add_argument("--candidate", default=".", help="git revision or directory (side B); default: this tree")
    exp.add_argument("--pairs", type=int, default=8, help="round pairs, each timing every variant on both sides")
    exp.add_argument("--data_dir", default=None, help="time the combination on these real-data shards")
    q = sub.choices["gate-quality"]
    q.add_argument("--mode", choices=["paired", "stored", "simulate"], default="paired")
    q.add_argument("--runs", type=_count("runs"), default=20)
    q.add_argument("--slowdowns", type=_slowdowns, default=None,
                   help="planted slowdowns (default 0.05,0.10 paired; 0.10,0.25 stored; 0: none, unchanged "
                        "code only, to count false failures)")
    q.add_argument("--json", help="write every figure here")
    q.add_argument("--resume", action="store_true",
                   help="paired: add the runs to the --json record of earlier sessions on this profile")
    q.add_argument("--baselines-dir", help="stored: where the recorded baselines live")
    q.add_argument("--hardware-profile", help="stored: the profile id of the baselines (default: detected)")
    q.add_argument("--pause-seconds", type=_at_least_zero("a number of seconds"), default=0.0,
                   help="stored: wait between rounds of sessions")
    q.add_argument("--pytest-args", default="", help="stored: extra pytest arguments, e.g. \"-k trivial\"")
    q.add_argument("--rejudge", metavar="RECORD",
                   help="stored: judge the sessions of a --json record again with this gate, against the baselines "
                        "they were judged against, and print what ran beside what this gate decides (measures "
                        "nothing; --json writes the record as judged again)")
    q.add_argument("--show", metavar="RECORD",
                   help="paired: print the runs of a --json record, a row per run, and its summary (measures "
                        "nothing)")
    q.add_argument("--run", type=int, metavar="N",
                   help="paired, with --show: print run N's comparisons instead, a row per combination")
    q.add_argument("--as-machine", metavar="ID",
                   help="stored, with --rejudge: judge every session as run on machine ID (e.g. one the baselines "
                        "do not hold, for a record whose sessions name none)")
    q.add_argument("--baselines-file", help="simulate: a baselines file with several sessions per combination")
    q.add_argument("--paired-json", help="simulate: a --mode=paired --json record to resample pairs from")
    q.add_argument("--combinations", type=_count("combinations"), default=400,
                   help="simulate: size of the simulated matrix")
    q.add_argument("--as-recorded", action="store_true",
                   help="simulate: resample paired process pairs with the signs they were recorded with (default: "
                        "each negated at random, as unchanged code's sides are exchangeable; as recorded, a "
                        "combination keeps its record's own mean ratio as if it were a real change)")
    q.add_argument("--draws", type=_count("matrices"), default=1000, help="simulate: simulated matrices")
    history_cli.add_commands(sub)
    return p


def _device(args):
    import tensorflow as tf

    return args.device or ("gpu" if tf.config.list_physical_devices("GPU") else "cpu")


def _combos(args, device) -> List[Combination]:
    import tensorflow as tf

    from hpcnn import hardware

    available = len(tf.config.list_physical_devices("GPU")) if device == "gpu" else hardware.LOGICAL_CPUS
    try:
        combos = [c for c in build_matrix(args.perf_matrix) if args.only in c.key]
    except ValueError as e:
        _usage(str(e))
    isa = hardware.isa_tier(hardware.cpu_flags())
    runnable = [c for c in combos if c.skip_reason(device, available, isa) is None]
    if not runnable:
        _usage(f"--only={args.only!r} leaves no combination this machine can run in matrix {args.perf_matrix!r}")
    return runnable


def _schedule_shape(args):
    """The sequential schedule the flags ask for, refused if it is not one (checked before TensorFlow loads)."""
    from hpcnn.perf.sequential import MIN_PAIRS, Schedule

    try:
        return Schedule(args.min_rounds, Schedule.step, args.max_rounds, block=args.restart_every or 1)
    except ValueError:
        _usage(f"--min-rounds={args.min_rounds} --max-rounds={args.max_rounds} is not a schedule; "
               f"allowed: {MIN_PAIRS} <= --min-rounds <= --max-rounds")


def _schedule(args, combinations: int = 1):
    """The sequential schedule the flags ask for, refused if its last look cannot reach the gate's level."""
    schedule = _schedule_shape(args)
    last = schedule.alpha_at(len(schedule.looks()) - 1, gate.combination_alpha(gate.DEFAULT_ALPHA, combinations))
    if schedule.smallest_p(args.max_rounds) >= last:
        need = next(n for n in range(args.min_rounds, 256) if schedule.smallest_p(n) < last)
        _usage(f"--max-rounds={args.max_rounds} is too few for the gate to detect anything over {combinations} "
               f"combination(s); allowed: {need} or more")
    return schedule


def cmd_profile(args):
    """``hpcnn-perf profile``: prints this machine's hardware profile and its id."""
    from hpcnn.perf.profile import detect, profile_id

    p = detect()
    print(json.dumps({"id": profile_id(p), **p}, indent=2) if args.json else profile_id(p))
    return 0


def cmd_review(args):
    """``hpcnn-perf review``: the figures the stored gate judges with, per combination of a baselines file."""
    from hpcnn.perf import baselines, review

    path = args.file
    if path is None:
        from hpcnn.perf.profile import detect, profile_id

        path = baselines.path_for(os.path.join(REPO, "baselines"), profile_id(detect()))
    if not os.path.isfile(path):
        _usage(f"no baselines file at {path}; record one with: pytest perf_tests --update-baselines")
    try:
        b = baselines.load(path)
    except baselines.BaselineError as e:
        _usage(str(e))
    if not b.combinations:
        _usage(f"baselines file {path} holds no combination; record with: pytest perf_tests --update-baselines")
    print("\n".join(review.format_review(b, path) + [""] + review.format_backtest(review.backtest(b))))
    return 0


def cmd_compare(args):
    """Each combination: A and B interleaved in round pairs until the sequential gate is sure."""
    from hpcnn.perf import sequential
    from hpcnn.perf.report import format_table

    _schedule_shape(args)  # what the flags alone can refuse is refused before TensorFlow loads (seconds)
    comparisons, alone = {}, {}
    with tempfile.TemporaryDirectory() as work, Worktrees(work) as trees:
        try:
            a_dir, b_dir = (trees.source(s) for s in (args.baseline, args.candidate))
        except BisectError as e:
            _usage(str(e))
        device = _device(args)
        combos = _combos(args, device)
        schedule = _schedule(args, len(combos))
        each = gate.combination_alpha(gate.DEFAULT_ALPHA, len(combos))
        for combo in combos:
            a, b = paired.open_pair(a_dir, b_dir, combo, device, args.plant_slowdown)
            try:
                run_pair = paired.pair_runner(a, b, combo, restart_every=args.restart_every)
                v, ra, rb = sequential.run_sequential(run_pair, schedule, args.threshold, each)
            finally:
                a.close()
                b.close()
            comparisons[combo.key], alone[combo.key] = (ra, rb), v
            print(f"{combo.key}: {v.describe()}", flush=True)
            if v.failed:
                _print_which_stage(combo.key, args)
    verdicts = sequential.family_verdicts(comparisons, schedule, args.threshold, gate.DEFAULT_ALPHA)
    for key, v in verdicts.items():
        if v.failed and not alone[key].failed:  # failed by Holm's step-down, once others had
            print(f"{key}: {v.describe()}", flush=True)
            _print_which_stage(key, args)
    title = (f"paired: A={args.baseline} B={args.candidate}; {len(combos)} combination(s), each at alpha "
             f"{each:.2g}, then Holm's step-down (family-wise {gate.DEFAULT_ALPHA:g})")
    print("\n".join(format_table([(k, v, "") for k, v in verdicts.items()], title)))
    return 1 if any(v.failed for v in verdicts.values()) else 0


def _print_which_stage(key: str, args) -> None:
    from hpcnn.perf.report import investigate_commands

    commands = investigate_commands(key, args.baseline, args.candidate, args.perf_matrix)
    print(f"  which stage: {commands['which stage']}")


def cmd_bisect(args):
    """The first commit in --good..--bad where one combination got slower, by paired comparisons against good."""
    from hpcnn.perf import bisection

    _schedule_shape(args)
    try:
        commits = bisection.commits_between(args.good, args.bad)
    except BisectError as e:
        _usage(str(e))
    device = _device(args)
    combo = _one_combo(args, device)
    print(f"bisect {combo.key}: {len(commits)} commit(s) after {args.good} up to {args.bad}, each judged against "
          f"{args.good} (paired, at most {args.max_rounds} round pairs, threshold {args.threshold:.0%})", flush=True)
    with tempfile.TemporaryDirectory() as work, Worktrees(work) as trees:
        try:
            judge = bisection.PairedJudge(trees, args.good, combo, device, _schedule(args), args.threshold,
                                          gate.DEFAULT_ALPHA, _data_dir(args), args.restart_every)
        except paired.WorkerError as e:
            _usage(f"--good={args.good!r} does not run {combo.key}: {bisection.first_error_line(e)}")
        try:
            result = bisection.search(commits, judge)
        finally:
            judge.close()
    print(_bisect_summary(result, args, commits), flush=True)
    return 0 if result.first_bad else 1


def _data_dir(args):
    """Config overrides for --data_dir (None without it); refuses a path that is not a directory."""
    if not args.data_dir:
        return None
    if not os.path.isdir(args.data_dir):
        _usage(f"--data_dir={args.data_dir!r} is not a directory; allowed: a folder of TFRecord shards")
    return {"data_dir": os.path.abspath(args.data_dir)}


def _one_combo(args, device) -> Combination:
    """The one combination --only names (bisect and explain follow one)."""
    combos = _combos(args, device)
    if len(combos) != 1:
        more = " ..." if len(combos) > 6 else ""
        _usage(f"--only={args.only!r} matches {len(combos)} combinations; {args.command} follows one, allowed: "
               f"a substring of exactly one of {', '.join(c.key for c in combos[:6])}{more}")
    return combos[0]


def cmd_explain(args):
    """Which stage of the step moved from --baseline to --candidate: the variants that isolate each, interleaved."""
    from hpcnn.perf import explain

    device = _device(args)
    combo = _one_combo(args, device)
    if args.pairs < explain.MIN_PAIRS:
        _usage(f"--pairs={args.pairs} is too few for an interval; allowed: {explain.MIN_PAIRS} or more")
    plan = explain.variants(combo, (_data_dir(args) or {}).get("data_dir"))
    print(f"explain {combo.key}: A={args.baseline} B={args.candidate}; {args.pairs} round pairs over "
          f"{', '.join(plan)}", flush=True)
    with tempfile.TemporaryDirectory() as work, Worktrees(work) as trees:
        try:
            a_dir, b_dir = (trees.source(s) for s in (args.baseline, args.candidate))
        except BisectError as e:
            _usage(str(e))
        first = next(iter(plan.values()))
        warm = paired.warmup_steps_for(combo)
        a = paired.Side(a_dir, combo, device, warm, overrides=first)
        try:
            b = paired.Side(b_dir, combo, device, warm, overrides=first)
            try:
                pairs = explain.measure(a, b, combo, plan, args.pairs)
                ops = explain.op_changes(a, b, combo, plan["step"])
            finally:
                b.close()
        finally:
            a.close()
    changes = explain.attribute(pairs)
    print(f"{'stage':26s} {'A ms':>9s} {'B ms':>9s} {'change (95% CI), per step':>30s}")
    for c in changes:
        print(c.describe())
    top = explain.culprit(changes)
    print(f"grew most: {top.stage}, {1e3 * top.change:+.2f} ms per step ({100 * top.change / top.a_step:+.1f}% "
          f"of A's step)" if top else "no stage grew significantly")
    print(f"\nop types whose time changed most (TensorFlow profiler, {ops.steps_a_side} steps a side):")
    print(f"{'op type':36s} {'A ms':>8s} {'B ms':>8s} {'change':>8s} per step, share of op time")
    for row in ops.rows:
        print(row.describe())
    return 0


def _bisect_summary(result, args, commits) -> str:
    minutes = f"{len(result.steps)} commit(s) tried in {result.seconds / 60:.1f} min"
    if not result.candidates:
        step = result.steps[0]
        return (f"no regression to bisect: {args.bad} against {args.good} is {step.outcome} "
                f"({step.describe()}); {minutes}")
    if result.first_bad is None:
        return (f"the first bad commit is one of {', '.join(c[:12] for c in result.candidates)} (skipped commits "
                f"hide which); {minutes}")
    subject = subprocess.run(["git", "log", "-1", "--format=%h %s", result.first_bad], capture_output=True,
                             text=True).stdout.strip()
    step = result.step_of(result.first_bad)
    v = step.verdict
    return (f"first bad commit: {subject}\n  ratio to {args.good}: {v.ratio:.3f} [95% CI {v.ci_low:.3f}, "
            f"{v.ci_high:.3f}] over {v.evidence}; {minutes}")


def cmd_gate_quality(args):
    """``hpcnn-perf gate-quality``: how often the gate fails unchanged code and catches planted slowdowns."""
    from hpcnn.perf import quality

    default = quality.STORED_SLOWDOWNS if args.mode == "stored" else quality.PAIRED_SLOWDOWNS
    slowdowns = args.slowdowns or list(default)
    if args.resume and args.mode != "paired":
        _usage(f"--resume extends a --mode=paired record; --mode={args.mode} has none")
    if args.rejudge and args.mode != "stored":
        _usage(f"--rejudge judges a --mode=stored record again; --mode={args.mode} has none")
    if args.as_machine is not None and not (args.rejudge and args.as_machine.strip()):
        _usage(f"--as-machine={args.as_machine!r} names the machine of a --rejudge record's sessions; allowed: a "
               "non-empty id, with --mode=stored --rejudge=RECORD")
    if args.run is not None and not args.show:
        _usage(f"--run={args.run} picks a run of a --show record; allowed: with --mode=paired --show=RECORD")
    if args.show:
        return _show(args, quality)
    if args.mode == "paired":
        earlier = _resumed(args) if args.resume else None  # refused before TensorFlow loads if unreadable
        _schedule_shape(args)
        device = _device(args)
        combos = _combos(args, device)
        save = _Saver(args.json) if args.json else None
        schedule = _schedule(args, len(combos))
        from hpcnn.perf.profile import detect, profile_id

        pid = profile_id(detect())
        if earlier is not None:
            _check_resumable(args, quality, earlier, pid, combos, slowdowns, schedule)
        _interruptible()
        try:
            record = quality.paired_quality(REPO, combos, device, args.runs, slowdowns, schedule, args.threshold,
                                            gate.DEFAULT_ALPHA, save=save,
                                            profile_id=pid, resume=earlier, restart_every=args.restart_every)
        except KeyboardInterrupt:  # a sitting's end: what was saved is the measurement's, not lost
            kept = interrupted_kept(args.json, save.count if save else 0, earlier is not None)
            print(f"hpcnn-perf: interrupted: {kept}", file=sys.stderr)
            return 130
        print("\n".join(quality.paired_report(record["summary"])))
    elif args.mode == "stored" and args.rejudge:
        record = _rejudged(args.rejudge, quality, args.as_machine)
    elif args.mode == "stored":
        if not args.baselines_dir:
            _usage("--mode=stored needs --baselines-dir (recorded with pytest perf_tests --update-baselines)")
        from hpcnn.perf import baselines
        from hpcnn.perf.profile import detect, profile_id

        pid = args.hardware_profile or profile_id(detect())
        save = _Saver(args.json) if args.json else None
        _interruptible()
        try:
            record = quality.stored_quality(REPO, args.baselines_dir, pid, args.runs, slowdowns,
                                            args.pytest_args.split(), args.pause_seconds,
                                            save=save, on_session=_print_false_failure)
        except baselines.BaselineError as e:
            _usage(str(e))
        except KeyboardInterrupt:
            print(f"hpcnn-perf: interrupted: {stored_kept(args.json, save.count if save else 0)}", file=sys.stderr)
            return 130
        print("\n".join(quality.stored_report(record["summary"])))
    else:
        record = _simulate(args)
    if args.json:
        jsonfile.write_atomically(args.json, record)
    return 0


def _show(args, quality) -> int:
    """``--show``: a paired record's runs (or run ``--run``'s comparisons) as its verdicts judge them now,
    measuring nothing; refused in one line if the record is unreadable or the run is not in it."""
    if args.mode != "paired" or args.resume or args.json:
        _usage(f"--show={args.show} prints a --mode=paired record and measures nothing; allowed: --mode=paired "
               "--show=RECORD [--run=N], without --json or --resume")
    try:
        with open(args.show) as f:
            record = json.load(f)
    except (OSError, ValueError) as e:
        _usage(f"--show={args.show}: not a readable JSON record ({e})")
    try:
        held = quality.runs_held(record)
        if args.run is not None:
            if not 1 <= args.run <= held:
                _usage(f"--run={args.run}: {args.show} holds " + (f"runs 1-{held}" if held else "no run")
                       + (f"; allowed: 1 to {held}" if held else ""))
            lines = quality.run_table(record, args.run - 1)
        else:
            lines = quality.shown_record(record)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as e:
        _usage(f"--show={args.show}: not a --mode=paired record of hpcnn-perf gate-quality "
               f"({type(e).__name__}: {e})")
    print("\n".join(lines))
    return 0


def interrupted_kept(path: Optional[str], saved: int, resumed: bool) -> str:
    """What an interrupted ``--mode=paired`` measurement kept, where it wrote ``saved`` combinations to ``path``
    (``--json``; None without) and extended an earlier record if ``resumed``: said as it is, since a cut before
    the first combination finished wrote nothing."""
    if not path:
        return "nothing was kept (no --json)"
    if saved:
        return (f"{path} keeps the {saved} combination(s) this session measured; the same command with --resume "
                "finishes the run")
    if resumed:
        return f"no combination finished; {path} is as it was, and the same command with --resume goes on from it"
    return f"no combination finished, so {path} was not written; the same command starts the measurement again"


def stored_kept(path: Optional[str], sessions: int) -> str:
    """What an interrupted ``--mode=stored`` measurement kept, where it wrote ``sessions`` sessions to ``path``
    (``--json``; None without). Such a record is not resumed, so the same ``--json`` again would replace it."""
    if not path:
        return "nothing was kept (no --json)"
    if sessions:
        return (f"{path} keeps the {sessions} session(s) it measured, summary included; --mode=stored does not "
                "resume, so measure on into another --json (the same one would be replaced)")
    return f"no session finished, so {path} was not written"


class _Saver:
    """A measurement's ``save``: writes its record to ``path`` (``--json``) atomically and counts the writes in
    ``count``, a cut held back meanwhile, so that the file and the count it reports agree whenever the cut comes."""

    def __init__(self, path: str):
        self.path, self.count = path, 0

    def __call__(self, record: dict) -> None:
        with _cut_held():
            jsonfile.write_atomically(self.path, record)
            self.count += 1


@contextlib.contextmanager
def _cut_held():
    """SIGINT and SIGTERM held back (not lost) while inside: a cut that arrives then lands just after."""
    cuts = {signal.SIGINT, signal.SIGTERM}
    held = signal.pthread_sigmask(signal.SIG_BLOCK, cuts)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _interruptible() -> None:
    """Ctrl-C, ``kill -INT`` and ``kill`` (TERM) end the measurement as KeyboardInterrupt, whose handlers close the
    workers and report what was saved: also when it was started in the background (``nohup ... &``), where the
    shell leaves SIGINT ignored and a plain TERM would end it without closing its workers."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.default_int_handler)


def _rejudged(path: str, quality, machine: Optional[str] = None) -> dict:
    """``--rejudge``: the stored record at ``path`` judged again by this gate (``replay.rejudged``; each session
    as run on ``machine`` where given), its report printed after what ran; refused in one line if it is not such
    a record."""
    from hpcnn.perf import replay
    from hpcnn.perf.baselines import BaselineError

    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError) as e:
        _usage(f"--rejudge={path}: not a readable JSON record ({e})")
    try:
        again = replay.rejudged(record, machine)
        ran, now = quality.summarize_stored(record), quality.summarize_stored(again)
    except (BaselineError, KeyError, TypeError, AttributeError, IndexError, ValueError) as e:
        _usage(f"--rejudge={path}: not a --mode=stored record of hpcnn-perf gate-quality "
               f"({type(e).__name__}: {e}); allowed: a --json record with 'sessions' and 'baselines'")
    print("as it ran:")
    print("\n".join("  " + line for line in quality.stored_levels(ran)))
    print("judged again by this gate, from the same rounds:")
    print("\n".join(quality.stored_report(now)))
    return again


def _print_false_failure(slowdown: float, process) -> None:
    """An unchanged session that failed: its gate's own report, as it happened (its rounds are in the record)."""
    if slowdown == 0 and process.returncode == 1:
        from hpcnn.perf.quality import gate_report

        print("\n".join(["false failure, unchanged code:", *("  " + line for line in gate_report(process.stdout))]),
              flush=True)


def _resumed(args) -> dict:
    """The --json record that --resume extends, as read (``_check_resumable`` checks it)."""
    if not args.json:
        _usage("--resume needs --json=PATH, the record of the earlier sessions")
    try:
        with open(args.json) as f:
            return json.load(f)
    except OSError as e:
        _usage(f"--resume: cannot read {args.json} ({e.strerror})")
    except ValueError as e:
        _usage(f"--resume: {args.json}: {e}")


def _check_resumable(args, quality, earlier, pid, combos, slowdowns, schedule) -> None:
    """Refuses a --resume record that is not the same measurement on this profile."""
    try:
        quality.check_resumable(earlier, pid, combos, slowdowns, schedule, args.threshold, gate.DEFAULT_ALPHA,
                                args.restart_every)
    except (ValueError, AttributeError, TypeError) as e:
        _usage(f"--resume: {args.json}: {e}")


def _simulate(args):
    from hpcnn.perf import baselines, replay

    if not args.baselines_file and not args.paired_json:
        _usage("--mode=simulate needs --baselines-file and/or --paired-json")
    record = {}
    if args.baselines_file:
        try:
            loaded = baselines.load(args.baselines_file)
            record["stored"] = replay.simulate_stored(loaded, args.combinations, args.draws)
        except (baselines.BaselineError, ValueError) as e:
            _usage(str(e))
        r = record["stored"]
        print(f"stored, {r['combinations']} unchanged combinations x {r['draws']} matrices from "
              f"{r['recorded_cases']} recorded sessions (leave one out): {r['matrices_with_a_false_failure']} "
              f"matrices with a false failure, rate {r['rate']:.3f} (target <= {r['alpha']}); parametric "
              f"{r['parametric_rate']:.3f}")
    if args.paired_json:
        try:
            with open(args.paired_json) as f:
                recorded = json.load(f)
            draws, schedule = max(20, args.draws // 5), _schedule(args, args.combinations)
            blocks = replay.design_blocks(recorded, schedule, restart_every=args.restart_every)
            record["paired"] = replay.simulate_paired(blocks, args.combinations, draws, schedule, args.threshold,
                                                      symmetric=not args.as_recorded)
            record["paired"]["power"] = replay.paired_power(recorded, schedule, args.threshold, draws,
                                                            restart_every=args.restart_every)
        except OSError as e:
            _usage(f"--paired-json: cannot read {args.paired_json} ({e.strerror})")
        except (KeyError, TypeError, AttributeError) as e:
            _usage(f"--paired-json: {args.paired_json} is not a gate-quality --mode=paired record ({e!r})")
        except ValueError as e:  # not JSON, or no pairs to resample
            _usage(f"--paired-json: {args.paired_json}: {e}")
        r = record["paired"]
        print(f"paired, {r['combinations']} unchanged combinations x {r['draws']} matrices resampled from "
              f"{sum(r['blocks'].values())} recorded process-pair blocks"
              f"{' as recorded' if args.as_recorded else ', each negated at random'}: "
              f"{r['matrices_with_a_false_failure']} with a false failure, rate {r['rate']:.3f}")
        restarts = {0: "never restarting", 1: "restarting every pair"}.get(
            args.restart_every, f"restarting every {args.restart_every} pairs")
        print(f"the record's own comparisons resampled by process-pair block, {draws} per cell, judged at most "
              f"{args.max_rounds} pairs, {restarts}, at each combination's level (share flagged, median pairs):")
        print("\n".join(replay.power_table(r["power"])))
    return record


def main(argv=None) -> int:
    """Entry point of the ``hpcnn-perf`` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    from hpcnn import backend
    from hpcnn.config import ConfigError

    try:
        backend.apply(args.onednn)  # before TensorFlow loads; paired workers inherit the environment it sets
    except ConfigError as e:
        _usage(str(e))
    commands = {"profile": cmd_profile, "review": cmd_review, "compare": cmd_compare, "bisect": cmd_bisect,
                "explain": cmd_explain, "gate-quality": cmd_gate_quality, "history": history_cli.cmd_history,
                "report": history_cli.cmd_report}
    from hpcnn.perf.paired import WorkerError

    try:
        code = commands[args.command](args)
        sys.stdout.flush()  # a reader gone early (``| head``) shows here, not as a traceback at exit
        return code
    except BrokenPipeError:  # the reader has all it wanted: nothing left to say, and no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except WorkerError as e:  # a revision under test that does not build or run: its own error, in one line
        from hpcnn.perf.bisection import first_error_line

        print(f"hpcnn-perf: error: a perf worker failed: {first_error_line(e)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
