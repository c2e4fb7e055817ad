"""The gate's decisions, on samples recorded on this project's 2-core CPU.

recorded_rounds.json: 20 gate-quality runs of trivial-ps, rounds interleaved A B B A,
unchanged and with a planted 25% slowdown (adjacent rounds form pairs).
recorded_sessions.json: smoke-matrix sessions recorded as a runner records its
baselines (separate pytest processes, minutes apart), whole-session drift included.
yardstick_sessions.json: 16 perf-suite sessions of one commit with the yardstick rate
timed beside each; every other one ran beside a process burning one of the 2 cores.
"""

import copy
import dataclasses
import datetime
import statistics
import glob
import itertools
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from scipy import stats

from hpcnn.perf import baselines as baselines_lib
from hpcnn.perf import explain, gate, paired, quality, replay, sequential, stored, worker
from hpcnn.perf.baselines import Baselines
from hpcnn.perf.matrix import Combination, build_matrix
from unit_tests.recorded import DATA, EIGHT_OCCASIONS, SLOW_SPELLS, TWO_DAYS_LATER
from unit_tests.helpers import REPO, SHIPPED_BASELINES


def _load(name):
    with open(os.path.join(DATA, name)) as f:
        return json.load(f)


ROUNDS = _load("recorded_rounds.json")
SESSIONS = _load("recorded_sessions.json")
SMOKE_ALPHA = gate.combination_alpha(gate.DEFAULT_ALPHA, len(SESSIONS["combinations"]))


def _pooled(runs):
    """Every recorded adjacent pair of ``runs``, as (A, B) throughputs."""
    return [(x, y) for r in runs for x, y in zip(r["baseline"], r["current"])]


def _replay(pairs, seed):
    """A sequential run whose pairs are drawn (seeded, with replacement) from ``pairs``.

    Drawn from all runs' pairs pooled, not from one run's six: one run's pairs share
    that moment's drift (a run where B happened to sit 13% low throughout exists),
    and replaying six pairs twenty times would fake a consistency they do not have.
    The window-level drift is in the real runs of `hpcnn-perf gate-quality --mode=paired`.
    """
    rng = np.random.default_rng(seed)
    order = rng.integers(len(pairs), size=64)
    return lambda r: pairs[order[r]]


# -- the verdict vocabulary ----------------------------------------------------------------------------------
def test_a_regression_needs_both_size_and_significance():
    run = ROUNDS["slowdown_25"][0]
    a = run["baseline"] * 4  # 24 recorded pairs: enough for the rank test to reach small levels
    b = run["current"] * 4
    v = sequential.judge_pairs(a, b, threshold=0.05, alpha=SMOKE_ALPHA)
    assert v.verdict == gate.REGRESSION and v.ratio < 0.85 and v.ci_low <= v.ratio <= v.ci_high
    assert sequential.judge_pairs(a, b, threshold=0.30, alpha=SMOKE_ALPHA).verdict == gate.UNCHANGED  # too small
    unchanged = ROUNDS["unchanged"][0]
    slower = [x * 0.97 for x in unchanged["current"]]
    v = sequential.judge_pairs(unchanged["baseline"] * 4, slower * 4, threshold=0.05, alpha=SMOKE_ALPHA)
    assert v.verdict in (gate.UNCHANGED, gate.NOISE) and v.ratio > 0.95  # a 3% drop is not beyond 5%


def test_family_alpha_is_split_over_the_combinations_judged():
    assert gate.combination_alpha(0.01, 400) == pytest.approx(2.5e-5)
    assert gate.combination_alpha(0.01, 0) == 0.01


def test_holm_steps_down_from_the_smallest_p_value_and_stops_at_the_first_it_keeps():
    # m = 4 at 0.01: the levels are 0.0025, 0.0033, 0.005, 0.01 in order of p
    assert gate.step_down({"a": 0.001, "b": 0.003, "c": 0.0049, "d": 0.5}) == pytest.approx(
        {"a": 0.0025, "b": 0.01 / 3, "c": 0.005})
    assert gate.step_down({"a": 0.001, "b": 0.004, "c": 0.0049, "d": 0.009}) == {"a": 0.0025}  # b stops it
    assert gate.step_down({"a": 0.004, "b": 0.001, "c": 0.02}) == pytest.approx({"b": 0.01 / 3, "a": 0.005})
    assert gate.step_down({"a": 0.0051, "b": 0.006}) == {}  # nothing below alpha/m: Holm rejects what Bonferroni does
    assert gate.step_down({}) == {}


def test_mds_grows_with_noise_and_shrinks_with_evidence():
    assert gate.mds(0.02, 10, 0.01) < gate.mds(0.04, 10, 0.01) < gate.mds(0.04, 3, 0.01)
    assert gate.mds(0.02, 10, 0.001) > gate.mds(0.02, 10, 0.01)
    # one-sided t quantiles at alpha and at the power, on the log scale
    expected = 1 - math.exp(-(2.7638 + 0.8791) * 0.02)  # t(0.99, 10) + t(0.8, 10)
    assert gate.mds(0.02, 10, 0.01) == pytest.approx(expected, rel=1e-3)
    assert gate.mds(float("nan"), 5, 0.01) == math.inf


# -- paired mode: sequential rounds --------------------------------------------------------------------------
def test_schedule_spends_at_most_alpha_and_refuses_useless_shapes():
    s = sequential.Schedule()
    assert s.looks() == list(range(8, 49, 4)) and s.block == 2
    for level in (0.01, 0.01 / 7, 0.01 / 400, 1e-9):
        assert sum(s.alpha_at(k, level) for k in range(len(s.looks()))) == pytest.approx(level)
    assert sequential.Schedule(5, 4, 7).looks() == [5, 7]
    assert sequential.Schedule(6, 1, 6).alpha_at(0, 0.01) == 0.01
    with pytest.raises(ValueError, match="min_pairs <= max_pairs"):
        sequential.Schedule(8, 4, 6)
    with pytest.raises(ValueError, match="3 <= min_pairs"):
        sequential.Schedule(2, 1, 6)
    with pytest.raises(ValueError, match="block >= 1"):
        sequential.Schedule(block=0)


def test_early_looks_share_the_early_half_only_where_all_blocks_one_way_could_reject():
    """n pairs in blocks of b, all one way, give the exact blocked signed-rank test's smallest p, 1/2^(n/b): with
    pairs one by one 1/256 at 8 pairs and 1/4096 at 12; in blocks of 2, 1/4096 takes 24 pairs."""
    s = sequential.Schedule(max_pairs=20, block=1)
    assert s.weights(0.01 / 7) == [0.0, 0.25, 0.25, 0.5]  # 1/4096 < 0.0014 / 4, but 1/256 > 0.0014 / 6
    assert s.weights(0.01) == [0.0, 0.25, 0.25, 0.5]  # 1/256 > 0.01 / 6: the look at 8 pairs is never reachable
    assert s.weights(0.05) == [1 / 6, 1 / 6, 1 / 6, 0.5]
    assert s.weights(0.01 / 400) == [0.0, 0.0, 0.0, 1.0]  # 2^-16 = 1.5e-5 > 2.5e-5 / 2: only 20 pairs can reject
    blocked = sequential.Schedule()
    assert blocked.smallest_p(24) == 0.5 ** 12 and blocked.smallest_p(25) == 0.5 ** 13
    # smoke's 0.01/6: 2^-14 at 28 pairs is below 0.0017 / 10, 2^-12 at 24 is not below 0.0017 / 12
    assert blocked.weights(0.01 / 6) == [0.0] * 5 + [0.1] * 5 + [0.5]
    assert blocked.weights(0.01 / 400) == [0.0] * 7 + [1 / 6] * 3 + [0.5]  # 400 combinations: from 36 pairs on
    for schedule in (s, blocked):
        for level in (0.01 / 7, 0.01 / 400):
            for n, w in zip(schedule.looks(), schedule.weights(level)):  # every part spent is one its look can reach
                assert w == 0 or schedule.smallest_p(n) < level * w
    # a record made before keeps the equal parts and the test it ran with, and a fresh schedule refuses to resume it
    old = sequential.Schedule.recorded({"min_pairs": 8, "step": 4, "max_pairs": 20})
    assert old.weights(0.01 / 7) == [1 / 6, 1 / 6, 1 / 6, 0.5] and old.block == 1 and old != s
    assert sequential.Schedule.recorded({k: v for k, v in vars(blocked).items() if k != "block"}).block == 1
    assert sequential.Schedule.recorded(vars(blocked)) == blocked
    # Holm's larger levels scale the combination's parts: the tests stay nested
    assert s.alpha_at(1, 0.01 / 6, level=0.01 / 7) == pytest.approx(0.01 / 6 * 0.25)
    assert s.alpha_at(0, 0.01, level=0.01 / 7) == 0.0


def test_sequential_gate_on_recorded_pairs_never_fails_unchanged_code_and_catches_25_percent():
    schedule = sequential.Schedule()
    same, slower = _pooled(ROUNDS["unchanged"]), _pooled(ROUNDS["slowdown_25"])
    unchanged = [sequential.run_sequential(_replay(same, i), schedule, 0.02, SMOKE_ALPHA) for i in range(20)]
    slowed = [sequential.run_sequential(_replay(slower, i), schedule, 0.02, SMOKE_ALPHA) for i in range(20)]
    assert sum(v.failed for v, _, _ in unchanged) == 0
    assert sum(v.failed for v, _, _ in slowed) >= 19
    # clear cases stop at the first look that can reject (14 process pairs of 2: 2^-14 below 0.0014 / 10);
    # every run ends at a look of the schedule
    assert min(len(a) for _, a, _ in slowed) == 28
    assert {len(a) for _, a, _ in unchanged + slowed} <= set(schedule.looks())


def test_clearly_equal_sides_stop_at_the_first_look_with_an_interval():
    """Pairs one by one have a 95% interval at 8 pairs; in blocks of 2, 4 process pairs have none (their
    smallest p, 1/16, is above 2.5%), 6 have one."""
    same = [(x, x * 1.001) for x, _ in _pooled(ROUNDS["unchanged"])]  # B tracks A round for round
    v, a, b = sequential.run_sequential(_replay(same, 0), sequential.Schedule(block=1), 0.02, SMOKE_ALPHA)
    assert len(a) == 8 and v.verdict == gate.UNCHANGED and 0.98 < v.ci_low <= v.ci_high < 1.02
    v, a, b = sequential.run_sequential(_replay(same, 0), sequential.Schedule(), 0.02, SMOKE_ALPHA)
    assert len(a) == 12 and v.verdict == gate.UNCHANGED and 0.98 < v.ci_low <= v.ci_high < 1.02
    assert sequential.judge_pairs(*zip(*same[:8]), block=2).ci_high == math.inf


QUALITY_RECORDS = os.path.join(SHIPPED_BASELINES, "quality")
XEON_PAIRED = os.path.join(QUALITY_RECORDS, "equal-part-looks",
                           "cpu-xeon-f6m207-avx512-bf16-onednn-2c-tf2.21.paired.json")
ZEN4_PAIRED = os.path.join(QUALITY_RECORDS, "per-process-plants",
                           "cpu-amd-epyc-f25m17-avx512-bf16-onednn-2c-tf2.21.paired.json")  # runs of the smoke matrix
THREE_STEP_ROUNDS = os.path.join(QUALITY_RECORDS, "three-step-rounds")  # the design before paired.round_steps
PAIR_LEVEL_TEST = os.path.join(QUALITY_RECORDS, "pair-level-test")  # the design before blocks of process pairs


def _in_order(comparison: dict, schedule: sequential.Schedule, threshold: float, alpha: float):
    """A recorded comparison's pairs run again in the order they ran, through ``schedule``: (verdict, A's rounds,
    B's rounds). StopIteration: the schedule would want more pairs than were recorded."""
    pairs = iter(zip(comparison["a"], comparison["b"]))
    return sequential.run_sequential(lambda _: next(pairs), schedule, threshold, alpha)


def _comparisons(record: dict):
    """(combination, level, run, comparison) for every comparison a paired quality record holds."""
    for k, c in record["combinations"].items():
        for level, comparisons in c.items():
            for r, x in enumerate(comparisons):
                yield k, level, r, x


def _as_placed_now(fields: dict) -> sequential.Schedule:
    """A recorded schedule's pairs, looks and test (records before blocks tested pairs one by one), with its
    looks' parts of the level placed as this gate places them."""
    return sequential.Schedule(**{"block": 1, **{k: v for k, v in fields.items() if k != "reachable_only"}})


def test_the_xeon_paired_record_judged_with_reachable_looks_stops_sooner_with_the_same_verdicts():
    """The six Xeon runs ran with equal parts, so no planted slowdown could stop before 16 pairs; with the
    early half on the looks at 12 and 16, the same recorded pairs catch what they caught, mostly at 12 pairs,
    and unchanged code still fails nowhere (every pair beyond a new stop was recorded, so the replay is exact)."""
    with open(XEON_PAIRED) as f:
        record = json.load(f)
    ran, now = sequential.Schedule.recorded(record["schedule"]), _as_placed_now(record["schedule"])
    each, threshold = record["combination_alpha"], record["threshold"]
    stops = {s: {"ran": [], "now": []} for s in ("0.0", "0.05", "0.1")}
    for _, s, _, x in _comparisons(record):
        for tag, schedule in (("ran", ran), ("now", now)):
            v, a, _ = _in_order(x, schedule, threshold, each)
            stops[s][tag].append((len(a), v.failed))
        assert stops[s]["ran"][-1] == (x["pairs"], x["verdict"] == gate.REGRESSION)
    assert stops["0.0"]["now"] == stops["0.0"]["ran"]  # 0/42 failed: unchanged pairs never reach 12 all one way
    for s in ("0.05", "0.1"):
        assert [f for _, f in stops[s]["now"]] == [f for _, f in stops[s]["ran"]]
        assert min(n for n, _ in stops[s]["ran"]) == 16
    assert sum(n == 12 for n, _ in stops["0.1"]["now"]) >= 35 and sum(n == 12 for n, _ in stops["0.05"]["now"]) >= 18


def test_the_earlier_designs_paired_records_judged_by_this_gate_fail_no_unchanged_run():
    """The unchanged comparisons of the paired records of earlier designs (their plants differ, but unchanged
    sides carry none), replayed pair by pair through this gate's looks and Holm's step-down: each stops within
    the pairs it recorded, and none of their 60 runs of unchanged code fails, on four CPU classes."""
    paths = sorted(glob.glob(os.path.join(QUALITY_RECORDS, "*", "*.paired.json")))
    runs = {}
    for path in paths:
        with open(path) as f:
            record = json.load(f)
        schedule = _as_placed_now(record["schedule"])
        each = gate.combination_alpha(record["alpha"], len(record["combinations"]))
        ran = min(len(c["0.0"]) for c in record["combinations"].values())
        for r in range(ran):
            replayed = {}
            for key, c in record["combinations"].items():
                _, a, b = _in_order(c["0.0"][r], schedule, record["threshold"], each)
                replayed[key] = a, b
            verdicts = sequential.family_verdicts(replayed, schedule, record["threshold"], record["alpha"])
            assert not [k for k, v in verdicts.items() if v.failed], (path, r)
        runs[record["profile_id"]] = runs.get(record["profile_id"], 0) + ran
    assert runs == {"cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21": 10,
                    "cpu-amd-epyc-f25m17-avx512-bf16-onednn-2c-tf2.21": 34,
                    "cpu-amd-epyc-f26m2-avx512-bf16-onednn-2c-tf2.21": 1,
                    "cpu-xeon-f6m207-avx512-bf16-onednn-2c-tf2.21": 15}


def test_paired_records_replayed_through_their_recorded_schedule_reach_what_they_recorded():
    """Every comparison of the records of the current design (``quality/*.paired.json``) and of the one before
    it (``pair-level-test/``), its pairs replayed in the order they ran through the looks and test of its recorded
    schedule: it stops where it stopped, with the verdict it had. A change to the schedule or the test that would
    have judged these runs differently fails here. (Each run's Holm step-down over those pairs is checked against
    the record's summary in test_perf_suite.)"""
    current = sorted(glob.glob(os.path.join(QUALITY_RECORDS, "*.paired.json")))
    paths = current + sorted(glob.glob(os.path.join(PAIR_LEVEL_TEST, "*.paired.json")))
    assert len(paths) >= 2  # the Zen 4 runs of 2026-11-28 and the Zen 3 runs of 2026-12-01 at least
    for path in paths:
        with open(path) as f:
            record = json.load(f)
        schedule = sequential.Schedule.recorded(record["schedule"])
        assert (schedule == sequential.Schedule()) == (path in current)  # the current design's schedule
        each, threshold = record["combination_alpha"], record["threshold"]
        for k, level, r, x in _comparisons(record):
            v, a, _ = _in_order(x, schedule, threshold, each)
            assert (len(a), v.verdict) == (x["pairs"], x["verdict"]), (path, k, level, r)


def test_holm_step_down_over_a_recorded_paired_run_catches_what_one_combination_missed_at_its_own_level():
    """In runs 1, 3, 9 and 10 of the Zen 4 paired record, alexnet bf16's planted 5% stayed "noise" after 20 pairs
    at its Bonferroni share of the level (in runs 1 and 3 p 0.0014 and 0.0027 against 0.0014 / 2 at the last
    look), while the other combinations failed (in run 10 all but trivial-replicated, which Holm's 0.01/2 caught
    first). Holm's step-down then tests it at the full 0.01 and catches it. Among its run's unchanged
    comparisons, where nothing else failed, the same pairs still pass."""
    with open(ZEN4_PAIRED) as f:
        record = json.load(f)
    schedule = sequential.Schedule.recorded(record["schedule"])
    threshold, combos = record["threshold"], record["combinations"]
    each = record["combination_alpha"]
    for c in combos.values():  # what ran is what judge_at gives the recorded pairs at the combination's level
        for comparisons in c.values():
            for x in comparisons:
                v = sequential.judge_at(x["a"], x["b"], schedule, threshold, each)
                assert v.verdict == x["verdict"] and len(x["a"]) == x["pairs"]
                assert (sequential.family_p(x["a"], x["b"], schedule, each) < each) == v.failed
    key = next(k for k in combos if "bf16" in k)
    missed = [r for r, x in enumerate(combos[key]["0.05"]) if x["verdict"] != gate.REGRESSION]
    assert missed == [0, 2, 5, 8, 9]
    rescued = [0, 2, 8, 9]  # in run 6 alexnet fp32 and tiny_resnet missed too: with three left, Holm fell short
    for r in range(len(combos[key]["0.0"])):
        planted = {k: (c["0.05"][r]["a"], c["0.05"][r]["b"]) for k, c in combos.items()}
        holm = sequential.family_verdicts(planted, schedule, threshold, record["alpha"])
        assert all(holm[k].failed for k in combos if combos[k]["0.05"][r]["verdict"] == gate.REGRESSION)
        unchanged = {k: (c["0.0"][r]["a"], c["0.0"][r]["b"]) for k, c in combos.items()}
        assert not any(v.failed for v in sequential.family_verdicts(unchanged, schedule, threshold).values())
        if r in rescued:
            assert all(v.failed for v in holm.values())
            assert holm[key].alpha > each and "Holm's step-down" in holm[key].note
            alone = {**unchanged, key: planted[key]}
            assert not sequential.family_verdicts(alone, schedule, threshold, record["alpha"])[key].failed
        elif r in missed:
            assert not holm[key].failed and sum(not v.failed for v in holm.values()) == 3


@pytest.mark.parametrize("seed", range(4))
def test_signed_rank_p_is_the_exact_permutation_distribution_with_ties_and_zeros(seed):
    d = np.round(np.random.default_rng(seed).normal(size=11), 1)  # rounding makes tied magnitudes and zeros
    nonzero = d[d != 0]
    ranks = stats.rankdata(np.abs(nonzero))
    w = ranks[nonzero > 0].sum()
    every = np.array([ranks[np.array(signs, bool)].sum() for signs in itertools.product([0, 1], repeat=len(ranks))])
    slower, faster = sequential.signed_rank_p(d)
    assert slower == pytest.approx(np.mean(every <= w + 1e-9)) and faster == pytest.approx(np.mean(every >= w - 1e-9))
    untied = np.random.default_rng(seed).normal(size=12)
    assert sequential.signed_rank_p(untied)[0] == pytest.approx(
        stats.wilcoxon(untied, alternative="less", method="exact").pvalue)


@pytest.mark.parametrize("seed", range(4))
def test_blocked_signed_rank_p_is_the_exact_distribution_over_whole_blocks_flipped(seed):
    """Each block of consecutive pairs (a process pair) flips its signs together; the statistic is the sum of all
    signed ranks, ranked over every pair. Enumerated over the 2^6 block patterns of 17 pairs in blocks of 3 (the
    last short), with tied magnitudes and zeros."""
    d = np.round(np.random.default_rng(seed).normal(0.3, 1, size=17), 1)
    nonzero = d != 0
    ranks = np.zeros(len(d))
    ranks[nonzero] = stats.rankdata(np.abs(d[nonzero]))
    signed = np.sign(d) * ranks
    sums = np.array([signed[i:i + 3].sum() for i in range(0, 17, 3)])
    every = np.array([np.dot(flips, sums) for flips in itertools.product([-1, 1], repeat=len(sums))])
    slower, faster = sequential.signed_rank_p(d, block=3)
    t = sums.sum()
    assert slower == pytest.approx(np.mean(every <= t + 1e-9)) and faster == pytest.approx(np.mean(every >= t - 1e-9))
    assert sequential.signed_rank_p(-d, block=3) == pytest.approx((faster, slower))
    assert min(slower, faster) >= 0.5 ** 6  # its smallest: every block one way


def test_the_blocked_interval_is_the_shifts_its_test_keeps():
    """The 95% interval of the blocked test holds the shifts c whose d - c it does not reject at 2.5% either way;
    its ends are Walsh averages, and the next Walsh average beyond each is rejected."""
    d = np.random.default_rng(5).normal(-0.03, 0.05, 40)
    low, high = sequential.shift_interval(d, 2)
    walsh = np.unique(sequential._walsh(d))
    assert low in walsh and high in walsh and low < sequential.hodges_lehmann(d)[0] < high
    assert sequential.signed_rank_p(d - low, 2)[1] >= 0.025 and sequential.signed_rank_p(d - high, 2)[0] >= 0.025
    below, above = walsh[walsh < low].max(), walsh[walsh > high].min()
    assert sequential.signed_rank_p(d - below, 2)[1] < 0.025 and sequential.signed_rank_p(d - above, 2)[0] < 0.025
    assert sequential.shift_interval(d[:10], 2) == (-math.inf, math.inf)  # 5 blocks: 1/32 is above 2.5%
    assert sequential.shift_interval(np.full(12, 0.01), 2) == (0.01, 0.01)  # every block the same: that shift alone


def test_a_verdict_over_process_pairs_says_so_and_quotes_their_spread():
    d = np.random.default_rng(6).normal(-0.06, 0.03, 40)
    a = [100.0] * 40
    b = list(100 * np.exp(d))
    v = sequential.judge_pairs(a, b, 0.02, 0.001, block=2)
    assert v.evidence == "40 paired rounds in 20 process pairs" and v.verdict == gate.REGRESSION
    assert v.p_slower == sequential.signed_rank_p(d, 2)[0] and v.ratio == sequential.judge_pairs(a, b).ratio
    assert sequential.judge_pairs(a, b).evidence == "40 paired rounds"


def test_paired_judgement_refuses_unequal_or_tiny_sides():
    with pytest.raises(ValueError, match="two equal sides of 3 or more rounds"):
        sequential.judge_pairs([1.0, 2.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="two equal sides"):
        sequential.judge_pairs([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="positive"):
        sequential.judge_pairs([1.0, 2.0, 0.0], [1.0, 2.0, 3.0])


class _TimedSide:
    """A paired side whose steps each take ``step_s`` seconds, but the first of a new process ``first_s``
    (default ``step_s``); it logs (name, steps) of every chunk it runs and (name, "rebuild") or
    (name, "restart") of every rebuild and restart (which gives it a new pid)."""

    measures_while_starting = True  # restarted one at a time, by restart()

    def __init__(self, name, step_s, log, first_s=None):
        self.name, self.step_s, self.log = name, step_s, log
        self.first_s = step_s if first_s is None else first_s
        self.pids = [f"{name}0"]
        self.fresh = True

    def rebuild(self, overrides=None):
        self.log.append((self.name, "rebuild"))

    def restart(self):
        self.log.append((self.name, "restart"))
        self.pids.append(f"{self.name}{len(self.pids)}")
        self.fresh = True

    def run(self, steps):
        self.log.append((self.name, steps))
        times = [self.first_s if self.fresh else self.step_s] + [self.step_s] * (steps - 1)
        self.fresh = False
        return times


class _StartedSide:
    """A side that logs how it is restarted: closed, spawned, awaited."""

    def __init__(self, name, log, measures=False):
        self.name, self.log, self.measures_while_starting = name, log, measures

    def close(self):
        self.log.append((self.name, "close"))

    def _spawn(self):
        self.log.append((self.name, "spawn"))

    def _await_ready(self):
        self.log.append((self.name, "ready"))

    def restart(self):
        self.log.append((self.name, "restart"))


def test_sides_that_time_nothing_while_starting_restart_at_once_and_a_measuring_one_alone():
    log = []
    paired.restart_all([_StartedSide("B", log), _StartedSide("A", log)])
    assert log == [("B", "close"), ("B", "spawn"), ("A", "close"), ("A", "spawn"), ("B", "ready"), ("A", "ready")]
    log.clear()
    paired.restart_all([_StartedSide("A", log), _StartedSide("B", log, measures=True)])
    assert log == [("A", "restart"), ("B", "restart")]  # B sizes its plant on a quiet machine


def test_a_round_pair_alternates_chunks_a_b_b_a_and_times_each_side_over_its_own_steps():
    log = []
    a, b = _TimedSide("A", 0.01, log), _TimedSide("B", 0.02, log)
    run_pair = paired.pair_runner(a, b, Combination("trivial", "parameter_server", "NHWC", 2, "fp32", 16, 7), chunks=3,
                                  restart_every=4)
    assert run_pair(0) == pytest.approx((3200.0, 1600.0))  # 32 images per step over 10 ms and 20 ms
    assert log == [("A", 3), ("B", 3),  # the first pair: the built sides settle one untimed chunk each,
                   ("A", 3), ("B", 3), ("B", 2), ("A", 2), ("A", 2), ("B", 2)]  # then A B, B A, A B
    log.clear()
    run_pair(1)  # later pairs rebuild both sides first; odd pairs start with B
    assert log[:2] == [("B", "rebuild"), ("A", "rebuild")]
    assert [name for name, _ in log[2:]] == ["B", "A", "A", "B", "B", "A"]
    log.clear()
    run_pair(2)
    assert log[:2] == [("A", "rebuild"), ("B", "rebuild")] and ("A", "rebuild") not in log[2:]


def test_both_sides_restart_as_new_processes_every_few_pairs_and_rebuild_between():
    log = []
    a, b = _TimedSide("A", 0.01, log), _TimedSide("B", 0.02, log)
    run_pair = paired.pair_runner(a, b, Combination("trivial", "parameter_server", "NHWC", 2, "fp32", 16, 4),
                                  chunks=2, restart_every=3)
    for r in range(7):
        run_pair(r)
    before_pairs = [e for e in log if e[1] in ("rebuild", "restart")]
    assert [what for _, what in before_pairs[::2]] == ["rebuild", "rebuild", "restart", "rebuild", "rebuild",
                                                        "restart"]  # before pairs 1..6: restarts before 3 and 6
    assert before_pairs[4:6] == [("B", "restart"), ("A", "restart")]  # in the order pair 3's chunks start
    assert before_pairs[10:12] == [("A", "restart"), ("B", "restart")]  # pair 6: the next process pair, A first
    assert run_pair.processes == [("A0", "B0")] * 3 + [("A1", "B1")] * 3 + [("A2", "B2")]
    restarted = log.index(("A", "restart"))  # pair 3 ran B first: after both restarts, each settles a chunk
    assert log[restarted + 1:restarted + 3] == [("B", 2), ("A", 2)]
    steps = sum(n for _, n in log if n not in ("rebuild", "restart"))
    assert steps == 7 * 2 * 4 + 3 * 2 * 2  # 7 pairs of 4 timed steps a side; 3 fresh pairs settle 2 a side
    never = paired.pair_runner(a, b, Combination("trivial", "parameter_server", "NHWC", 2, "fp32", 16, 4),
                               restart_every=0)
    log.clear()
    for r in range(5):
        never(r)
    assert ("A", "restart") not in log and never.processes == [("A2", "B2")] * 5


def test_the_slow_first_step_of_a_fresh_process_is_left_out_of_the_pairs_it_times():
    log = []
    a = _TimedSide("A", 0.01, log, first_s=0.03)  # a new process's first step: three times as long
    b = _TimedSide("B", 0.02, log)
    run_pair = paired.pair_runner(a, b, Combination("trivial", "parameter_server", "NHWC", 1, "fp32", 32, 6),
                                  chunks=3, restart_every=2)
    assert [x for r in range(3) for x in run_pair(r)] == pytest.approx([3200.0, 1600.0] * 3)  # 2: after a restart
    assert [n for name, n in log if name == "A"] == [2, 2, 2, 2, "rebuild", 2, 2, 2, "restart", 2, 2, 2, 2]


def _busy_share_of_one_core(seconds):
    cpu, wall = time.process_time(), time.perf_counter()
    time.sleep(seconds)
    return (time.process_time() - cpu) / (time.perf_counter() - wall)


def test_a_worker_answers_only_once_its_input_pipeline_has_filled_its_buffers():
    import tensorflow as tf

    def costly(i):  # 1.3 GFLOP of real work per element: 10-30 ms on one core
        m = tf.random.stateless_uniform((320, 320), seed=tf.stack([i, i]))
        for _ in range(20):
            m = tf.linalg.matmul(m, m) / 320.0
        return tf.reduce_sum(m)

    # 100 elements keep the pipeline busy for a second or more; the premise is read over 0.2 s, not a single
    # 50 ms slice, so that two busy neighbours on a 2-core machine (a perf run beside CI) do not break it
    elements = iter(tf.data.Dataset.range(10_000).map(costly).prefetch(100))
    next(elements)
    assert _busy_share_of_one_core(0.2) > 0.2  # the premise: the pipeline goes on filling its buffer
    waited = worker.settle(limit_s=60.0)
    assert _busy_share_of_one_core(0.2) < 0.1
    assert 0.1 < waited < 60.0
    assert worker.settle() < 0.2  # a quiet process answers at once


_STARVED = """
import hashlib, os, subprocess, sys, threading, time
from hpcnn.perf import worker

os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, which the threads started below inherit
# a neighbour at full priority on that core, which ends by itself should this script die before killing it
hog = subprocess.Popen([sys.executable, "-c", "import time\\nend = time.time() + 30\\nwhile time.time() < end: pass"])
try:
    os.sched_setaffinity(hog.pid, os.sched_getaffinity(0))
    stop = threading.Event()

    def pipeline():  # wants the core all the time (hashing releases the GIL) but gets ~1.5% of it at nice 19
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        data = bytes(1 << 22)
        while not stop.is_set():
            hashlib.sha256(data).digest()

    threading.Thread(target=pipeline, daemon=True).start()
    time.sleep(0.3)
    waited = worker.settle(limit_s=1.0)
    worker._runnable_threads = lambda: 0  # what settle saw before it counted threads waiting for a core
    blind = worker.settle(limit_s=1.0)
    stop.set()
    print(waited, blind)
finally:
    hog.kill()
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads thread states from Linux's /proc")
def test_a_pipeline_starved_by_a_neighbour_is_not_taken_for_a_quiet_one():
    out = subprocess.run([sys.executable, "-c", _STARVED], cwd=REPO, capture_output=True, text=True, timeout=60,
                         check=True)
    waited, blind = map(float, out.stdout.split())
    assert waited >= 1.0  # never quiet: the starved thread stays runnable, so settle waits to its limit
    assert blind < 1.0  # counting only the CPU it got, the starved thread looked quiet


@pytest.mark.parametrize("matrix", ["smoke", "full"])
def test_every_paired_round_alternates_in_all_its_chunks_and_stored_rounds_keep_their_steps(matrix):
    """Alexnet's smoke rounds are 3 steps, which cut into 3 chunks, not 10: in a pair (and in explain's
    pairs) each side runs 10, one per chunk; every other round already had a step per chunk and keeps its
    length."""
    for c in build_matrix(matrix):
        steps = paired.round_steps(c)
        assert len(paired.round_chunks(c)) == paired.CHUNKS and sum(paired.round_chunks(c)) == steps
        assert steps == c.steps_per_round or (c.steps_per_round < paired.CHUNKS and steps == paired.CHUNKS)
    smoke = {c.key: paired.round_steps(c) for c in build_matrix("smoke")}
    assert [smoke[k] for k in sorted(smoke)] == [10, 10, 30, 20, 20, 30, 20]  # alexnet bf16, fp32, lenet, ...
    log = []
    a, b = _TimedSide("A", 0.01, log), _TimedSide("B", 0.02, log)
    alexnet = next(c for c in build_matrix("smoke") if c.model == "alexnet")
    one_step_chunks = [(name, 1) for _ in range(5) for name in ("A", "B", "B", "A")]
    paired.pair_runner(a, b, alexnet)(0)
    assert log[2:] == one_step_chunks  # after a settle chunk each
    log.clear()  # explain times its variants in the same rounds
    explain.measure(a, b, alexnet, {"step": {}}, pairs=1, log=lambda line: None)
    assert [e for e in log if e[1] != "rebuild"] == one_step_chunks


@pytest.mark.parametrize("steps,chunks,sizes", [(30, 10, [3] * 10), (7, 3, [3, 2, 2]), (3, 10, [1, 1, 1]),
                                                (20, 1, [20])])
def test_chunk_sizes_cover_the_round_in_near_equal_parts(steps, chunks, sizes):
    assert paired.chunk_sizes(steps, chunks) == sizes


# -- stored mode: sessions -----------------------------------------------------------------------------------
def _baselines(drop=None):
    combos = {k: {"sessions": [{"samples": s} for s in v if s is not drop]}
              for k, v in SESSIONS["combinations"].items()}
    return Baselines(SESSIONS["profile"], combos)


def test_pooled_and_moderated_spread_by_hand():
    a = [[100.0, 101.0], [110.0, 111.0], [90.0]]
    b = [[50.0], [55.0]]
    la, lb = np.log([100.5, 110.5, 90.0]), np.log([50.0, 55.0])
    ss = np.sum((la - la.mean()) ** 2) + np.sum((lb - lb.mean()) ** 2)
    pooled = stored.pooled_noise([a, b, [[7.0]]])  # a single session adds nothing
    assert pooled.df == 3 and pooled.sigma == pytest.approx(math.sqrt(ss / 3))
    own = stored.moderated_noise(b, pooled)
    assert own.df == 1 + 3  # own df + min(pooled df, PRIOR_DF)
    assert own.sigma ** 2 == pytest.approx((3 * pooled.sigma ** 2 + np.sum((lb - lb.mean()) ** 2)) / 4)
    assert stored.moderated_noise([[7.0]], None) is None


def test_every_recorded_session_passes_against_the_others_whatever_its_drift():
    """Leave one session out: unchanged code, each session's own drift included, never fails."""
    biggest_shift = 0.0
    for key, sessions in SESSIONS["combinations"].items():
        for j, current in enumerate(sessions):
            rest = sessions[:j] + sessions[j + 1:]
            b = _baselines(drop=current)
            v = stored.judge_sessions(rest, current, gate.STORED_THRESHOLD, SMOKE_ALPHA, b.prior())
            assert not v.failed, (key, j, v.describe())
            biggest_shift = max(biggest_shift, abs(math.log(v.ratio)))
    assert biggest_shift > 0.05  # the recording does hold whole-session shifts beyond the threshold


def test_rounds_as_independent_samples_would_have_failed_a_shifted_unchanged_session():
    """Why sessions, not rounds: the old one-session Mann-Whitney gate calls a drifted session a regression."""
    flagged = []
    for key, sessions in SESSIONS["combinations"].items():
        for i, base in enumerate(sessions):
            for current in sessions[i + 1:]:
                if gate.judge_rounds(base, current, gate.STORED_THRESHOLD, SMOKE_ALPHA).failed:
                    flagged.append(key)
    assert flagged  # unchanged code, judged by rounds: false failures
    b = _baselines()
    for key in set(flagged):
        sessions = b.sessions(key)
        assert not stored.judge_sessions(sessions[:-1], sessions[-1], 0.05, SMOKE_ALPHA, b.prior()).failed


def test_a_planted_slowdown_beyond_the_mds_fails_with_the_mds_in_the_message():
    b = _baselines()
    prior = b.prior()
    for key, sessions in SESSIONS["combinations"].items():
        mds = stored.next_session_mds(sessions[:-1], prior, SMOKE_ALPHA)
        slowed = [x * (1 - min(0.9, mds + 0.15)) for x in sessions[-1]]
        v = stored.judge_sessions(sessions[:-1], slowed, gate.STORED_THRESHOLD, SMOKE_ALPHA, prior)
        assert v.failed and f"MDS {v.mds:.1%}" in v.describe(), (key, v.describe())


# -- stored mode on the yardstick: sessions with a busy neighbour -----------------------------------------
YARDSTICK = _load("yardstick_sessions.json")["combinations"]


def _quiet_baselines(leave_out=None):
    return Baselines({}, {k: {"sessions": [s for s in v if not s["neighbour"] and s is not leave_out]}
                          for k, v in YARDSTICK.items()})


def _judged_on_yardstick(b, key, session, factor=1.0):
    """As the perf suite judges ``session`` (its rounds times ``factor``) against ``b``, on one occasion."""
    sessions, reference = b.judged_sessions(key)
    rate = session["yardstick"]["rate"]
    runner = b.runner(key, rate)
    current = stored.on_yardstick([x * factor for x in session["samples"]], rate, reference, runner.slope.beta)
    return stored.judge_sessions(sessions, current, gate.STORED_THRESHOLD, SMOKE_ALPHA, b.prior(), runner)


def test_on_the_yardstick_a_session_beside_a_busy_neighbour_is_no_regression():
    """A neighbour took 30-45% of every combination's speed: raw, each such session fails; on the yardstick none.

    The correction is not exact: the neighbour slows the yardstick more than the trivial models, which read
    up to 28% fast on it (an 'improvement'); lenet's sessions land within 5% of its quiet ones."""
    b = _quiet_baselines()
    raw = Baselines({}, {k: {"sessions": [{"samples": s["samples"]} for s in v if not s["neighbour"]]}
                         for k, v in YARDSTICK.items()})
    for key, sessions in YARDSTICK.items():
        for session in (s for s in sessions if s["neighbour"]):
            shifted = stored.judge_sessions(raw.sessions(key), session["samples"], gate.STORED_THRESHOLD,
                                            SMOKE_ALPHA, raw.prior())
            assert shifted.failed and shifted.ratio < 0.75, (key, shifted.describe())
            v = _judged_on_yardstick(b, key, session)
            assert not v.failed and abs(math.log(v.ratio)) < abs(math.log(shifted.ratio)), (key, v.describe())
            assert "on the yardstick (runner at 0." in v.describe()


def test_on_the_yardstick_quiet_sessions_pass_and_a_drop_beyond_the_mds_is_caught():
    """Leave one quiet session out: unchanged it passes; its rounds 20% slower fail wherever the MDS allows."""
    for key, sessions in YARDSTICK.items():
        caught = 0
        for session in (s for s in sessions if not s["neighbour"]):
            b = _quiet_baselines(leave_out=session)
            unchanged = _judged_on_yardstick(b, key, session)
            assert not unchanged.failed, (key, unchanged.describe())
            slowed = _judged_on_yardstick(b, key, session, factor=0.8)
            assert slowed.failed or unchanged.ratio * 0.8 > 1 - slowed.mds, (key, slowed.describe())
            caught += slowed.failed
        assert caught >= 7, key  # of 8


def test_a_runner_far_slower_than_its_baselines_saw_fails_only_drops_beyond_the_wide_bound():
    """Beside the neighbour the runner ran at 0.5-0.7x of its quiet recording, beyond what the yardstick corrects
    alike (the trivial models read up to 28% fast): there a planted 10% can read as an improvement, so the gate
    fails only drops beyond the wide bound and says why; quiet sessions, within the recorded range, are judged
    as before."""
    b = _quiet_baselines()
    for key, sessions in YARDSTICK.items():
        low, high = b.runner(key, 1.0).seen
        assert 0.8 < low <= 1 <= high < 1.25, (key, low, high)  # the quiet recording's own range
        for session in (s for s in sessions if s["neighbour"]):
            v = _judged_on_yardstick(b, key, session, factor=0.9)
            assert v.verdict in (gate.UNCHANGED, gate.NOISE) and v.mds >= gate.WIDE_BOUND, (key, v.describe())
            assert f"beyond the {low:.2f}-{high:.2f}x its baselines saw" in v.describe()
            assert _judged_on_yardstick(b, key, session, factor=0.5).failed  # a halving still fails
        for session in (s for s in sessions if not s["neighbour"]):
            inside = _judged_on_yardstick(_quiet_baselines(leave_out=session), key, session)
            assert "beyond the" not in inside.describe() and inside.mds < gate.WIDE_BOUND


def test_one_recorded_session_says_it_cannot_tell_drift_from_a_regression():
    key, sessions = next(iter(SESSIONS["combinations"].items()))
    v = stored.judge_sessions(sessions[:1], [x * 0.8 for x in sessions[1]], 0.05, SMOKE_ALPHA, None)
    assert not v.failed and v.mds == gate.WIDE_BOUND and v.weak
    assert v.ratio < 0.9 and v.verdict == gate.NOISE  # a drop inside the wide bound is noise, never "unchanged"
    assert "cannot tell session drift from a regression" in v.describe()
    halved = stored.judge_sessions(sessions[:1], [x * 0.5 for x in sessions[0]], 0.05, 0.01, None)
    assert halved.failed  # beyond the wide bound, with rank significance


# -- stored mode across occasions: the drift between days ----------------------------------------------------
def test_sessions_more_than_an_hour_apart_start_a_new_occasion_and_an_undated_one_joins_the_last():
    dates = ["2026-11-24T03:55:59+00:00", "2026-11-24T04:10:00+00:00", "2026-11-24T05:09:00+00:00", None,
             "2026-11-24T06:10:00+00:00", "2026-11-25T01:30:00+00:00"]
    assert stored.occasions(dates) == [0, 0, 0, 0, 1, 2]  # 59 min is the same occasion; 61 min is not
    assert stored.occasions([None, None]) == [0, 0]
    now = datetime.datetime(2026, 11, 25, 2, 0, tzinfo=datetime.timezone.utc)
    assert not stored.on_new_occasion(dates, now)  # 30 min after the newest session: still its occasion
    assert stored.on_new_occasion(dates, now + datetime.timedelta(hours=1))
    assert stored.on_new_occasion([None], now)  # nothing dated: no recording to share conditions with


def test_occasion_spread_by_hand_is_the_excess_of_occasion_means_over_the_spread_within_them():
    a = [[100.0], [104.0], [120.0], [118.0]]  # two occasions of two sessions
    b = [[50.0], [51.0], [49.0]]  # one occasion: says nothing of the drift
    occ_a, occ_b = [0, 0, 1, 1], [0, 0, 0]
    la, lb = np.log([100.0, 104.0, 120.0, 118.0]), np.log([50.0, 51.0, 49.0])
    ss_within = (np.sum((la[:2] - la[:2].mean()) ** 2) + np.sum((la[2:] - la[2:].mean()) ** 2)
                 + np.sum((lb - lb.mean()) ** 2))
    within = stored.pooled_noise([a, b], [occ_a, occ_b])
    assert within.df == 2 + 2 and within.sigma == pytest.approx(math.sqrt(ss_within / 4))
    means = np.array([la[:2].mean(), la[2:].mean()])
    excess = np.sum((means - means.mean()) ** 2) - within.sigma ** 2 * 0.5  # 1 df; each mean over 2 sessions
    drift = stored.pooled_drift([a, b], [occ_a, occ_b], within)
    d0, s0 = stored.ASSUMED_DRIFT.df, stored.ASSUMED_DRIFT.sigma
    assert drift.measured_df == 1 and drift.df == d0 + 1
    assert drift.sigma ** 2 == pytest.approx((d0 * s0 ** 2 + excess) / (d0 + 1))
    one_day = stored.pooled_drift([b], [occ_b], within)
    assert one_day == stored.ASSUMED_DRIFT  # the assumption alone until a second occasion
    # the occasions are judged as units: the level is the mean of occasion means, not of sessions
    v = stored.judge_sessions(a, [110.0] * 3, occasion=occ_a, prior=within, drift=drift)
    assert v.baseline_median == pytest.approx(math.exp(means.mean()))


def test_a_new_occasion_adds_the_drift_to_the_noise_and_says_whether_it_was_measured():
    b = _baselines()
    key, sessions = next(iter(SESSIONS["combinations"].items()))
    prior, drift = b.prior(), stored.ASSUMED_DRIFT
    same = stored.judge_sessions(sessions[:-1], sessions[-1], 0.05, SMOKE_ALPHA, prior)
    other_day = stored.judge_sessions(sessions[:-1], sessions[-1], 0.05, SMOKE_ALPHA, prior, drift=drift)
    assert other_day.ratio == same.ratio and other_day.mds > same.mds
    assert other_day.ci_low < same.ci_low and other_day.ci_high > same.ci_high
    assert "drift between occasions 5.0% assumed (record sessions on other days" in other_day.describe()
    assert stored.next_session_mds(sessions[:-1], prior, SMOKE_ALPHA, drift=drift) == pytest.approx(other_day.mds)
    measured = stored.Drift(0.03, 20, 8)
    assert "drift between occasions 3.0% measured on 8 occasion contrast(s)" in stored.judge_sessions(
        sessions[:-1], sessions[-1], 0.05, SMOKE_ALPHA, prior, drift=measured).describe()


def test_a_session_within_the_hour_of_the_newest_occasion_is_judged_against_that_occasion_alone():
    """Two recorded days 15% apart: a session of the second day's level, run right after its recording, is
    compared with that day's sessions (no drift term), not with a level half-way between the days."""
    day1 = [[100.0], [101.0], [99.0], [100.5]]
    day2 = [[115.0], [116.0], [114.0], [115.5]]
    occasion = [0, 0, 0, 0, 1, 1, 1, 1]
    within = stored.pooled_noise([day1 + day2], [occasion])
    same = stored.judge_sessions(day1 + day2, [115.2] * 3, 0.05, SMOKE_ALPHA, within, occasion=occasion)
    assert same.baseline_median == pytest.approx(math.exp(np.mean(np.log([115.0, 116.0, 114.0, 115.5]))))
    assert same.verdict == gate.UNCHANGED and same.ratio == pytest.approx(1.0, abs=0.005)
    assert stored.judge_sessions(day1 + day2, [104.0] * 3, 0.05, SMOKE_ALPHA, within, occasion=occasion).failed
    drift = stored.pooled_drift([day1 + day2], [occasion], within)
    new_day = stored.judge_sessions(day1 + day2, [104.0] * 3, 0.05, SMOKE_ALPHA, within, occasion=occasion,
                                    drift=drift)
    assert not new_day.failed and new_day.baseline_median == pytest.approx(math.exp(
        (np.mean(np.log([100.0, 101.0, 99.0, 100.5])) + np.mean(np.log([115.0, 116.0, 114.0, 115.5]))) / 2))


def test_a_refresh_on_a_new_day_keeps_the_days_before_it():
    def day(d, n):
        return [{"samples": [1.0], "date": f"2026-11-{d}T0{i}:00:00+00:00", "i": (d, i)} for i in range(n)]

    kept = baselines_lib.thinned(day(24, 8) + day(25, 8), keep=10)
    assert [s["i"] for s in kept] == [(24, i) for i in range(3, 8)] + [(25, i) for i in range(3, 8)]
    assert baselines_lib.thinned(day(24, 8) + day(25, 1), keep=8) == day(24, 8)[1:] + day(25, 1)
    assert len({s["i"][0] for s in baselines_lib.thinned(day(23, 2) + day(24, 8) + day(25, 8), 10)}) == 3


# -- stored mode the next day: a day-old file, a runner at half its recorded speed ---------------------------
CROSS_DAY = _load("cross_day_sessions.json")


def _next_day(level, before=False):
    """Every (combination, session) of the next day's ``level`` sessions, judged against the day-old file;
    ``before``: as the gate did before occasions (the rounds over the whole yardstick rate, nothing more)."""
    b = Baselines(CROSS_DAY["profile"], CROSS_DAY["recorded"])
    alpha = gate.combination_alpha(gate.DEFAULT_ALPHA, len(b.combinations))
    reference = {k: b.judged_sessions(k)[1] for k in b.combinations}
    whole = {k: [stored.on_yardstick(s["samples"], s["yardstick"]["rate"], reference[k]) for s in v["sessions"]]
             for k, v in b.combinations.items()}  # over the whole rate
    out = []
    for session in CROSS_DAY["next_day"][level]:
        started = datetime.datetime.fromtimestamp(session["start"], datetime.timezone.utc)
        for key, rec in session["combinations"].items():
            assert b.on_new_occasion(key, started)  # the next day: the perf suite adds the drift
            rounds, rates = rec["images_per_sec_rounds"], rec["yardstick_rates"]
            if not before:
                out.append((key, b.judge(key, rounds, rates, alpha, now=started)))
                continue
            current = stored.on_yardstick(rounds, float(np.median(rates)), reference[key])
            out.append((key, stored.judge_sessions(whole[key], current, gate.STORED_THRESHOLD, alpha,
                                                   stored.pooled_noise(whole.values()))))
    return out


def test_the_next_day_no_unchanged_session_fails_and_each_verdict_says_the_drift_was_assumed():
    judged = _next_day("0.0")
    assert len(judged) >= 6 * 5
    assert not [(k, v.describe()) for k, v in judged if v.failed]
    assert all("drift between occasions 5.0% assumed" in v.describe() for _, v in judged)
    far = [v for _, v in judged if "beyond the" in v.note]
    assert far and all(v.mds >= gate.WIDE_BOUND for v in far)  # the runner ran far below the file's speeds
    moved = [v for v in far if abs(v.ratio - 1) > gate.STORED_THRESHOLD]
    assert moved and all(v.verdict == gate.NOISE for v in moved)  # judged loosely, but a move is not "unchanged"


def test_the_next_day_the_yardstick_alone_reads_planted_slowdowns_as_speed_ups_which_the_gate_no_longer_claims():
    """Judged as the gate did before occasions (the rounds relative to the yardstick, nothing more), sessions
    with a planted slowdown read 15 points or more faster than planted (the runner ran at half its recorded
    speed, and the yardstick over-corrects the models); the gate now reports none of them as an improvement,
    and each it passes has an MDS above the planted size: it says it cannot see such a drop there."""
    for level in ("0.1", "0.25"):
        before = _next_day(level, before=True)
        assert any(v.ratio > 1 - float(level) + 0.15 for _, v in before), level  # 15 points faster than planted
        now = _next_day(level)
        assert not [k for k, v in now if v.verdict == gate.IMPROVEMENT]
        missed = [v for _, v in now if not v.failed]
        assert all(v.mds > float(level) for v in missed), [v.describe() for v in missed]


def test_within_a_day_throughput_follows_the_yardstick_at_about_half_its_rate():
    """The next day's 6 unchanged sessions ran with the runner at 0.43-0.94x: per combination, log throughput
    moved about half as far as the log yardstick rate, so dividing by the whole rate over-corrects."""
    day = CROSS_DAY["next_day"]["0.0"]
    keys = list(day[0]["combinations"])
    levels = [stored.levels([s["combinations"][k]["images_per_sec_rounds"] for s in day]) for k in keys]
    speeds = [[float(np.median(s["combinations"][k]["yardstick_rates"])) for s in day] for k in keys]
    slope = stored.pooled_slope(levels, speeds, [[0] * len(day)] * len(keys))
    assert slope.sessions == 36 and 0.35 < slope.beta < 0.75
    assert slope.var > stored.SLOPE_SPREAD ** 2  # one combination's slope is less sure than the pooled one

    def spread(beta):  # of log session level about each combination's mean, at this slope
        return float(np.std(np.concatenate([(y - beta * np.log(z)) - np.mean(y - beta * np.log(z))
                                            for y, z in zip(levels, speeds)])))

    assert spread(slope.beta) < 0.75 * spread(1.0) and spread(slope.beta) < 0.75 * spread(0.0)


def test_pooled_slope_is_the_assumption_until_an_occasion_holds_sessions_at_different_speeds():
    one_each = stored.pooled_slope([[0.0, 0.1]], [[1.0, 2.0]], [[0, 1]])  # two occasions of one session
    assert one_each == stored.pooled_slope([[0.0, 0.1, 0.2]], [[1.0, 1.0, 1.0]], [[0, 0, 0]]) == stored.ASSUMED
    steep = stored.pooled_slope([np.log([10.0, 20.0, 40.0, 80.0]) + [0.01, -0.01, 0.01, -0.01]],
                                [[1.0, 2.0, 4.0, 8.0]], [[0, 0, 0, 0]])  # throughput in proportion to the speed
    assert steep.sessions == 4 and stored.ASSUMED_SLOPE < steep.beta < 1.0  # pulled towards the prior, a little


def test_the_slopes_uncertainty_widens_the_interval_as_the_runner_moves_from_its_recorded_speeds():
    sessions, prior = [[100.0], [102.0], [98.0], [101.0]], stored.Noise(0.03, 40)
    slope, recorded = stored.Slope(0.6, 0.04), (0.9, 1.0, 1.1, 1.0)
    at_home = stored.next_session_mds(sessions, prior, 0.01, runner=stored.Runner(1.0, recorded, slope))
    far = stored.next_session_mds(sessions, prior, 0.01, runner=stored.Runner(1.3, recorded, slope))
    noise = stored.moderated_noise(sessions, prior)
    gap = math.log(1.3) - float(np.mean(np.log(recorded)))
    se = math.sqrt(noise.sigma ** 2 * (1 + 1 / 4) + 0.04 * gap ** 2)
    assert far == pytest.approx(gate.mds(se, noise.df * (se ** 2 / (noise.sigma ** 2 * 1.25)) ** 2, 0.01))
    assert at_home < far and at_home == pytest.approx(stored.next_session_mds(sessions, prior, 0.01), rel=1e-3)
    with pytest.raises(ValueError, match="3 recorded runner speeds for 4 sessions"):
        stored.judge_sessions(sessions, [100.0], runner=stored.Runner(1.0, recorded[:3], slope))


def test_at_the_files_slope_the_next_days_unchanged_sessions_read_closer_to_their_baseline():
    """The day-old file's own slope (fitted within its day) brings the next day's unchanged sessions, with the
    runner at half its recorded speed, closer to 1 than the whole rate does; none fails, none is 'faster'."""
    b = Baselines(CROSS_DAY["profile"], CROSS_DAY["recorded"])
    assert b.slope().sessions == 48 and b.slope().beta < 0.8
    now, before = _next_day("0.0"), _next_day("0.0", before=True)
    assert not [v.describe() for _, v in now if v.failed or v.verdict == gate.IMPROVEMENT]
    assert (np.std([math.log(v.ratio) for _, v in now]) < 0.7 * np.std([math.log(v.ratio) for _, v in before]))
    assert all(f"to the power {b.slope(k).beta:.2f}" in v.describe() for k, v in now)


def test_a_combinations_own_slope_leans_on_its_sessions_as_far_as_they_measure_it():
    pooled = stored.Slope(0.3, 0.03, 60)
    speeds = [1.0, 0.9, 1.1, 0.8, 1.2, 1.0]
    wobble = np.array([0.004, -0.004, 0.004, -0.004, 0.004, -0.004])
    # sessions that all saw the runner at one speed say nothing of the slope: the pooled one stands
    assert stored.combination_slope(pooled, wobble, [1.0] * 6, [0] * 6) == pooled
    assert stored.combination_slope(pooled, wobble[:2], speeds[:2], [0, 1]) == pooled  # one session per occasion
    # throughput in proportion to the runner's speed: pulled from 0.3 towards 1, the further the more sessions
    few = stored.combination_slope(pooled, np.log(speeds) + wobble, speeds, [0] * 6)
    many = stored.combination_slope(pooled, np.log(speeds * 3) + np.tile(wobble, 3), speeds * 3, [0] * 18)
    assert pooled.beta < few.beta < many.beta < 1.0 and 0 < few.fitted < many.fitted < 1
    assert many.var < few.var < pooled.var and (few.sessions, many.sessions) == (6, 18)
    # the degrees of freedom its fit spent leave its spread's count, which widens the spread
    sessions = [[math.exp(x) * 100] for x in wobble]
    plain = stored.moderated_noise(sessions, None, [0] * 6)
    fitted = stored.moderated_noise(sessions, None, [0] * 6, few.fitted)
    assert fitted.df == pytest.approx(plain.df - few.fitted) and fitted.sigma > plain.sigma
    assert stored.pooled_noise([sessions], [[0] * 6], [few.fitted]) == fitted


ZEN4 = _load("zen4_sessions.json")  # a Zen 4 runner's file (9 sessions, two occasions) and 26 rounds of
# gate-quality --mode=stored against it: 4 within the hour of its newest occasion, 22 on a new one (see "about")


class _PooledSlope(Baselines):
    """The gate before per-combination slopes: every combination at the file's pooled slope."""

    def slope(self, key=None, new_occasion=False):
        return super().slope(None, new_occasion)


def _zen4(when, level, pooled=False):
    """{combination: verdicts of the recorded ``when`` sessions at ``level``} against the Zen 4 file."""
    b = (_PooledSlope if pooled else Baselines)(ZEN4["profile"], ZEN4["recorded"])
    alpha = gate.combination_alpha(gate.DEFAULT_ALPHA, len(b.combinations))
    out = {k: [] for k in b.combinations}
    for session in ZEN4[when][level]:
        started = datetime.datetime.fromtimestamp(session["start"], datetime.timezone.utc)
        for key, rec in session["combinations"].items():
            assert b.on_new_occasion(key, started) == (when == "new_occasion")
            out[key].append(b.judge(key, rec["images_per_sec_rounds"], rec["yardstick_rates"], alpha, now=started))
    return out


def _key(part):
    return next(k for k in ZEN4["recorded"] if part in k)


def test_each_combination_follows_the_runner_at_its_own_slope():
    """On the Zen 4 runner lenet's throughput follows the yardstick closely and alexnet's hardly at all, which
    one pooled slope (0.31) blurs into a spread between sessions; tiny_resnet's sessions saw the runner at one
    speed, so they say nothing of its slope and it keeps the pooled one."""
    b, pooled = Baselines(ZEN4["profile"], ZEN4["recorded"]), _PooledSlope(ZEN4["profile"], ZEN4["recorded"])
    lenet, tiny = _key("lenet"), _key("tiny_resnet")
    alexnets = [k for k in b.combinations if "alexnet" in k]
    assert 0.25 < b.slope().beta < 0.35
    assert b.slope(lenet).beta > b.slope().beta + 0.2 and all(b.slope(k).beta < b.slope().beta - 0.1 for k in alexnets)
    assert b.slope(tiny).fitted < 0.1 and b.slope(tiny).beta == pytest.approx(b.slope().beta, abs=0.02)
    assert all(0 < b.slope(k).fitted < 1 and b.slope(k).var < b.slope().var for k in b.combinations)

    def spread(baselines, key):
        return stored.moderated_noise(baselines.judged_sessions(key)[0], None, baselines.occasions(key),
                                      baselines.fitted(key)).sigma

    assert spread(b, lenet) < 0.5 * spread(pooled, lenet)
    assert all(spread(b, k) < spread(pooled, k) for k in alexnets + [lenet])
    assert b.prior().sigma < pooled.prior().sigma


def test_a_combinations_slope_leans_on_the_slope_pooled_over_the_other_combinations():
    """``Baselines`` pools the others' slope as the whole file's sums less the combination's own (so that a
    file of hundreds of combinations costs one pass, not one per combination): the same slope as a file
    without that combination would pool."""
    b = Baselines(ZEN4["profile"], ZEN4["recorded"])
    for key in b.combinations:
        others = Baselines(ZEN4["profile"], {k: v for k, v in ZEN4["recorded"].items() if k != key})
        rates = [s["yardstick"]["rate"] for s in ZEN4["recorded"][key]["sessions"]]
        direct = stored.combination_slope(others.slope(), stored.levels(b.sessions(key)), rates, b.occasions(key))
        assert b.slope(key) != b.slope() and others.slope() != b.slope()
        assert dataclasses.astuple(b.slope(key)) == pytest.approx(dataclasses.astuple(direct), rel=1e-9)


SHIPPED_ZEN4 = os.path.join(SHIPPED_BASELINES, "cpu-amd-epyc-f25m17-avx512-bf16-onednn-2c-tf2.21.json")


def _held_out_errors(b, extra):
    """Each recorded session of ``b``'s combinations, corrected at its combination's slope within an occasion
    plus ``extra``, less the mean of its other occasions' means so corrected: the gap a session on a new occasion
    is judged across, computed here from the file's rounds and rates alone."""
    out = []
    for key, rec in b.combinations.items():
        y = np.log([statistics.median(x["samples"]) for x in rec["sessions"]])
        z = np.log([x["yardstick"]["rate"] for x in rec["sessions"]])
        g = np.array(b.file_occasions()[key])
        c = y - (b.slope(key).beta + extra) * z
        for o in np.unique(g):
            out += list(c[g == o] - np.mean([c[g == p].mean() for p in np.unique(g) if p != o]))
    return np.array(out)


def test_across_occasions_throughput_follows_the_runner_further_and_the_gate_corrects_for_it(monkeypatch):
    """The shipped Zen 4 file, eight occasions over four days (two slow mornings among them): judged against
    its other occasions, a session is predicted closer at each combination's slope within an occasion plus the
    extra slope the file measures across them (0.22, moderated from its own 0.26) than at the slope within one
    alone. A session on a new occasion is judged at that steeper slope, and with the drift measured at it
    (3.4%, not 4.6%); one within the hour of the newest occasion keeps the slope within an occasion. Each
    occasion's own extra slope strays from the pooled one by 0.17, well beyond the 0.06 error of that mean: the
    slope's variance for a new occasion holds both."""
    b = baselines_lib.load(SHIPPED_ZEN4)
    extra = b.extra()
    assert extra.occasions == 8 and 0.15 < extra.beta < 0.3 and 0 < extra.var < stored.OCCASION_SLOPE_SD ** 2
    assert 0.15 < math.sqrt(extra.spread) < 0.2 and extra.spread > 4 * extra.var
    rms = {d: float(np.sqrt(np.mean(_held_out_errors(b, d) ** 2))) for d in (0.0, extra.beta)}
    assert rms[extra.beta] < 0.95 * rms[0.0], rms
    for key in b.combinations:
        within, across = b.slope(key), b.slope(key, new_occasion=True)
        assert across.beta == pytest.approx(within.beta + extra.beta)
        assert across.var == pytest.approx(within.var + extra.var + extra.spread) and across.fitted == within.fitted
        assert b.combinations[key]["occasion_slope"] == pytest.approx(across.beta, abs=1e-3)
    assert b.drift().sigma < 0.035
    # within the hour of the newest occasion the verdict is the slope within one's
    key = "lenet-parameter_server-NHWC-1dev-fp32-b32"
    newest = b.combinations[key]["sessions"][-1]
    at = stored.parse_date(newest["date"]) + datetime.timedelta(minutes=10)
    later = at + datetime.timedelta(hours=2)
    rate = newest["yardstick"]["rate"] * 0.8
    v_hour, v_later = (b.judge(key, newest["samples"], [rate], SMOKE_ALPHA, now=t) for t in (at, later))
    assert f"to the power {b.slope(key).beta:.2f}" in v_hour.describe()
    assert f"to the power {b.slope(key, True).beta:.2f}" in v_later.describe()
    monkeypatch.setattr(stored, "OCCASION_SLOPE_OCCASIONS", 10 ** 6)  # as the gate was before it measured that
    assert baselines_lib.load(SHIPPED_ZEN4).drift().sigma > 0.045


def test_the_extra_slope_across_occasions_needs_three_occasions_and_leans_towards_none(monkeypatch):
    """A file of two occasions (the shipped Xeon one, or the Zen 4 file's first two) measures no extra slope: the
    two occasions' contrast is also their drift. On three or more it is measured, each occasion one cluster of
    evidence, and moderated towards none: the Zen 4 file's first three occasions alone give a smaller extra than
    their own unmoderated fit."""
    xeon = baselines_lib.load(os.path.join(SHIPPED_BASELINES, "cpu-xeon-f6m207-avx512-bf16-onednn-2c-tf2.21.json"))
    assert xeon.extra() == stored.NO_EXTRA
    assert all(xeon.slope(k, new_occasion=True) == xeon.slope(k) for k in xeon.combinations)
    zen4 = baselines_lib.load(SHIPPED_ZEN4)
    occasion = zen4.file_occasions()

    def first(n):
        return Baselines(zen4.profile, {k: {"sessions": [x for x, o in zip(rec["sessions"], occasion[k]) if o < n]}
                                        for k, rec in zen4.combinations.items()})
    assert first(2).extra() == stored.NO_EXTRA
    moderated = first(3).extra()
    monkeypatch.setattr(stored, "OCCASION_SLOPE_SD", 1e6)  # a prior that says nothing: the file's own fit
    raw = first(3).extra()
    assert moderated.occasions == raw.occasions == 3 and 0 < moderated.beta < raw.beta


def test_one_occasions_extra_slope_strays_by_the_weighted_scatter_of_each_occasions_own():
    """``Extra.spread``: each occasion's own extra slope (its sums' ratio: 0.2, 0.4 and 0.6 here) about their
    pooled least-squares one (2.8 / 6), weighted by the occasion's squared speed gaps (1, 2, 3), over k - 1. A
    new occasion's slope holds it beside the error of the mean."""
    extra = stored.occasion_extra({0: (0.2, 1.0), 1: (0.8, 2.0), 2: (1.8, 3.0)})
    assert extra.occasions == 3 and extra.spread == pytest.approx(
        (1 * (0.2 - 2.8 / 6) ** 2 + 2 * (0.4 - 2.8 / 6) ** 2 + 3 * (0.6 - 2.8 / 6) ** 2) / 6 * 3 / 2)
    within = stored.Slope(0.5, 0.01)
    across = stored.across_occasions(within, extra)
    assert across.beta == pytest.approx(0.5 + extra.beta) and across.var == pytest.approx(
        0.01 + extra.var + extra.spread)


def test_at_their_own_slopes_later_sessions_catch_more_planted_slowdowns_and_no_unchanged_one_fails():
    """Judged against the file: 22 rounds more than an hour after it (a new occasion, as CI's sessions are) and
    4 within its newest hour. No unchanged session fails either way; with each combination's own slope the
    unchanged sessions of lenet and alexnet scatter less and a planted 25% is caught more often."""
    for when in ("within_hour", "new_occasion"):
        for pooled in (False, True):
            assert not [v.describe() for vs in _zen4(when, "0.0", pooled).values() for v in vs if v.failed]
    now, before = _zen4("new_occasion", "0.25"), _zen4("new_occasion", "0.25", pooled=True)
    caught = {k: (sum(v.failed for v in now[k]), sum(v.failed for v in before[k])) for k in now}
    assert all(own >= old for own, old in caught.values()), caught
    assert caught[_key("lenet")][0] - caught[_key("lenet")][1] >= 5, caught
    assert caught[_key("fp32-b16")][0] - caught[_key("fp32-b16")][1] >= 3, caught

    def sd(verdicts):
        return float(np.std([math.log(v.ratio) for v in verdicts]))

    unchanged, unchanged_before = _zen4("new_occasion", "0.0"), _zen4("new_occasion", "0.0", pooled=True)
    for key in (_key("lenet"), _key("bf16")):
        assert sd(unchanged[key]) < 0.8 * sd(unchanged_before[key])
    lenet = _key("lenet")  # within the hour: lenet's MDS falls below the planted 25%, which is then caught
    within, within_before = _zen4("within_hour", "0.25")[lenet], _zen4("within_hour", "0.25", pooled=True)[lenet]
    assert all(v.failed and v.mds < 0.2 for v in within) and sum(v.failed for v in within_before) <= 1


def _zen4_family(when, level):
    """Per recorded session: its verdicts at the combination's Bonferroni level, after Holm's step-down, and after
    confirmation (these sessions recorded none: the same as after Holm)."""
    record = {"baselines": {"profile": ZEN4["profile"], "combinations": ZEN4["recorded"]},
              "sessions": {level: ZEN4[when][level]}}
    return replay.judge_again(record)[level]


def test_holm_step_down_on_recorded_stored_sessions_fails_no_unchanged_one_and_catches_more_planted():
    """The 26 recorded rounds against the Zen 4 file: where a planted 25% made some combinations fail at
    alpha/7, Holm's step-down tests the rest at the larger levels that leaves and catches more; an unchanged
    session has nothing below alpha/7, so Holm adds nothing to it."""
    for when in ("within_hour", "new_occasion"):
        for alone, holm, _ in _zen4_family(when, "0.0"):
            assert not any(v.failed for v in holm.values())
    sessions = _zen4_family("new_occasion", "0.25")
    before = sum(v.failed for alone, _, _ in sessions for v in alone.values())
    after = sum(v.failed for _, holm, _ in sessions for v in holm.values())
    assert after > before, (before, after)
    for alone, holm, _ in sessions:
        assert all(holm[k].failed for k in alone if alone[k].failed)  # Holm keeps every Bonferroni failure
        for k in holm:
            if holm[k].failed and not alone[k].failed:
                assert holm[k].alpha > alone[k].alpha and holm[k].p_slower < holm[k].alpha
                assert holm[k].mds == alone[k].mds and "Holm's step-down" in holm[k].note


def test_the_live_stored_record_of_slow_spells_is_what_this_gate_decides_and_where_it_failed():
    """The Zen 4 record of gate-quality --mode=stored of 07:57-09:07 against the five-occasion file as shipped:
    20 unchanged sessions and 20 with a planted 25%, over 65 minutes, each on a new occasion, Holm's step-down
    run by the perf suite and nothing re-measured, on a morning the runner swung between 0.66x and 1.11x its
    recorded speed. A planted 25% was caught in at least 19 of 20 wherever the MDS is below it. As it ran, two
    unchanged sessions failed one combination each, both with the runner slow (0.79x and 0.84x beside those
    rounds), where a trivial model fell further than its slope on the yardstick says; the next unchanged
    session, three minutes later, passed that combination (test_perf_suite re-measures them so, and the
    confirmation clears both). Judged by this gate, at the steeper slope a new occasion is corrected at, one of
    them passes (trivial-replicated at 0.79x) and the other still fails at first; the bar, asked of each session
    whose own MDS is below the plant's drop, is met on five combinations."""
    with open(SLOW_SPELLS) as f:
        record = json.load(f)
    for level, sessions in replay.judge_again(record).items():
        assert len(sessions) == 20
        for alone, holm, _ in sessions:  # Holm's step-down keeps every failure at the combination's own level
            assert all(v.failed == (alone[k].failed or v.alpha > alone[k].alpha) for k, v in holm.items())

    def false_failures(r):
        return [(i, k) for i, s in enumerate(r["sessions"]["0.0"]) for k, v in s["combinations"].items()
                if v["verdict"] == gate.REGRESSION]
    unchanged = record["sessions"]["0.0"]
    ran = false_failures(record)
    assert [k.split("-")[:2] for _, k in ran] == [["trivial", "replicated"], ["trivial", "independent"]], ran
    for i, k in ran:
        assert unchanged[i]["combinations"][k]["runner_speed"] < 0.9
        assert unchanged[i + 1]["combinations"][k]["verdict"] != gate.REGRESSION
    now = replay.rejudged(record)
    assert false_failures(now) == ran[1:] and quality.summarize_stored(now)["0.0"]["failed"] == 1
    planted = quality.summarize_stored(now)["0.25"]["per_combination"]
    below = [k for k, x in planted.items() if x["median_mds"] < 0.25]
    assert len(below) == 6 and all(planted[k]["failed"] >= 19 for k in below), planted
    (bar,) = quality.stored_bars(quality.summarize_stored(now))
    assert bar.met and len(bar.judged) == 5
    assert sum(x["failed"] for x in planted.values()) > sum(x["failed_alone"] for x in planted.values())
    span = max(s["start"] for s in unchanged) - min(s["start"] for s in unchanged)
    assert span > 3600


def test_a_400_combination_matrix_of_unchanged_sessions_fails_no_more_than_alpha():
    r = replay.simulate_stored(_baselines(), combinations=400, draws=400, alpha=0.01, seed=1)
    assert r["failing_cases"] == 0 and r["rate"] <= 0.01
    assert r["parametric_rate"] <= 0.05  # 40 parametric matrices: 0.05 = 2 of 40


def test_rounds_against_rounds_refuses_sample_sizes_that_could_never_fail():
    assert gate.min_rounds(0.01) == 5 and gate.smallest_p(4, 4) == pytest.approx(1 / 70)
    with pytest.raises(ValueError, match="use at least 5 rounds"):
        gate.judge_rounds([100.0] * 4, [50.0] * 4)
    with pytest.raises(ValueError, match="positive"):
        gate.judge_rounds([], [1.0])
    assert gate.judge_rounds([100.0, 101, 99, 100, 102], [50.0, 51, 49, 50, 52]).failed


@pytest.mark.parametrize("tried,target,expected", [
    ([(100, 0.02)], 0.05, 250),  # proportional from one measurement
    ([(100, 0.001)], 0.05, 400),  # at most 4x the last
    ([(100, 0.02), (250, 0.08)], 0.05, 175),  # secant through the last two
    ([(100, 0.05), (200, 0.03)], 0.10, 667),  # a non-increasing pair: proportional from the last
    ([(400, 0.60)], 0.05, 100),  # at least a quarter of the last
])
def test_planted_work_is_searched_by_secant_steps_within_bounds(tried, target, expected):
    from hpcnn.perf.slowdown import next_units

    assert next_units(tried, target) == expected


def _step_clock(planted, per_unit: float, sigma: float = 0.0):
    """``run_steps`` of a step that takes 10 ms longer by ``per_unit`` for every unit of work ``planted`` holds (the
    real variable the hook reads), each step's time scattered by a seeded log-normal ``sigma``; counts its calls."""
    rng = np.random.default_rng(0)

    def run_steps(n):
        run_steps.calls += 1
        units = int(planted.units.numpy())
        return [0.01 * (1 + per_unit * units) * rng.lognormal(0, sigma) for _ in range(n)]

    run_steps.calls = 0
    return run_steps


def test_the_plant_search_lands_on_the_amount_that_adds_the_fraction_and_measures_it_afresh():
    from hpcnn.perf import slowdown

    planted = slowdown.PlantedSlowdown()
    clock = _step_clock(planted, per_unit=0.01)  # 1% a unit, exactly: 5 units add 5%
    # The first amount tried comes from this machine's real unit of work (unit_seconds), so the search may
    # stop at 4 or 6 units (4% and 6% are within a fifth of 5%), not only at 5; what it returns is the size
    # measured afresh of the amount it left planted.
    size = planted.calibrate(0.05, clock, chunk=2)
    units = int(planted.units.numpy())
    assert units in (4, 5, 6) and size == pytest.approx(0.01 * units)
    assert planted.measure(12, clock, chunk=2) == pytest.approx(0.12) and int(planted.units.numpy()) == 12


def test_a_search_measurement_alternates_until_precise_to_half_the_tolerance_or_its_cap():
    from hpcnn.perf import slowdown

    planted = slowdown.PlantedSlowdown()
    exact = _step_clock(planted, per_unit=0.01)
    fraction, se = planted.alternate(5, exact, 2, alternations=10, precision=0.005, cap=200)
    assert (fraction, se) == (pytest.approx(0.05), pytest.approx(0.0, abs=1e-12)) and exact.calls == 20
    noisy = _step_clock(planted, per_unit=0.01, sigma=0.05)  # a 2-step chunk's log-ratio scatters by ~5%
    fraction, se = planted.alternate(5, noisy, 2, alternations=10, precision=0.005, cap=200)
    assert 20 < noisy.calls < 400 and se <= 0.005 and abs(fraction - 0.05) < 3 * se  # more pairs, not the cap
    wild = _step_clock(planted, per_unit=0.01, sigma=0.5)
    fraction, se = planted.alternate(5, wild, 2, alternations=10, precision=0.005, cap=200)
    assert wild.calls == 400 and se > 0.005  # the cap ends it
    # the reported measurement runs its fixed number of pairs whatever the scatter
    wild.calls = 0
    planted.measure(5, wild, 2)
    assert wild.calls == 2 * slowdown.MEASURE_ALTERNATIONS


def test_a_measured_fraction_trims_the_chunks_that_ran_far_off():
    from hpcnn.perf.slowdown import fraction_and_error

    ratios = [1.05] * 16 + [1.9, 0.6, 2.5, 0.5]  # four chunk pairs after an idle wait ran far off
    fraction, se = fraction_and_error(ratios)
    assert fraction == pytest.approx(0.05) and se == pytest.approx(0.0, abs=1e-12)
    assert fraction_and_error([1.0, 1.1])[1] == math.inf  # too few pairs for an error


# -- gate-quality records that span sessions -------------------------------------------------------------------
TWO_SESSIONS = _load("quality_two_sessions.json")  # gate-quality --only=trivial-independent --slowdowns=0.10
# --min-rounds=4 --max-rounds=8 --runs=1, then the same with --resume: one run from each of two sessions


def test_later_runs_of_a_quality_measurement_plant_the_amount_of_work_its_first_run_searched():
    """In the Xeon run of 03:40-04:37 each run still searched its own amount; a run now takes the first one's."""
    path = os.path.join(QUALITY_RECORDS, "per-run-plants", "cpu-xeon-f6m207-avx512-bf16-onednn-2c-tf2.21.paired.json")
    with open(path) as f:
        record = json.load(f)
    per = record["combinations"]["trivial-parameter_server-NHWC-1dev-fp32-b32"]
    assert [x["units"] for x in per["0.05"]] == [[2] * 5] and quality.planted_units(per) == {0.05: 2, 0.1: 4}
    assert quality.planted_units({"0.0": [], "0.05": [], "0.1": []}) == {}  # nothing run yet: the first run searches


def test_a_resumed_quality_record_counts_the_runs_of_every_session():
    s = quality.summarize_paired(TWO_SESSIONS)
    key = "trivial-independent-NHWC-2dev-fp32-b32"
    assert (s["runs"], s["sessions"]) == (2, 2)
    assert [x["session"] for x in TWO_SESSIONS["combinations"][key]["0.1"]] == [0, 1]
    assert s["flagged"] == {"0.0": 0, "0.1": 2}
    planted = [x["planted"] for x in TWO_SESSIONS["combinations"][key]["0.1"]]
    assert s["per_combination"][key]["0.1"]["planted_measured"] == pytest.approx(sum(planted) / 2)
    startups = [x["startup_s"][key] for x in TWO_SESSIONS["sessions"]]  # each session started its workers once
    assert s["startup_seconds"] == pytest.approx(sum(startups) / 2)
    three_runs = {**TWO_SESSIONS, "workers": quality.FRESH_WORKERS,
                  "sessions": [{**TWO_SESSIONS["sessions"][0], "runs": 3}, TWO_SESSIONS["sessions"][1]]}
    per_run = [startups[0] / 3, startups[1]]  # fresh workers: a session's startup seconds are spread over its runs
    assert quality.summarize_paired(three_runs)["startup_seconds"] == pytest.approx(sum(per_run) / 2)


def test_the_quality_table_counts_false_failures_unchanged_and_catches_planted_over_the_record_runs():
    s = quality.summarize_paired(TWO_SESSIONS)
    key = "trivial-independent-NHWC-2dev-fp32-b32"
    head, rule, row = quality.paired_table(s)
    assert head == "| combination | unchanged | planted 10% |" and rule == "| --- | --- | --- |"
    cells = [c.strip() for c in row.strip("|").split("|")]
    per = s["per_combination"][key]
    assert cells[0] == key
    assert cells[1].startswith(f"0/2 failed, ratio {per['0.0']['median_ratio']:.3f}")
    assert cells[2].startswith(f"2/2 caught (plant {per['0.1']['planted_measured']:.1%})")
    assert f"MDS {per['0.1']['median_mds']:.1%}" in cells[2]


def test_a_quality_record_resumes_only_the_same_measurement_on_the_same_profile():
    combo = [Combination("trivial", "independent", "NHWC", 2, "fp32", 32, 20)]
    same = dict(combos=combo, slowdowns=[0.10], schedule=sequential.Schedule(4, 4, 8), threshold=0.02,
                alpha=gate.DEFAULT_ALPHA)
    # recorded when every early look had an equal part of the level, reachable or not: another schedule
    with pytest.raises(ValueError, match=r"schedule is \{'min_pairs': 4, 'step': 4, 'max_pairs': 8\}, this run's "
                                         r"\{'min_pairs': 4, 'step': 4, 'max_pairs': 8, 'reachable_only': True, "
                                         r"'block': 2\}"):
        quality.check_resumable(TWO_SESSIONS, "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21", **same)
    two_sessions = {**TWO_SESSIONS, "schedule": vars(same["schedule"])}  # given the schedule, older fields refuse
    # recorded before each run started its own workers: another measurement (twenty looks at one worker pair)
    with pytest.raises(ValueError, match="workers is None, this run's 'fresh per run'"):
        quality.check_resumable(two_sessions, "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21", **same)
    # fresh workers, but each comparison over one process pair: another measurement too
    with pytest.raises(ValueError, match="restart_every is None, this run's 2"):
        quality.check_resumable({**two_sessions, "workers": quality.FRESH_WORKERS},
                                "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21", **same)
    # restarts, but the first pair of each process pair timed from a cold step: another measurement as well
    with pytest.raises(ValueError, match="settle_chunks is None, this run's 1"):
        quality.check_resumable({**two_sessions, "workers": quality.FRESH_WORKERS, "restart_every": 2},
                                "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21", **same)
    # settled, but each restarted process sized its own plant and reported the measurement that ended its search
    settled = {**two_sessions, "workers": quality.FRESH_WORKERS, "restart_every": 2, "settle_chunks": 1}
    with pytest.raises(ValueError, match="plant is None, this run's 'one amount per combination and level"):
        quality.check_resumable(settled, "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21", **same)
    # one amount per side, but each run searched its own from 10-pair measurements: another code change each run
    per_run = {**settled, "plant": "one amount per side, sized in the pair's chunks, measured afresh"}
    with pytest.raises(ValueError, match="plant is \"one amount per side, sized in the pair's chunks"):
        quality.check_resumable(per_run, "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21", **same)
    three_step = {**settled, "plant": paired.PLANT}
    # one plant, but rounds of the combination's own steps, however few chunks they made (records before
    # paired.round_steps): a 3-step alexnet round alternated in 3 chunks, not 10
    with pytest.raises(ValueError,
                       match=r"round_steps is None, this run's \{'trivial-independent-NHWC-2dev-fp32-b32': 20\}"):
        quality.check_resumable(three_step, "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21", **same)
    fresh = {**three_step, "round_steps": {"trivial-independent-NHWC-2dev-fp32-b32": 20}}
    quality.check_resumable(fresh, "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21", **same)
    alexnet = next(c for c in build_matrix("smoke") if c.model == "alexnet")
    with pytest.raises(ValueError, match="round_steps"):  # alexnet's smoke rounds: 10 steps a side now
        quality.check_resumable({**fresh, "round_steps": {alexnet.key: alexnet.steps_per_round}},
                                "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21", **{**same, "combos": [alexnet]})
    with pytest.raises(ValueError, match="restart_every is 2, this run's 4"):
        quality.check_resumable(fresh, "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21", **same, restart_every=4)
    with pytest.raises(ValueError, match="profile_id is 'cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21'"):
        quality.check_resumable(fresh, "cpu-amd-epyc-avx512-amx-onednn-2c-tf2.21", **same)
    with pytest.raises(ValueError, match="levels"):
        quality.check_resumable(fresh, "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21", **{**same, "slowdowns": [0.05]})
    with pytest.raises(ValueError, match="not a record"):
        quality.check_resumable([1], "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21", **same)


# -- simulated matrices of paired comparisons --------------------------------------------------------------------
def _log_ratios(run):
    return [math.log(b / a) for a, b in zip(run["a"], run["b"])]


def _same_blocks(got, want):
    return [len(b) for b in got] == [len(b) for b in want] and np.allclose(sum(got, []), sum(want, []))


def test_paired_pairs_recorded_without_restarts_are_one_process_pair_block_per_comparison():
    blocks = replay.process_pair_blocks(TWO_SESSIONS)
    key = "trivial-independent-NHWC-2dev-fp32-b32"
    runs = TWO_SESSIONS["combinations"][key]["0.0"]
    assert _same_blocks(blocks[key], [_log_ratios(x) for x in runs])
    assert _same_blocks(replay.process_pair_blocks(TWO_SESSIONS, "0.1")[key],
                        [_log_ratios(x) for x in TWO_SESSIONS["combinations"][key]["0.1"]])


def test_pairs_recorded_with_restarts_split_where_either_side_is_a_new_process():
    key = "trivial-independent-NHWC-2dev-fp32-b32"
    run = TWO_SESSIONS["combinations"][key]["0.0"][0]
    n = len(run["a"])
    pids = [[11, 21]] * 2 + [[12, 21]] + [[13, 22]] * (n - 3)  # A restarted before pair 3, both before pair 4
    record = {"combinations": {key: {"0.0": [{**run, "pids": pids}]}}}
    d = _log_ratios(run)
    assert _same_blocks(replay.process_pair_blocks(record)[key], [d[:2], d[2:3], d[3:]])


def test_a_drawn_comparison_is_made_of_whole_recorded_blocks():
    key = "trivial-independent-NHWC-2dev-fp32-b32"
    blocks = [b[i:i + 4] for b in replay.process_pair_blocks(TWO_SESSIONS)[key] for i in range(0, len(b), 4)]
    assert len(blocks) >= 3
    out = replay.draw_blocks(blocks, 22, np.random.default_rng(3))
    assert len(out) == 22
    pos, used = 0, set()
    while pos < len(out):  # every stretch is one block, in full except where the draw is cut at 22
        match = [i for i, b in enumerate(blocks) if out[pos:pos + len(b)] == b[:len(out) - pos]]
        assert match, f"pairs from {pos} on are no recorded block"
        used.add(match[0])
        pos += len(blocks[match[0]])
    assert len(used) > 1


def test_simulated_paired_matrices_keep_each_process_pairs_offset():
    """Recorded unchanged pairs, centred, plus an offset of +-4% per block of 4 pairs (a process pair): 20 pairs
    over 5 such blocks fail now and then (all 5 drawn below: 1 in 32); pairs drawn one by one mostly average it
    out (17 or more of 20 from below: about 1 in 750)."""
    pairs = [x for b in replay.process_pair_blocks(TWO_SESSIONS)["trivial-independent-NHWC-2dev-fp32-b32"]
             for x in b]
    centre = float(np.median(pairs))
    noise = [0.2 * (x - centre) for x in pairs]  # a fifth of this combination's spread: the offset dominates
    blocks = [[noise[(4 * i + j) % len(noise)] + (0.04 if i % 2 else -0.04) for j in range(4)] for i in range(8)]
    schedule = sequential.Schedule(20, 4, 20, block=1)  # one look, pair by pair: every comparison runs its 5 blocks
    kept = replay.simulate_paired({"x": blocks}, combinations=80, draws=20, schedule=schedule, seed=2)
    single = replay.simulate_paired({"x": [[x] for b in blocks for x in b]}, combinations=80, draws=20,
                                     schedule=schedule, seed=2)
    assert kept["blocks"] == {"x": 8} and single["blocks"] == {"x": 32}
    assert single["rate"] <= 0.25 and kept["rate"] >= 0.5  # about 0.1 and 0.92 expected over 80 combinations
    with pytest.raises(ValueError, match="needs recorded pairs"):
        replay.simulate_paired({"x": []})


def test_the_blocked_test_is_not_fooled_by_process_pair_offsets_that_fool_the_pair_by_pair_test():
    """Recorded unchanged pairs, centred and shrunk, in process pairs of 4 pairs each carrying an offset of +-4%:
    over 48 pairs (12 process pairs) the test taking pairs one by one fails most matrices of 40 combinations,
    counting each process pair's 4 pairs as 4 signs; the test flipping process pairs whole fails about 1 in 100
    (exact: every pattern of block signs is equally likely here)."""
    pairs = [x for b in replay.process_pair_blocks(TWO_SESSIONS)["trivial-independent-NHWC-2dev-fp32-b32"]
             for x in b]
    centre = float(np.median(pairs))
    noise = [0.2 * (x - centre) for x in pairs]
    blocks = [[noise[(4 * i + j) % len(noise)] + (0.04 if i % 2 else -0.04) for j in range(4)] for i in range(16)]
    rates = {block: replay.simulate_paired({"x": blocks}, combinations=40, draws=20, seed=3,
                                            schedule=sequential.Schedule(48, 4, 48, block=block))["rate"]
             for block in (1, 4)}
    assert rates[1] >= 0.5 and rates[4] <= 0.05, rates


def test_resampling_the_zen3_paired_record_shows_what_the_blocked_test_at_48_pairs_catches():
    """tiny_resnet's comparisons in the Zen 3 paired record of the pair-by-pair design (pairs spreading 7-9% on
    that class), resampled by process-pair block and judged again as they ran (pair by pair, at most 20) and by
    this design (process pairs of 2 flipped whole, at most 48): its planted 5% is caught about half the time as
    it ran (3 of its 6 runs) and nearly 9 times in 10 now, where its unchanged comparisons run to the cap and
    stay unflagged; its planted 10% is caught by either."""
    with open(os.path.join(PAIR_LEVEL_TEST, "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21.paired.json")) as f:
        record = json.load(f)
    key = "tiny_resnet-replicated-NHWC-2dev-fp32-b32"
    record["combinations"] = {key: record["combinations"][key]}  # judged at the whole run's combination_alpha
    ran = replay.paired_power(record, sequential.Schedule.recorded(record["schedule"]), draws=100)
    now = replay.paired_power(record, sequential.Schedule(), draws=100)
    assert ran["0.05"][key]["flagged"] < 0.75 < 0.8 < now["0.05"][key]["flagged"]
    assert ran["0.1"][key]["flagged"] >= 0.95 and now["0.1"][key]["flagged"] >= 0.95
    assert now["0.0"][key]["flagged"] <= 0.03 and now["0.0"][key]["median_pairs"] == 48
    share = now["0.0"][key]["flagged"]
    assert replay.power_table(now)[2].startswith(f"| {key} | {share:.2f} (48) | ")


def test_a_quality_measurement_tests_blocks_that_are_its_process_pairs():
    combo = [Combination("trivial", "independent", "NHWC", 2, "fp32", 32, 20)]
    for schedule, restart_every in ((sequential.Schedule(block=2), 4), (sequential.Schedule(block=2), 0),
                                    (sequential.Schedule(block=1), 2)):
        with pytest.raises(ValueError, match="the test's blocks must be the process pairs"):
            quality.paired_quality(".", combo, "cpu", 1, [0.05], schedule, 0.02, 0.01, restart_every=restart_every)


def test_a_design_resamples_only_process_pairs_no_longer_than_the_records():
    """Process pairs of 2 are cut from recorded ones of 4 (each piece keeps its process pair's offset); pairs taken
    one by one draw the record's process pairs whole; longer ones than recorded cannot be made."""
    record = {**TWO_SESSIONS, "restart_every": 4}
    key = "trivial-independent-NHWC-2dev-fp32-b32"
    whole = replay.process_pair_blocks(record)[key]
    assert _same_blocks(replay.design_blocks(record, sequential.Schedule(block=1))[key], whole)
    cut = replay.design_blocks(record, sequential.Schedule())[key]
    assert max(len(b) for b in cut) == 2 and np.allclose(sum(cut, []), sum(whole, []))
    with pytest.raises(ValueError, match="process pairs of 8 cannot be resampled from them"):
        replay.design_blocks(record, sequential.Schedule(block=8))


def test_a_design_restarting_every_pair_draws_each_recorded_pair_as_a_process_pair_of_its_own():
    """The Zen 4 record of process pairs of 2: restarting every pair, each recorded pair is a block of one (an
    offset drawn afresh for every pair, as that design has); never restarting, the process pairs whole, as a
    schedule of block 1 alone gives; a test whose blocks are not the design's process pairs is refused."""
    with open(os.path.join(QUALITY_RECORDS, "cpu-amd-epyc-f25m17-avx512-bf16-onednn-2c-tf2.21.paired.json")) as f:
        record = json.load(f)
    key = "alexnet-parameter_server-NHWC-1dev-fp32-b16"
    whole = replay.process_pair_blocks(record, "0.05")[key]
    assert {len(b) for b in whole} == {2}
    each = replay.design_blocks(record, sequential.Schedule(block=1), "0.05", restart_every=1)[key]
    assert _same_blocks(each, [[x] for b in whole for x in b])
    for restart_every in (0, None):
        got = replay.design_blocks(record, sequential.Schedule(block=1), "0.05", restart_every)[key]
        assert _same_blocks(got, whole)
    with pytest.raises(ValueError, match="the test's blocks must be the process pairs"):
        replay.design_blocks(record, sequential.Schedule(block=2), restart_every=1)
    record["combinations"] = {key: record["combinations"][key]}
    power = replay.paired_power(record, sequential.Schedule(block=1), draws=40, restart_every=1)
    assert power["0.1"][key]["flagged"] >= 0.9 and power["0.0"][key]["flagged"] <= 0.1


ZEN4_STORED = os.path.join(DATA, "zen4_stored_confirmed.json")  # shipped in baselines/quality until 2026-11-28
XEON_STORED = os.path.join(QUALITY_RECORDS, "cpu-xeon-f6m207-avx512-bf16-onednn-2c-tf2.21.stored.json")
XEON_ONE_OCCASION = os.path.join(DATA, "xeon_stored_one_occasion.json")  # shipped at 7a192bf
ZEN3_STORED = os.path.join(QUALITY_RECORDS, "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21.stored.json")
ZEN3_SLOW_SPELLS = os.path.join(DATA, "zen3_stored_two_slow_spells.json")  # in baselines/quality until 2026-12-01
ZEN5_STORED = os.path.join(QUALITY_RECORDS, "cpu-amd-epyc-f26m2-avx512-bf16-onednn-2c-tf2.21.stored.json")


def _recorded(path, sessions_per_level=20, span_s=3600):
    """A live stored record as it ran: its sessions per level, its unchanged ones spread over ``span_s``, and
    every first failure, none other, re-measured at least 60 s (the suite's default pause) after its first
    measurement. Returns the record."""
    with open(path) as f:
        record = json.load(f)
    for level, sessions in record["sessions"].items():
        assert len(sessions) == sessions_per_level
        for session in sessions:
            for k, v in session["combinations"].items():
                first = v["verdict"] in (gate.REGRESSION, gate.UNCONFIRMED)
                assert first == (v["confirm_verdict"] is not None), (level, k)
                assert not first or v["confirm_pause_s"] >= 60
    unchanged = record["sessions"]["0.0"]
    assert max(s["start"] for s in unchanged) - min(s["start"] for s in unchanged) > span_s
    return record


def _judged_again_as_it_ran(path, sessions_per_level=20, span_s=3600):
    """A live stored record (``_recorded``) whose every session, judged again by this gate from the rounds of both
    its measurements, gets the verdict (after Holm and confirmation), ratio and level that ran: a record of a
    file this gate judges as the gate that ran it did. Returns the record."""
    record = _recorded(path, sessions_per_level, span_s)
    again = replay.judge_again(record)
    for level, sessions in record["sessions"].items():
        for session, judged in zip(sessions, again[level]):
            ran = session["combinations"]
            assert {k: v.verdict for k, v in judged.final.items()} == {k: v["verdict"] for k, v in ran.items()}
            for k, v in judged.holm.items():
                assert v.ratio == pytest.approx(ran[k]["ratio"]) and v.alpha == pytest.approx(ran[k]["alpha"])
    return record


def _recorded_days(record):
    """The days on which the sessions of a live stored record's baselines file were recorded."""
    return {s["date"][:10] for c in record["baselines"]["combinations"].values() for s in c["sessions"]}


def _planted_with(record, verdict):
    """(combination, as it ran) for every comparison of a planted-25% session that ended with this verdict:
    UNCONFIRMED for a first catch its re-measurement cleared, NOISE for a miss."""
    return [(k, v) for s in record["sessions"]["0.25"] for k, v in s["combinations"].items()
            if v["verdict"] == verdict]


def test_the_shipped_live_stored_record_with_confirmation_is_what_this_gate_decides():
    """The Zen 4 record of gate-quality --mode=stored with failures confirmed (the suite's default: re-measured
    no sooner than 60 s after the first measurement, at each session's end), against the five-occasion file as
    shipped: 20 unchanged sessions and 20 with a planted 25%, 10:57-12:28 on 2026-11-26, each on a new occasion.
    As it ran, one unchanged session failed trivial-independent at first (0.842, the runner at 0.78x) and passed
    once re-measured; judged by this gate (its steeper slope across occasions) none fails even at first. A
    planted 25% is caught in 19 or 20 of 20 wherever the median MDS is below it; asked of each session whose own
    MDS is (the bar, in which a runner far from its recorded speeds widens the interval), trivial-replicated is
    short by one, 17 of 18, and four combinations meet it."""
    record = _recorded(ZEN4_STORED)
    ran = quality.summarize_stored(record)
    assert ran["0.0"]["failed"] == 0 and ran["0.0"]["failed_first"] == 1  # one slow spell, cleared
    summary = quality.summarize_stored(replay.rejudged(record))
    assert summary["0.0"]["failed"] == summary["0.0"]["failed_first"] == 0
    planted = summary["0.25"]["per_combination"]
    below = [k for k, x in planted.items() if x["median_mds"] < 0.25]
    assert len(below) == 6 and all(planted[k]["failed"] >= 19 for k in below), planted
    (bar,) = quality.stored_bars(summary)
    assert len(bar.judged) == 5 and bar.short == {"trivial-replicated-NHWC-2dev-fp32-b32": (17, 18)}


def test_the_zen4_live_stored_record_two_days_after_its_file_fails_no_unchanged_session():
    """The Zen 4 record of 05:44-06:56 on 2026-11-28 against the five-occasion file shipped then (2026-11-25 and
    -26), two days after its newest session: 20 unchanged and 20 planted-25% sessions, the runner at 0.61-1.04x.
    Five first failures in four unchanged sessions of its slow spells, each cleared by its re-measurement, so
    none failed. The 25% bar, asked where the MDS is below the plant's 20% drop, is short by one or two sessions
    on three of those five combinations: catches a re-measurement cleared with the runner beyond the speeds the
    file saw (only drops beyond 35% fail there), both alexnet ones of planted session 3 while reading below 0.70.
    Judged by this gate, at the steeper slope across occasions and with how far one occasion's own strays from
    it, one unchanged session fails at first (cleared), and fewer sessions are in reach: three combinations are
    short by one, alexnet bf16 at 14 of 15, alexnet fp32 at 16 of 17 and trivial-independent at 15 of 16."""
    record = _recorded(TWO_DAYS_LATER)
    assert _recorded_days(record) == {"2026-11-25", "2026-11-26"} and record["profile_id"].startswith(
        "cpu-amd-epyc-f25m17-")
    summary = quality.summarize_stored(record)
    assert summary["0.0"]["failed"] == 0 and summary["0.0"]["failed_first"] == 4
    cleared = [v for s in record["sessions"]["0.0"] for v in s["combinations"].values()
               if v["verdict"] == gate.UNCONFIRMED]
    assert len(cleared) == 5 and all(v["ratio"] < 0.88 and v["confirm_ratio"] > v["ratio"] for v in cleared)
    (bar,) = quality.stored_bars(summary)
    assert bar.met is False and bar.out_of_reach == ["tiny_resnet-replicated-NHWC-2dev-fp32-b32",
                                                     "trivial-parameter_server-NHWC-1dev-fp32-b32"]
    assert {k: n for k, n in bar.judged.items() if n[0] < 0.95 * n[1]} == {
        "alexnet-parameter_server-NHWC-1dev-bf16-b16": (17, 19),
        "alexnet-parameter_server-NHWC-1dev-fp32-b16": (17, 19),
        "trivial-independent-NHWC-2dev-fp32-b32": (18, 19)}
    session = record["sessions"]["0.25"][2]["combinations"]
    alexnet = [v for k, v in session.items() if k.startswith("alexnet")]
    assert all(v["verdict"] == gate.UNCONFIRMED and v["confirm_ratio"] < 0.70 for v in alexnet)
    now = quality.summarize_stored(replay.rejudged(record))
    assert now["0.0"]["failed"] == 0 and now["0.0"]["failed_first"] == 1
    (bar,) = quality.stored_bars(now)
    assert bar.short == {"alexnet-parameter_server-NHWC-1dev-bf16-b16": (14, 15),
                         "alexnet-parameter_server-NHWC-1dev-fp32-b16": (16, 17),
                         "trivial-independent-NHWC-2dev-fp32-b32": (15, 16)}


def _without_spread(monkeypatch):
    """The gate as it was before a new occasion's slope held how far one occasion's own strays (the error of the
    mean extra slope alone): ``Extra.spread`` zeroed wherever it is measured."""
    measure = stored.occasion_extra
    monkeypatch.setattr(stored, "occasion_extra", lambda sums: dataclasses.replace(measure(sums), spread=0.0))


def test_the_zen3_live_stored_record_of_two_slow_spells_is_what_this_gate_decides_and_where_it_failed(monkeypatch):
    """The Zen 3 record of 2026-11-27, unchanged code alone (--slowdowns=0) against the file as shipped (three
    occasions, 2026-11-24 and -25), each session on a new occasion: 17 sessions at 19:12-19:56 and 20 at
    21:14-22:01. The runner read 0.43-0.71x the speed each combination was recorded at, and the combinations
    0.66-0.97 of what the file's slopes (0.45-0.62) predict there: on both spells the models slowed with the
    yardstick further than on the file's occasions. Where a runner lay over 10% beyond a combination's recorded
    speeds only drops beyond 35% fail; inside that margin five first failures, three cleared once re-measured,
    and two confirmed, both trivial-independent just inside the margin: 0.705 at 0.56x (re-measured at 0.766)
    and 0.684 at 0.55x (re-measured at 0.728). Known false failures, held here so that a change to the stored
    gate shows what it does to them: judged by this gate, which measures on the file's three occasions that a
    session on a new one follows the yardstick 0.20 further than within one (each occasion's own straying by
    0.08), no session fails, even at first; with the error of that mean alone one failed at first
    (trivial-parameter_server, 0.780 at 0.62x), cleared by its re-measurement."""
    record = _recorded(ZEN3_SLOW_SPELLS, sessions_per_level=37, span_s=2.5 * 3600)
    assert list(record["sessions"]) == ["0.0"] and _recorded_days(record) == {"2026-11-24", "2026-11-25"}
    combos = [v for s in record["sessions"]["0.0"] for v in s["combinations"].values()]
    assert all(0.42 < v["runner_speed"] < 0.72 and 0.65 < v["ratio"] < 0.98 for v in combos)
    summary = quality.summarize_stored(record)
    assert summary["0.0"]["failed"] == 2 and summary["0.0"]["failed_first"] == 5
    confirmed = [(i, k) for i, s in enumerate(record["sessions"]["0.0"]) for k, v in s["combinations"].items()
                 if v["verdict"] == gate.REGRESSION]
    assert confirmed == [(0, "trivial-independent-NHWC-2dev-fp32-b32"), (22, "trivial-independent-NHWC-2dev-fp32-b32")]
    against = replay.judged_against(record)
    assert against.extra().occasions == 3 and 0.15 < against.extra().beta < 0.25
    now = replay.rejudged(record)
    assert 0.07 < math.sqrt(against.extra().spread) < 0.09
    assert quality.summarize_stored(now)["0.0"]["failed_first"] == 0
    assert min(v["ratio"] for s in now["sessions"]["0.0"] for v in s["combinations"].values()) > 0.73
    _without_spread(monkeypatch)
    before = replay.rejudged(record)
    first = [(i, k, round(v["ratio"], 3)) for i, s in enumerate(before["sessions"]["0.0"])
             for k, v in s["combinations"].items() if v["verdict"] in (gate.REGRESSION, gate.UNCONFIRMED)]
    assert first == [(21, "trivial-parameter_server-NHWC-1dev-fp32-b32", 0.780)]


def test_the_zen3_live_stored_record_on_another_vm_fails_tiny_resnet_once_as_this_gate_decides():
    """The Zen 3 record of 20:19-21:17 on 2026-12-01, run by this gate (commit 155dcd9), unchanged code alone
    against the file as shipped (three occasions, 2026-11-24 and -25), each session on a new occasion, 20
    sessions started over 57 minutes. On this VM every combination sat at its own offset from what the file
    predicts at the runner's speed (0.36-1.09x): medians 1.15-1.26 for the trivial models, 0.86 for tiny_resnet
    (0.70-0.93), where the file's occasions measure a drift of 3.8% between them. One session failed, confirmed:
    tiny_resnet 0.700 at 0.63x (p 3.5e-05 against 0.0017), re-measured 60 s later at 0.808 (p 0.0071 at 0.01). A
    known false failure of the stored gate, held here so that a change to the gate shows what it does to it: the
    issue's bar for unchanged code is not met on this class. Judged again by this gate, whose slope for a new
    occasion holds how far one occasion's own strays, the same session fails: that widens the interval with the
    runner's distance from its recorded speeds, and this VM's offset is its own at every speed."""
    record = _recorded(ZEN3_STORED, span_s=55 * 60)
    assert _recorded_days(record) == {"2026-11-24", "2026-11-25"}
    summary = quality.summarize_stored(record)
    assert (summary["0.0"]["failed"], summary["0.0"]["failed_first"]) == (1, 1)
    failed = [(i, k, round(v["ratio"], 3), round(v["confirm_ratio"], 3))
              for i, x in enumerate(record["sessions"]["0.0"]) for k, v in x["combinations"].items()
              if v["verdict"] == gate.REGRESSION]
    assert failed == [(13, "tiny_resnet-replicated-NHWC-2dev-fp32-b32", 0.700, 0.808)]
    per = summary["0.0"]["per_combination"]
    assert all(per[k]["ratio_min"] > 1.05 for k in per if k.startswith(("trivial-replicated", "trivial-independent")))
    assert per["tiny_resnet-replicated-NHWC-2dev-fp32-b32"]["ratio_max"] < 0.95
    assert quality.bar_lines(quality.stored_bars(summary), 1, 20, "session")[0].endswith("NOT MET")
    again = replay.rejudged(record)
    assert [(i, k) for i, x in enumerate(again["sessions"]["0.0"]) for k, v in x["combinations"].items()
            if v["verdict"] in (gate.REGRESSION, gate.UNCONFIRMED)] == [(13, failed[0][1])]
    assert again["sessions"]["0.0"][13]["combinations"][failed[0][1]]["verdict"] == gate.REGRESSION


def _with_sessions_of(record, other, days_earlier=0.0):
    """``record`` whose baselines file also holds every unchanged session of the live record ``other`` (its
    rounds and the median of its yardstick rates), dated as it ran ``days_earlier`` days before: a file that
    holds another VM's occasions."""
    out = copy.deepcopy(record)
    for session in other["sessions"]["0.0"]:
        date = datetime.datetime.fromtimestamp(session["start"] - days_earlier * 86400, datetime.timezone.utc)
        for key, v in session["combinations"].items():
            rate = statistics.median(v["yardstick_rates"])
            recorded = baselines_lib.session_record(v["images_per_sec_rounds"], None, rate)
            recorded["date"] = date.isoformat(timespec="seconds")
            out["baselines"]["combinations"][key]["sessions"].append(recorded)
    return out


def test_a_zen3_file_holding_another_vms_sessions_clears_one_vm_and_fails_the_other(monkeypatch):
    """The two live Zen 3 records (2026-11-27's slow spells, 2026-12-01's VM) judged against the shipped file
    with the other record's sessions added to it, each from the rounds both ran. Holding 2026-11-27's two
    spells as occasions, the file measures a drift of 4.3% and clears 2026-12-01's tiny_resnet (0 of 20
    sessions fail, 1 at first). Holding 2026-12-01's sessions (dated five days back, so that they precede the
    sessions judged), the slope across occasions falls from 0.20 to below 0, each occasion's own straying from
    it by 0.14, and 9 of 2026-11-27's 37 sessions fail, trivial-independent in 9; judged with the error of the
    mean slope alone, as the gate was before it held that straying, 22 failed, trivial-independent in 21. The
    yardstick's slope measured on one VM mispredicts the next, so on this class a stored file does not yet hold
    the runners of a pool, and paired mode is the gate to use."""
    with open(ZEN3_STORED) as f:
        vm = json.load(f)
    with open(ZEN3_SLOW_SPELLS) as f:
        spells = json.load(f)
    holding = _with_sessions_of(vm, spells)
    assert 0.04 < replay.judged_against(holding).drift().sigma < 0.045
    cleared = quality.summarize_stored(replay.rejudged(holding))["0.0"]
    assert (cleared["failed"], cleared["failed_first"]) == (0, 1)
    backwards = _with_sessions_of(spells, vm, days_earlier=5)
    against = replay.judged_against(backwards)
    assert against.extra().occasions == 4 and against.extra().beta < 0 and 0.13 < math.sqrt(against.extra().spread)
    failed = quality.summarize_stored(replay.rejudged(backwards))["0.0"]
    assert failed["failed"] == 9
    assert failed["per_combination"]["trivial-independent-NHWC-2dev-fp32-b32"]["failed"] == 9
    _without_spread(monkeypatch)
    before = quality.summarize_stored(replay.rejudged(backwards))["0.0"]
    assert before["failed"] == 22
    assert before["per_combination"]["trivial-independent-NHWC-2dev-fp32-b32"]["failed"] == 21


def _against_the_eight_occasion_file(record):
    """``record``, checked to be judged against the Zen 4 file of eight occasions (three days, the newest session
    before 10:00 on 2026-11-28). Returns the record."""
    assert _recorded_days(record) == {"2026-11-25", "2026-11-26", "2026-11-28"} and max(
        s["date"] for c in record["baselines"]["combinations"].values() for s in c["sessions"]) < "2026-11-28T10"
    return record


def test_the_zen4_live_stored_record_against_eight_occasions_fails_nothing_at_the_slope_across_them():
    """The Zen 4 record of 11:13-12:25 on 2026-11-28 against the eight-occasion file as shipped, run by the gate
    of d41542b (slopes within an occasion): one unchanged session failed, tiny_resnet at 0.695 confirmed at 0.769
    (p 0.006). Judged again by this gate, which corrects a new occasion at the slope measured across the file's
    occasions (recorded before this run: an out-of-sample test), no unchanged session fails and that one is
    cleared; the 25% bar, not met either way, is asked of three combinations instead of one, and is short by one
    session on alexnet."""
    record = _against_the_eight_occasion_file(_recorded(EIGHT_OCCASIONS))
    ran = quality.summarize_stored(record)
    assert (ran["0.0"]["failed"], ran["0.0"]["failed_first"]) == (1, 2)
    failed = [(i, k) for i, x in enumerate(record["sessions"]["0.0"]) for k, v in x["combinations"].items()
              if v["verdict"] == gate.REGRESSION]
    assert failed == [(4, "tiny_resnet-replicated-NHWC-2dev-fp32-b32")]
    again = replay.rejudged(record)
    now = quality.summarize_stored(again)
    assert (now["0.0"]["failed"], now["0.0"]["failed_first"]) == (0, 1)
    assert again["sessions"]["0.0"][4]["combinations"][failed[0][1]]["verdict"] == gate.UNCONFIRMED
    (before,), (after,) = quality.stored_bars(ran), quality.stored_bars(now)
    assert before.judged == {"alexnet-parameter_server-NHWC-1dev-fp32-b16": (15, 16)}
    assert after.judged == {"alexnet-parameter_server-NHWC-1dev-fp32-b16": (8, 9),
                            "lenet-parameter_server-NHWC-1dev-fp32-b32": (11, 11),
                            "trivial-independent-NHWC-2dev-fp32-b32": (3, 3)}
    assert after.short == {"alexnet-parameter_server-NHWC-1dev-fp32-b16": (8, 9)}


def test_the_zen4_live_stored_record_of_the_slope_across_occasions_meets_the_bar_where_in_reach():
    """The Zen 4 record of sessions started 13:57-15:01 on 2026-11-28, run by this gate (the slope across
    occasions of 849f03c) against the same eight-occasion file, four hours after its newest session: 20
    unchanged and 20 planted-25% sessions, the runner at 0.74-1.17x each combination's recorded speed. No
    unchanged session failed, even before confirmation, and where a session's MDS was below the plant's 20% drop
    the planted 25% was caught every time (alexnet fp32, lenet and trivial-independent); the four combinations
    out of reach were still caught in 16-19 of 20. Judged again by this gate, whose slope for a new occasion
    also holds how far one occasion's own strays, fewer sessions are in reach (the bar is asked of 38
    comparisons instead of 51) and every one of them is caught; three planted catches out of reach now pass
    (trivial-independent twice and lenet once, reading 0.84-0.85), and every other verdict is the same."""
    record = _against_the_eight_occasion_file(_recorded(os.path.join(
        QUALITY_RECORDS, "cpu-amd-epyc-f25m17-avx512-bf16-onednn-2c-tf2.21.stored.json")))
    summary = quality.summarize_stored(record)
    assert (summary["0.0"]["failed"], summary["0.0"]["failed_first"]) == (0, 0)
    assert summary["0.25"]["failed"] == 20
    (bar,) = quality.stored_bars(summary)
    assert bar.judged == {"alexnet-parameter_server-NHWC-1dev-fp32-b16": (20, 20),
                          "lenet-parameter_server-NHWC-1dev-fp32-b32": (20, 20),
                          "trivial-independent-NHWC-2dev-fp32-b32": (11, 11)} and not bar.short
    caught = {k: sum(s["combinations"][k]["verdict"] == gate.REGRESSION for s in record["sessions"]["0.25"])
              for k in bar.out_of_reach}
    assert sorted(caught.values()) == [16, 17, 18, 19]
    again = replay.rejudged(record)
    changed = [(level, i, k) for level in record["sessions"]
               for i, (s, x) in enumerate(zip(record["sessions"][level], again["sessions"][level]))
               for k, v in x["combinations"].items() if v["verdict"] != s["combinations"][k]["verdict"]]
    assert changed == [("0.25", 1, "trivial-independent-NHWC-2dev-fp32-b32"),
                       ("0.25", 1, "lenet-parameter_server-NHWC-1dev-fp32-b32"),
                       ("0.25", 11, "trivial-independent-NHWC-2dev-fp32-b32")]
    assert all(again["sessions"]["0.25"][i]["combinations"][k]["verdict"] == gate.NOISE for _, i, k in changed)
    (now,) = quality.stored_bars(quality.summarize_stored(again))
    assert now.judged == {"alexnet-parameter_server-NHWC-1dev-fp32-b16": (19, 19),
                          "lenet-parameter_server-NHWC-1dev-fp32-b32": (17, 17),
                          "trivial-independent-NHWC-2dev-fp32-b32": (2, 2)}


def test_gate_quality_rejudge_prints_what_ran_beside_what_this_gate_decides(tmp_path, capsys):
    """`hpcnn-perf gate-quality --mode=stored --rejudge RECORD` on the Zen 3 record: what ran (2 of 37 unchanged
    sessions failed), then this gate's report from the same rounds, and --json writes the record judged again."""
    from hpcnn.perf.cli import main as perf_main

    out = tmp_path / "again.json"
    assert perf_main(["gate-quality", "--mode=stored", f"--rejudge={ZEN3_SLOW_SPELLS}", f"--json={out}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == ["as it ran:", "  planted   0%: 2/37 sessions failed (5 before confirmation)",
                         "judged again by this gate, from the same rounds:",
                         "planted   0%: 0/37 sessions failed"]
    assert lines[-1] == "unchanged: 0 of 37 sessions failed (the bar: none): met"
    with open(out) as f:
        again = json.load(f)
    with open(ZEN3_SLOW_SPELLS) as f:
        assert again == replay.rejudged(json.load(f))


def test_the_zen5_live_stored_record_fails_no_unchanged_session_and_catches_only_within_the_hour():
    """The Zen 5 record of 00:53-02:16 on 2026-11-28, against that runner's first occasion alone (5 sessions at
    00:50-00:53, begun seconds after a CI run): 20 rounds of unchanged, planted-10% and planted-25% sessions. The
    first 12 rounds fell within the hour of the file (MDS 13-25% where the runner stayed in reach), the last 8
    on a new occasion (assumed 5% drift: MDS 28-35%). No unchanged session failed, even before confirmation.
    A planted 25% was caught only within the hour, and there in 36 of the 52 comparisons whose MDS was below 25%:
    the runner read up to 1.36x its recorded speed, and where it lay over 10% beyond a combination's recorded
    speeds only drops beyond 35% fail (MDS 35%)."""
    record = _judged_again_as_it_ran(ZEN5_STORED)
    assert list(record["sessions"]) == ["0.0", "0.1", "0.25"] and _recorded_days(record) == {"2026-11-28"}
    summary = quality.summarize_stored(record)
    assert summary["0.0"]["failed"] == 0 and summary["0.0"]["failed_first"] == 0
    assert summary["0.25"]["failed"] == 12
    dates = [s["date"] for c in record["baselines"]["combinations"].values() for s in c["sessions"]]

    def new_occasion(session):
        return stored.on_new_occasion(dates, datetime.datetime.fromtimestamp(session["start"], datetime.timezone.utc))
    planted = record["sessions"]["0.25"]
    within = [v for s in planted if not new_occasion(s) for v in s["combinations"].values()]
    later = [v for s in planted if new_occasion(s) for v in s["combinations"].values()]
    assert (len(within), len(later)) == (84, 56)
    assert not [v for v in later if v["verdict"] == gate.REGRESSION] and min(v["mds"] for v in later) > 0.25
    reachable = [v for v in within if v["mds"] < 0.25]
    assert len(reachable) == 52 and sum(v["verdict"] == gate.REGRESSION for v in reachable) == 36
    out_of_reach = [v for v in within if v["mds"] == pytest.approx(gate.WIDE_BOUND)]
    assert out_of_reach and all(v["runner_speed"] > 1.0 for v in out_of_reach)


def test_the_xeon_live_stored_record_is_what_this_gate_decides_on_a_file_of_two_occasions():
    """The Xeon record of 16:31-18:10 on 2026-11-26 (the gate of 7a192bf) against that runner's file as shipped:
    two occasions, 2026-11-24 and 15:11-15:18 that day, so every session was on a new occasion at the measured
    4.9% drift and the MDS was 23-25%, below the planted 25%. No unchanged session failed, even before
    confirmation. A planted 25% was caught in 19 or 20 of 20 on six combinations and in 18 of 20 on alexnet bf16:
    once its session's runner read 0.83x, beyond the range the file saw, where only drops beyond 35% fail, and
    once confirmation cleared a first catch (0.787, re-measured at 0.900, p 0.07); confirmation also cleared one
    of trivial-replicated's (re-measured at p 0.013 against 0.01)."""
    record = _judged_again_as_it_ran(XEON_STORED)
    assert _recorded_days(record) == {"2026-11-24", "2026-11-26"}
    summary = quality.summarize_stored(record)
    assert summary["0.0"]["failed"] == 0 and summary["0.0"]["failed_first"] == 0
    planted = summary["0.25"]["per_combination"]
    assert all(0.23 < x["median_mds"] < 0.25 for x in planted.values()), planted
    caught = {k: x["failed"] for k, x in planted.items()}
    assert sorted(caught.values()) == [18, 19, 19, 19, 20, 20, 20], caught
    assert caught["alexnet-parameter_server-NHWC-1dev-bf16-b16"] == 18
    cleared = sorted(k for k, _ in _planted_with(record, gate.UNCONFIRMED))
    assert cleared == ["alexnet-parameter_server-NHWC-1dev-bf16-b16", "trivial-replicated-NHWC-2dev-fp32-b32"]
    # every miss but those two is a session whose runner lay beyond the file's range, judged at the 35% bar
    missed = [v for _, v in _planted_with(record, gate.NOISE)]
    assert len(missed) == 3 and all(v["mds"] > 0.25 and v["runner_speed"] < 0.85 for v in missed)


def test_the_xeon_live_stored_record_is_what_this_gate_decides_on_a_file_of_one_occasion():
    """The Xeon record of 13:49-15:09 on 2026-11-26 (the gate of f921f5b; shipped until the run above) against
    that runner's file as it was shipped then: one occasion, two days before, so the drift between occasions is
    the assumed 5% and every MDS 28-29%, above the planted 25%. No unchanged session failed, even before
    confirmation, though the trivial models read up to 14% below their recorded speed on the yardstick;
    confirmation cleared two first catches of alexnet bf16, re-measured at p 0.022 and 0.028 against 0.01.
    Planted sessions are caught as often as an MDS above the plant allows: 3-18 of 20, never all."""
    record = _judged_again_as_it_ran(XEON_ONE_OCCASION)
    assert len(record["baselines"]["combinations"]) == 7
    assert _recorded_days(record) == {"2026-11-24"}
    summary = quality.summarize_stored(record)
    assert summary["0.0"]["failed"] == 0 and summary["0.0"]["failed_first"] == 0
    assert min(x["ratio_min"] for x in summary["0.0"]["per_combination"].values()) < 0.87
    planted = summary["0.25"]["per_combination"]
    assert all(0.25 < x["median_mds"] < 0.30 for x in planted.values()), planted
    assert all(3 <= x["failed"] <= 18 for x in planted.values()), planted
    assert summary["0.25"]["failed_first"] == summary["0.25"]["failed"] == 18
    cleared = _planted_with(record, gate.UNCONFIRMED)
    assert [k for k, _ in cleared] == ["alexnet-parameter_server-NHWC-1dev-bf16-b16"] * 2
    assert all(gate.CONFIRM_ALPHA < v["confirm_p_slower"] < 0.03 for _, v in cleared)


def test_a_planted_slowdown_is_a_smaller_drop_in_throughput():
    """Work that makes a step 25% longer leaves 1/1.25 of the images/sec: a 20% drop, the unit of the MDS."""
    assert quality.plant_drop(0.25) == pytest.approx(0.20)
    assert quality.plant_drop(0.10) == pytest.approx(1 - 1 / 1.1)
    assert quality.plant_drop(0.0) == 0.0


def test_the_stored_bar_is_asked_only_of_sessions_whose_mds_is_below_the_plants_drop():
    """The Zen 4 record with confirmation: at a planted 25% (a 20% drop) five combinations had every session's MDS
    below 20% and caught it in 19 or 20 of 20; trivial-ps (MDS 21.4%) and tiny_resnet (26%) are not asked, though
    trivial-ps's MDS is below 25%. On the Xeon record every MDS was 23-25%: nothing to judge. On the Zen 5 record
    the runner left reach in many sessions, and where it stayed in reach the bar was not met."""
    zen4 = quality.stored_bars(quality.summarize_stored(_recorded(ZEN4_STORED)))
    assert [b.level for b in zen4] == [0.25] and zen4[0].met is True
    assert zen4[0].out_of_reach == ["tiny_resnet-replicated-NHWC-2dev-fp32-b32",
                                    "trivial-parameter_server-NHWC-1dev-fp32-b32"]
    assert all(n == 20 and caught >= 19 for caught, n in zen4[0].judged.values()) and len(zen4[0].judged) == 5
    xeon = quality.stored_bars(quality.summarize_stored(_judged_again_as_it_ran(XEON_STORED)))
    assert xeon[0].met is None and len(xeon[0].out_of_reach) == 7
    zen5_record = _judged_again_as_it_ran(ZEN5_STORED)
    ten, quarter = quality.stored_bars(quality.summarize_stored(zen5_record))
    assert (ten.level, ten.met, quarter.met) == (0.10, None, False)
    assert quarter.judged["alexnet-parameter_server-NHWC-1dev-bf16-b16"] == (4, 7)
    for key, (caught, n) in quarter.judged.items():  # the bar's counts are the sessions' own verdicts
        mine = [v for s in zen5_record["sessions"]["0.25"]
                for k, v in s["combinations"].items() if k == key and v["mds"] < 0.2]
        assert (caught, n) == (sum(v["verdict"] == gate.REGRESSION for v in mine), len(mine))
    lines = quality.bar_lines([ten, quarter], 0, 20, "session")
    assert lines[0].endswith(": met") and "nothing to judge" in lines[1]
    assert "NOT MET" in lines[2] and "alexnet-parameter_server-NHWC-1dev-bf16-b16 4/7" in lines[2]
    assert "out of reach (MDS above the plant's drop): trivial-independent-NHWC-2dev-fp32-b32" in lines[2]


def test_the_paired_bar_counts_runs_after_holm():
    """Zen 5's first paired run: 5% caught in 7/7, 10% missed on alexnet bf16, so that bar is not met; Zen 3's two
    runs meet both. Unchanged code failed nowhere."""
    with open(os.path.join(THREE_STEP_ROUNDS, "cpu-amd-epyc-f26m2-avx512-bf16-onednn-2c-tf2.21.paired.json")) as f:
        zen5 = quality.summarize_paired(json.load(f))
    five, ten = quality.paired_bars(zen5)
    assert (five.level, five.met, ten.level, ten.met) == (0.05, True, 0.10, False)
    assert ten.judged["alexnet-parameter_server-NHWC-1dev-bf16-b16"] == (0, 1)
    lines = quality.bar_lines([five, ten], zen5["flagged"]["0.0"], zen5["runs"], "run")
    assert lines[0] == "unchanged: 0 of 1 runs failed (the bar: none): met"
    assert "at least 1 run each" in lines[1] and "short: alexnet-parameter_server-NHWC-1dev-bf16-b16 0/1" in lines[2]
    with open(os.path.join(THREE_STEP_ROUNDS, "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21.paired.json")) as f:
        zen3 = quality.summarize_paired(json.load(f))
    assert [b.met for b in quality.paired_bars(zen3)] == [True, True]


def test_the_zen4_record_of_the_pair_level_test_meets_the_paired_bar_after_twenty_runs():
    """The issue's paired bar judged on the shipped Zen 4 record of the design before blocks (runs of 2026-11-28 and
    29): no unchanged run failed, and after Holm's step-down a planted 5% was missed only in run 12 (tiny_resnet,
    alexnet fp32) and run 20 (trivial-parameter_server), so every combination meets 16/20 at 5% and 19/20 at 10%."""
    with open(os.path.join(PAIR_LEVEL_TEST, "cpu-amd-epyc-f25m17-avx512-bf16-onednn-2c-tf2.21.paired.json")) as f:
        record = json.load(f)
    summary = quality.summarize_paired(record)
    assert summary["runs"] == 20 and summary["flagged"]["0.0"] == 0
    five, ten = quality.paired_bars(summary)
    assert (five.level, five.met, ten.level, ten.met) == (0.05, True, 0.10, True)
    families = quality.family_failures(record, 20)
    missed = sorted((run + 1, k) for k, runs in families["0.05"].items() for run, failed in enumerate(runs)
                    if not failed)
    assert missed == [(12, "alexnet-parameter_server-NHWC-1dev-fp32-b16"),
                      (12, "tiny_resnet-replicated-NHWC-2dev-fp32-b32"),
                      (20, "trivial-parameter_server-NHWC-1dev-fp32-b32")]
    assert all(all(runs) for runs in families["0.1"].values())


def test_a_quality_run_ends_with_its_table_and_the_bars():
    """What `hpcnn-perf gate-quality` prints at its end, on shipped records: the Zen 4 stored run's sessions, its
    table, and the bar met at 25%; the Zen 3 paired runs' flagged counts and both bars met; the comparisons a
    flagged Zen 4 run missed."""
    zen4 = quality.stored_report(quality.summarize_stored(_recorded(ZEN4_STORED)))
    assert zen4[:2] == ["planted   0%: 0/20 sessions failed (1 before confirmation)",
                        "planted  25%: 20/20 sessions failed"]
    assert zen4[-3] == "the issue's bar, where a session's MDS was below the plant's drop in throughput:"
    assert zen4[-2] == "unchanged: 0 of 20 sessions failed (the bar: none): met"
    assert zen4[-1].startswith("planted 25% (throughput x0.800; the bar: 95%): met on 5 combination(s); out of reach")
    with open(os.path.join(THREE_STEP_ROUNDS, "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21.paired.json")) as f:
        zen3 = quality.paired_report(quality.summarize_paired(json.load(f)))
    assert zen3[0].startswith("planted   0%: 0/2 runs with a false failure, 0/12 comparisons failed")
    assert zen3[-2:] == ["planted 5% (throughput x0.952; the bar: 80%): met on 6 combination(s), at least 2 runs each",
                         "planted 10% (throughput x0.909; the bar: 95%): met on 6 combination(s), at least 2 runs each"]
    with open(os.path.join(THREE_STEP_ROUNDS, "cpu-amd-epyc-f25m17-avx512-bf16-onednn-2c-tf2.21.paired.json")) as f:
        zen4_paired = json.load(f)
    # every run had a catch at 5%, but alexnet bf16's three comparisons and three others were missed: the line
    # says both, so a flagged run is not read as a whole matrix caught
    five = quality.paired_report(quality.summarize_paired(zen4_paired))[1]
    missed = sum(not failed for runs in quality.family_failures(zen4_paired, 3)["0.05"].values() for failed in runs)
    assert missed == 6 and five.startswith("planted   5%: 3/3 runs flagged, 15/21 comparisons caught")

