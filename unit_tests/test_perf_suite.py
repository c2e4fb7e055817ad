"""The perf suite itself: profiles, baselines files, the matrix, paired worktrees (the gate: test_gate*.py)."""

import dataclasses
import json
import os
import pathlib

import pytest

from hpcnn.perf import baselines, gate, paired, quality, replay, sequential, stored, yardstick
from hpcnn.perf.matrix import build_matrix
from hpcnn.perf.profile import (MACHINE_ENV, differences, detect, gpu_fields, identity, machine_id, parse_nvidia_smi,
                                profile_id)
from unit_tests.helpers import SHIPPED_BASELINES, SHIPPED_BASELINES_FILES
from unit_tests.recorded import DATA, SLOW_SPELLS

CPU = {"cpu_model": "AMD EPYC", "cpu_family_model": "f25m1", "cpu_isa": "avx2", "onednn": True, "cpu_cores": 2,
       "gpu_models": [], "gpu_count": 0, "tensorflow": "2.21.0", "cuda": None, "cudnn": None}
GPU = {**CPU, "cpu_cores": 96, "gpu_models": ["NVIDIA H100 80GB HBM3"] * 8, "gpu_count": 8, "cuda": "12.5",
       "cudnn": "9", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_memory_gb": 80, "gpu_compute_capability": "9.0",
       "gpu_mig": False, "gpu_driver_major": "550"}

# nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap,mig.mode.current --format=csv,noheader,nounits
# as printed on a lent H100 machine (2026-11-24, nvidia-smi 580.159.04). It prints one such line per GPU;
# the recorded line twice stands for a two-GPU machine.
SMI_H100 = "NVIDIA H100 80GB HBM3, 81559, 580.159.04, 9.0, Disabled\n" * 2
SMI_T4 = "Tesla T4, 15360, 535.104.05, 7.5, [N/A]\n"


def test_profile_ids_are_short_readable_and_name_every_identity_field():
    assert profile_id(CPU) == "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21"
    assert profile_id({**CPU, "cpu_isa": "amx", "onednn": False}) == "cpu-amd-epyc-f25m1-amx-2c-tf2.21"
    # Zen 4 and Zen 5 VMs both call themselves "AMD EPYC" with AVX512-BF16: only family/model parts them
    zen4, zen5 = ({**CPU, "cpu_isa": "avx512-bf16", "cpu_family_model": fm} for fm in ("f25m17", "f26m2"))
    assert (profile_id(zen4), profile_id(zen5)) == ("cpu-amd-epyc-f25m17-avx512-bf16-onednn-2c-tf2.21",
                                                    "cpu-amd-epyc-f26m2-avx512-bf16-onednn-2c-tf2.21")
    assert differences(zen4, zen5) == ["cpu_family_model: recorded 'f25m17', here 'f26m2'"]
    assert profile_id({**CPU, "cpu_family_model": None}) == "cpu-amd-epyc-avx2-onednn-2c-tf2.21"  # not x86
    assert profile_id({**CPU, "cpu_model": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz",
                       "cpu_family_model": "f6m143"}).startswith("cpu-xeon-8481c-f6m143-avx2")
    assert profile_id(GPU) == "gpu-h100-80gb-x8-cc9.0-tf2.21-cuda12.5-cudnn9-drv550"
    t4 = {**GPU, "gpu_model": "Tesla T4", "gpu_memory_gb": 15, "gpu_count": 1, "gpu_compute_capability": "7.5"}
    assert profile_id(t4) == "gpu-t4-15gb-x1-cc7.5-tf2.21-cuda12.5-cudnn9-drv550"
    assert profile_id({**GPU, "gpu_mig": True}).startswith("gpu-h100-80gb-x8-mig-cc9.0")


def _one_field_changed(base):
    """For every identity field of ``base``, a copy differing in that field only."""
    other = {"cpu_model": "Intel Xeon 8481C", "cpu_family_model": "f26m2", "cpu_isa": "amx",
             "onednn": not base["onednn"], "cpu_cores": 4, "tensorflow": "2.22.0",
             "gpu_model": "NVIDIA A100-SXM4-80GB", "gpu_memory_gb": 40, "gpu_count": 4,
             "gpu_compute_capability": "8.0", "gpu_mig": True, "gpu_driver_major": "535", "cuda": "12.2",
             "cudnn": "8"}
    return {field: {**base, field: other[field]} for field in identity(base)}


@pytest.mark.parametrize("base", [CPU, GPU], ids=["cpu", "gpu"])
def test_profiles_differing_in_any_one_identity_field_get_different_ids(base):
    changed = _one_field_changed(base)
    assert set(changed) == set(identity(base))  # every identity field is exercised
    ids = {field: profile_id(p) for field, p in changed.items()}
    assert len(set(ids.values())) == len(ids) and profile_id(base) not in ids.values()
    for field, p in changed.items():
        found = differences(base, p)
        assert len(found) == 1 and found[0].startswith(f"{field}: recorded"), (field, found)
    assert differences(base, dict(base)) == []
    assert differences(base, {**base, "tensorflow": "2.21.3", "python": "3.12"}) == []  # not identity fields
    assert differences(CPU, GPU)[0].startswith("kind: recorded on a CPU runner")


def test_nvidia_smi_rows_become_the_gpu_fields():
    rows = parse_nvidia_smi(SMI_H100)
    assert len(rows) == 2 and rows[0] == {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559,
                                          "driver": "580.159.04", "compute_capability": "9.0", "mig": "Disabled"}
    fields = gpu_fields(["NVIDIA H100 80GB HBM3"] * 2, rows)
    assert fields == {"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_memory_gb": 80, "gpu_compute_capability": "9.0",
                      "gpu_mig": False, "gpu_driver_major": "580"}
    t4 = gpu_fields(["Tesla T4"], parse_nvidia_smi(SMI_T4))
    assert t4["gpu_mig"] is False and t4["gpu_memory_gb"] == 15 and t4["gpu_compute_capability"] == "7.5"
    assert parse_nvidia_smi("") == [] and gpu_fields([], []) == {
        "gpu_model": None, "gpu_memory_gb": None, "gpu_compute_capability": None, "gpu_mig": False,
        "gpu_driver_major": None}


def test_a_machine_is_named_by_its_owner_or_else_by_this_boot_of_it(tmp_path):
    boot = tmp_path / "boot_id"
    boot.write_text("6f8a448a-5550-480c-a4b1-20c6c6b27b6f\n")
    by_boot = machine_id({}, str(boot))
    assert by_boot.startswith("boot-") and len(by_boot) == 17 and "6f8a" not in by_boot  # a hash, not the id
    assert machine_id({MACHINE_ENV: " "}, str(boot)) == by_boot  # blank: not a name
    boot.write_text("0c1e2d3f-0000-4000-8000-000000000000\n")
    assert machine_id({}, str(boot)) != by_boot  # rebooted: another machine, as a cloud VM may be
    assert machine_id({MACHINE_ENV: "ci-runner-7"}, str(boot)) == "ci-runner-7"
    assert machine_id({}, str(tmp_path / "absent")) is None


def test_detected_profile_describes_this_machine():
    from hpcnn import backend, hardware

    p = detect()
    assert p["cpu_cores"] == len(os.sched_getaffinity(0))
    assert p["cpu_isa"] == hardware.isa_tier(hardware.cpu_flags())
    assert p["onednn"] is backend.onednn_enabled()
    assert p["tensorflow"].startswith("2.") and p["gpu_count"] == len(p["gpu_models"])
    cpuinfo = pathlib.Path("/proc/cpuinfo")
    first = cpuinfo.read_text().split("\n\n")[0] if cpuinfo.exists() else ""
    fields = dict(line.split(":", 1) for line in first.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    if "cpu family" in fields:  # x86
        assert p["cpu_family_model"] == f"f{fields['cpu family']}m{fields['model']}"
    pid = profile_id(p)
    if not p["gpu_count"]:
        assert pid.startswith("cpu-") and (f"-{p['cpu_isa']}-onednn-" in pid) is p["onednn"]
        if p["cpu_family_model"]:
            assert f"-{p['cpu_family_model']}-{p['cpu_isa']}" in pid


def test_baselines_append_sessions_keep_the_newest_and_keep_thresholds(tmp_path):
    path = baselines.path_for(str(tmp_path), "cpu-x-2c-tf2.21")
    assert baselines.load(path) == baselines.Baselines(None, {})
    baselines.save(path, CPU, {"a": baselines.session_record([10.0, 12.0, 11.0], "abc")})
    data = json.loads(tmp_path.joinpath("cpu-x-2c-tf2.21.json").read_text())
    data["combinations"]["a"]["threshold"] = 0.1  # set by hand when reviewing the file
    tmp_path.joinpath("cpu-x-2c-tf2.21.json").write_text(json.dumps(data))
    for i in range(4):
        baselines.save(path, CPU, {"a": baselines.session_record([20.0 + i, 21.0], f"c{i}"),
                                   "b": baselines.session_record([5.0], None)}, keep=3)
    loaded = baselines.load(path)
    assert loaded.profile == CPU
    a = loaded.combinations["a"]
    assert [s["commit"] for s in a["sessions"]] == ["c1", "c2", "c3"] and a["threshold"] == 0.1
    assert loaded.sessions("a") == [[21.0, 21.0], [22.0, 21.0], [23.0, 21.0]]
    assert a["sessions"][-1]["median"] == 22.0 and a["sessions"][-1]["rounds"] == 2
    assert a["alpha"] == pytest.approx(0.01 / 2) and 0 < a["mds"] < 1  # 2 combinations share alpha 0.01
    assert sorted(os.listdir(tmp_path)) == ["cpu-x-2c-tf2.21.json"]  # no temporary file left behind


def test_sessions_are_judged_on_the_yardstick_only_when_every_one_timed_the_current_version(tmp_path):
    path = baselines.path_for(str(tmp_path), "p")
    for samples, rate in (([10.0, 12.0], 50.0), ([8.0], 40.0), ([30.0], 100.0)):
        baselines.save(path, CPU, {"a": baselines.session_record(samples, "c", rate),
                                   "b": baselines.session_record(samples, "c", rate if rate != 40.0 else None)})
    loaded = baselines.load(path)
    assert loaded.combinations["a"]["sessions"][0]["yardstick"] == {"version": yardstick.VERSION, "rate": 50.0}
    sessions, reference = loaded.judged_sessions("a")  # every session at the median rate, 50
    beta = loaded.slope("a").beta  # how far throughput follows the rate, fitted to these sessions and the prior
    assert reference == 50.0 and loaded.slope().sessions == loaded.slope("a").sessions == 3
    assert stored.ASSUMED_SLOPE < beta < 1.5 and loaded.combinations["a"]["slope"] == pytest.approx(beta, abs=1e-3)
    assert loaded.slope("b") == loaded.slope() and "slope" not in loaded.combinations["b"]  # not on the yardstick
    assert [x for s in sessions for x in s] == pytest.approx([10.0, 12.0, 8.0 * 1.25 ** beta, 30.0 * 0.5 ** beta])
    assert loaded.judged_sessions("b") == ([[10.0, 12.0], [8.0], [30.0]], None)  # one session never timed it
    loaded.combinations["a"]["sessions"][1]["yardstick"]["version"] = yardstick.VERSION + 1
    assert loaded.judged_sessions("a") == (loaded.sessions("a"), None)  # another yardstick's figures: not comparable
    assert loaded.judged_sessions("missing") == ([], None)


def test_schema_1_files_read_as_one_session(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"schema": 1, "profile": CPU, "combinations": {
        "k": {"samples": [3.0, 4.0], "median": 3.5, "commit": "x", "threshold": 0.2}}}))
    loaded = baselines.load(str(path))
    assert loaded.sessions("k") == [[3.0, 4.0]] and loaded.combinations["k"]["threshold"] == 0.2


def test_an_interrupted_save_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = baselines.path_for(str(tmp_path), "p")
    baselines.save(path, CPU, {"a": baselines.session_record([1.0], None)})
    before = tmp_path.joinpath("p.json").read_text()

    def interrupted(*args, **kwargs):  # the new content is written, not yet in place
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        baselines.save(path, CPU, {"a": baselines.session_record([2.0], None)})
    assert tmp_path.joinpath("p.json").read_text() == before and os.listdir(tmp_path) == ["p.json"]


def test_a_saved_file_is_readable_by_others_as_a_plain_write_would_be(tmp_path):
    path = baselines.path_for(str(tmp_path), "p")
    baselines.save(path, CPU, {"a": baselines.session_record([1.0], None)})
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask  # a temp file's 0600 would hide it from CI users


@pytest.mark.parametrize("content,message", [
    ("{not json", "not readable JSON"),
    ("[]", "expected an object with a 'combinations' object"),
    ('{"combinations": {"k": {"sessions": []}}}', "combination 'k' needs 'sessions'"),
    ('{"combinations": {"k": {"sessions": [{"samples": [1, -2]}]}}}', "combination 'k' needs 'sessions'"),
    ('{"combinations": {"k": {"samples": []}}}', "combination 'k' needs 'sessions'"),
    ('{"combinations": {"k": {"sessions": [{"samples": [1]}], "threshold": 5}}}', "threshold=5"),
    ('{"combinations": {"k": {"sessions": [{"samples": [1], "yardstick": {"version": 1, "rate": 0}}]}}}',
     "combination 'k' has a session whose 'yardstick' is not"),
    ('{"combinations": {"k": {"sessions": [{"samples": [1]}]}}}', "expected the 'profile' it was recorded on"),
])
def test_malformed_baselines_name_the_file(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(baselines.BaselineError) as e:
        baselines.load(str(path))
    assert str(path) in str(e.value) and message in str(e.value)


def test_smoke_matrix_covers_every_mode_and_skips_what_the_cpu_cannot_run():
    smoke = build_matrix("smoke")
    assert {c.variable_update for c in smoke} == {"parameter_server", "replicated", "independent"}
    assert {c.num_devices for c in smoke} == {1, 2} and len({c.key for c in smoke}) == len(smoke)
    full = build_matrix("full")
    assert len({c.key for c in full}) == len(full)
    reasons = {c.key: c.skip_reason("cpu", 4) for c in full}
    assert reasons["resnet50-replicated-nccl-NHWC-2dev-fp32-b64"].startswith("--use_nccl=True needs --device=gpu")
    fp16 = reasons["resnet50-parameter_server-NHWC-1dev-fp16-b64"]
    assert fp16.startswith("--precision=fp16 is not usable on the CPU")
    assert "NCHW" in reasons["resnet50-parameter_server-NCHW-1dev-fp32-b64"]
    assert reasons["resnet50-replicated-NHWC-8dev-fp32-b64"] == "needs 8 devices, this machine has 4"
    assert reasons["resnet50-replicated-NHWC-2dev-bf16-b64"] is None
    bf16 = next(c for c in smoke if c.precision == "bf16")
    assert "emulated on this CPU (avx2" in bf16.skip_reason("cpu", 4, "avx2")
    assert bf16.skip_reason("cpu", 4, "avx512") is not None  # AVX-512 without BF16: emulated too
    assert bf16.skip_reason("cpu", 4, "amx") is None and bf16.skip_reason("cpu", 4, "avx512-bf16") is None
    assert any(c.model == "alexnet" and c.precision == "fp32" for c in smoke)  # a real model on every CPU
    gpu = {c.key: c.skip_reason("gpu", 8) for c in full}
    assert gpu["resnet50-replicated-nccl-NCHW-8dev-fp16-b64"] is None
    assert gpu["resnet50-parameter_server-NCHW-1dev-fp32-b64"] is None
    assert gpu["resnet50-replicated-NHWC-2dev-bf16-b64"] == "the GPU matrix measures float16"
    with pytest.raises(ValueError, match="allowed: smoke, full"):
        build_matrix("medium")


@pytest.mark.parametrize("name", SHIPPED_BASELINES_FILES)
def test_shipped_baselines_load_and_are_named_after_the_profile_they_hold(name):
    loaded = baselines.load(os.path.join(SHIPPED_BASELINES, name))
    assert profile_id(loaded.profile) + ".json" == name
    smoke = {c.key for c in build_matrix("smoke")}
    for key, rec in loaded.combinations.items():
        assert key in smoke and len(loaded.sessions(key)) >= 5
        assert rec["mds"] > 0 and rec["alpha"] == pytest.approx(0.01 / len(loaded.combinations))


QUALITY = os.path.join(SHIPPED_BASELINES, "quality")
# records of earlier designs, and what each holds where the default measurement now differs: each process
# searched its own plant; each run searched one per side; every early look had an equal part of the level;
# alexnet's rounds were its 3 steps, 3 chunks (none recorded round lengths); and all of them: process pairs of
# 4 pairs, tested pair by pair, at most 20 pairs, a planted slowdown measured in every process; and every one of
# them, the design before this one too: rebuilds ordered by the pair's number (``paired.REBUILD_ORDER``)
EQUAL_PARTS = {"min_pairs": 8, "step": 4, "max_pairs": 20}
EVERY_PROCESS = "one amount per combination and level, searched precisely once, measured afresh in every process"
PAIR_LEVEL = {"schedule": {**EQUAL_PARTS, "reachable_only": True}, "restart_every": 4, "plant": EVERY_PROCESS}
EARLIER_DESIGNS = {
    os.path.join(QUALITY, "fixed-rebuild-order"): {},
    os.path.join(QUALITY, "per-process-plants"): {"schedule": EQUAL_PARTS, "plant": None, "round_steps": None,
                                                  "restart_every": 4},
    os.path.join(QUALITY, "per-run-plants"): {
        "schedule": EQUAL_PARTS, "plant": "one amount per side, sized in the pair's chunks, measured afresh",
        "round_steps": None, "restart_every": 4},
    os.path.join(QUALITY, "equal-part-looks"): {"schedule": EQUAL_PARTS, "round_steps": None, "restart_every": 4,
                                                "plant": EVERY_PROCESS},
    os.path.join(QUALITY, "three-step-rounds"): {**PAIR_LEVEL, "round_steps": None},
    os.path.join(QUALITY, "pair-level-test"): PAIR_LEVEL}
EARLIER_DESIGNS = {folder: {**fields, "rebuild_order": None} for folder, fields in EARLIER_DESIGNS.items()}


def _paired_records():
    return [os.path.join(folder, f) for folder in (QUALITY, *EARLIER_DESIGNS)
            for f in sorted(os.listdir(folder)) if f.endswith(".paired.json")]


@pytest.mark.parametrize("path", _paired_records(), ids=lambda p: os.path.relpath(p, QUALITY))
def test_shipped_paired_quality_records_are_what_gate_quality_resume_extends_on_their_profile(path):
    """A record in ``quality/`` that the default ``gate-quality --mode=paired --resume`` would refuse (another
    design, schedule or level) cannot collect the twenty runs it is kept for: those stay the default measurement.
    Those in the folders of ``EARLIER_DESIGNS`` ran another design: resume refuses them, and would take them
    with only the fields named there changed to the default measurement's."""
    with open(path) as f:
        record = json.load(f)
    assert record["profile_id"] + ".paired.json" == os.path.basename(path)
    smoke = {c.key: c for c in build_matrix("smoke")}
    combos = [smoke[k] for k in record["combinations"]]
    def resume(rec):
        quality.check_resumable(rec, rec["profile_id"], combos, list(quality.PAIRED_SLOWDOWNS), sequential.Schedule(),
                                gate.PAIRED_THRESHOLD, gate.DEFAULT_ALPHA, paired.RESTART_EVERY)

    earlier = EARLIER_DESIGNS.get(os.path.dirname(path))
    if earlier:
        assert {field: record.get(field) for field in earlier} == earlier
        with pytest.raises(ValueError, match="cannot resume: the record's "):
            resume(record)
        now = {"schedule": vars(sequential.Schedule()), "plant": paired.PLANT,
               "round_steps": quality.round_steps_by_combination(combos), "restart_every": paired.RESTART_EVERY,
               "rebuild_order": paired.REBUILD_ORDER}
        resume({**record, **{field: now[field] for field in earlier}})  # those fields are all that differs
    else:
        resume(record)
    assert record["combination_alpha"] == pytest.approx(gate.combination_alpha(gate.DEFAULT_ALPHA, len(combos)))
    whole, unfinished = quality.next_run(record)
    assert whole == sum(s["runs"] for s in record["sessions"])
    if all("measured" in s for s in record["sessions"]):  # sessions since 2026-12-03 count what they measured
        assert sum(sum(s["measured"].values()) for s in record["sessions"]) == whole * len(combos) + len(unfinished)
    if not whole:  # a first run cut by a sitting's end: nothing to summarize until --resume finishes it
        assert "summary" not in record and unfinished
        return
    summary = quality.summarize_paired(record)
    assert summary == record["summary"] and summary["unfinished"] == unfinished


def _perf_conftest():
    """perf_tests/conftest.py as a module (the unit tests do not collect perf_tests)."""
    import importlib.util
    import sys

    path = os.path.join(os.path.dirname(SHIPPED_BASELINES), "perf_tests", "conftest.py")
    spec = importlib.util.spec_from_file_location("hpcnn_perf_conftest", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve their annotations through it
    spec.loader.exec_module(module)
    return module


def test_a_perf_session_ends_with_holm_step_down_over_the_combinations_it_judged():
    """Recorded sessions of a planted 25% against the Zen 4 file, held as test_throughput holds them: in the first
    where a combination passed at alpha/7 while others failed and Holm rejects it, the session's step-down fails
    it, in its row of the end-of-session table and in its benchmark's extra_info (what --benchmark-json and
    gate-quality read); the other rows stay as they were."""
    import datetime

    with open(os.path.join(DATA, "zen4_sessions.json")) as f:
        zen4 = json.load(f)
    loaded = baselines.Baselines(zen4["profile"], zen4["recorded"])
    each = gate.combination_alpha(gate.DEFAULT_ALPHA, len(loaded.combinations))
    conftest = _perf_conftest()
    for session in zen4["new_occasion"]["0.25"]:
        state = conftest.PerfSession(zen4["profile"], "zen4", "zen4.json", loaded, False, "cpu", 2,
                                     judged=len(session["combinations"]))
        assert state.alpha == each
        started = datetime.datetime.fromtimestamp(session["start"], datetime.timezone.utc)
        extra = {}
        for key, rec in session["combinations"].items():
            def rejudge(level, key=key, rec=rec):
                return loaded.judge(key, rec["images_per_sec_rounds"], rec["yardstick_rates"], level, now=started)

            v = rejudge(each)
            extra[key] = {"verdict": v.verdict}
            state.rows.append((key, v, ""))
            state.hold(key, v, rejudge, extra[key])
        before = dict((k, v) for k, v, _ in state.rows)
        added = state.step_down()
        if added:
            break
    else:
        pytest.fail("no recorded session where Holm's step-down adds a failure")
    after = dict((k, v) for k, v, _ in state.rows)
    for key in before:
        if key in added:
            assert not before[key].failed and after[key].failed and extra[key]["verdict"] == gate.REGRESSION
            assert extra[key]["alpha"] > each and after[key] is added[key]
        else:
            assert after[key] is before[key] and extra[key] == {"verdict": before[key].verdict}
    assert any(v.failed for k, v in before.items())


def _finished_session(record, level, i, confirm_pause, broken=False):
    """Session ``i`` at ``level`` of a recorded gate-quality --mode=stored run, held as test_throughput holds it
    and finished as the session's end does, where re-measuring a combination yields its rounds of the next
    session at the same level (recorded 3-4 minutes later by the same run), or, ``broken``, raises as a model
    that no longer builds would: (the session's state, the failures it reported at its end, each combination's
    extra_info)."""
    import datetime

    loaded = replay.judged_against(record)
    session, later = record["sessions"][level][i], record["sessions"][level][i + 1]
    state = _perf_conftest().PerfSession(loaded.profile, "zen4", "zen4.json", loaded, False, "cpu", 2,
                                         judged=len(session["combinations"]), confirm_pause=confirm_pause)
    started = datetime.datetime.fromtimestamp(session["start"], datetime.timezone.utc)
    extra = {}
    for key, rec in session["combinations"].items():
        def rejudge(alpha, key=key, rec=rec):
            return loaded.judge(key, rec["images_per_sec_rounds"], rec["yardstick_rates"], alpha, now=started)

        def remeasure(key=key):
            if broken:
                raise RuntimeError("OOM when allocating tensor\nand a long trace")
            return later["combinations"][key]["images_per_sec_rounds"], later["combinations"][key]["yardstick_rates"]

        v = rejudge(state.alpha)
        extra[key] = {"verdict": v.verdict}
        state.rows.append((key, v, ""))
        state.hold(key, v, rejudge, extra[key], remeasure)
    return state, state.finish(), extra


def test_a_stored_failure_stands_only_if_a_re_measurement_at_the_session_end_fails_too():
    """The unchanged session of the Zen 4 live record of 07:57 that fails a combination at first (the runner in a
    slow spell; two did, as it ran, before the gate measured its steeper slope across occasions) passes once the
    failure is re-measured, as it read in the next session; with confirmation off it fails. Planted 25%
    failures, those Holm's step-down adds included, are re-measured too, and fail where the re-measurement is
    slower at alpha 0.01: confirmation clears failures, never adds one."""
    with open(SLOW_SPELLS) as f:
        record = json.load(f)
    unchanged = record["sessions"]["0.0"]
    first = replay.judge_again(record)  # this gate's first verdicts, after Holm's step-down
    failing = [(i, k) for i, j in enumerate(first["0.0"]) for k, v in j.holm.items() if v.failed]
    assert len(failing) == 1
    for i, key in failing:
        state, failed, extra = _finished_session(record, "0.0", i, confirm_pause=0.0)
        v, again = dict((k, r) for k, r, _ in state.rows)[key], unchanged[i + 1]["combinations"][key]
        assert failed == {} and v.verdict == gate.UNCONFIRMED and "not confirmed: re-measured" in v.note
        assert v.ratio == pytest.approx(first["0.0"][i].holm[key].ratio)  # the first measurement's
        assert extra[key]["verdict"] == gate.UNCONFIRMED and extra[key]["confirm_verdict"] != gate.REGRESSION
        assert extra[key]["confirm_images_per_sec_rounds"] == again["images_per_sec_rounds"]
        assert extra[key]["confirm_alpha"] == gate.CONFIRM_ALPHA
        assert [k for k in extra if "confirm_verdict" in extra[k]] == [key]  # nothing else was re-measured
        state, failed, extra = _finished_session(record, "0.0", i, confirm_pause=None)
        assert failed == {} and dict((k, r) for k, r, _ in state.rows)[key].failed  # its test failed it
        assert "confirm_verdict" not in extra[key]
        state, failed, extra = _finished_session(record, "0.0", i, confirm_pause=0.0, broken=True)
        assert list(failed) == [key] and "could not re-measure (RuntimeError: OOM when allocating tensor)" in \
            failed[key].note and extra[key]["confirm_error"] == "RuntimeError: OOM when allocating tensor"

    planted = record["sessions"]["0.25"]
    caught = kept = by_holm = 0
    for i in range(len(planted) - 1):
        state, failed, extra = _finished_session(record, "0.25", i, confirm_pause=0.0)
        ran = {k: v.verdict for k, v in first["0.25"][i].holm.items()}
        assert {k for k, x in extra.items() if "confirm_verdict" in x} == {k for k in ran if ran[k] == "REGRESSION"}
        assert set(failed) == {k for k, x in extra.items() if x.get("confirm_verdict") == gate.REGRESSION}
        assert all(extra[k]["verdict"] == gate.REGRESSION and v.failed and "confirmed: " in v.note
                   for k, v in failed.items())
        caught, kept = caught + sum(v == "REGRESSION" for v in ran.values()), kept + len(failed)
        by_holm += sum(v.alpha > state.alpha for v in failed.values())
    assert by_holm >= 1 and kept >= 0.95 * caught, (caught, kept, by_holm)
    passed = dataclasses.replace(v, verdict=gate.NOISE)
    with pytest.raises(ValueError, match="confirms a failure, not a verdict of 'noise'"):
        gate.confirm(passed, v, 0.0)
