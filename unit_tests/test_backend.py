"""The CPU backend: hpcnn's choice per CPU class, forcing it, reporting it, and the backends agreeing."""

import json
import subprocess
import sys

import numpy as np
import pytest

from hpcnn import backend, hardware
from hpcnn.config import ConfigError
from unit_tests.helpers import REPO

# /proc/cpuinfo flags of the two VMs this project runs on, both "AMD EPYC" by model name.
ZEN3 = set(
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx "
    "mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid extd_apicid "
    "tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave "
    "avx f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext ssbd "
    "ibrs ibpb stibp vmmcall fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid rdseed adx smap clflushopt clwb "
    "sha_ni xsaveopt xsavec xgetbv1 xsaves clzero xsaveerptr wbnoinvd arat umip pku ospke vaes vpclmulqdq rdpid "
    "fsrm".split())
SAPPHIRE_RAPIDS = ZEN3 | set(
    "avx512f avx512dq avx512ifma avx512cd avx512bw avx512vl avx_vnni avx512_bf16 avx512vbmi avx512_vbmi2 gfni "
    "avx512_vnni avx512_bitalg avx512_vpopcntdq amx_bf16 avx512_fp16 amx_tile amx_int8".split())
SKYLAKE_SP = ZEN3 | {"avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl"}  # AVX-512, no VNNI/BF16
SANDY_BRIDGE = ZEN3 - {"avx2", "fma"}  # AVX only


@pytest.mark.parametrize("flags,tier,native_bf16", [
    (ZEN3, "avx2", False), (SAPPHIRE_RAPIDS, "amx", True), (SKYLAKE_SP, "avx512", False),
    (SANDY_BRIDGE, "avx", False), (SAPPHIRE_RAPIDS - {"amx_tile"}, "avx512-bf16", True), (set(), "baseline", False),
])
def test_isa_tier_of_each_cpu_class(flags, tier, native_bf16):
    assert hardware.isa_tier(flags) == tier
    assert hardware.has_native_bf16(tier) is native_bf16


@pytest.mark.parametrize("flags,onednn,why", [
    (SAPPHIRE_RAPIDS, True, "TensorFlow's own default"),
    (ZEN3, True, "hpcnn's default on AVX2 CPUs"),
    (SKYLAKE_SP, True, "hpcnn's default on AVX2 CPUs"),
    (SANDY_BRIDGE, False, "TensorFlow's default"),
])
def test_auto_chooses_per_cpu_class(flags, onednn, why):
    d = backend.decide("auto", env={}, flags=flags)
    assert d.onednn is onednn and why in d.reason and d.requested == "auto"


def test_the_environment_then_a_forced_choice_take_precedence():
    assert backend.decide("auto", env={backend.ENV: "0"}, flags=SAPPHIRE_RAPIDS).onednn is False
    assert backend.decide("auto", env={backend.ENV: "True"}, flags=SANDY_BRIDGE).onednn is True
    assert "in the environment" in backend.decide("auto", env={backend.ENV: "1"}, flags=ZEN3).reason
    assert backend.decide("off", env={backend.ENV: "1"}, flags=ZEN3).onednn is False
    assert backend.decide("on", env={backend.ENV: "0"}, flags=SANDY_BRIDGE).onednn is True
    with pytest.raises(ConfigError, match="TF_ENABLE_ONEDNN_OPTS='yes' in the environment .* allowed: 0, 1"):
        backend.decide("auto", env={backend.ENV: "yes"}, flags=ZEN3)
    with pytest.raises(ConfigError, match="--onednn='mkl' is not allowed; allowed: auto, on, off"):
        backend.decide("mkl")


def test_this_session_runs_the_backend_it_asked_for(request):
    live = backend.current()
    assert live.onednn is backend.onednn_enabled()
    assert live.onednn is backend.decide(request.config.getoption("--onednn")).onednn
    assert backend.describe() == {"onednn": live.onednn, "onednn_reason": live.reason}


def test_a_forced_backend_tensorflow_can_no_longer_honour_is_a_clear_error():
    other = "off" if backend.onednn_enabled() else "on"
    with pytest.raises(ConfigError, match=f"--onednn={other} cannot take effect: TensorFlow is already loaded"):
        backend.apply(other)
    with pytest.raises(ConfigError, match=rf"hpcnn.backend.apply\('{other}'\) before importing TensorFlow"):
        backend.check(other)
    assert backend.apply("auto").onednn is backend.onednn_enabled()  # auto accepts what is loaded


def _cli(*flags, timeout=300):
    return subprocess.run([sys.executable, "-m", "hpcnn.cli", *flags], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def test_either_backend_runs_from_the_cli_reports_itself_and_computes_the_same_loss(tmp_path):
    results = {}
    for choice in ("on", "off"):
        out = tmp_path / f"{choice}.json"
        p = _cli(f"--onednn={choice}", "--model=lenet", "--batch_size=8", "--num_batches=2",
                 "--num_warmup_batches=0", f"--result_json={out}")
        assert p.returncode == 0, p.stderr[-2000:]
        header = next(line for line in p.stdout.splitlines() if line.startswith("CPU backend:"))
        assert header.endswith(f"--onednn={choice}: forced")
        assert header.startswith("CPU backend: oneDNN;" if choice == "on" else "CPU backend: TensorFlow's default")
        results[choice] = json.loads(out.read_text())
        assert results[choice]["hardware"]["onednn"] is (choice == "on")
        assert results[choice]["config"]["onednn"] == choice
    # Same weights and data: the first step's loss (before any update) agrees across backends.
    np.testing.assert_allclose(results["on"]["losses"][0], results["off"]["losses"][0], rtol=1e-5)


def test_nchw_without_onednn_is_one_clear_usage_error():
    p = _cli("--onednn=off", "--data_format=NCHW", "--model=lenet")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines() == [
        "hpcnn: error: --data_format=NCHW on the CPU needs oneDNN (TensorFlow's default CPU kernels have only NHWC "
        "convolutions), and this run has it off; use --onednn=on or --data_format=NHWC"]


def _probe(tmp_path, onednn, data_format, model):
    out = tmp_path / f"{onednn}-{data_format}.npz"
    p = subprocess.run([sys.executable, "-m", "unit_tests.backend_probe", f"--onednn={onednn}",
                        f"--data_format={data_format}", f"--model={model}", f"--out={out}"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    result = np.load(out)
    assert bool(result["onednn"]) is (onednn == "on")
    return result


def test_nchw_under_onednn_matches_nhwc_under_either_backend(tmp_path):
    """The layout check that runs on every CPU, whatever backend the test session itself has."""
    reference = _probe(tmp_path, "off", "NHWC", "tiny_resnet")
    for onednn, data_format in (("on", "NHWC"), ("on", "NCHW")):
        other = _probe(tmp_path, onednn, data_format, "tiny_resnet")
        for mode in ("training_False", "training_True"):
            scale = np.abs(reference[mode]).max()
            # Training-mode batch norm over 2 images magnifies kernel rounding (see test_models.py).
            tol = 2e-3 if mode == "training_True" else 1e-4
            np.testing.assert_allclose(other[mode], reference[mode], rtol=tol, atol=tol * scale)
