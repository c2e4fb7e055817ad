"""Test-wide setup: the CPU backend, markers declared once, hardware-driven skips, logical CPU devices.

Markers:
  perf: a performance measurement (perf_tests/); never part of the unit run.
  gpu: needs a CUDA GPU; skipped where TensorFlow sees none.
  distributed: starts ps/worker processes on 127.0.0.1.
  slow: takes more than a few seconds on a 2-core CPU.
  nchw: runs NCHW kernels on the CPU; skipped where this session's CPU backend has none.
"""

import pytest

from hpcnn.config import ONEDNN

MARKERS = {
    "perf": "performance measurement with pytest-benchmark",
    "gpu": "needs a CUDA GPU visible to TensorFlow",
    "distributed": "starts TensorFlow servers on 127.0.0.1",
    "slow": "takes more than a few seconds on a 2-core CPU",
    "nchw": "runs NCHW kernels on the CPU (oneDNN has them; TensorFlow's default CPU kernels do not)",
}

# Multi-device tests run on hardware.LOGICAL_CPUS logical CPU devices. TensorFlow can
# split the CPU only before its runtime starts, so the split is made once per session.


def pytest_addoption(parser):
    parser.addoption("--onednn", default="auto", choices=ONEDNN,
                     help="CPU backend of the test session (as hpcnn --onednn); fixed before TensorFlow loads")
    # Declared here, not in perf_tests/, because pytest reads options only from
    # the root conftest whatever paths a run names.
    g = parser.getgroup("hpcnn perf suite")
    g.addoption("--perf-matrix", default="smoke", choices=["smoke", "full"],
                help="smoke: minutes on a 2-core CPU; full: the GPU runners' matrix")
    g.addoption("--hardware-profile", default=None, help="profile id to use instead of the detected one")
    g.addoption("--update-baselines", action="store_true",
                help="add this session to the profile's baselines (each combination keeps its newest sessions)")
    g.addoption("--baseline-sessions", type=int, default=10, help="sessions a combination keeps when recording")
    g.addoption("--baselines-dir", default=None, help="where <profile-id>.json files live (default: baselines/)")
    g.addoption("--perf-rounds", type=int, default=6, help="timed rounds per combination")
    g.addoption("--perf-report", default=None, metavar="FILE.md",
                help="write the gate's verdicts as Markdown for a merge-request comment")
    g.addoption("--confirm-pause", type=float, default=60.0, metavar="SECONDS",
                help="stored mode: a combination that fails is measured again this long after its first "
                     "measurement, and fails only if that confirms it (a slow spell of a shared runner passes)")
    g.addoption("--no-confirm", action="store_true", help="fail on the first measurement, without re-measuring")
    g.addoption("--plant-slowdown", type=float, default=0.0,
                help="test-only: add real work worth this fraction of each step")
    g.addoption("--plant-units", default=None, metavar="FILE.json",
                help="test-only: plant these amounts of work, {combination: units} as a session with "
                     "--plant-slowdown recorded them (planted_units), instead of searching them again")


def pytest_configure(config):
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")
    from hpcnn import backend, hardware

    backend.apply(config.getoption("--onednn"))  # before anything imports TensorFlow
    from hpcnn.devices import ensure_logical_cpus

    ensure_logical_cpus(hardware.LOGICAL_CPUS)


def pytest_collection_modifyitems(config, items):
    import tensorflow as tf

    from hpcnn.devices import cpu_runs_nchw

    skips = {}
    if not tf.config.list_physical_devices("GPU"):
        skips["gpu"] = pytest.mark.skip(reason="no GPU visible to TensorFlow on this machine")
    if any(item.get_closest_marker("nchw") for item in items) and not cpu_runs_nchw():
        skips["nchw"] = pytest.mark.skip(reason=(
            "this session's CPU backend (oneDNN off) has no NCHW kernels; the NCHW layout is checked in oneDNN "
            "processes by test_backend.py::test_nchw_under_onednn_matches_nhwc_under_either_backend"))
    for item in items:
        for marker, skip in skips.items():
            if item.get_closest_marker(marker):  # markers only: parameter ids are keywords too
                item.add_marker(skip)
