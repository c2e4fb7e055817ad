"""The throughput history: storing perf-suite runs, finding the commits where throughput stepped, the reports."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from hpcnn.perf import gate, history, trend
from hpcnn.perf.baselines import Baselines
from hpcnn.perf.report import format_markdown, investigate_commands
from hpcnn.perf.stored import judge_sessions
from unit_tests.recorded import load

PROFILE = "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21"
# the baselines this project shipped for its 2-core EPYC from 56d5f6f to 2ae3607: 8 smoke sessions, real drift
RECORDED = "baselines_56d5f6f.json"


def _recorded_rounds():
    """Per combination, the rounds of every session of a recorded baselines file (real noise)."""
    combos = load(RECORDED)["combinations"]
    return {key: [s["samples"] for s in c["sessions"]] for key, c in combos.items()}


def _run_file(path, commit, day, rounds, verdict="UNCHANGED", yardstick=None, version=1):
    """A file as `pytest perf_tests --benchmark-json` writes it (the fields hpcnn and history read);
    ``yardstick``: the yardstick rates timed beside the rounds, if any."""
    benches = [{"name": f"test_throughput[{key}]", "extra_info": {
        "combination": key, "images_per_sec_rounds": r, "profile_id": PROFILE,
        **({"verdict": verdict} if verdict else {}),
        **({"yardstick_rates": yardstick, "yardstick_version": version} if yardstick else {})}}
        for key, r in rounds.items()]
    data = {"commit_info": {"id": commit, "time": f"2026-11-{day:02d}T12:00:00+00:00"},
            "datetime": f"2026-11-{day:02d}T13:00:00", "benchmarks": benches}
    path.write_text(json.dumps(data))
    return str(path)


def _points(values):
    return [history.Point(f"{i:040x}", f"2026-11-{i + 1:02d}", float(v), [float(v)], 1, False)
            for i, v in enumerate(values)]


def test_adding_a_run_twice_stores_it_once_and_a_bad_file_changes_nothing(tmp_path):
    rounds = {k: r[0] for k, r in _recorded_rounds().items()}
    good = _run_file(tmp_path / "a.json", "a" * 40, 1, rounds)
    with history.History(str(tmp_path / "h.sqlite")) as h:
        assert h.add(history.parse_run(good)) is True
        assert h.add(history.parse_run(good)) is False
        (tmp_path / "bad.json").write_text(json.dumps({"benchmarks": [{"name": "x", "extra_info": {}}]}))
        with pytest.raises(history.HistoryError, match=r"bad\.json: benchmark x has no combination"):
            history.parse_run(str(tmp_path / "bad.json"))
        (tmp_path / "cut.json").write_text((tmp_path / "a.json").read_text()[:50])
        with pytest.raises(history.HistoryError, match=r"cut\.json: not JSON"):
            history.parse_run(str(tmp_path / "cut.json"))
        key = sorted(rounds)[0]
        series = h.series(PROFILE, key)
        assert len(series) == 1 and series[0].rounds == rounds[key] and series[0].median == np.median(rounds[key])
        assert h.combinations(PROFILE) == sorted(rounds)


def test_runs_of_one_commit_pool_and_a_recording_session_is_marked_a_refresh(tmp_path):
    recorded = _recorded_rounds()
    key = sorted(recorded)[0]
    with history.History(str(tmp_path / "h.sqlite")) as h:
        h.add(history.parse_run(_run_file(tmp_path / "1.json", "b" * 40, 2, {key: recorded[key][1]})))
        h.add(history.parse_run(_run_file(tmp_path / "0.json", "a" * 40, 1, {key: recorded[key][0]}, verdict=None)))
        h.add(history.parse_run(_run_file(tmp_path / "2.json", "b" * 40, 2, {key: recorded[key][2]})))
        a, b = h.series(PROFILE, key)  # commit time orders the points, not the order of adding
    assert (a.commit, a.refresh, a.runs) == ("a" * 40, True, 1)
    assert (b.commit, b.refresh, b.runs) == ("b" * 40, False, 2)
    assert b.rounds == recorded[key][1] + recorded[key][2]
    assert b.median == pytest.approx(np.median([np.median(recorded[key][1]), np.median(recorded[key][2])]))


def test_by_yardstick_a_run_counts_as_its_images_per_sec_over_the_runner_speed_timed_beside_it(tmp_path):
    recorded = _recorded_rounds()
    key = sorted(recorded)[0]
    rounds = recorded[key][0]
    with history.History(str(tmp_path / "h.sqlite")) as h:
        # commit a ran on a runner at full speed; b's two runs on one at 80% (both the rounds and the yardstick)
        h.add(history.parse_run(_run_file(tmp_path / "a.json", "a" * 40, 1, {key: rounds}, yardstick=[50, 52, 48])))
        h.add(history.parse_run(_run_file(tmp_path / "b.json", "b" * 40, 2, {key: [0.8 * x for x in rounds]},
                                          yardstick=[40, 41, 39])))
        h.add(history.parse_run(_run_file(tmp_path / "c.json", "b" * 40, 2, {key: [0.8 * x for x in rounds[::-1]]},
                                          yardstick=[40.5, 39.5])))
        h.add(history.parse_run(_run_file(tmp_path / "old.json", "c" * 40, 3, {key: rounds})))  # none timed
        h.add(history.parse_run(_run_file(tmp_path / "v0.json", "d" * 40, 4, {key: rounds}, yardstick=[9], version=0)))
        raw = h.series(PROFILE, key)
        a, b = h.series(PROFILE, key, by_yardstick=True)
        assert [p.commit[0] for p in raw] == ["a", "b", "c", "d"]
        assert raw[1].median == pytest.approx(0.8 * raw[0].median)
        assert (a.commit[0], b.commit[0], b.runs) == ("a", "b", 2)  # runs without (this version's) yardstick left out
        scale = np.median([50, 40, 40])  # the series' median rate
        assert a.median == pytest.approx(np.median(rounds) * scale / 50)
        assert b.median == pytest.approx(a.median)  # the slower runner's runs, divided by its speed, are a's level
        assert max(a.rounds) == pytest.approx(max(rounds) * scale / 50)
        with pytest.raises(history.HistoryError, match=r"no run of other \(cpu-.*\) timed the yardstick"):
            h.series(PROFILE, "other", by_yardstick=True)


def test_the_yardstick_is_a_real_training_step_of_fixed_work():
    from hpcnn.perf.yardstick import Yardstick

    a, b = Yardstick(warmup_steps=0), Yardstick(warmup_steps=0)
    first = [float(a._step()) for _ in range(20)]
    assert first[-1] < first[0]  # it trains: the loss falls under SGD
    assert [float(b._step()) for _ in range(20)] == pytest.approx(first, rel=1e-4)  # the same work every time
    assert a.rate(steps=3) > 0


def test_a_history_made_before_the_yardstick_gains_its_column_and_keeps_its_runs(tmp_path):
    import sqlite3

    db = sqlite3.connect(str(tmp_path / "old.sqlite"))
    db.executescript(_schema_without("yardstick", "yardstick_version"))
    db.execute("INSERT INTO runs VALUES ('r1', ?, 'abc', '2026-11-01', '2026-11-01', 0, 'f.json')", (PROFILE,))
    db.execute("INSERT INTO samples VALUES ('r1', 'k', '[1.0, 2.0, 3.0]', 2.0, 'UNCHANGED')")
    db.commit()
    db.close()
    with history.History(str(tmp_path / "old.sqlite")) as h:
        (point,) = h.series(PROFILE, "k")
        assert (point.median, point.rounds) == (2.0, [1.0, 2.0, 3.0])
        h.add(history.parse_run(_run_file(tmp_path / "new.json", "e" * 40, 2, {"k": [4.0, 4.0, 4.0]},
                                          yardstick=[10.0])))
        (point,) = h.series(PROFILE, "k", by_yardstick=True)
        assert point.median == 4.0


def _schema_without(*columns):
    """history.SCHEMA as it was before ``columns`` of the samples table existed."""
    return "\n".join(line for line in history.SCHEMA.splitlines() if not (line.split() and line.split()[0] in columns))


def test_a_history_made_before_the_yardstick_version_column_keeps_its_rates_as_version_1(tmp_path, monkeypatch):
    import sqlite3

    db = sqlite3.connect(str(tmp_path / "v.sqlite"))
    db.executescript(_schema_without("yardstick_version"))
    db.execute("INSERT INTO runs VALUES ('r1', ?, 'abc', '2026-11-01', '2026-11-01', 0, 'f.json')", (PROFILE,))
    db.execute("INSERT INTO samples VALUES ('r1', 'k', '[2.0, 2.0, 2.0]', 2.0, 'UNCHANGED', 10.0)")
    db.commit()
    db.close()
    monkeypatch.setattr(history.yardstick, "VERSION", 1)
    with history.History(str(tmp_path / "v.sqlite")) as h:
        (point,) = h.series(PROFILE, "k", by_yardstick=True)
        assert point.median == 2.0
        # a later run times a changed yardstick (version 2): the two versions' rates are never divided by each other
        h.add(history.parse_run(_run_file(tmp_path / "v2.json", "e" * 40, 2, {"k": [3.0, 3.0, 3.0]},
                                          yardstick=[30.0], version=2)))
        assert [p.commit for p in h.series(PROFILE, "k", by_yardstick=True)] == ["abc"]
        monkeypatch.setattr(history.yardstick, "VERSION", 2)
        (point,) = h.series(PROFILE, "k", by_yardstick=True)
        assert (point.commit, point.median) == ("e" * 40, 3.0)


def test_a_planted_10_percent_step_and_its_removal_are_found_at_their_commits():
    found, false = 0, 0
    for seed in range(100):
        flat = 100 * np.exp(np.random.default_rng(seed).normal(0, 0.02, 14))
        planted = flat * np.where((np.arange(14) >= 5) & (np.arange(14) < 10), 0.9, 1.0)
        changes = history.find_changes(_points(planted))
        found += [c.index for c in changes] == [5, 10]
        false += bool(history.find_changes(_points(flat)))
        if [c.index for c in changes] == [5, 10]:
            slower, faster = changes
            assert slower.ci_low < slower.ratio < slower.ci_high < 1 < faster.ci_low
            assert slower.after == _points(planted)[5].commit and slower.commits_before == 5
    assert found >= 75 and false <= 4  # at 2% noise per commit; 200 seeds gave 179/200 and 4/200


def test_a_step_in_recorded_sessions_is_found_and_their_own_drift_is_not_a_step():
    rounds = _recorded_rounds()["trivial-replicated-NHWC-2dev-fp32-b32"]
    medians = [np.median(r) for r in rounds + rounds[::-1]]  # 16 real sessions: the recording and its replay
    assert history.find_changes(_points(medians)) == []
    stepped = [m * (0.75 if i >= 8 else 1.0) for i, m in enumerate(medians)]
    (change,) = history.find_changes(_points(stepped))
    assert change.index == 8 and change.ci_low < 0.75 < change.ci_high


# lenet-parameter_server on 15 real commits (9 of main, then the planted 10% slowdown at index 9, two more,
# its removal at index 12, two more): each commit's median of 3 sessions, recorded round-robin in one hour
LENET_HISTORY = [1572, 1577, 1586, 1441, 1552, 1542, 1571, 1561, 1567, 1399, 1404, 1445, 1620, 1597, 1528]


def test_a_real_history_read_raw_shows_no_step_but_the_planted_ones():
    # its lone low commit at index 3 is as deep as the planted step: against its own residuals, the 3-commit dip
    # is no longer clear of such noise at 15 commits, so a step may go unseen but none is made up
    for alpha in (0.01, 0.05):
        changes = history.find_changes(_points(LENET_HISTORY), alpha=alpha)
        assert [c.index for c in changes] in ([], [9, 12]), alpha


def _session_noise():
    """Each real session's deviation from the median of its commit's other four sessions (log images/sec):
    single sessions of a shared runner, heavy-tailed (one ran at 0.6x)."""
    runs = load(YARDSTICK_HISTORY)["runs"]
    by = {}
    for run in runs:
        for key, c in run["combinations"].items():
            by.setdefault((key, run["commit"]), []).append(np.log(np.median(c["rounds"])))
    return np.array([v[i] - np.median(np.delete(v, i)) for v in map(np.array, by.values()) for i in range(len(v))])


def test_long_series_of_real_session_noise_show_no_step():
    noise = _session_noise()
    assert noise.min() < -0.3  # the premise: tails no normal noise of this spread has
    rng = np.random.default_rng(0)
    flat = [history.find_changes(_points(np.exp(rng.choice(noise, 300)))) for _ in range(20)]
    assert sum(bool(f) for f in flat) <= 1  # against normal noise (before): steps in about 30% of such series


def test_a_step_beside_a_small_dip_is_found_at_its_own_commit():
    # a real 10% step right after a 3% dip of 5 commits (at 2% noise, not a step by itself): the step is found
    # at its own commit and alone; when the search kept the first cut of its best split, it added 193-196 too
    for seed in range(3):
        y = 0.02 * np.random.default_rng(seed).standard_normal(300) + np.where(np.arange(300) >= 200, np.log(1.1), 0)
        y[195:200] -= 0.03
        assert [c.index for c in history.find_changes(_points(np.exp(y)))] == [200], seed


YARDSTICK_HISTORY = "history_yardstick.json"
PLANTED, REMOVED = "9eabfdf", "ea2c11b"  # its commits 8 and 11 of 13


def _yardstick_history(tmp_path):
    """The real history of 13 commits x 5 sessions with the yardstick timed beside every round, as files
    of `pytest perf_tests --benchmark-json`, stored in a new database; returns the database's path."""
    recorded = load(YARDSTICK_HISTORY)
    files = []
    for i, run in enumerate(recorded["runs"]):
        benches = [{"name": f"test_throughput[{key}]", "extra_info": {
            "combination": key, "images_per_sec_rounds": c["rounds"], "profile_id": recorded["profile_id"],
            "verdict": c["verdict"], "yardstick_rates": c["yardstick"], "yardstick_version": recorded["version"]}}
            for key, c in run["combinations"].items()]
        path = tmp_path / f"run{i}.json"
        path.write_text(json.dumps({"commit_info": {"id": run["commit"], "time": run["commit_time"]},
                                    "datetime": run["run_time"], "benchmarks": benches}))
        files.append(str(path))
    db = str(tmp_path / "h.sqlite")
    with history.History(db) as h:
        for path in files:
            h.add(history.parse_run(path))
    return db


def test_on_the_yardstick_a_real_history_shows_exactly_its_planted_step_and_removal_at_the_default_alpha(tmp_path):
    db = _yardstick_history(tmp_path)
    with history.History(db) as h:
        series = list(h.selected())  # default: on the yardstick, since every run timed it
        assert len(series) == 3 and all(on for *_, on in series)
        for _, key, points, _ in series:
            assert len(points) == 13 and all(p.runs == 5 for p in points)
            changes = history.find_changes(points)
            assert [points[c.index].commit[:7] for c in changes] == [PLANTED, REMOVED], key
            slower, faster = changes
            assert 0.85 < slower.ratio < slower.ci_high < 1 < faster.ci_low < faster.ratio < 1.15
        # the same runs read raw: the runner's drift hides a step or makes one at a commit that changed nothing
        raw = [[points[c.index].commit[:7] for c in history.find_changes(points)]
               for _, _, points, on in h.selected(by_yardstick=False) if not on]
        assert len(raw) == 3 and any(found != [PLANTED, REMOVED] for found in raw)


def test_history_changes_says_which_series_it_read_on_the_yardstick_and_raw_reads_them_as_measured(tmp_path):
    db = _yardstick_history(tmp_path)
    cmd = [sys.executable, "-m", "hpcnn.perf.cli", "history", "changes", f"--db={db}", "--only=lenet"]
    default = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    lines = default.stdout.strip().splitlines()
    assert default.returncode == 0 and len(lines) == 2, default.stdout
    assert lines[0].startswith(f"{PROFILE} lenet-parameter_server-NHWC-1dev-fp32-b32 (on the yardstick): {REMOVED}")
    assert lines[1].startswith(f"{PROFILE} lenet-parameter_server-NHWC-1dev-fp32-b32 (on the yardstick): {PLANTED}")
    raw = subprocess.run(cmd + ["--raw"], capture_output=True, text=True, timeout=120)
    assert raw.returncode == 0 and "(on the yardstick)" not in raw.stdout and raw.stdout != default.stdout
    both = subprocess.run(cmd + ["--raw", "--by-yardstick"], capture_output=True, text=True, timeout=120)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr and "Traceback" not in both.stderr


def test_history_commands_add_list_changes_newest_first_and_refuse_a_bad_file_in_one_line(tmp_path):
    rounds = _recorded_rounds()
    key = "trivial-independent-NHWC-2dev-fp32-b32"  # the quietest recorded combination: 3.6% between sessions
    files = []
    for i in range(12):
        scale = 0.75 if 4 <= i < 8 else 1.0  # a 25% drop at commit 4, gone at commit 8
        files.append(_run_file(tmp_path / f"{i}.json", f"{i:x}" * 40, i + 1,
                               {key: [x * scale for x in rounds[key][i % 8]]}))
    db = str(tmp_path / "h.sqlite")
    cmd = [sys.executable, "-m", "hpcnn.perf.cli", "history"]
    added = subprocess.run(cmd + ["add", f"--db={db}", *files], capture_output=True, text=True, timeout=120)
    assert added.returncode == 0 and added.stdout.count(": added") == 12
    (tmp_path / "bad.json").write_text("{")
    refused = subprocess.run(cmd + ["add", f"--db={db}", files[0], str(tmp_path / "bad.json")], capture_output=True,
                             text=True, timeout=120)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines() == [f"hpcnn-perf: error: {tmp_path / 'bad.json'}: not JSON "
                                                   "(Expecting property name enclosed in double quotes at line 1)"]
    wrong = subprocess.run(cmd + ["changes", f"--db={db}", "--alpha=0.5"], capture_output=True, text=True, timeout=120)
    assert wrong.returncode == 2 and wrong.stderr.strip().splitlines() == [
        "hpcnn-perf: error: --alpha=0.5 is out of range; allowed: 0 < alpha <= 0.2"]
    listed = subprocess.run(cmd + ["changes", f"--db={db}"], capture_output=True, text=True, timeout=120)
    lines = listed.stdout.strip().splitlines()
    assert listed.returncode == 0 and len(lines) == 2, listed.stdout
    assert lines[0].startswith(f"{PROFILE} {key}: {'8' * 12}: ") and "faster" in lines[0]
    assert lines[1].startswith(f"{PROFILE} {key}: {'4' * 12}: ") and "slower" in lines[1]


def test_report_draws_one_plot_per_combination_and_names_each_step(tmp_path):
    rounds = _recorded_rounds()
    with history.History(str(tmp_path / "h.sqlite")) as h:
        for i in range(12):
            scale = 0.7 if i >= 6 else 1.0
            h.add(history.parse_run(_run_file(tmp_path / f"{i}.json", f"{i:x}" * 40, i + 1,
                                              {k: [x * scale for x in r[i % 8]] for k, r in rounds.items()},
                                              verdict=None if i == 0 else "UNCHANGED")))
        page = trend.write_report(h, str(tmp_path / "report"), jobs=2)
        one_process = trend.write_report(h, str(tmp_path / "serial"), jobs=1)
    with open(page) as f:
        text = f.read()
    with open(one_process) as f:
        assert f.read() == text  # the pool's page lists the combinations in the history's order, as one process
    pngs = [f for f in os.listdir(tmp_path / "report") if f.endswith(".png")]
    assert len(pngs) == len(rounds)
    assert all(os.path.getsize(tmp_path / "report" / f) > 10_000 for f in pngs)
    assert f"{'6' * 12}: 30.0% slower" in text or f"{'6' * 12}: " in text


def _verdict(current_scale):
    rounds = _recorded_rounds()["trivial-independent-NHWC-2dev-fp32-b32"]
    current = [x * current_scale for x in rounds[-1]]
    return judge_sessions(rounds[:-1], current, gate.STORED_THRESHOLD, 0.01)


def test_merge_request_report_leads_with_the_verdict_and_says_how_to_reproduce_each_failure():
    slower, same = _verdict(0.6), _verdict(1.0)
    assert slower.failed and not same.failed
    rows = [("a-combination", slower, ""), ("b-combination", same, ""), ("c-combination", None, "no baseline")]
    text = format_markdown(rows, "profile X", lambda key: f"repro {key}")
    lines = text.splitlines()
    assert lines[0] == "## hpcnn perf gate: FAILED: 1 of 2 combination(s) slower"
    v = slower
    assert f"| `a-combination` | {v.baseline_median:.2f} | {v.current_median:.2f} | {v.ratio:.3f}" in text
    assert "**REGRESSION**" in text and "| `c-combination` | - | - | - | - | no baseline |" in text
    assert lines[-1] == "- `a-combination`: `repro a-combination`"
    with_next = format_markdown(rows, "profile X", lambda key: f"repro {key}",
                                lambda key: investigate_commands(key, "abc123", None)).splitlines()
    assert with_next[-3:] == [
        "- `a-combination`: `repro a-combination`",
        "  - which commit: `hpcnn-perf bisect --good=abc123 --bad=HEAD --only=a-combination`",
        "  - which stage: `hpcnn-perf explain --baseline=abc123 --candidate=HEAD --only=a-combination`"]
    passed = format_markdown(rows[1:], "profile X", lambda key: "")
    assert passed.startswith("## hpcnn perf gate: passed (1 combination(s) judged, none slower)")
    assert "Reproduce" not in passed


def test_failures_name_the_commits_to_bisect_and_explain_between():
    assert investigate_commands("k", None, "f00d", matrix="full") == {
        "which commit": "hpcnn-perf bisect --good=GOOD_REV --bad=f00d --only=k --perf-matrix=full",
        "which stage": "hpcnn-perf explain --baseline=GOOD_REV --candidate=f00d --only=k --perf-matrix=full"}
    sessions = [{"samples": [1.0], "commit": "old"}, {"samples": [1.0], "commit": "new"}, {"samples": [1.0]}]
    recorded = Baselines("p", {"k": {"sessions": sessions}})
    assert recorded.last_commit("k") == "new" and recorded.last_commit("other") is None
