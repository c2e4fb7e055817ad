"""The perf suite itself: profiles, baselines files, the matrix, and the gate."""

import json
import os

import numpy as np
import pytest

from hpcnn.perf import baselines, gate
from hpcnn.perf.matrix import build_matrix
from hpcnn.perf.profile import differences, detect, gpu_fields, identity, parse_nvidia_smi, profile_id

CPU = {"cpu_model": "AMD EPYC", "cpu_isa": "avx2", "onednn": True, "cpu_cores": 2, "gpu_models": [],
       "gpu_count": 0, "tensorflow": "2.21.0", "cuda": None, "cudnn": None}
GPU = {**CPU, "cpu_cores": 96, "gpu_models": ["NVIDIA H100 80GB HBM3"] * 8, "gpu_count": 8, "cuda": "12.5",
       "cudnn": "9", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_memory_gb": 80, "gpu_compute_capability": "9.0",
       "gpu_mig": False, "gpu_driver_major": "550"}

# nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap,mig.mode.current --format=csv,noheader,nounits
# in the format nvidia-smi documents (no GPU machine with TensorFlow was available to record one).
SMI_H100 = "NVIDIA H100 80GB HBM3, 81559, 550.54.15, 9.0, Disabled\n" * 2
SMI_T4 = "Tesla T4, 15360, 535.104.05, 7.5, [N/A]\n"


def test_profile_ids_are_short_readable_and_name_every_identity_field():
    assert profile_id(CPU) == "cpu-amd-epyc-avx2-onednn-2c-tf2.21"
    assert profile_id({**CPU, "cpu_isa": "amx", "onednn": False}) == "cpu-amd-epyc-amx-2c-tf2.21"
    assert profile_id({**CPU, "cpu_model": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"}).startswith(
        "cpu-xeon-8481c-avx2")
    assert profile_id(GPU) == "gpu-h100-80gb-x8-cc9.0-tf2.21-cuda12.5-cudnn9-drv550"
    t4 = {**GPU, "gpu_model": "Tesla T4", "gpu_memory_gb": 15, "gpu_count": 1, "gpu_compute_capability": "7.5"}
    assert profile_id(t4) == "gpu-t4-15gb-x1-cc7.5-tf2.21-cuda12.5-cudnn9-drv550"
    assert profile_id({**GPU, "gpu_mig": True}).startswith("gpu-h100-80gb-x8-mig-cc9.0")


def _one_field_changed(base):
    """For every identity field of ``base``, a copy differing in that field only."""
    other = {"cpu_model": "Intel Xeon 8481C", "cpu_isa": "amx", "onednn": not base["onednn"], "cpu_cores": 4,
             "tensorflow": "2.22.0", "gpu_model": "NVIDIA A100-SXM4-80GB", "gpu_memory_gb": 40, "gpu_count": 4,
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
                                          "driver": "550.54.15", "compute_capability": "9.0", "mig": "Disabled"}
    fields = gpu_fields(["NVIDIA H100 80GB HBM3"] * 2, rows)
    assert fields == {"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_memory_gb": 80, "gpu_compute_capability": "9.0",
                      "gpu_mig": False, "gpu_driver_major": "550"}
    t4 = gpu_fields(["Tesla T4"], parse_nvidia_smi(SMI_T4))
    assert t4["gpu_mig"] is False and t4["gpu_memory_gb"] == 15 and t4["gpu_compute_capability"] == "7.5"
    assert parse_nvidia_smi("") == [] and gpu_fields([], []) == {
        "gpu_model": None, "gpu_memory_gb": None, "gpu_compute_capability": None, "gpu_mig": False,
        "gpu_driver_major": None}


def test_detected_profile_describes_this_machine():
    from hpcnn import backend, hardware

    p = detect()
    assert p["cpu_cores"] == len(os.sched_getaffinity(0))
    assert p["cpu_isa"] == hardware.isa_tier(hardware.cpu_flags())
    assert p["onednn"] is backend.onednn_enabled()
    assert p["tensorflow"].startswith("2.") and p["gpu_count"] == len(p["gpu_models"])
    pid = profile_id(p)
    if not p["gpu_count"]:
        assert pid.startswith("cpu-") and (f"-{p['cpu_isa']}-onednn-" in pid) is p["onednn"]


def test_baselines_round_trip_and_keep_thresholds(tmp_path):
    path = baselines.path_for(str(tmp_path), "cpu-x-2c-tf2.21")
    assert baselines.load(path) == baselines.Baselines(None, {})
    baselines.save(path, CPU, {"a": baselines.entry([10.0, 12.0, 11.0], "abc", threshold=0.1)})
    baselines.save(path, CPU, {"a": baselines.entry([20.0, 21.0], "def"), "b": baselines.entry([5.0], None)})
    assert baselines.load(path).profile == CPU
    loaded = baselines.load(path).combinations
    assert loaded["a"]["samples"] == [20.0, 21.0] and loaded["a"]["threshold"] == 0.1
    assert loaded["a"]["median"] == 20.5 and loaded["a"]["rounds"] == 2 and loaded["a"]["commit"] == "def"
    assert loaded["b"]["iqr"] == 0
    assert sorted(os.listdir(tmp_path)) == ["cpu-x-2c-tf2.21.json"]  # no temporary file left behind


def test_an_interrupted_save_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = baselines.path_for(str(tmp_path), "p")
    baselines.save(path, CPU, {"a": baselines.entry([1.0], None)})
    before = tmp_path.joinpath("p.json").read_text()

    def broken_dump(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(json, "dump", broken_dump)
    with pytest.raises(KeyboardInterrupt):
        baselines.save(path, CPU, {"a": baselines.entry([2.0], None)})
    assert tmp_path.joinpath("p.json").read_text() == before and os.listdir(tmp_path) == ["p.json"]


@pytest.mark.parametrize("content,message", [
    ("{not json", "not readable JSON"),
    ("[]", "expected an object with a 'combinations' object"),
    ('{"combinations": {"k": {"samples": []}}}', "combination 'k' needs 'samples'"),
    ('{"combinations": {"k": {"samples": [1, -2]}}}', "combination 'k' needs 'samples'"),
    ('{"combinations": {"k": {"samples": [1], "threshold": 5}}}', "threshold=5"),
    ('{"combinations": {"k": {"samples": [1]}}}', "expected the 'profile' it was recorded on"),
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
    assert reasons["resnet50-replicated-nccl-NHWC-2dev-fp32-b64"] == "NCCL all-reduce needs GPUs"
    assert "NCHW" in reasons["resnet50-parameter_server-NCHW-1dev-fp32-b64"]
    assert reasons["resnet50-replicated-NHWC-8dev-fp32-b64"] == "needs 8 devices, this machine has 4"
    assert reasons["resnet50-replicated-NHWC-2dev-bf16-b64"] is None
    bf16 = next(c for c in smoke if c.precision == "bf16")
    assert "emulated on this CPU (avx2" in bf16.skip_reason("cpu", 4, "avx2")
    assert bf16.skip_reason("cpu", 4, "avx512") is not None  # AVX-512 without BF16: emulated too
    assert bf16.skip_reason("cpu", 4, "amx") is None and bf16.skip_reason("cpu", 4, "avx512-bf16") is None
    assert any(c.model == "alexnet" and c.precision == "fp32" for c in smoke)  # a real model on every CPU
    assert full[0].skip_reason("gpu", 8) is None or "bf16" in full[0].skip_reason("gpu", 8)
    with pytest.raises(ValueError, match="allowed: smoke, full"):
        build_matrix("medium")


# Per-round images/sec recorded on this 2-core CPU with `hpcnn-perf gate-quality`
# (trivial, parameter_server, batch 32): an unchanged pair and a 25% planted slowdown.
RECORDED = os.path.join(os.path.dirname(__file__), "data", "recorded_rounds.json")


def _recorded():
    with open(RECORDED) as f:
        return json.load(f)


def test_gate_on_recorded_rounds_keeps_its_measured_quality():
    """All 20 recorded runs of each kind: none unchanged fails, at least 18 of 20 slowdowns do."""
    rec = _recorded()
    assert len(rec["unchanged"]) == len(rec["slowdown_25"]) == 20
    false_failures = sum(gate.judge(p["baseline"], p["current"]).failed for p in rec["unchanged"])
    caught = sum(gate.judge(p["baseline"], p["current"]).failed for p in rec["slowdown_25"])
    assert false_failures == 0 and caught >= 18


def test_gate_needs_both_size_and_significance():
    base = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0]
    assert gate.judge(base, [x * 0.9 for x in base]).verdict == gate.REGRESSION
    assert gate.judge(base, [x * 0.97 for x in base]).verdict == gate.UNCHANGED  # significant but small
    noisy = [60.0, 140.0, 95.0, 70.0, 130.0, 100.0]
    assert gate.judge(base, [x * 0.9 for x in noisy]).verdict == gate.NOISE  # large but not significant
    assert gate.judge(base, [x * 1.2 for x in base]).verdict == gate.IMPROVEMENT
    assert gate.judge(base, [x * 0.9 for x in base], threshold=0.15).verdict == gate.UNCHANGED


def test_gate_interval_brackets_the_ratio_and_is_repeatable():
    rng = np.random.default_rng(1)
    base, cur = rng.normal(100, 3, 8), rng.normal(80, 3, 8)
    v = gate.judge(base, cur)
    assert v.ci_low <= v.ratio <= v.ci_high and v.ci_high < 1
    assert gate.judge(base, cur) == v
    assert "ratio" in v.describe() and "REGRESSION" in v.describe()


def test_gate_refuses_sample_sizes_that_could_never_fail():
    assert gate.min_rounds(0.01) == 5 and gate.smallest_p(4, 4) == pytest.approx(1 / 70)
    with pytest.raises(ValueError, match="use at least 5 rounds"):
        gate.judge([100.0] * 4, [50.0] * 4)
    with pytest.raises(ValueError, match="positive"):
        gate.judge([], [1.0])
    assert gate.judge([100.0, 101, 99, 100, 102], [50.0, 51, 49, 50, 52]).failed


def test_paired_mode_checks_out_a_git_revision_as_a_worktree(tmp_path, monkeypatch):
    from hpcnn.perf import paired

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    monkeypatch.chdir(repo)
    tree = paired.source_tree("HEAD", str(tmp_path))
    try:
        assert tree.startswith(str(tmp_path))
        assert os.path.isfile(os.path.join(tree, "hpcnn", "benchmark.py"))
    finally:
        paired.remove_worktree(tree)
    assert not os.path.exists(tree)
    assert paired.source_tree(repo, str(tmp_path)) == repo  # a directory is used as it is
