"""What recorded quality runs say under another gate or another design, measuring nothing.

* ``judge_again`` / ``rejudged``: a stored record's sessions judged again from
  their rounds by this checkout's gate, against the baselines they were judged
  against: what a change to the gate does to a runner's recorded days.
* ``simulate_stored`` / ``simulate_paired``: a matrix of many combinations
  (400 by default, the size of a full GPU matrix) of unchanged code, drawn from
  recorded samples: how often would any combination fail?
* ``paired_power``: a paired record's comparisons resampled by process-pair block
  and judged under another schedule: what it would catch, before a new design
  spends twenty runs to show it.
"""

from __future__ import annotations

import copy
import datetime
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from hpcnn.perf import gate, quality, sequential, stored
from hpcnn.perf.baselines import Baselines


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


def judge_again(record: dict, machine: Optional[str] = None) -> Dict[str, List[Judged]]:
    """Every session of a stored record judged again from its rounds by this gate, against the baselines it was
    judged against (the record's ``baselines``) and at the time it ran: {level: [``Judged``, one per session]}.
    A failure whose session re-measured it is confirmed or cleared by those rounds, judged at the time they ran;
    one recorded without a re-measurement (confirmation off, or a record from before it) stands. Each
    comparison on the machine it names (``machine`` in its rounds), or on ``machine`` where given (a record of
    sessions that named none: what that machine's sessions are to the baselines), or unknown."""
    against = judged_against(record)
    out: Dict[str, List[Judged]] = {}
    for level, sessions in record["sessions"].items():
        out[level] = []
        for session in sessions:
            now = datetime.datetime.fromtimestamp(session["start"], datetime.timezone.utc)
            rounds = session["combinations"]

            def judge(key: str, alpha: float, rounds=rounds, now=now) -> gate.Verdict:
                return against.judge(key, rounds[key]["images_per_sec_rounds"], rounds[key]["yardstick_rates"],
                                     alpha, now=now, machine=machine or rounds[key].get("machine"))

            own = gate.combination_alpha(gate.DEFAULT_ALPHA, len(rounds))
            alone = {key: judge(key, own) for key in rounds}
            holm = gate.family(alone, {k: v.p_slower for k, v in alone.items()}, judge)
            final = dict(holm)
            for key, v in holm.items():
                x = rounds[key]
                if v.failed and x.get("confirm_images_per_sec_rounds"):
                    when = datetime.datetime.fromtimestamp(x["confirm_time"], datetime.timezone.utc)
                    again = against.judge(key, x["confirm_images_per_sec_rounds"], x["confirm_yardstick_rates"],
                                          gate.CONFIRM_ALPHA, now=when, machine=machine or x.get("machine"))
                    final[key] = gate.confirm(v, again, x["confirm_pause_s"])
            out[level].append(Judged(alone, holm, final))
    return out


def rejudged(record: dict, machine: Optional[str] = None) -> dict:
    """A stored record as this gate decides it (``judge_again``): a copy whose every comparison's verdict (after
    Holm and confirmation), ratio, level, p-value and MDS, and every session's ``failed``, are this gate's, so
    that ``summarize_stored`` tells what a change to the gate does to recorded sessions."""
    out = copy.deepcopy(record)
    for level, judged in judge_again(record, machine).items():
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
            blocks += quality.process_pairs(run)
        out[key] = [b[i:i + size] for b in blocks for i in range(0, len(b), size)] if size else blocks
    return out


def design_blocks(record: dict, schedule: sequential.Schedule, level: str = "0.0",
                  restart_every: Optional[int] = None) -> Dict[str, List[List[float]]]:
    """``process_pair_blocks`` as process pairs of a design run them: pieces of ``restart_every`` pairs, the
    design's restarts. Restarting every pair (1), each recorded pair is a block of its own, whose offset is
    then a draw from the record's process pairs, as each pair of that design has one of its own; never
    restarting (0), the record's process pairs whole, the nearest a record of shorter ones comes to one
    process pair per comparison. Without ``restart_every``, the schedule's: pieces of ``schedule.block``
    pairs, and a schedule of block 1 (pairs taken as independent) keeps the record's own process pairs, which
    its test ignores but the machine does not.

    Raises:
      ValueError: the design's process pairs are longer than the record's, or are not the test's blocks.
    """
    if restart_every is None:
        size = schedule.block if schedule.block > 1 else 0
    elif schedule.block != (restart_every or 1):
        raise ValueError(f"the test's blocks must be the process pairs: a schedule of block {schedule.block} "
                         f"with restarts every {restart_every} pairs")
    else:
        size = restart_every
    ran = record.get("restart_every") or 0
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
                 draws: int = 200, seed: int = 0, restart_every: Optional[int] = None) -> Dict[str, Dict[str, dict]]:
    """{level: {combination: {"flagged": share, "median_pairs": n}}}: a paired quality record's comparisons at
    each level (unchanged and planted) resampled by process-pair block (``draw_blocks``) and judged again under
    ``schedule`` (process pairs of ``restart_every`` pairs: ``design_blocks``), each at the combination's own
    level of the run that recorded them (Holm's step-down can only add catches, so a planted share is a floor).
    What another cap of pairs, or other restarts, would have caught on this machine, from pairs it measured,
    before a new design spends twenty runs to show it."""
    rng = np.random.default_rng(seed)
    each = record.get("combination_alpha") or gate.combination_alpha(gate.DEFAULT_ALPHA, len(record["combinations"]))
    out: Dict[str, Dict[str, dict]] = {}
    for level in record["levels"]:
        out[str(level)] = {}
        for key, blocks in design_blocks(record, schedule, str(level), restart_every).items():
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
    return quality.level_table(levels, [[key] + [f"{power[s][key]['flagged']:.2f} ({power[s][key]['median_pairs']:.0f})"
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
