"""The gate end to end on real measurements: record, then catch an unmistakable slowdown.

The planted slowdown adds real work worth twice each step (the step takes about
3x as long), far beyond this machine's drift, so these tests cannot flake on a
slow shared runner; the gate's sensitivity to small slowdowns is measured by
`hpcnn-perf gate-quality`, not asserted here.
"""

import json
import os
import signal
import statistics
import subprocess
import sys
import time

import pytest

from hpcnn.perf.profile import machine_id
from unit_tests.helpers import REPO

COMBO = "trivial-parameter_server-NHWC-1dev-fp32-b32"
PLANT = "2.0"
# A paired comparison cancels the runner's drift pair by pair: half a step more is unmistakable there (every pair
# of trivial-ps here reads 0.6-0.75), where a stored session, judged across drift, needs PLANT.
PAIRED_PLANT = "0.5"


def _pytest_perf(tmp_path, *extra):
    cmd = [sys.executable, "-m", "pytest", "perf_tests", "-k", COMBO, "-p", "no:cacheprovider",
           f"--baselines-dir={tmp_path}", "--hardware-profile=e2e-test", "--perf-rounds=5",
           f"--benchmark-json={tmp_path / 'bench.json'}", *extra]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """One recording session of COMBO, made once for the stored tests (a session costs a process start and
    a measurement): (its folder, the recording's pytest run, its benchmark JSON). A test copies the
    baselines file into its own folder with ``baselines_in``."""
    folder = tmp_path_factory.mktemp("recorded")
    run = _pytest_perf(folder, "--update-baselines")
    bench = json.loads((folder / "bench.json").read_text()) if run.returncode == 0 else None
    return folder, run, bench


def baselines_in(tmp_path, recording) -> dict:
    """Copies the recorded baselines file into ``tmp_path``; returns COMBO's entry in it."""
    folder, run, _ = recording
    assert run.returncode == 0, run.stdout[-3000:]
    text = (folder / "e2e-test.json").read_text()
    (tmp_path / "e2e-test.json").write_text(text)
    return json.loads(text)["combinations"][COMBO]


@pytest.mark.slow
def test_a_session_without_a_baseline_passes_and_a_recording_saves_its_rounds(tmp_path, recording):
    missing = _pytest_perf(tmp_path)
    assert missing.returncode == 0, missing.stdout[-3000:]
    assert "no baseline" in missing.stdout and "--update-baselines" in missing.stdout

    saved = baselines_in(tmp_path, recording)
    _, record, bench = recording
    assert len(saved["sessions"]) == 1
    assert "backtest: one occasion recorded, none to judge against the others" in record.stdout
    samples = saved["sessions"][-1]["samples"]
    assert len(samples) == 5 and min(samples) > 0
    bench = bench["benchmarks"][0]
    assert bench["extra_info"]["images_per_sec_rounds"] == samples
    assert bench["stats"]["rounds"] == 5
    rates = bench["extra_info"]["yardstick_rates"]  # the runner's speed, timed before each round
    assert len(rates) == 5 and min(rates) > 0 and bench["extra_info"]["yardstick_version"] == 1
    assert saved["sessions"][-1]["yardstick"] == {"version": 1, "rate": statistics.median(rates)}
    assert saved["sessions"][-1]["machine"] == machine_id()  # the machine it ran on: this one, as the child saw it


@pytest.mark.slow
def test_stored_sessions_fail_on_a_planted_slowdown_and_gate_quality_records_each_round(tmp_path, recording,
                                                                                       capsys):
    """Two rounds of gate-quality --mode=stored against the recording: each an unchanged and a planted session,
    a real ``pytest perf_tests`` run; the planted ones must fail the gate, with its message."""
    from hpcnn.perf import cli, quality, replay, stored

    recorded = baselines_in(tmp_path, recording)["sessions"][0]
    saved, lines, processes = [], [], []
    record = quality.stored_quality(REPO, str(tmp_path), "e2e-test", 2, [float(PLANT)],
                                    ["-k", COMBO, "--perf-rounds=5", "--confirm-pause=2"], log=lines.append,
                                    save=lambda r: saved.append(json.loads(json.dumps(r))),
                                    on_session=lambda s, p: processes.append((s, p)))
    assert [s for s, _ in processes] == [0.0, float(PLANT)] * 2

    slowed = processes[1][1]  # the first planted session: the gate's failure as a merge request sees it
    assert slowed.returncode == 1, slowed.stdout[-3000:]
    assert "throughput regression" in slowed.stdout and "REGRESSION" in slowed.stdout
    report = quality.gate_report(slowed.stdout)
    assert report[0].startswith("hpcnn perf gate, profile e2e-test: 1 combination(s) judged")
    assert "benchmark:" in slowed.stdout and not [x for x in report if "benchmark:" in x or not x.strip()]
    assert report[-1].startswith("  which ")  # the gate's lines end with the commands that investigate
    row = next(line for line in report if line.startswith(COMBO + " "))  # the table row
    assert float(row.split()[3]) < 0.6  # about 1/3: the planted work is real
    assert "confirmed: re-measured 2 s later: ratio " in slowed.stdout
    assert "one session cannot tell session drift from a regression" in slowed.stdout
    assert "1 recorded session on the yardstick (runner at " in slowed.stdout  # judged relative to the runner
    recorded_at = recorded["commit"] or "GOOD_REV"  # the failure points from there to this checkout
    for what, command in (("which stage", f"explain --baseline={recorded_at} --candidate="),
                          ("which commit", f"bisect --good={recorded_at} --bad=")):
        assert any(line.startswith(f"  {what}: hpcnn-perf {command}") for line in report), report
    # gate-quality prints an unchanged session's failure so, as it happens (this one's output stands in); a
    # planted session's failure is the catch it was run for, and is not printed
    cli._print_false_failure(float(PLANT), slowed)
    assert capsys.readouterr().out == ""
    cli._print_false_failure(0.0, slowed)
    assert capsys.readouterr().out.splitlines() == ["false failure, unchanged code:", *("  " + x for x in report)]

    # saved after each session, before its line: a cut keeps every session the log reported
    assert [(r["summary"]["0.0"]["sessions"], r["summary"][PLANT]["sessions"]) for r in saved] == [
        (1, 0), (1, 1), (2, 1), (2, 2)]
    assert len(lines) == 4 and lines[0].startswith(f"session 1 planted 0%: {COMBO} ")
    planted = record["summary"][PLANT]
    assert planted["failed"] == 2 and list(planted["per_combination"]) == [COMBO]
    assert planted["per_combination"][COMBO]["failed"] == planted["per_combination"][COMBO]["failed_alone"] == 2
    # the record holds the file it was judged against, so this gate judges its sessions again as they ran
    assert record["baselines"]["combinations"][COMBO]["sessions"][0]["samples"] == recorded["samples"]
    again = replay.judge_again(record)
    assert [[judged.final[COMBO].verdict for judged in again[level]] for level in ("0.0", PLANT)] == [
        [s["combinations"][COMBO]["verdict"] for s in record["sessions"][level]] for level in ("0.0", PLANT)]
    for session in record["sessions"][PLANT] + record["sessions"]["0.0"]:
        v = session["combinations"][COMBO]
        assert v["runner_speed"] > 0 and 0 < v["ratio"] and v["mds"] == 0.35  # one recorded session: the wide bound
        # the rounds behind the verdict, to judge the same sessions again under another gate design
        assert len(v["images_per_sec_rounds"]) == len(v["yardstick_rates"]) == 5
        rounds, rates = v["images_per_sec_rounds"], v["yardstick_rates"]
        # one recorded session measures no slope: throughput follows the yardstick at the assumed one
        assert v["ratio"] == pytest.approx(statistics.median(rounds) / recorded["median"] * (
            recorded["yardstick"]["rate"] / statistics.median(rates)) ** stored.ASSUMED_SLOPE)
    assert all(v["combinations"][COMBO]["ratio"] < 0.6 for v in record["sessions"][PLANT])
    # one code change: the first planted session searched the amount of work, the second planted it as it was
    first, second = (session["combinations"][COMBO] for session in record["sessions"][PLANT])
    assert record["plant"] == quality.STORED_PLANT and [first["planted_searched"], second["planted_searched"]] == [
        True, False]
    assert first["planted_units"] > 0 and second["planted_units"] == first["planted_units"]
    assert record["plant_units"] == {PLANT: {COMBO: first["planted_units"]}}
    assert all(session["combinations"][COMBO]["planted_units"] is None for session in record["sessions"]["0.0"])
    for session, judged in zip(record["sessions"][PLANT], again[PLANT]):  # each failure re-measured, and kept
        v = session["combinations"][COMBO]
        # the failure stood only once a second measurement, built afresh two seconds later, was slower too
        assert v["confirm_verdict"] == "REGRESSION" and v["confirm_pause_s"] >= 2 and v["confirm_alpha"] == 0.01
        assert len(v["confirm_images_per_sec_rounds"]) == len(v["confirm_yardstick_rates"]) == 5
        assert v["confirm_images_per_sec_rounds"] != v["images_per_sec_rounds"] and v["confirm_ratio"] < 0.6
        assert judged.final[COMBO].ratio == pytest.approx(v["ratio"]) and "confirmed" in judged.final[COMBO].note
    assert planted["failed_first"] == 2
    assert len(lines) == 4 and "runner at " in lines[0]


@pytest.mark.slow
def test_paired_mode_catches_a_planted_slowdown():
    # 7 process pairs of 2 pairs, the fewest whose signs all one way (1/128) reject at 0.01 (one look)
    cmd = [sys.executable, "-m", "hpcnn.perf.cli", "compare", "--baseline=.", "--candidate=.",
           f"--only={COMBO}", "--min-rounds=14", "--max-rounds=14", "--restart-every=2",
           f"--plant-slowdown={PAIRED_PLANT}"]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    assert f"{COMBO}: baseline" in p.stdout and "REGRESSION" in p.stdout
    assert "14 paired rounds in 7 process pairs" in p.stdout
    assert f"which stage: hpcnn-perf explain --baseline=. --candidate=. --only={COMBO}" in p.stdout


def test_perf_cli_usage_errors_exit_2():
    p = subprocess.run([sys.executable, "-m", "hpcnn.perf.cli", "compare", "--baseline=no-such-rev-xyz",
                        f"--only={COMBO}"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "'no-such-rev-xyz' is neither a directory nor a git revision" in p.stderr
    p = subprocess.run([sys.executable, "-m", "hpcnn.perf.cli", "compare", "--baseline=.", "--max-rounds=4"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "--min-rounds=8 --max-rounds=4 is not a schedule; allowed: 3 <= --min-rounds <= --max-rounds" in p.stderr
    p = subprocess.run([sys.executable, "-m", "hpcnn.perf.cli", "compare", "--baseline=.", f"--only={COMBO}",
                        "--min-rounds=3", "--max-rounds=6"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "--max-rounds=6 is too few for the gate to detect anything over 1 combination(s); " \
        "allowed: 13 or more" in p.stderr, p.stderr  # 7 process pairs of 2 pairs: 1/2^7 below 0.01


def test_gate_quality_resumes_only_a_record_of_the_same_measurement(tmp_path):
    record = tmp_path / "q.json"
    record.write_text('{"sessions": [], "profile_id": "gpu-h100-x1", "combinations": {}}')
    p = subprocess.run([sys.executable, "-m", "hpcnn.perf.cli", "gate-quality", "--resume", f"--json={record}",
                        f"--only={COMBO}"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "cannot resume: the record's profile_id is 'gpu-h100-x1'" in p.stderr, p.stderr
    p = subprocess.run([sys.executable, "-m", "hpcnn.perf.cli", "gate-quality", "--resume",
                        f"--json={tmp_path / 'none.json'}"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "--resume: cannot read" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, "-m", "hpcnn.perf.cli", "gate-quality", "--mode=simulate",
                        f"--paired-json={tmp_path / 'none.json'}"], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 2 and "--paired-json: cannot read" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, "-m", "hpcnn.perf.cli", "gate-quality", "--mode=simulate",
                        f"--paired-json={record}"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "needs recorded pairs of at least one combination" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.slow
def test_paired_gate_quality_starts_fresh_workers_for_every_run_and_resamples_their_pairs(tmp_path):
    from hpcnn.perf import sequential

    # Unchanged code alone (--slowdowns=0): a planted side is the same worker plumbing that compare's test
    # catches, and the amount a later run plants is quality.planted_units' (test_gate_paired).
    record = tmp_path / "q.json"
    p = subprocess.run([sys.executable, "-m", "hpcnn.perf.cli", "gate-quality", "--mode=paired", f"--only={COMBO}",
                        "--slowdowns=0", "--min-rounds=7", "--max-rounds=7", "--restart-every=0", "--runs=2",
                        f"--json={record}"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads(record.read_text())
    assert r["workers"] == "fresh per run" and r["restart_every"] == 0 and r["summary"]["runs"] == 2
    assert r["settle_chunks"] == 1  # resumable only by a run that settles fresh processes alike
    assert list(r["combinations"][COMBO]) == ["0.0"]
    unchanged = r["combinations"][COMBO]["0.0"]
    pids = [{p for pair in x["pids"] for p in pair} for x in unchanged]
    assert len(pids[0]) == len(pids[1]) == 2 and not pids[0] & pids[1]  # run 2 timed none of run 1's processes
    for x in unchanged:  # one process pair per comparison here: restarts inside one are tested by
        assert len(x["pids"]) == 7 and len(set(map(tuple, x["pids"]))) == 1  # pair_runner's and a Side's tests
        assert len(x["a"]) == len(x["b"]) == x["pairs"] == 7 and x["units"] == [] and x["planted"] == 0
        assert x["ratio"] == pytest.approx(sequential.judge_pairs(x["a"], x["b"]).ratio)  # the pairs' own
    flagged = r["summary"]["flagged"]["0.0"]
    assert f"planted   0%: {flagged}/2 runs with a false failure" in p.stdout
    # the simulated 400-combination matrix resamples the record's process pairs: 2 runs x 1 block of 7 pairs,
    # judged as they ran (pair by pair, without restarts); process pairs of 2 pairs cannot be cut from them
    simulate = [sys.executable, "-m", "hpcnn.perf.cli", "gate-quality", "--mode=simulate", f"--paired-json={record}",
                "--combinations=20", "--draws=100"]
    p = subprocess.run(simulate, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "process pairs of 2 cannot be resampled from them" in p.stderr, p.stderr[-2000:]
    p = subprocess.run(simulate + ["--restart-every=0"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "20 unchanged combinations x 20 matrices resampled from 2 recorded process-pair blocks" in p.stdout
    assert "judged at most 48 pairs, never restarting, at each combination's level" in p.stdout  # and its own
    assert f"| {COMBO} | " in p.stdout  # comparisons again
    p = subprocess.run(simulate + ["--restart-every=1"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "process pairs of 1 cannot be resampled from them" in p.stderr, p.stderr[-2000:]


def _cut_once_saved(cmd, record, sig, **popen) -> str:
    """Starts ``cmd``, waits until it has saved ``record`` (after its first combination), sends it ``sig`` and
    returns its stderr, once it has exited as interrupted (130) without a traceback."""
    p = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    deadline = time.monotonic() + 600
    while not record.exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130 and "Traceback" not in err, err[-2000:]
    return err


@pytest.mark.slow
def test_a_paired_quality_run_cut_by_ctrl_c_keeps_its_finished_combinations_and_resume_measures_the_rest(tmp_path):
    """A sitting that ends part way through a run: the record holds the combinations it finished, and
    --resume finishes that run by measuring only the others (the three trivial combinations, unchanged only)."""
    record = tmp_path / "q.json"
    cmd = [sys.executable, "-m", "hpcnn.perf.cli", "gate-quality", "--mode=paired", "--only=trivial-",
           "--slowdowns=0", "--min-rounds=9", "--max-rounds=9", "--restart-every=0", "--runs=1", f"--json={record}"]
    # started the way a sitting starts it, in the background with SIGINT ignored (what `nohup cmd &` gets from
    # a shell), and cut with TERM, what `kill` sends: the command handles both as Ctrl-C
    err = _cut_once_saved(cmd, record, signal.SIGTERM,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    cut = json.loads(record.read_text())
    done = sorted(k for k, per in cut["combinations"].items() if per["0.0"])
    assert f"hpcnn-perf: interrupted: {record} keeps the {len(done)} combination(s) this session measured; the same " \
        "command with --resume finishes the run" in err
    assert len(cut["combinations"]) == 3 and 1 <= len(done) < 3 and "summary" not in cut
    assert cut["sessions"][0]["runs"] == 0 and sum(cut["sessions"][0]["measured"].values()) == len(done)
    p = subprocess.run(cmd + ["--resume"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads(record.read_text())
    assert r["summary"]["runs"] == 1 and r["summary"]["unfinished"] == [] and len(r["sessions"]) == 2
    assert r["sessions"][1]["measured"] == {k: int(k not in done) for k in r["combinations"]}
    for k, per in r["combinations"].items():
        assert [x["session"] for x in per["0.0"]] == [0 if k in done else 1]
        if k in done:
            assert per["0.0"] == cut["combinations"][k]["0.0"]  # kept as measured before the cut
    assert "planted   0%: " in p.stdout and "/1 runs with a false failure" in p.stdout


@pytest.mark.slow
def test_a_paired_quality_run_cut_inside_the_next_run_still_counts_the_run_its_session_finished(tmp_path):
    """The save after a run's last combination already counts that run as its session's: a cut inside the
    next run (nothing more saved) leaves a record whose sessions' runs add up to its whole runs."""
    from hpcnn.perf import quality

    record = tmp_path / "q.json"
    cmd = [sys.executable, "-m", "hpcnn.perf.cli", "gate-quality", "--mode=paired", f"--only={COMBO}",
           "--slowdowns=0", "--min-rounds=9", "--max-rounds=9", "--restart-every=0", "--runs=2", f"--json={record}"]
    _cut_once_saved(cmd, record, signal.SIGINT)  # run 1, its one combination, is saved: cut run 2 as it starts
    cut = json.loads(record.read_text())
    assert [len(per["0.0"]) for per in cut["combinations"].values()] == [1]
    assert quality.next_run(cut) == (1, [])
    assert [s["runs"] for s in cut["sessions"]] == [1] and cut["sessions"][0]["measured"] == {COMBO: 1}


@pytest.mark.slow
def test_a_stored_quality_run_cut_on_seeing_a_sessions_line_keeps_that_session(tmp_path, recording):
    """``gate-quality --mode=stored`` cut (SIGINT) the moment its first session's line shows: it ends in one line,
    exit 130, and the record holds that session as the line reported it (the record was saved once a round, after
    the lines, until 2026-12-06: such a cut lost the whole round and ended in a traceback)."""
    baselines_in(tmp_path, recording)
    record = tmp_path / "q.json"
    cmd = [sys.executable, "-m", "hpcnn.perf.cli", "gate-quality", "--mode=stored", f"--baselines-dir={tmp_path}",
           "--hardware-profile=e2e-test", "--slowdowns=0", "--runs=2", f"--json={record}",
           f"--pytest-args=-k {COMBO} --perf-rounds=5 --confirm-pause=2"]
    p = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
    line = next((x for x in p.stdout if x.startswith("session 1 ")), "")
    p.send_signal(signal.SIGINT)  # run 2's session has just started: the cut ends it
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert err.strip().splitlines()[-1] == (f"hpcnn-perf: interrupted: {record} keeps the 1 session(s) it measured, "
                                            "summary included; --mode=stored does not resume, so measure on into "
                                            "another --json (the same one would be replaced)")
    assert line.startswith(f"session 1 planted 0%: {COMBO} "), err[-2000:]
    kept = json.loads(record.read_text())
    [session] = kept["sessions"]["0.0"]
    v = session["combinations"][COMBO]
    assert line.split(": ", 1)[1].split(";")[0].strip() == f"{COMBO} {v['ratio']:.3f} {v['verdict']}"
    assert kept["summary"]["0.0"]["sessions"] == 1


@pytest.mark.slow
def test_a_paired_quality_run_cut_on_seeing_a_combinations_line_keeps_that_combination(tmp_path):
    """A sitting's script cuts the measurement as soon as a new ``run N <combination>:`` line shows in its log;
    the line comes after the save, so the record keeps every comparison the log reported, as reported (the
    save came after the line until 2026-12-06, and such a cut lost the combination it had just printed)."""
    record = tmp_path / "q.json"
    cmd = [sys.executable, "-m", "hpcnn.perf.cli", "gate-quality", "--mode=paired", f"--only={COMBO}",
           "--slowdowns=0", "--min-rounds=7", "--max-rounds=7", "--restart-every=0", "--runs=2", f"--json={record}"]
    p = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
    line = next((x for x in p.stdout if x.startswith("run 1 ")), "")
    p.send_signal(signal.SIGINT)  # the moment the line is read, as the sitting's loop does
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert line.startswith(f"run 1 {COMBO}: 0% "), err[-2000:]
    kept = json.loads(record.read_text())["combinations"][COMBO]["0.0"]
    assert [f"{x['ratio']:.3f} {x['verdict']} ({x['pairs']} pairs)" for x in kept] == [line.split(": 0% ")[1].strip()]
    assert f"{record} keeps the 1 combination(s) this session measured" in err


def test_baselines_recorded_on_another_profile_are_refused_even_under_a_forced_id(tmp_path):
    from hpcnn.perf import baselines
    from hpcnn.perf.profile import detect, profile_id

    here = detect()
    other = {**here, "cpu_isa": "amx" if here.get("cpu_isa") != "amx" else "avx2"}
    baselines.save(str(tmp_path / "forced.json"), other, {COMBO: baselines.session_record([100.0] * 5, "abc")})
    p = subprocess.run([sys.executable, "-m", "pytest", "perf_tests", "-p", "no:cacheprovider", "-q",
                        f"--baselines-dir={tmp_path}", "--hardware-profile=forced", "-k", COMBO],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 4, p.stdout[-2000:] + p.stderr[-2000:]
    assert (f"baselines file {tmp_path / 'forced.json'} was recorded on profile {profile_id(other)}, "
            f"but this machine is {profile_id(here)} (cpu_isa: recorded") in p.stderr


@pytest.mark.parametrize("flag, says", [
    ("--confirm-pause=-5", "--confirm-pause=-5 is not a pause; allowed: 0 or more seconds"),
    ("--confirm-pause=inf", "--confirm-pause=inf is not a pause; allowed: 0 or more seconds"),
    ("--plant-slowdown=nan", "--plant-slowdown=nan is not a fraction of a step; allowed: 0 or more"),
])
def test_a_pause_or_plant_that_is_not_one_is_refused_before_anything_runs(tmp_path, flag, says):
    p = subprocess.run([sys.executable, "-m", "pytest", "perf_tests", "-p", "no:cacheprovider", "-q",
                        f"--baselines-dir={tmp_path}", flag, "-k", COMBO],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 4 and "Traceback" not in p.stderr, p.stdout[-2000:] + p.stderr[-2000:]
    assert says in p.stderr


@pytest.mark.parametrize("content, says", [
    ("{not json", "cannot be read as JSON"),
    ('{"%s": -3}' % COMBO, "allowed: a JSON object of {combination: units of work, an integer 0 or more}"),
])
def test_a_plant_units_file_that_is_not_units_of_work_is_refused_before_anything_runs(tmp_path, content, says):
    units = tmp_path / "units.json"
    units.write_text(content)
    p = subprocess.run([sys.executable, "-m", "pytest", "perf_tests", "-p", "no:cacheprovider", "-q",
                        f"--baselines-dir={tmp_path}", f"--plant-units={units}", "-k", COMBO],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 4 and "Traceback" not in p.stderr, p.stdout[-2000:] + p.stderr[-2000:]
    assert f"--plant-units={units} " in p.stderr and says in p.stderr


@pytest.mark.slow
def test_a_paired_worker_rebuilds_a_fresh_benchmark_and_a_planted_slowdown_survives_rebuild_and_restart():
    from hpcnn.perf import paired
    from hpcnn.perf.bisection import first_error_line
    from hpcnn.perf.matrix import build_matrix

    combo = next(c for c in build_matrix("smoke") if c.key == COMBO)
    plain, planted = paired.open_pair(REPO, REPO, combo, "cpu", plant_b=float(PLANT))
    other = None
    try:
        plain.run(3)
        first = plain.losses
        plain.run(3)
        assert plain.losses != first  # training went on
        for side in (plain, planted):
            side.rebuild()
            side.run(3)
        assert plain.losses == first  # fresh weights: the same three steps again
        assert planted.losses == first  # the planted work leaves the loss as it is
        slowed = sorted(planted.run(9))[4] / sorted(plain.run(9))[4]
        assert slowed > 1.5, slowed  # the rebuilt step still carries the planted work (3x the step)
        # one code change: a restarted side is a new process planting the amount its first process sized,
        units, pid, measured = list(planted.planted_units), planted.pids[-1], planted.planted_fraction
        assert not planted.measures_while_starting  # its first process measured the size: restarts do not
        planted.restart()
        assert planted.pids[-1] != pid and len(units) == 1 and units[0] > 0 and planted.planted_units == units * 2
        assert planted.planted_fraction == measured > 1.0
        slowed = sorted(planted.run(9))[4] / sorted(plain.run(9))[4]
        assert slowed > 1.5, slowed
        # a worker that does not answer in time: the error's line says so, not the last thing it logged
        with pytest.raises(paired.WorkerError) as timed_out:
            planted.run(200, timeout_s=0.5)
        assert first_error_line(timed_out.value) == "perf worker gave no answer in 0.5 s"
        # two sides that time nothing while starting restart at once: new processes, fresh weights
        other = paired.Side(REPO, combo, "cpu", paired.warmup_steps_for(combo))
        pids = [plain.pids[-1], other.pids[-1]]
        paired.restart_all([plain, other])
        assert [plain.pids[-1], other.pids[-1]] != pids and len(set(plain.pids + other.pids)) == 4
        for side in (plain, other):
            side.run(3)
            assert side.losses == first
    finally:
        plain.close()
        planted.close()
        if other:
            other.close()


@pytest.mark.slow
def test_a_rebuild_keeps_the_overrides_the_side_was_opened_with_unless_told_otherwise():
    from hpcnn.perf import paired
    from hpcnn.perf.matrix import build_matrix

    combo = next(c for c in build_matrix("smoke") if c.key == COMBO)
    side = paired.Side(REPO, combo, "cpu", warmup_steps=2, overrides={"forward_only": True})
    try:
        side.run(3)
        assert len(set(side.losses)) == 1  # forward only on the same synthetic batch: the same loss
        side.rebuild({})  # a variant: the combination's own training step
        side.run(3)
        assert len(set(side.losses)) == 3  # training: the loss moves step by step
        side.rebuild()  # the side's own overrides again
        side.run(3)
        assert len(set(side.losses)) == 1
    finally:
        side.close()


@pytest.mark.slow
def test_a_failure_of_the_good_side_stops_a_bisect_instead_of_skipping_the_commit_under_test(tmp_path):
    from hpcnn.perf import bisection, paired, sequential
    from hpcnn.perf.matrix import build_matrix

    combo = next(c for c in build_matrix("smoke") if c.key == COMBO)
    with bisection.Worktrees(str(tmp_path), cwd=REPO) as trees:
        judge = bisection.PairedJudge(trees, "HEAD", combo, "cpu", sequential.Schedule(3, 1, 3), 0.02, 0.01)
        try:
            judge.good.proc.kill()  # the good revision's worker dies between two commits
            judge.good.proc.wait()
            with pytest.raises(paired.WorkerError, match="the worker of the good revision failed while judging"):
                judge("HEAD")
            assert len(trees.made) == 1  # the commit's worktree is gone, the good one's kept until the end
        finally:
            judge.close()
