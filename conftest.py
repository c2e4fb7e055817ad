"""Test-wide setup: markers declared once, hardware-driven skips, logical CPU devices.

Markers:
  perf: a performance measurement (perf_tests/); never part of the unit run.
  gpu: needs a CUDA GPU; skipped where TensorFlow sees none.
  distributed: starts ps/worker processes on 127.0.0.1.
  slow: takes more than a few seconds on a 2-core CPU.
"""

import pytest

MARKERS = {
    "perf": "performance measurement with pytest-benchmark",
    "gpu": "needs a CUDA GPU visible to TensorFlow",
    "distributed": "starts TensorFlow servers on 127.0.0.1",
    "slow": "takes more than a few seconds on a 2-core CPU",
}

# Multi-device tests run on logical CPU devices. TensorFlow can split the CPU only
# before its runtime starts, so the split is made once for the whole session.
NUM_LOGICAL_CPUS = 4


def pytest_addoption(parser):
    # Declared here, not in perf_tests/, because pytest reads options only from
    # the root conftest whatever paths a run names.
    g = parser.getgroup("hpcnn perf suite")
    g.addoption("--perf-matrix", default="smoke", choices=["smoke", "full"],
                help="smoke: minutes on a 2-core CPU; full: the GPU runners' matrix")
    g.addoption("--hardware-profile", default=None, help="profile id to use instead of the detected one")
    g.addoption("--update-baselines", action="store_true", help="record this run as the profile's baselines")
    g.addoption("--baselines-dir", default=None, help="where <profile-id>.json files live (default: baselines/)")
    g.addoption("--perf-rounds", type=int, default=6, help="timed rounds per combination")
    g.addoption("--plant-slowdown", type=float, default=0.0,
                help="test-only: add real work worth this fraction of each step")


def pytest_configure(config):
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")
    from hpcnn.devices import ensure_logical_cpus

    ensure_logical_cpus(NUM_LOGICAL_CPUS)


def pytest_collection_modifyitems(config, items):
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        return
    skip_gpu = pytest.mark.skip(reason="no GPU visible to TensorFlow on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
