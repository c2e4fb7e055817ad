"""How good the gate is on this machine: false failures of unchanged code, planted slowdowns caught.

* ``paired_quality``: unchanged against unchanged, and against planted slowdowns
  (real work added inside the step), with the sequential paired gate, ``runs``
  times per combination.
* ``stored_quality``: whole ``pytest perf_tests`` sessions against recorded
  baselines, unchanged and planted, one after another (spread over time as a
  runner's merge requests are).
* ``simulate_stored`` / ``simulate_paired``: a matrix of many combinations
  (400 by default, the size of a full GPU matrix) of unchanged code, drawn from
  recorded samples: how often would any combination fail?
"""

from __future__ import annotations

import copy
import datetime
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from hpcnn.jsonfile import write_atomically
from hpcnn.perf import gate, paired, sequential, stored
from hpcnn.perf.baselines import Baselines, load as load_baselines, path_for
from hpcnn.perf.matrix import Combination
from hpcnn.stats import interleaved


PAIRED_SLOWDOWNS = (0.05, 0.10)  # the levels of the paired bar: 5% caught in 16/20 runs, 10% in 19/20
STORED_SLOWDOWNS = (0.10, 0.25)  # the stored bar's levels: 10% in 16/20 sessions, 25% in 19/20
# the bars, {level: the share of runs or sessions a plant must be caught in}; unchanged code: none fails.
# Stored mode asks them only of the sessions whose MDS was below the plant's drop in throughput (``plant_drop``)
PAIRED_BARS = {0.05: 16 / 20, 0.10: 19 / 20}
STORED_BARS = {0.10: 16 / 20, 0.25: 19 / 20}
FRESH_WORKERS = "fresh per run"  # a record's "workers": each run starts its own (records without it kept theirs)


def plant_drop(slowdown: float) -> float:
    """The drop in throughput that a planted ``slowdown`` makes: work that makes each step ``1 + slowdown`` times
    as long leaves ``1 / (1 + slowdown)`` of the images/sec, so a planted 25% is a 20% drop. The gate's ratio and
    MDS are in throughput, so a plant is within a session's reach where its MDS is below this, not below the
    slowdown itself."""
    return slowdown / (1.0 + slowdown)


def paired_quality(here: str, combos: List[Combination], device: str, runs: int, slowdowns: Sequence[float],
                   schedule: sequential.Schedule, threshold: float, alpha: float, log=print,
                   save: Optional[Callable[[dict], None]] = None, profile_id: str = "",
                   resume: Optional[dict] = None, restart_every: int = paired.RESTART_EVERY) -> dict:
    """``runs`` runs of the matrix, each a sequential comparison of unchanged code against itself and each slowdown.

    Every run starts its own workers (A, an unchanged B and one B per slowdown) for each combination and
    closes them once the combination is judged, as a merge request's comparison does. A worker process
    runs at its own steady offset, which rebuilding the benchmark inside it does not remove (alexnet here:
    one unchanged B ran 2.0-2.5% below its A in three quiet runs, every one of their 40 pairs below 1):
    workers kept through all runs would make the runs twenty looks at one draw of that offset instead of
    twenty draws; inside a comparison both sides restart every ``restart_every`` pairs, as ``compare``'s
    do (``paired.pair_runner``). A planted slowdown is one code change through the whole measurement: the
    first run searches its amount of work and every later run plants the same (``planted_units``), each
    process measuring its size afresh. ``save`` gets the record after every run, so an interrupted measurement
    keeps the runs it finished.

    ``resume``: a record of earlier sessions of the same measurement (``check_resumable``) that these runs
    extend; a run of the smoke matrix at three levels costs about an hour on a 2-core CPU, so twenty
    runs take more than one sitting.
    """
    if schedule.block != (restart_every or 1):
        raise ValueError(f"the test's blocks must be the process pairs: schedule.block={schedule.block}, "
                         f"restart_every={restart_every}")
    levels = [0.0] + [s for s in slowdowns if s > 0]
    each = gate.combination_alpha(alpha, len(combos))
    record: Dict[str, dict] = resume or {
        **_measurement(profile_id, combos, levels, schedule, threshold, alpha, restart_every),
        "combination_alpha": each,
        "sessions": [], "combinations": {c.key: {str(s): [] for s in levels} for c in combos}}
    session = len(record["sessions"])
    record["sessions"].append({"started": time.time(), "runs": 0, "startup_s": {c.key: 0.0 for c in combos}})
    for run in range(runs):
        for combo in combos:
            per = record["combinations"][combo.key]
            started = time.perf_counter()
            a, sides = paired.open_sides(here, here, combo, device, levels, planted_units(per))
            record["sessions"][session]["startup_s"][combo.key] += time.perf_counter() - started
            try:
                for s in interleaved(levels, run):
                    t0 = time.perf_counter()
                    run_pair = paired.pair_runner(a, sides[s], combo, restart_every=restart_every)
                    v, ra, rb = sequential.run_sequential(run_pair, schedule, threshold, each)
                    per[str(s)].append({"a": ra, "b": rb, "ratio": v.ratio, "verdict": v.verdict,
                                        "pairs": len(ra), "mds": v.mds, "seconds": time.perf_counter() - t0,
                                        "session": session, "planted": sides[s].planted_fraction,
                                        "units": sides[s].planted_units, "pids": run_pair.processes})
            finally:
                for side in [a, *sides.values()]:
                    side.close()
            log(f"run {run + 1} {combo.key}: " + ", ".join(
                f"{s:.0%} {per[str(s)][-1]['ratio']:.3f} {per[str(s)][-1]['verdict']} "
                f"({per[str(s)][-1]['pairs']} pairs)" for s in levels))
        record["sessions"][session]["runs"] = run + 1
        record["summary"] = summarize_paired(record)
        if save:
            save(record)
    return record


def planted_units(per_level: Dict[str, list]) -> Dict[float, int]:
    """{slowdown: the amount of work its first recorded comparison planted}: a measurement's later runs, resumed
    or not, plant the same code change as its first (``paired.PLANT``)."""
    return {float(s): runs[0]["units"][0] for s, runs in per_level.items() if runs and runs[0].get("units")}


def check_resumable(record: dict, profile_id: str, combos: List[Combination], slowdowns: Sequence[float],
                    schedule: sequential.Schedule, threshold: float, alpha: float,
                    restart_every: int = paired.RESTART_EVERY) -> None:
    """Raises ValueError naming the first thing in which ``record`` is not the measurement asked for now:
    another hardware profile (figures of two machines do not pool), other combinations, levels, schedule,
    threshold, alpha, restarts, settling chunks, plant sizing or round lengths (records made before restarts,
    before fresh processes settled, before a side kept one amount of planted work, or before rounds had a step
    per chunk, have none and are refused)."""
    if not isinstance(record, dict) or not isinstance(record.get("sessions"), list):
        raise ValueError("not a record of hpcnn-perf gate-quality --mode=paired --json (no sessions list)")
    levels = [0.0] + [s for s in slowdowns if s > 0]
    asked = {**_measurement(profile_id, combos, levels, schedule, threshold, alpha, restart_every),
             "combinations": sorted(c.key for c in combos)}
    for field, want in asked.items():
        have = record.get(field)
        if field == "combinations":
            have = sorted(have or {})
        if have != want:
            raise ValueError(f"cannot resume: the record's {field} is {have!r}, this run's {want!r}")


def round_steps_by_combination(combos: Sequence[Combination]) -> Dict[str, int]:
    """{combination: the steps of a side's round in a pair} (``paired.round_steps``), as a record holds them."""
    return {c.key: paired.round_steps(c) for c in combos}


def _measurement(profile_id: str, combos: Sequence[Combination], levels: Sequence[float],
                 schedule: sequential.Schedule, threshold: float, alpha: float, restart_every: int) -> dict:
    """What makes two paired quality records the same measurement: written in a record, checked on resume."""
    return {"profile_id": profile_id, "levels": list(levels), "schedule": vars(schedule), "threshold": threshold,
            "alpha": alpha, "workers": FRESH_WORKERS, "restart_every": restart_every,
            "settle_chunks": paired.SETTLE_CHUNKS, "plant": paired.PLANT,
            "round_steps": round_steps_by_combination(combos)}


def summarize_paired(record: dict) -> dict:
    """Runs flagged per slowdown (any combination failed), per-combination counts, wall time per run.

    A run's verdicts are the matrix's after Holm's step-down (``family_failures``); ``failed_alone`` counts the
    verdicts each comparison reached at its own Bonferroni share of the level, as it ran.
    """
    combos = record["combinations"]
    levels = record["levels"]
    runs = min(len(c[str(s)]) for c in combos.values() for s in levels)
    failures = family_failures(record, runs)
    out = {"runs": runs, "sessions": len(record["sessions"]), "flagged": {}, "per_combination": {},
           "median_run_seconds": {}}
    for s in levels:
        key = str(s)
        out["flagged"][key] = sum(any(failures[key][name][r] for name in combos) for r in range(runs))
        out["median_run_seconds"][key] = statistics.median(
            sum(c[key][r]["seconds"] for c in combos.values()) for r in range(runs))
    for name, c in combos.items():
        out["per_combination"][name] = {
            str(s): {"failed": sum(failures[str(s)][name]),
                     "failed_alone": sum(x["verdict"] == gate.REGRESSION for x in c[str(s)][:runs]),
                     "median_pairs": statistics.median(x["pairs"] for x in c[str(s)][:runs]),
                     "median_mds": statistics.median(x["mds"] for x in c[str(s)][:runs]),
                     "median_ratio": statistics.median(x["ratio"] for x in c[str(s)][:runs]),
                     "planted_measured": statistics.median(x["planted"] for x in c[str(s)][:runs])} for s in levels}
    # seconds spent starting every combination's workers, per run (workers kept through a session: per session)
    fresh = record.get("workers") == FRESH_WORKERS
    out["startup_seconds"] = statistics.median(sum(x["startup_s"].values()) / (x["runs"] if fresh else 1)
                                               for x in record["sessions"] if x["runs"])
    return out


def family_failures(record: dict, runs: int) -> Dict[str, Dict[str, List[bool]]]:
    """{level: {combination: whether each of the first ``runs`` runs failed}} after Holm's step-down over the
    matrix of each run and level (``sequential.family_verdicts`` on the recorded pairs, at the record's
    schedule, threshold and family-wise alpha)."""
    schedule = sequential.Schedule.recorded(record["schedule"])
    out: Dict[str, Dict[str, List[bool]]] = {}
    for s in record["levels"]:
        key = str(s)
        out[key] = {name: [] for name in record["combinations"]}
        for r in range(runs):
            comparisons = {name: (c[key][r]["a"], c[key][r]["b"]) for name, c in record["combinations"].items()}
            verdicts = sequential.family_verdicts(comparisons, schedule, record["threshold"], record["alpha"])
            for name, v in verdicts.items():
                out[key][name].append(v.failed)
    return out


def paired_table(summary: dict) -> List[str]:
    """A Markdown table of a paired record's summary: per combination and level, how many runs failed (false
    failures unchanged, catches planted; after Holm's step-down, with the count at the combination's own
    Bonferroni level where it differs), the median ratio, pairs and MDS, and the median plant as measured."""
    levels = sorted(summary["flagged"], key=float)
    runs = summary["runs"]
    rows = []
    for name, per in sorted(summary["per_combination"].items()):
        cells = [name]
        for s in levels:
            x = per[s]
            what = "failed" if float(s) == 0 else f"caught (plant {x['planted_measured']:.1%})"
            alone = x.get("failed_alone", x["failed"])
            what += f" ({alone} at its own level)" if alone != x["failed"] else ""
            cells.append(f"{x['failed']}/{runs} {what}, ratio {x['median_ratio']:.3f}, {x['median_pairs']:g} pairs, "
                         f"MDS {x['median_mds']:.1%}")
        rows.append(cells)
    return _level_table(levels, rows)


def _level_table(levels: Sequence[str], rows: List[List[str]]) -> List[str]:
    """The lines of a Markdown table whose columns are a combination's name, then one per level ("unchanged",
    "planted 5%", ...); ``rows`` are the cells, name first."""
    head = ["combination"] + [("unchanged" if float(s) == 0 else f"planted {float(s):.0%}") for s in levels]
    return ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head),
            *("| " + " | ".join(cells) + " |" for cells in rows)]


# a planted slowdown in stored mode is one code change through the measurement: the first session of each level
# searches its amount of work per combination (``slowdown.PlantedSlowdown.calibrate``), every later session plants
# those amounts (``--plant-units``). Until this was recorded each session searched its own.
STORED_PLANT = "one amount per combination and level, searched by the level's first session"


def stored_quality(repo: str, baselines_dir: str, profile_id: str, runs: int, slowdowns: Sequence[float],
                   pytest_args: Sequence[str] = (), pause_s: float = 0.0, log=print,
                   save: Optional[Callable[[dict], None]] = None,
                   on_session: Optional[Callable[[float, subprocess.CompletedProcess], object]] = None) -> dict:
    """``runs`` rounds of pytest sessions (unchanged, then each slowdown) judged against recorded baselines;
    ``save`` gets the record, summary included, after every round (an hour's measurement survives a cut);
    ``on_session(slowdown, process)`` gets each finished session (its output: ``gate_report``).

    The record keeps the baselines file as it was judged against (``baselines``) and each combination's rounds
    and yardstick rates, so that ``judge_again`` can judge the same sessions with another gate later."""
    levels = [0.0] + [s for s in slowdowns if s > 0]
    judged_against = load_baselines(path_for(baselines_dir, profile_id))
    record = {"baselines_dir": baselines_dir, "profile_id": profile_id, "plant": STORED_PLANT,
              "baselines": {"profile": judged_against.profile, "combinations": judged_against.combinations},
              "sessions": {str(s): [] for s in levels}, "plant_units": {}}
    with tempfile.TemporaryDirectory() as work:
        for run in range(runs):
            for s in levels:
                out = os.path.join(work, "bench.json")
                units = os.path.join(work, f"units-{s}.json")
                cmd = [sys.executable, "-m", "pytest", "perf_tests", "-p", "no:cacheprovider", "-q",
                       f"--baselines-dir={baselines_dir}", f"--hardware-profile={profile_id}",
                       f"--benchmark-json={out}", *pytest_args] + ([f"--plant-slowdown={s}"] if s else [])
                if str(s) in record["plant_units"]:
                    cmd.append(f"--plant-units={units}")
                started = time.time()
                p = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
                if p.returncode not in (0, 1):
                    raise RuntimeError(f"perf session exited {p.returncode}:\n{(p.stdout + p.stderr)[-3000:]}")
                with open(out) as f:
                    benches = json.load(f)["benchmarks"]
                verdicts = {b["extra_info"]["combination"]: {k: b["extra_info"].get(k) for k in _KEPT}
                            for b in benches if "verdict" in b["extra_info"]}
                if s and str(s) not in record["plant_units"]:  # the first session searched them
                    record["plant_units"][str(s)] = {b["extra_info"]["combination"]: b["extra_info"]["planted_units"]
                                                     for b in benches if "planted_units" in b["extra_info"]}
                    write_atomically(units, record["plant_units"][str(s)])
                record["sessions"][str(s)].append({"start": started, "failed": p.returncode == 1,
                                                   "combinations": verdicts})
                if on_session:
                    on_session(s, p)
                log(f"session {run + 1} planted {s:.0%}: " + ", ".join(
                    f"{k} {v['ratio']:.3f} {v['verdict']}" for k, v in verdicts.items())
                    + "".join(f"; runner at {v['runner_speed']:.2f}x" for v in list(verdicts.values())[:1]
                              if v.get("runner_speed")))
            record["summary"] = summarize_stored(record)
            if save:
                save(record)
            if pause_s and run < runs - 1:
                time.sleep(pause_s)
    return record


def gate_report(stdout: str) -> List[str]:
    """The gate's own lines of a ``pytest perf_tests`` session: its table of verdicts, then each regression's
    message and the commands that investigate it, up to the blank line before pytest-benchmark's table."""
    lines = stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("hpcnn perf gate, profile ")), len(lines))
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


# per combination of a session: the verdict, and the raw rounds and yardstick rates it came from, so that the
# same real sessions can judge another gate design offline
_KEPT = ("verdict", "ratio", "mds", "p_slower", "alpha", "runner_speed", "images_per_sec_rounds", "yardstick_rates",
         "yardstick_version", "confirm_images_per_sec_rounds", "confirm_yardstick_rates", "confirm_time",
         "confirm_pause_s", "confirm_verdict", "confirm_ratio", "confirm_p_slower", "confirm_alpha", "confirm_error",
         "planted_units", "planted_searched")


def summarize_stored(record: dict) -> dict:
    """Per level of a stored record: sessions, sessions that failed, and per combination the sessions it failed
    (as judged: after Holm's step-down and confirmation), those it failed at its own Bonferroni level, those it
    failed before confirmation (``failed_first``: the same where nothing was re-measured), the range of its
    ratios and its median MDS. Sessions that failed before confirmation: ``failed_first`` at the level.
    At a planted level, ``in_reach`` counts the sessions whose MDS was below the plant's drop (``plant_drop``)
    and ``caught_in_reach`` those of them that caught it: what the stored bar is asked of."""
    out = {}
    for level, sessions in record["sessions"].items():
        per: Dict[str, dict] = {}
        for session in sessions:
            own = gate.combination_alpha(gate.DEFAULT_ALPHA, len(session["combinations"]))
            for key, v in session["combinations"].items():
                x = per.setdefault(key, {"failed": 0, "failed_alone": 0, "failed_first": 0, "ratios": [], "mds": [],
                                         "in_reach": 0, "caught_in_reach": 0})
                failed = v["verdict"] == gate.REGRESSION
                reach = float(level) > 0 and v.get("mds") is not None and v["mds"] < plant_drop(float(level))
                x["in_reach"] += reach
                x["caught_in_reach"] += reach and failed
                x["failed"] += failed
                x["failed_first"] += v["verdict"] in (gate.REGRESSION, gate.UNCONFIRMED)
                # records from before Holm's step-down have no level: each failed at its own
                x["failed_alone"] += failed and (v.get("alpha") is None or v["alpha"] <= own * (1 + 1e-9))
                x["ratios"].append(v["ratio"])
                if v.get("mds") is not None:
                    x["mds"].append(v["mds"])
        first = sum(any(v["verdict"] in (gate.REGRESSION, gate.UNCONFIRMED) for v in session["combinations"].values())
                    for session in sessions)
        out[level] = {"sessions": len(sessions), "failed": sum(session["failed"] for session in sessions),
                      "failed_first": first,
                      "per_combination": {key: {"failed": x["failed"], "failed_alone": x["failed_alone"],
                                                "failed_first": x["failed_first"],
                                                "in_reach": x["in_reach"], "caught_in_reach": x["caught_in_reach"],
                                                "ratio_min": min(x["ratios"]), "ratio_max": max(x["ratios"]),
                                                "median_mds": statistics.median(x["mds"]) if x["mds"] else None}
                                          for key, x in sorted(per.items())}}
    return out


def stored_table(summary: dict) -> List[str]:
    """A Markdown table of a stored record's summary: per combination and level, the sessions that failed
    (false failures unchanged, catches planted; with the count at the combination's own level where Holm's
    step-down added some, and before confirmation where it cleared some), the range of ratios and the median
    MDS."""
    levels = sorted(summary, key=float)
    rows = []
    for name in summary[levels[0]]["per_combination"]:
        cells = [name]
        for s in levels:
            x, n = summary[s]["per_combination"].get(name), summary[s]["sessions"]
            if x is None:
                cells.append("not judged")
                continue
            what = "failed" if float(s) == 0 else "caught"
            what += f" ({x['failed_alone']} at its own level)" if x["failed_alone"] != x["failed"] else ""
            first = x.get("failed_first", x["failed"])
            what += f" ({first} before confirmation)" if first != x["failed"] else ""
            mds = "unknown" if x["median_mds"] is None else f"{x['median_mds']:.1%}"
            cells.append(f"{x['failed']}/{n} {what}, ratios {x['ratio_min']:.3f}-{x['ratio_max']:.3f}, MDS {mds}")
        rows.append(cells)
    return _level_table(levels, rows)


class Bar(NamedTuple):
    """The issue's bar at one planted level: each judged combination's (caught, out of) and whether every one
    caught at least ``need`` of its share; ``out_of_reach`` lists the combinations the bar is not asked of (stored
    mode: no session's MDS below the plant's drop). ``met`` is None where nothing was judged."""
    level: float
    need: float
    judged: Dict[str, tuple]
    out_of_reach: List[str]

    @property
    def short(self) -> Dict[str, tuple]:
        """The judged combinations that caught less than ``need`` of their share."""
        return {k: (c, n) for k, (c, n) in sorted(self.judged.items()) if c < self.need * n - 1e-9}

    @property
    def met(self) -> Optional[bool]:
        return None if not self.judged else not self.short


def stored_bars(summary: dict) -> List[Bar]:
    """The stored bar at each of the summary's planted levels that has one (``STORED_BARS``), asked of each
    combination's sessions whose MDS was below the plant's drop."""
    out = []
    for s, level in sorted(summary.items(), key=lambda kv: float(kv[0])):
        need = STORED_BARS.get(round(float(s), 6))
        if need is None:
            continue
        per = level["per_combination"]
        out.append(Bar(float(s), need, {k: (x["caught_in_reach"], x["in_reach"]) for k, x in per.items()
                                        if x.get("in_reach")},
                       sorted(k for k, x in per.items() if not x.get("in_reach"))))
    return out


def paired_bars(summary: dict) -> List[Bar]:
    """The paired bar at each planted level that has one (``PAIRED_BARS``), asked of every combination's runs."""
    out = []
    for s in sorted(summary["flagged"], key=float):
        need = PAIRED_BARS.get(round(float(s), 6))
        if need is not None:
            out.append(Bar(float(s), need, {k: (per[s]["failed"], summary["runs"])
                                            for k, per in summary["per_combination"].items()}, []))
    return out


def bar_lines(bars: Sequence[Bar], false_failures: int, out_of: int, unit: str) -> List[str]:
    """The bars as a reader checks them: unchanged ``unit``s that failed (the bar: none), then per planted level
    whether it was met and the combinations that fell short."""
    lines = [f"unchanged: {false_failures} of {out_of} {unit}s failed (the bar: none): "
             + ("met" if false_failures == 0 else "NOT MET")]
    for bar in bars:
        head = f"planted {bar.level:.0%} (throughput x{1 - plant_drop(bar.level):.3f}; the bar: {bar.need:.0%})"
        if bar.met is None:
            lines.append(f"{head}: nothing to judge, no {unit}'s MDS was below the plant's drop")
            continue
        short = [f"{k} {c}/{n}" for k, (c, n) in bar.short.items()]
        fewest = min(n for _, n in bar.judged.values())
        line = (f"{head}: " + ("met" if bar.met else "NOT MET") + f" on {len(bar.judged)} combination(s)"
                + (f", at least {fewest} {unit}{'s' if fewest > 1 else ''} each" if fewest < 20 else ""))
        line += f"; short: {', '.join(short)}" if short else ""
        if bar.out_of_reach:
            line += f"; out of reach (MDS above the plant's drop): {', '.join(bar.out_of_reach)}"
        lines.append(line)
    return lines


def paired_report(summary: dict) -> List[str]:
    """What a paired quality run prints at its end: per level, the runs flagged (any combination failed) and the
    comparisons that failed, with the wall time; the per-combination table; and the issue's bars."""
    runs = summary["runs"]
    lines = []
    for s, flagged in summary["flagged"].items():
        what, verb = ("runs with a false failure", "failed") if float(s) == 0 else ("runs flagged", "caught")
        failed = sum(per[s]["failed"] for per in summary["per_combination"].values())
        lines.append(f"planted {float(s):4.0%}: {flagged}/{runs} {what}, {failed}/"
                     f"{runs * len(summary['per_combination'])} comparisons {verb} ({summary['sessions']} "
                     f"session(s)); median run {summary['median_run_seconds'][s]:.0f} s, plus "
                     f"{summary['startup_seconds']:.0f} s starting each run's workers")
    return [*lines, "", "medians over the runs:", *paired_table(summary), "",
            "the issue's bar, after Holm's step-down:",
            *bar_lines(paired_bars(summary), summary["flagged"].get(str(0.0), 0), runs, "run")]


def stored_levels(summary: dict) -> List[str]:
    """A stored record's summary in a line per level: the sessions that failed, and before confirmation."""
    return [f"planted {float(s):4.0%}: {level['failed']}/{level['sessions']} sessions failed"
            + (f" ({level['failed_first']} before confirmation)" if level["failed_first"] != level["failed"] else "")
            for s, level in summary.items()]


def stored_report(summary: dict) -> List[str]:
    """What a stored quality run prints at its end: sessions failed per level (``stored_levels``), the
    per-combination table, and the issue's bars, asked where a session's MDS was below the plant's drop."""
    unchanged = summary[str(0.0)]
    return [*stored_levels(summary), "", "per combination (after Holm's step-down and confirmation):",
            *stored_table(summary), "",
            "the issue's bar, where a session's MDS was below the plant's drop in throughput:",
            *bar_lines(stored_bars(summary), unchanged["failed"], unchanged["sessions"], "session")]


Verdicts = Dict[str, gate.Verdict]


class Judged(NamedTuple):
    """One recorded session judged again: at each combination's Bonferroni level (``alone``), after Holm's
    step-down (``holm``), and after the confirmations the session recorded (``final``)."""

    alone: Verdicts
    holm: Verdicts
    final: Verdicts


def judged_against(record: dict) -> Baselines:
    """The baselines file a stored record's sessions were judged against (its ``baselines``)."""
    return Baselines(record["baselines"]["profile"], record["baselines"]["combinations"])


def judge_again(record: dict) -> Dict[str, List[Judged]]:
    """Every session of a stored record judged again from its rounds by this gate, against the baselines it was
    judged against (the record's ``baselines``) and at the time it ran: {level: [``Judged``, one per session]}.
    A failure whose session re-measured it is confirmed or cleared by those rounds, judged at the time they ran;
    one recorded without a re-measurement (confirmation off, or a record from before it) stands."""
    against = judged_against(record)
    out: Dict[str, List[Judged]] = {}
    for level, sessions in record["sessions"].items():
        out[level] = []
        for session in sessions:
            now = datetime.datetime.fromtimestamp(session["start"], datetime.timezone.utc)
            rounds = session["combinations"]

            def judge(key: str, alpha: float, rounds=rounds, now=now) -> gate.Verdict:
                return against.judge(key, rounds[key]["images_per_sec_rounds"], rounds[key]["yardstick_rates"],
                                     alpha, now=now)

            own = gate.combination_alpha(gate.DEFAULT_ALPHA, len(rounds))
            alone = {key: judge(key, own) for key in rounds}
            holm = gate.family(alone, {k: v.p_slower for k, v in alone.items()}, judge)
            final = dict(holm)
            for key, v in holm.items():
                x = rounds[key]
                if v.failed and x.get("confirm_images_per_sec_rounds"):
                    when = datetime.datetime.fromtimestamp(x["confirm_time"], datetime.timezone.utc)
                    again = against.judge(key, x["confirm_images_per_sec_rounds"], x["confirm_yardstick_rates"],
                                          gate.CONFIRM_ALPHA, now=when)
                    final[key] = gate.confirm(v, again, x["confirm_pause_s"])
            out[level].append(Judged(alone, holm, final))
    return out


def rejudged(record: dict) -> dict:
    """A stored record as this gate decides it (``judge_again``): a copy whose every comparison's verdict (after
    Holm and confirmation), ratio, level, p-value and MDS, and every session's ``failed``, are this gate's, so
    that ``summarize_stored`` tells what a change to the gate does to recorded sessions."""
    out = copy.deepcopy(record)
    for level, judged in judge_again(record).items():
        for session, j in zip(out["sessions"][level], judged):
            for key, rec in session["combinations"].items():
                first, final = j.holm[key], j.final[key]
                rec.update(verdict=final.verdict, ratio=first.ratio, alpha=first.alpha, p_slower=first.p_slower,
                           mds=first.mds)
            session["failed"] = any(v.failed for v in j.final.values())
    return out


def simulate_stored(baselines: Baselines, combinations: int = 400, draws: int = 1000,
                    alpha: float = gate.DEFAULT_ALPHA, seed: int = 0) -> dict:
    """Unchanged matrices of ``combinations`` drawn from recorded sessions, leave one session out.

    Each simulated combination is a recorded one (cycled) whose randomly chosen
    session plays the current session and whose other sessions the baseline; the
    pooled spread and the combination's slope leave that session out too (a slope
    fitted with it would bend towards it). The held-out session is judged
    against the other sessions of its occasion, as a session run within the hour of a
    recording is, so this checks the spread within occasions; the drift between days
    is checked by sessions run on another day (``stored_quality``).
    Returns how many of ``draws`` matrices had any failure (the family-wise
    false-alarm rate), and the same for a parametric draw from the fitted
    log-normal noise.
    """
    judged = {k: baselines.judged_sessions(k)[0] for k in baselines.combinations}  # as the gate sees them
    occasion = {k: baselines.occasions(k) for k in baselines.combinations}
    keys = [k for k in baselines.combinations if len(judged[k]) >= 3]
    if not keys:
        raise ValueError("simulate_stored() needs combinations with 3 or more recorded sessions")
    rng = np.random.default_rng(seed)
    each = gate.combination_alpha(alpha, combinations)
    cases = {}  # (key, held-out index) -> failed at `each`: every case is a real unchanged session
    for k in keys:
        on_yardstick = baselines.judged_sessions(k)[1] is not None
        for j in range(len(judged[k])):
            without = _leave_out(baselines, k, j)
            rest_occasion, held = occasion[k][:j] + occasion[k][j + 1:], baselines.combinations[k]["sessions"][j]
            new = occasion[k][j] not in rest_occasion  # alone on its occasion: judged as on a new one
            rest, reference = without.judged_sessions(k, new)
            current = held["samples"] if not on_yardstick else stored.on_yardstick(
                held["samples"], held["yardstick"]["rate"], reference, without.slope(k, new).beta)
            own = [s for s, g in zip(rest, rest_occasion) if g == occasion[k][j]]  # the held-out one's occasion
            v = (stored.judge_sessions(own, current, gate.STORED_THRESHOLD, each, without.prior()) if not new else
                 stored.judge_sessions(rest, current, gate.STORED_THRESHOLD, each, without.prior(True),
                                       occasion=rest_occasion, drift=baselines.drift()))
            cases[(k, j)] = v.failed
    counts = [len(judged[keys[i % len(keys)]]) for i in range(combinations)]
    failures = 0
    for _ in range(draws):
        picks = [(keys[i % len(keys)], int(rng.integers(counts[i]))) for i in range(combinations)]
        failures += any(cases[p] for p in picks)
    return {"combinations": combinations, "draws": draws, "alpha": alpha, "combination_alpha": each,
            "recorded_cases": len(cases), "failing_cases": sum(cases.values()),
            "matrices_with_a_false_failure": failures, "rate": failures / draws,
            "parametric_rate": _parametric_stored(baselines, keys, combinations, max(50, draws // 10), each, rng)}


def _leave_out(baselines: Baselines, key: str, j: int) -> Baselines:
    """``baselines`` without session ``j`` of ``key``."""
    combos = dict(baselines.combinations)
    sessions = combos[key]["sessions"]
    combos[key] = {**combos[key], "sessions": sessions[:j] + sessions[j + 1:]}
    return Baselines(baselines.profile, combos)


def _parametric_stored(baselines, keys, combinations, draws, each, rng) -> float:
    """The same matrix drawn from the fitted noise: log session medians normal with the pooled spread."""
    noise = baselines.prior()
    counts = {k: len(baselines.sessions(k)) for k in keys}
    failures = 0
    for _ in range(draws):
        failed = False
        for i in range(combinations):
            n = counts[keys[i % len(keys)]]
            x = np.exp(rng.normal(0.0, noise.sigma, n + 1)) * 100.0
            sessions = [[v] * 5 for v in x[:-1]]
            failed |= stored.judge_sessions(sessions, [x[-1]] * 5, gate.STORED_THRESHOLD, each, noise).failed
        failures += failed
    return failures / draws


def process_pair_blocks(record: dict, level: str = "0.0", size: int = 0) -> Dict[str, List[List[float]]]:
    """Each combination's comparisons at ``level`` cut into blocks of consecutive pairs that one (A, B) process
    pair ran, as log(B/A) per pair (a gate-quality --mode=paired record). A comparison recorded without
    ``pids`` (before restarts) ran all its pairs on one process pair: one block. ``size``: each block cut
    further into pieces of that many pairs (a process pair that restarts after ``size`` pairs draws its offset
    as one of them did; 0: whole)."""
    out: Dict[str, List[List[float]]] = {}
    for key, c in record["combinations"].items():
        blocks: List[List[float]] = []
        for run in c[level]:
            d = [float(x) for x in np.log(np.asarray(run["b"], float) / np.asarray(run["a"], float))]
            pids = [tuple(p) for p in run.get("pids") or [()] * len(d)]
            blocks += [[x for _, x in block] for _, block in itertools.groupby(zip(pids, d), key=lambda y: y[0])]
        out[key] = [b[i:i + size] for b in blocks for i in range(0, len(b), size)] if size else blocks
    return out


def design_blocks(record: dict, schedule: sequential.Schedule, level: str = "0.0") -> Dict[str, List[List[float]]]:
    """``process_pair_blocks`` as process pairs of ``schedule``'s design run them: pieces of ``schedule.block``
    pairs; a schedule of block 1 (pairs taken as independent) keeps the record's own process pairs, which its
    test ignores but the machine does not.

    Raises:
      ValueError: the schedule's process pairs are longer than the record's.
    """
    ran, size = record.get("restart_every") or 0, schedule.block if schedule.block > 1 else 0
    blocks = process_pair_blocks(record, level, size)
    if size and any(blocks.values()) and (not ran or size > ran):
        raise ValueError(f"the record's process pairs ran {ran or 'all'} pairs each; process pairs of "
                         f"{size} cannot be resampled from them (allowed: --restart-every <= {ran})")
    return blocks


def draw_blocks(blocks: Sequence[Sequence[float]], n: int, rng: np.random.Generator,
                symmetric: bool = False) -> List[float]:
    """``n`` pairs made of whole recorded blocks drawn with replacement, in the order drawn (the last cut short):
    a simulated comparison carries a process offset per block, as the recorded comparisons did.

    ``symmetric``: each drawn block's log-ratios negated or not at random, as swapping which process of its
    pair is A would: of unchanged code, a block and its negation are equally likely, so the simulated null is
    centred on no change rather than on the record's own mean (a draw of its noise, or the asymmetry of a
    design that restarted A first in every process pair)."""
    out: List[float] = []
    while len(out) < n:
        block = blocks[int(rng.integers(len(blocks)))]
        out.extend([-x for x in block] if symmetric and rng.integers(2) else block)
    return out[:n]


def judge_resampled(blocks: Sequence[Sequence[float]], schedule: sequential.Schedule, threshold: float,
                    alpha: float, rng: np.random.Generator, symmetric: bool = False) -> Tuple[gate.Verdict, int]:
    """(verdict, pairs it took): one comparison made of recorded blocks (``draw_blocks``, as many pairs as the
    schedule's cap) replayed through the gate's looks at ``alpha``."""
    draw = iter(draw_blocks(blocks, schedule.max_pairs, rng, symmetric))
    v, a, _ = sequential.run_sequential(lambda r: (100.0, 100.0 * float(np.exp(next(draw)))), schedule,
                                        threshold, alpha)
    return v, len(a)


def paired_power(record: dict, schedule: sequential.Schedule, threshold: float = gate.PAIRED_THRESHOLD,
                 draws: int = 200, seed: int = 0) -> Dict[str, Dict[str, dict]]:
    """{level: {combination: {"flagged": share, "median_pairs": n}}}: a paired quality record's comparisons at
    each level (unchanged and planted) resampled by process-pair block (``draw_blocks``) and judged again under
    ``schedule``, each at the combination's own level of the run that recorded them (Holm's step-down can only
    add catches, so a planted share is a floor). What another cap of pairs would have caught on this machine,
    from pairs it measured, before a new design spends twenty runs to show it."""
    rng = np.random.default_rng(seed)
    each = record.get("combination_alpha") or gate.combination_alpha(gate.DEFAULT_ALPHA, len(record["combinations"]))
    out: Dict[str, Dict[str, dict]] = {}
    for level in record["levels"]:
        out[str(level)] = {}
        for key, blocks in design_blocks(record, schedule, str(level)).items():
            flagged, pairs = 0, []
            for _ in range(draws):
                v, n = judge_resampled(blocks, schedule, threshold, each, rng)
                flagged += v.failed
                pairs.append(n)
            out[str(level)][key] = {"flagged": flagged / draws, "median_pairs": float(np.median(pairs))}
    return out


def power_table(power: Dict[str, Dict[str, dict]]) -> List[str]:
    """``paired_power``'s shares as a Markdown table: a combination per row, "0.98 (28)" per level (the share
    flagged, the median pairs)."""
    levels = list(power)
    return _level_table(levels, [[key] + [f"{power[s][key]['flagged']:.2f} ({power[s][key]['median_pairs']:.0f})"
                                          for s in levels] for key in sorted(power[levels[0]])])


def simulate_paired(blocks: Dict[str, List[List[float]]], combinations: int = 400, draws: int = 200,
                    schedule: Optional[sequential.Schedule] = None, threshold: float = gate.PAIRED_THRESHOLD,
                    alpha: float = gate.DEFAULT_ALPHA, seed: int = 0, symmetric: bool = False) -> dict:
    """Unchanged matrices whose combinations resample recorded process-pair blocks (``process_pair_blocks``).

    Resampling blocks rather than single pairs keeps each process pair's offset, which pairs drawn one by
    one would average away: the simulated false-failure rate then counts that offset as the real runs do.
    ``symmetric``: blocks negated at random (``draw_blocks``), a null centred on no change.
    """
    schedule = schedule or sequential.Schedule()
    rng = np.random.default_rng(seed)
    each = gate.combination_alpha(alpha, combinations)
    keys = sorted(k for k in blocks if blocks[k])
    if not keys:
        raise ValueError("simulate_paired() needs recorded pairs of at least one combination")
    failures = 0
    for _ in range(draws):
        failed = False
        for i in range(combinations):
            failed |= judge_resampled(blocks[keys[i % len(keys)]], schedule, threshold, each, rng,
                                      symmetric)[0].failed
        failures += failed
    return {"combinations": combinations, "draws": draws, "alpha": alpha, "combination_alpha": each,
            "symmetric": symmetric,
            "blocks": {k: len(blocks[k]) for k in keys},
            "matrices_with_a_false_failure": failures, "rate": failures / draws}
