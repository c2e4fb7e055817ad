"""The stored gate's decisions, on samples recorded on this project's 2-core CPU.

recorded_rounds.json: 20 gate-quality runs of trivial-ps, rounds interleaved A B B A,
unchanged and with a planted 25% slowdown (adjacent rounds form pairs).
recorded_sessions.json: smoke-matrix sessions recorded as a runner records its
baselines (separate pytest processes, minutes apart), whole-session drift included.
yardstick_sessions.json: 16 perf-suite sessions of one commit with the yardstick rate
timed beside each; every other one ran beside a process burning one of the 2 cores.
The paired gate's decisions are in test_gate_paired.py.
"""

import copy
import dataclasses
import datetime
import math
import os
import statistics

import numpy as np
import pytest

from hpcnn.perf import baselines as baselines_lib
from hpcnn.perf import gate, quality, replay, review, sequential, stored
from hpcnn.perf.baselines import Baselines
from unit_tests.recorded import (DATA, EIGHT_OCCASIONS, QUALITY_RECORDS, SLOW_SPELLS,
                                 THREE_STEP_ROUNDS, TWO_DAYS_LATER, load)
from unit_tests.helpers import SHIPPED_BASELINES


ROUNDS = load("recorded_rounds.json")
SESSIONS = load("recorded_sessions.json")
SMOKE_ALPHA = gate.combination_alpha(gate.DEFAULT_ALPHA, len(SESSIONS["combinations"]))


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
YARDSTICK = load("yardstick_sessions.json")["combinations"]


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
CROSS_DAY = load("cross_day_sessions.json")


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


ZEN4 = load("zen4_sessions.json")  # a Zen 4 runner's file (9 sessions, two occasions) and 26 rounds of
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
    record = load(SLOW_SPELLS)
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
    beats = []
    fraction, se = planted.alternate(5, exact, 2, alternations=10, precision=0.005, cap=200,
                                     progress=lambda: beats.append(exact.calls))
    assert (fraction, se) == (pytest.approx(0.05), pytest.approx(0.0, abs=1e-12)) and exact.calls == 20
    assert beats == list(range(2, 21, 2))  # a heartbeat after each off/on pair
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


# -- live stored records: what gate-quality --mode=stored measured, judged again ------------------------------
ZEN4_STORED = os.path.join(DATA, "zen4_stored_confirmed.json")  # shipped in baselines/quality until 2026-11-28
XEON_STORED = os.path.join(QUALITY_RECORDS, "cpu-xeon-f6m207-avx512-bf16-onednn-2c-tf2.21.stored.json")
XEON_ONE_OCCASION = os.path.join(DATA, "xeon_stored_one_occasion.json")  # shipped at 7a192bf
ZEN3_STORED = os.path.join(QUALITY_RECORDS, "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21.stored.json")
ZEN3_SLOW_SPELLS = os.path.join(DATA, "zen3_stored_two_slow_spells.json")  # in baselines/quality until 2026-12-01
# gate-quality --mode=stored, unchanged code alone, on a third Zen 3 VM, 16:56-17:58 on 2026-12-03 (gate of e0d7d75)
ZEN3_VM_OF_12_03 = os.path.join(DATA, "zen3_stored_vm_of_2026_12_03.json")
ZEN5_STORED = os.path.join(QUALITY_RECORDS, "cpu-amd-epyc-f26m2-avx512-bf16-onednn-2c-tf2.21.stored.json")


def _recorded(path, sessions_per_level=20, span_s=3600):
    """A live stored record as it ran: its sessions per level, its unchanged ones spread over ``span_s``, and
    every first failure, none other, re-measured at least 60 s (the suite's default pause) after its first
    measurement. Returns the record."""
    record = load(path)
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


def _with_sessions_of(record, other, days_earlier=0.0, machine=None):
    """``record`` whose baselines file also holds every unchanged session of the live record ``other`` (its
    rounds and the median of its yardstick rates), dated as it ran ``days_earlier`` days before, named as
    recorded on ``machine`` (None: unnamed): a file that holds another VM's occasions."""
    out = copy.deepcopy(record)
    for session in other["sessions"]["0.0"]:
        date = datetime.datetime.fromtimestamp(session["start"] - days_earlier * 86400, datetime.timezone.utc)
        for key, v in session["combinations"].items():
            rate = statistics.median(v["yardstick_rates"])
            recorded = baselines_lib.session_record(v["images_per_sec_rounds"], None, rate, machine)
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
    vm = load(ZEN3_STORED)
    spells = load(ZEN3_SLOW_SPELLS)
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


TINY_RESNET = "tiny_resnet-replicated-NHWC-2dev-fp32-b32"


def _on_machine(record, machine):
    """``record`` whose baselines file names ``machine`` as the machine of every session it holds."""
    out = copy.deepcopy(record)
    for c in out["baselines"]["combinations"].values():
        for s in c["sessions"]:
            s["machine"] = machine
    return out


def test_on_a_machine_the_file_does_not_hold_the_zen3_vm_of_2026_12_01_fails_no_session():
    """The Zen 3 record of 2026-12-01 (a VM the shipped file had not seen; its sessions named no machine), judged
    again as sessions of a machine the file does not hold: the gate adds the spread of one machine's offset
    (``stored.ASSUMED_MACHINE``, 9.2%: set from this record's six median offsets and 2026-12-03's, so in sample
    here) and no session fails, even at first, where tiny_resnet failed at 0.700 judged as on the file's machine.
    The price is reach: every comparison's MDS is 45-55%, and each verdict says why and what to do instead."""
    record = load(ZEN3_STORED)
    again = replay.rejudged(record, machine="a-vm-the-file-does-not-hold")
    summary = quality.summarize_stored(again)["0.0"]
    assert (summary["failed"], summary["failed_first"]) == (0, 0)
    mds = [v["mds"] for x in again["sessions"]["0.0"] for v in x["combinations"].values()]
    assert 0.45 < min(mds) and max(mds) < 0.55
    assert again["sessions"]["0.0"][13]["combinations"][TINY_RESNET]["ratio"] == pytest.approx(0.700, abs=0.0005)
    against = replay.judged_against(record)
    x = record["sessions"]["0.0"][13]["combinations"][TINY_RESNET]
    now = datetime.datetime.fromtimestamp(record["sessions"]["0.0"][13]["start"], datetime.timezone.utc)
    v = against.judge(TINY_RESNET, x["images_per_sec_rounds"], x["yardstick_rates"], x["alpha"], now, "another")
    assert not v.failed and "a machine the baselines do not hold" in v.note and "9.2% apart per workload, assumed" \
        in v.note
    held = _on_machine(record, "another")  # the same file naming that machine: judged as it ran
    assert replay.judged_against(held).judge(TINY_RESNET, x["images_per_sec_rounds"], x["yardstick_rates"],
                                             x["alpha"], now, "another").failed
    key = next(iter(against.combinations))
    assert against.next_session_mds(key, 0.01, other_machine=True) > 0.3 > against.next_session_mds(key, 0.01)


def test_a_single_recorded_session_of_another_machine_says_so_beside_its_wide_bound():
    key = "alexnet-parameter_server-NHWC-1dev-fp32-b16"
    first, second = SESSIONS["combinations"][key][:2]
    b = Baselines(SESSIONS["profile"], {key: {"sessions": [baselines_lib.session_record(first, None, None, "vm-a")]}})
    there, here = b.judge(key, second, machine="vm-b"), b.judge(key, second, machine="vm-a")
    assert there.mds == here.mds == gate.WIDE_BOUND and there.verdict == here.verdict
    assert there.note == here.note + "; recorded on another machine (record sessions on this one)"


def test_the_zen3_vm_of_2026_12_03_judged_out_of_sample_as_a_machine_the_file_does_not_hold_fails_no_session():
    """The Zen 3 record of 16:56-17:58 on 2026-12-03: unchanged code alone against the file as shipped, 20
    sessions over 62 minutes on a third VM (runner at 0.32-1.33x its recorded speed), by the gate before machines
    (e0d7d75): no session failed, most of them with the runner beyond its recorded speeds (MDS 35%). This VM sat
    below the file where 2026-12-01's sat above it (medians 0.87-1.01 against 0.86-1.26). Judged as a machine the
    file does not hold, at the spread set from 2026-12-01's VM alone (11% on 6 contrasts, before this record was
    looked at), no session fails even at first; at the spread set from both VMs (9.2% on 12), none either."""
    record = _recorded(ZEN3_VM_OF_12_03, span_s=60 * 60)
    assert _recorded_days(record) == {"2026-11-24", "2026-11-25"}
    ran = quality.summarize_stored(record)["0.0"]
    assert (ran["failed"], ran["failed_first"]) == (0, 0)
    speeds = [v["runner_speed"] for x in record["sessions"]["0.0"] for v in x["combinations"].values()]
    assert 0.3 < min(speeds) < 0.35 and 1.3 < max(speeds) < 1.35
    for sigma, df in ((0.11, 6), (stored.ASSUMED_MACHINE_SIGMA, stored.ASSUMED_MACHINE_DF)):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(stored, "ASSUMED_MACHINE", stored.Drift(sigma, df))
            again = quality.summarize_stored(replay.rejudged(record, machine="a-vm-the-file-does-not-hold"))
            assert (again["0.0"]["failed"], again["0.0"]["failed_first"]) == (0, 0)


def test_a_zen3_file_of_two_vms_measures_their_spread_and_judges_each_machine_as_the_file_holds_it():
    """The shipped Zen 3 file (one VM, 2026-11-24 and -25) holding also the sessions of 2026-12-01's VM, each
    named by its machine: it measures one machine's offset at 8.8% on 6 contrasts (moderated towards the assumed
    9.2%), and 2026-12-03's VM, judged as a machine it does not hold, fails no session (MDS 41-58%); judged as if
    the file were one machine, as a file whose sessions name none is, two sessions fail. A session of the file's
    own VM is judged against that VM's sessions alone: as against the file without the other VM's."""
    third = load(ZEN3_VM_OF_12_03)
    two = _with_sessions_of(_on_machine(third, "file-vm"), load(ZEN3_STORED), machine="vm-2026-12-01")
    against = replay.judged_against(two)
    other = against.other_machine()
    assert other.machines == 2 and other.spread.measured_df == 6 and 0.087 < other.spread.sigma < 0.089
    assert against.judging(TINY_RESNET, "file-vm").machines(TINY_RESNET) == ["file-vm"] * 14
    assert against.judging(TINY_RESNET, "vm-2026-12-03") is against is against.judging(TINY_RESNET, None)
    named = replay.rejudged(two, machine="vm-2026-12-03")
    assert (quality.summarize_stored(named)["0.0"]["failed"], quality.summarize_stored(named)["0.0"]["failed_first"]) \
        == (0, 0)
    mds = [v["mds"] for x in named["sessions"]["0.0"] for v in x["combinations"].values()]
    assert 0.41 < min(mds) and max(mds) < 0.58
    assert quality.summarize_stored(replay.rejudged(two))["0.0"]["failed"] == 2
    own = replay.rejudged(two, machine="file-vm")
    alone = replay.rejudged(_on_machine(third, "file-vm"), machine="file-vm")
    assert [[(v["ratio"], v["verdict"]) for v in x["combinations"].values()] for x in own["sessions"]["0.0"]] == \
        [[(v["ratio"], v["verdict"]) for v in x["combinations"].values()] for x in alone["sessions"]["0.0"]]


def test_review_backtests_an_occasion_of_a_machine_no_other_occasion_ran_on_as_a_machine_the_file_does_not_hold():
    """``hpcnn-perf review`` on the shipped Zen 3 file holding also 2026-12-01's VM's 20 sessions: held out, that
    VM's occasion is judged as a machine the rest does not hold, and none of its sessions fails even at first;
    with sessions that name no machine, one fails at first (tiny_resnet, 0.700). The file's own three occasions
    are judged against the rest of their machine's, as before."""
    third = load(ZEN3_VM_OF_12_03)
    for named, failed_first in ((True, 0), (False, 1)):
        two = _with_sessions_of(_on_machine(third, "file-vm") if named else third, load(ZEN3_STORED),
                                machine="vm-2026-12-01" if named else None)
        held = review.backtest(replay.judged_against(two))
        assert [len(h.alone) for h in held] == [6, 4, 4, 20] and [h.failed for h in held[:3]] == [0, 0, 0]
        assert held[3].failed == failed_first and held[3].failed_confirmed == 0
        assert min(held[3].ratios) == pytest.approx(0.700, abs=0.0005)


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
    again = load(out)
    assert again == replay.rejudged(load(ZEN3_SLOW_SPELLS))


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


# -- the bars and what a quality run prints -----------------------------------------------------------
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
    zen3 = quality.paired_report(quality.summarize_paired(
        load(os.path.join(THREE_STEP_ROUNDS, "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21.paired.json"))))
    assert zen3[0].startswith("planted   0%: 0/2 runs with a false failure, 0/12 comparisons failed")
    assert zen3[-2:] == ["planted 5% (throughput x0.952; the bar: 80%): met on 6 combination(s), at least 2 runs each",
                         "planted 10% (throughput x0.909; the bar: 95%): met on 6 combination(s), at least 2 runs each"]
    zen4_paired = load(os.path.join(THREE_STEP_ROUNDS, "cpu-amd-epyc-f25m17-avx512-bf16-onednn-2c-tf2.21.paired.json"))
    # every run had a catch at 5%, but alexnet bf16's three comparisons and three others were missed: the line
    # says both, so a flagged run is not read as a whole matrix caught
    five = quality.paired_report(quality.summarize_paired(zen4_paired))[1]
    missed = sum(not failed for runs in quality.family_failures(zen4_paired, 3)["0.05"].values() for failed in runs)
    assert missed == 6 and five.startswith("planted   5%: 3/3 runs flagged, 15/21 comparisons caught")
