"""How good the gate is on this machine: false failures of unchanged code, planted slowdowns caught.

* ``paired_quality``: unchanged against unchanged, and against planted slowdowns
  (real work added inside the step), with the sequential paired gate, ``runs``
  times per combination.
* ``stored_quality``: whole ``pytest perf_tests`` sessions against recorded
  baselines, unchanged and planted, one after another (spread over time as a
  runner's merge requests are).

The summaries, tables and bars of their records are here too; what those records
say when judged again or resampled is ``hpcnn.perf.replay``.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple


from hpcnn.jsonfile import write_atomically
from hpcnn.perf import gate, paired, profile, sequential
from hpcnn.perf.baselines import current_commit, load as load_baselines, path_for
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
    process measuring its size afresh. ``save`` gets the record after every combination, so an interrupted
    measurement keeps the comparisons it finished.

    ``resume``: a record of earlier sessions of the same measurement (``check_resumable``) that these runs
    extend; a run of the smoke matrix at three levels costs one to three hours on a 2-core CPU, so twenty
    runs take many sittings and a run can be cut by the end of one. A resumed measurement first finishes the
    run its record left unfinished, measuring only the combinations that run lacks (``next_run``): a run's
    comparisons are judged together (Holm over its matrix), not when they were measured.
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
    this = new_session(here, combos)
    record["sessions"].append(this)
    first, _ = next_run(record)
    for run in range(runs):
        for combo in combos:
            per = record["combinations"][combo.key]
            if len(per[str(levels[0])]) > first + run:  # measured before an earlier session was cut
                continue
            started = time.perf_counter()
            a, sides = paired.open_sides(here, here, combo, device, levels, planted_units(per))
            this["startup_s"][combo.key] += time.perf_counter() - started
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
            this["measured"][combo.key] += 1
            this["ended"] = time.time()
            if next_run(record)[0] > first + run:
                this["runs"] = run + 1  # before the save: a cut inside the next run keeps this one counted
            if save:  # before the line that reports it: a sitting cut on seeing the line loses nothing it saw
                save(_summarized(record))
            log(f"run {first + run + 1} {combo.key}: " + ", ".join(
                f"{s:.0%} {per[str(s)][-1]['ratio']:.3f} {per[str(s)][-1]['verdict']} "
                f"({per[str(s)][-1]['pairs']} pairs)" for s in levels))
    return _summarized(record)


def new_session(here: str, combos: Sequence[Combination]) -> dict:
    """A paired quality record's entry for one sitting's measurement: when it started, the commit of the
    checkout at ``here`` it measured and the machine it ran on (``profile.machine_id``), so that a record
    built over many sittings says which code and which VM measured each run; ``paired_quality`` counts its
    runs, workers' starts and combinations measured, and sets ``ended`` as each combination finishes."""
    return {"started": time.time(), "commit": current_commit(here), "machine": profile.machine_id(), "runs": 0,
            "startup_s": {c.key: 0.0 for c in combos}, "measured": {c.key: 0 for c in combos}}


def next_run(record: dict) -> tuple:
    """(the runs a paired quality record holds whole, the combinations it holds of the run after them): an
    interrupted session leaves a run with some combinations measured, which ``--resume`` finishes."""
    counts = {name: min(len(x) for x in per.values()) for name, per in record["combinations"].items()}
    whole = min(counts.values(), default=0)
    return whole, sorted(name for name, n in counts.items() if n > whole)


def _summarized(record: dict) -> dict:
    """``record`` with its ``summary`` of the whole runs it holds (none until its first run is whole)."""
    if next_run(record)[0]:
        record["summary"] = summarize_paired(record)
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
    threshold, alpha, restarts, settling chunks, plant sizing, rebuild order or round lengths (records made before
    restarts, before fresh processes settled, before a side kept one amount of planted work, before rebuilds took
    turns across process pairs, or before rounds had a step per chunk, have none and are refused)."""
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
            "round_steps": round_steps_by_combination(combos), "rebuild_order": paired.REBUILD_ORDER}


def summarize_paired(record: dict, views: Optional[Sequence["RunView"]] = None) -> dict:
    """Runs flagged per slowdown (any combination failed), per-combination counts, wall time per run.

    A run's verdicts are the matrix's after Holm's step-down (``family_failures``); ``failed_alone`` counts the
    verdicts each comparison reached at its own Bonferroni share of the level, as it ran. ``views``: the
    record's runs as ``run_view`` judged them already (``shown_record``), so that Holm is not run twice.
    """
    combos = record["combinations"]
    levels = record["levels"]
    runs, unfinished = next_run(record)
    failures = family_failures(record, runs, views)
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
    out["startup_seconds"] = startup_per_run(record)
    out["unfinished"] = unfinished
    return out


def startup_per_run(record: dict) -> float:
    """Seconds spent starting the matrix's workers for one run: per combination, the median over sessions of
    its start-up seconds per run it measured there (sessions before ``measured`` was kept: their whole runs;
    workers kept through a session: once per session), summed over the combinations."""
    fresh = record.get("workers") == FRESH_WORKERS
    per: Dict[str, List[float]] = {}
    for x in record["sessions"]:
        measured = x.get("measured") or {name: x["runs"] for name in x["startup_s"]}
        for name, seconds in x["startup_s"].items():
            if measured.get(name):
                per.setdefault(name, []).append(seconds / (measured[name] if fresh else 1))
    return sum(statistics.median(v) for v in per.values())


def family_failures(record: dict, runs: int, views: Optional[Sequence["RunView"]] = None
                     ) -> Dict[str, Dict[str, List[bool]]]:
    """{level: {combination: whether each of the first ``runs`` runs failed}}, each run judged as ``run_view``
    judges it (Holm's step-down over the run's matrix at the record's schedule, threshold and family-wise
    alpha), or as ``views`` (runs from the first) hold them; ValueError where one of those runs is not whole."""
    out: Dict[str, Dict[str, List[bool]]] = {str(s): {name: [] for name in record["combinations"]}
                                             for s in record["levels"]}
    for r in range(runs):
        view = views[r] if views is not None else run_view(record, r)
        if not view.whole:
            raise ValueError(f"run {r + 1} is not whole: it lacks {', '.join(view.missing)}")
        for key, failed in view.failed.items():
            for name, x in failed.items():
                out[key][name].append(x)
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
    return level_table(levels, rows)


def level_table(levels: Sequence[str], rows: List[List[str]]) -> List[str]:
    """The lines of a Markdown table whose columns are a combination's name, then one per level ("unchanged",
    "planted 5%", ...); ``rows`` are the cells, name first."""
    return markdown_table(["combination", *map(_level_name, levels)], rows)


def markdown_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> List[str]:
    """The lines of a Markdown table: its head, the rule under it, then a line per row of cells."""
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
    ``save`` gets the record, summary included, after every session and before its line is logged (an hour's
    measurement survives a cut, and a cut loses no session the log reported);
    ``on_session(slowdown, process)`` gets each finished session (its output: ``gate_report``).

    The record keeps the baselines file as it was judged against (``baselines``) and each combination's rounds
    and yardstick rates, so that ``replay.judge_again`` can judge the same sessions with another gate later."""
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
                record["summary"] = summarize_stored(record)
                if save:  # before the session's line: a line in the log is a session the record holds
                    save(record)
                if on_session:
                    on_session(s, p)
                log(f"session {run + 1} planted {s:.0%}: " + ", ".join(
                    f"{k} {v['ratio']:.3f} {v['verdict']}" for k, v in verdicts.items())
                    + "".join(f"; runner at {v['runner_speed']:.2f}x" for v in list(verdicts.values())[:1]
                              if v.get("runner_speed")))
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
_KEPT = ("verdict", "ratio", "mds", "p_slower", "alpha", "runner_speed", "machine", "images_per_sec_rounds",
         "yardstick_rates", "yardstick_version", "confirm_images_per_sec_rounds", "confirm_yardstick_rates",
         "confirm_time", "confirm_pause_s", "confirm_verdict", "confirm_ratio", "confirm_p_slower", "confirm_alpha",
         "confirm_error", "planted_units", "planted_searched")


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
    return level_table(levels, rows)


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
    if summary.get("unfinished"):
        lines.append(f"run {runs + 1} unfinished: {len(summary['unfinished'])} of {len(summary['per_combination'])} "
                     f"combinations measured ({', '.join(summary['unfinished'])}); --resume finishes it first")
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


def process_pairs(comparison: dict) -> List[List[float]]:
    """A recorded paired comparison cut into the blocks of consecutive pairs that one (A, B) process pair ran,
    as log(B/A) per pair; one block where it was recorded without ``pids`` (before restarts)."""
    d = [math.log(b / a) for a, b in zip(comparison["a"], comparison["b"])]
    pids = [tuple(p) for p in comparison.get("pids") or [()] * len(d)]
    return [[x for _, x in block] for _, block in itertools.groupby(zip(pids, d), key=lambda y: y[0])]


def asymmetry_t(comparison: dict) -> Optional[float]:
    """An unchanged comparison's mean log-ratio over the standard error of its process pairs' means: a worker
    side that runs faster as B than as A would push it one way run after run. None under two process pairs."""
    return _blocks_t(process_pairs(comparison))


def _blocks_t(blocks: Sequence[Sequence[float]]) -> Optional[float]:
    """The one-sample t of blocks' means (pairs of one process pair share its offset); None under two, or none
    spread."""
    means = [statistics.fmean(b) for b in blocks]
    if len(means) < 2 or statistics.stdev(means) == 0:
        return None
    return statistics.fmean(means) / (statistics.stdev(means) / math.sqrt(len(means)))


class Lean(NamedTuple):
    """One combination's unchanged comparisons, pooled over a record's runs: ``pairs`` and ``process_pairs``; the
    mean log(B/A) with its t over the process pairs' means; and by what precedes a pair, a restart or a rebuild,
    the mean log(B/A) where B went first minus where A did, with its Welch t (None under two pairs a side); and
    ``leader``, the same difference by the side that leads a pair's chunks (``paired.chunk_leader``)."""
    pairs: int
    process_pairs: int
    mean: float
    t: Optional[float]
    restart: Optional[Tuple[float, float]]
    rebuild: Optional[Tuple[float, float]]
    leader: Optional[Tuple[float, float]]


def _welch(x: Sequence[float], y: Sequence[float]) -> Optional[Tuple[float, float]]:
    if min(len(x), len(y)) < 2:
        return None
    diff = statistics.fmean(x) - statistics.fmean(y)
    se = math.sqrt(statistics.variance(x) / len(x) + statistics.variance(y) / len(y))
    return (diff, diff / se) if se else None


def order_leans(record: dict) -> Dict[str, Lean]:
    """Per combination, ``Lean`` over the unchanged comparisons of a record whose sides took turns to go first
    (``paired.REBUILD_ORDER``): process pair k's pair at place p followed a restart (p = 0) or a rebuild, led by
    the side ``paired.first_to_go`` gives. The turns cancel a first mover's lean from the mean; the differences
    show whether one is there. The chunk leader's difference leaves out each comparison's first pair, which
    follows no restart or rebuild of its own; where a process pair runs two pairs, as the current design does,
    B leads exactly the pairs that follow a rebuild, so that difference is also after rebuilds minus after
    restarts. Pairs of one process pair share its offset, so where it runs more than two a Welch t flatters them.
    Empty for records of a fixed order or without pids."""
    if record.get("rebuild_order") != paired.REBUILD_ORDER:
        return {}
    leans = {}
    for name, per in record["combinations"].items():
        led: Dict[Tuple[bool, bool], List[float]] = {(r, b): [] for r in (True, False) for b in (True, False)}
        chunks_led: Tuple[List[float], List[float]] = ([], [])  # by A, by B
        blocks = []
        for x in per[str(record["levels"][0])]:
            if not x.get("pids"):
                continue
            for k, block in enumerate(process_pairs(x)):  # k counts the process pairs of one comparison
                blocks.append(block)
                for place, d in enumerate(block):
                    r = k * record["restart_every"] + place  # the pair's index in its comparison
                    led[place == 0, paired.first_to_go(r, record["restart_every"]) == 1].append(d)
                    if r:
                        chunks_led[paired.chunk_leader(r)].append(d)
        if not blocks:
            continue
        leans[name] = Lean(sum(map(len, blocks)), len(blocks), statistics.fmean(itertools.chain.from_iterable(blocks)),
                           _blocks_t(blocks), _welch(led[True, True], led[True, False]),
                           _welch(led[False, True], led[False, False]), _welch(chunks_led[1], chunks_led[0]))
    return leans


def lean_table(leans: Dict[str, Lean]) -> List[str]:
    """``order_leans`` as a Markdown table, a row per combination, in percent of log(B/A)."""
    def cell(x: Optional[Tuple[float, float]]) -> str:
        return "-" if x is None else f"{x[0]:+.2%} (t {x[1]:+.1f})"

    head = ["combination", "pairs (process pairs)", "mean log(B/A) (t)", "after restarts: B first - A first (t)",
            "after rebuilds: B first - A first (t)", "chunks: B leads - A leads (t)"]
    return markdown_table(head, [[name, f"{x.pairs} ({x.process_pairs})",
                                  f"{x.mean:+.2%}" + ("" if x.t is None else f" (t {x.t:+.1f})"),
                                  cell(x.restart), cell(x.rebuild), cell(x.leader)] for name, x in leans.items()])


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(seconds))


def _session_span(session: dict) -> str:
    """When a paired record's session ran, with the commit and machine it names: "2026-12-04 16:56-18:57 UTC at
    b397706 on boot-0123456789ab"; sessions recorded before those were kept give their start alone."""
    text = _utc(session["started"])
    if session.get("ended") is not None:
        end = _utc(session["ended"])
        text += "-" + (end[11:] if end[:10] == text[:10] else end)
    text += " UTC"
    if session.get("commit"):
        text += f" at {session['commit'][:7]}"
    if session.get("machine"):
        text += f" on {session['machine']}"
    return text


def _starting_seconds(record: dict, name: str, entry: dict) -> Optional[float]:
    """Seconds that starting ``name``'s workers took for the run of its comparison ``entry`` (one start per
    combination and run serves every level); None where workers were kept through a session, as early records
    did, so that no run owns their start."""
    if record.get("workers") != FRESH_WORKERS or entry.get("session") is None:
        return None
    session = record["sessions"][entry["session"]]
    measured = session.get("measured") or {n: session["runs"] for n in session["startup_s"]}
    return session["startup_s"][name] / max(1, measured.get(name, 1))


class RunView(NamedTuple):
    """One run of a paired quality record as it is judged: its combinations' comparisons per level, the verdicts
    (after Holm's step-down over the run's matrix when the run is whole; as each ran, at its own Bonferroni
    share, when it is not) and the sessions that measured it."""

    run: int  # 0-based
    whole: bool
    names: List[str]  # the combinations it holds, in the record's order
    missing: List[str]  # those it lacks (an unfinished run)
    entries: Dict[str, Dict[str, dict]]  # level -> combination -> the recorded comparison
    failed: Dict[str, Dict[str, bool]]  # level -> combination -> failed (planted: caught)
    verdicts: Dict[str, Dict[str, str]]  # level -> combination -> the verdict judged here
    sessions: List[int]


def runs_held(record: dict) -> int:
    """Runs a paired quality record holds, its unfinished one included."""
    return max((len(x) for per in record["combinations"].values() for x in per.values()), default=0)


def run_view(record: dict, run: int) -> RunView:
    """Run ``run`` (0-based) of a paired quality record, judged; ValueError where the record does not hold it."""
    held = runs_held(record)
    if not 0 <= run < held:
        raise ValueError(f"no run {run + 1}: the record holds runs 1-{held}" if held else "the record holds no run")
    levels = [str(s) for s in record["levels"]]
    combos = record["combinations"]
    names = [n for n, per in combos.items() if all(len(per[s]) > run for s in levels)]
    whole = run < next_run(record)[0]
    entries = {s: {n: combos[n][s][run] for n in names} for s in levels}
    failed: Dict[str, Dict[str, bool]] = {}
    verdicts: Dict[str, Dict[str, str]] = {}
    for s in levels:
        if whole:
            judged = sequential.family_verdicts({n: (x["a"], x["b"]) for n, x in entries[s].items()},
                                                sequential.Schedule.recorded(record["schedule"]),
                                                record["threshold"], record["alpha"])
            failed[s] = {n: v.failed for n, v in judged.items()}
            verdicts[s] = {n: v.verdict for n, v in judged.items()}
        else:
            verdicts[s] = {n: x["verdict"] for n, x in entries[s].items()}
            failed[s] = {n: v == gate.REGRESSION for n, v in verdicts[s].items()}
    sessions = sorted({x["session"] for per in entries.values() for x in per.values() if x.get("session") is not None})
    return RunView(run, whole, names, [n for n in combos if n not in names], entries, failed, verdicts, sessions)


def _level_name(s: str) -> str:
    return "unchanged" if float(s) == 0 else f"planted {float(s):.0%}"


def _outcome(view: RunView, s: str, name: str) -> str:
    """What a comparison came to: unchanged code "failed" or its verdict; a plant "caught" or "missed"; with the
    verdict it reached at its own level where Holm's step-down decided otherwise."""
    x, failed = view.entries[s][name], view.failed[s][name]
    if float(s) == 0:
        word = "FAILED" if failed else view.verdicts[s][name]
    else:
        word = "caught" if failed else f"MISSED ({view.verdicts[s][name]})"
    if failed != (x["verdict"] == gate.REGRESSION):
        word += f" by Holm's step-down ({x['verdict']} at its own level)"
    return word


def _level_seconds(view: RunView) -> Dict[str, float]:
    return {s: sum(x["seconds"] for x in per.values()) for s, per in view.entries.items()}


def _run_starts(record: dict, view: RunView) -> Optional[float]:
    starts = [_starting_seconds(record, n, view.entries[str(record["levels"][0])][n]) for n in view.names]
    return None if any(x is None for x in starts) else sum(starts)


def run_table(record: dict, run: int) -> List[str]:
    """Run ``run`` (0-based) of a paired quality record as a Markdown table, a row per combination: each level's
    ratio, outcome, pairs and seconds (a plant as its first planted process measured it), and the seconds its
    workers took to start; then the run's time per level, its sessions, and how many comparisons failed or were
    caught. A run not yet whole is shown as it ran, and says what it lacks."""
    view = run_view(record, run)
    cap = record["schedule"]["max_pairs"]
    first = str(record["levels"][0])
    rows = []
    for name in view.names:
        cells = [name]
        for s, per in view.entries.items():
            x = per[name]
            cell = (f"{x['ratio']:.3f} {_outcome(view, s, name)}, {x['pairs']} pairs"
                    f"{' (the cap)' if x['pairs'] >= cap else ''}, {x['seconds']:.0f} s")
            cells.append(cell + (f", plant measured {x['planted']:.1%}" if float(s) else ""))
        start = _starting_seconds(record, name, view.entries[first][name])
        cells.append("kept through the session" if start is None else f"{start:.0f} s")
        rows.append(cells)
    levels = list(view.entries)
    head = ["combination", *(_level_name(s) + ": ratio, outcome, pairs, time" for s in levels), "starting workers"]
    sessions = ", ".join(f"{i + 1} (started {_session_span(record['sessions'][i])})" for i in view.sessions)
    lines = [f"run {run + 1} of {runs_held(record)}" + (f", measured in session(s) {sessions}" if sessions else "")
             + ":", *markdown_table(head, rows), ""]
    seconds, starts = _level_seconds(view), _run_starts(record, view)
    total = sum(seconds.values()) + (starts or 0)
    lines.append("measured " + ", ".join(f"{seconds[s]:.0f}" for s in levels) + " s per level"
                 + (f", plus {starts:.0f} s starting workers" if starts is not None else "")
                 + f": {total / 60:.0f} minutes")
    n = len(view.names)
    counts = [f"{_level_name(s)}: {sum(view.failed[s].values())} of {n} "
              + ("failed" if float(s) == 0 else "caught") for s in levels]
    if view.whole:
        lines.append("after Holm's step-down over the run's matrix: " + "; ".join(counts))
    else:
        lines.append(f"unfinished: {n} of {n + len(view.missing)} combinations measured (lacks "
                     f"{', '.join(view.missing)}); as each ran, at its own Bonferroni share: " + "; ".join(counts)
                     + "; Holm's step-down judges the run once --resume finishes it")
    return lines


def _spans(positions: Sequence[int]) -> str:
    """1-based positions as runs of consecutive ones: [1, 2, 3, 5, 6] -> "1-3, 5-6"."""
    spans: List[List[int]] = []
    for p in sorted(positions):
        if spans and p == spans[-1][1] + 1:
            spans[-1][1] = p
        else:
            spans.append([p, p])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)


def _run_sessions(record: dict, view: RunView) -> str:
    """The sessions that measured a run (``_session_span``); where there were several, each followed by the
    positions, in the record's order, of the combinations it measured in this run: "(combinations 1-3)"."""
    spans = [_session_span(record["sessions"][i]) for i in view.sessions]
    if len(spans) < 2:
        return ", ".join(spans)
    order = {n: p for p, n in enumerate(record["combinations"], 1)}
    for k, i in enumerate(view.sessions):
        mine = [order[n] for n in view.names if any(per[n].get("session") == i for per in view.entries.values())]
        spans[k] += f" (combination{'s' if len(mine) > 1 else ''} {_spans(mine)})"
    return ", ".join(spans)


def runs_table(record: dict, views: Optional[Sequence[RunView]] = None) -> List[str]:
    """Every run of a paired quality record in a Markdown table, a row per run: its sessions (``_run_sessions``:
    which combinations each measured where a run took several), then per level how many comparisons failed (planted:
    were caught) of those it holds, the range of their ratios and their pairs (median), its minutes with those spent
    starting workers, and the range of its unchanged comparisons' ``asymmetry_t`` with their sum over the square
    root of their number (an A/B asymmetry would push it one way run after run). ``views``: every run as
    ``run_view`` judged it already."""
    levels = [str(s) for s in record["levels"]]
    head = ["run", "sessions (commit, machine)",
            *(_level_name(s) + (": failed" if float(s) == 0 else ": caught") + ", ratios, pairs (median)"
              for s in levels), "minutes (starting workers)", "unchanged t: range, sum over sqrt(n)"]
    rows = []
    views = views if views is not None else [run_view(record, r) for r in range(runs_held(record))]
    for r, view in enumerate(views):
        n = len(view.names)
        cells = [f"{r + 1}" + ("" if view.whole else f" (unfinished: {n} of {n + len(view.missing)}, as ran)"),
                 _run_sessions(record, view) or "-"]
        for s in levels:
            ratios = [x["ratio"] for x in view.entries[s].values()]
            pairs = [x["pairs"] for x in view.entries[s].values()]
            spread = f"{min(pairs)}" if min(pairs) == max(pairs) else f"{min(pairs)}-{max(pairs)}"
            cells.append(f"{sum(view.failed[s].values())}/{n}, {min(ratios):.3f}-{max(ratios):.3f}, "
                         f"{spread} ({statistics.median(pairs):g})")
        starts = _run_starts(record, view)
        minutes = (sum(_level_seconds(view).values()) + (starts or 0)) / 60
        cells.append(f"{minutes:.0f}" + (f" ({starts / 60:.1f})" if starts is not None else ""))
        ts = [t for t in map(asymmetry_t, view.entries[levels[0]].values()) if t is not None]
        cells.append(f"{min(ts):+.2f} to {max(ts):+.2f}, {sum(ts) / math.sqrt(len(ts)):+.2f}" if ts else "-")
        rows.append(cells)
    return markdown_table(head, rows)


def shown_record(record: dict) -> List[str]:
    """``gate-quality --show``'s lines for a paired record: ``runs_table``, ``lean_table`` where its sides took
    turns to go first, then the summary's report once a run is whole; each run judged once, for both."""
    views = [run_view(record, r) for r in range(runs_held(record))]
    lines = runs_table(record, views)
    leans = order_leans(record)
    if leans:
        lines += ["", "which side went first or led a pair's chunks, over the unchanged comparisons of every run (the "
                  "turns cancel a first mover's or leader's lean from the mean; a difference shows one):",
                  *lean_table(leans)]
    if next_run(record)[0]:
        lines += ["", *paired_report(summarize_paired(record, views))]
    return lines
