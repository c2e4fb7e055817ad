"""``hpcnn-perf history add|changes`` and ``hpcnn-perf report``: the commands over a history database."""

from __future__ import annotations

import time

from hpcnn.usage import usage_error

DEFAULT_DB = "perf-history.sqlite"


def add_commands(sub) -> None:
    """Adds ``history`` (``add``, ``changes``) and ``report`` to the ``hpcnn-perf`` subcommands ``sub``."""
    history = sub.add_parser("history", help="the throughput history of a branch, in an SQLite file")
    verbs = history.add_subparsers(dest="verb", required=True, parser_class=type(history))
    add = verbs.add_parser("add", help="store runs of pytest perf_tests --benchmark-json=RUN.json")
    add.add_argument("files", nargs="+", metavar="RUN.json")
    changes = verbs.add_parser("changes", help="the commits where a combination's throughput stepped, newest first")
    report = sub.add_parser("report", help="an HTML page of every combination's history, steps marked")
    report.add_argument("--out", required=True, help="directory for index.html and the plots")
    report.add_argument("--jobs", type=int, default=None, help="processes drawing the plots (default: one per core)")
    for p in (add, changes, report):
        p.add_argument("--db", default=DEFAULT_DB, help=f"the history database (default: ./{DEFAULT_DB})")
    for p in (changes, report):
        p.add_argument("--profile", default="", help="only this profile id")
        p.add_argument("--only", default="", help="only combinations whose key contains this")
        p.add_argument("--alpha", type=float, default=0.01,
                       help="chance that a series with no step shows one (default 0.01; 0 < alpha <= 0.2)")
        view = p.add_mutually_exclusive_group()
        view.add_argument("--by-yardstick", dest="by_yardstick", action="store_const", const=True, default=None,
                          help="divide each run by the runner's speed timed beside it, leaving out runs that did "
                               "not time it (default where every run of a combination timed it)")
        view.add_argument("--raw", dest="by_yardstick", action="store_const", const=False,
                          help="images/sec as measured, never divided by the runner's speed")


def _alpha(args) -> float:
    if not 0 < args.alpha <= 0.2:
        usage_error("hpcnn-perf", f"--alpha={args.alpha:g} is out of range; allowed: 0 < alpha <= 0.2")
    return args.alpha


def cmd_history(args) -> int:
    """``history add``: every file parsed before anything is stored; ``history changes``: the steps found."""
    from hpcnn.perf import history

    try:
        if args.verb == "add":
            runs = [history.parse_run(f) for f in args.files]
            with history.History(args.db) as h:
                for run in runs:
                    added = h.add(run)
                    print(f"{run.source}: {'added' if added else 'already stored'} (run {run.run_id}, profile "
                          f"{run.profile_id}, commit {run.commit[:12]}, {len(run.rounds)} combination(s)"
                          f"{', a baseline refresh' if run.refresh else ''})")
            return 0
        alpha = _alpha(args)
        with history.History(args.db) as h:
            found, series, on_yardstick = [], 0, 0
            for pid, key, points, on in h.selected(args.profile, args.only, args.by_yardstick):
                series, on_yardstick = series + 1, on_yardstick + on
                label = f"{pid} {key}{' (on the yardstick)' if on else ''}"
                # newest first: by commit time, and by place in the series where commits share a second
                found += [((points[c.index].commit_time or "", c.index), label, c)
                          for c in history.find_changes(points, alpha)]
    except history.HistoryError as e:
        usage_error("hpcnn-perf", str(e))
    for _, label, change in sorted(found, key=lambda f: f[0], reverse=True):
        print(f"{label}: {change.describe()}")
    if not found:
        print(f"no steps found in {series} combination(s), {on_yardstick} of them on the yardstick")
    return 0


def cmd_report(args) -> int:
    """``report``: writes the HTML page and its plots."""
    from hpcnn.perf import history, trend

    alpha = _alpha(args)
    if args.jobs is not None and args.jobs < 1:
        usage_error("hpcnn-perf", f"--jobs={args.jobs} is out of range; allowed: 1 or more")
    started = time.perf_counter()
    try:
        with history.History(args.db) as h:
            path = trend.write_report(h, args.out, args.profile, args.only, alpha, args.jobs, args.by_yardstick)
    except history.HistoryError as e:
        usage_error("hpcnn-perf", str(e))
    print(f"report written to {path} in {time.perf_counter() - started:.1f} s")
    return 0
