"""The perf suite's fixtures: matrix parametrisation, profile, baselines, end-of-run table."""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, List

import pytest

from hpcnn.perf import baselines as baselines_lib
from hpcnn.perf.matrix import build_matrix
from hpcnn.perf.profile import detect, differences, profile_id
from hpcnn.perf.report import Row, format_table

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass
class PerfSession:
    profile: dict
    profile_id: str
    path: str
    baselines: Dict[str, dict]
    update: bool
    device: str
    available_devices: int
    recorded: Dict[str, dict] = dataclasses.field(default_factory=dict)
    rows: List[Row] = dataclasses.field(default_factory=list)


def pytest_generate_tests(metafunc):
    if "combo" in metafunc.fixturenames:
        combos = build_matrix(metafunc.config.getoption("--perf-matrix"))
        metafunc.parametrize("combo", combos, ids=[c.key for c in combos])


def pytest_sessionstart(session):
    import tensorflow as tf

    from hpcnn.perf.gate import min_rounds

    config = session.config
    rounds = config.getoption("--perf-rounds")
    if rounds < min_rounds():
        raise pytest.UsageError(f"--perf-rounds={rounds} is too few for the gate to detect anything; "
                                f"allowed: {min_rounds()} or more")
    profile = detect()
    pid = config.getoption("--hardware-profile") or profile_id(profile)
    directory = config.getoption("--baselines-dir") or os.path.join(REPO, "baselines")
    path = baselines_lib.path_for(directory, pid)
    try:
        loaded = baselines_lib.load(path)
    except baselines_lib.BaselineError as e:
        raise pytest.UsageError(str(e)) from None
    if loaded.profile is not None:
        mismatch = differences(loaded.profile, profile)
        if mismatch:
            raise pytest.UsageError(
                f"baselines file {path} was recorded on profile {profile_id(loaded.profile)}, but this machine is "
                f"{profile_id(profile)} ({'; '.join(mismatch)}); baselines judge only the machine they were "
                f"recorded on: record this one's with `pytest perf_tests --update-baselines`")
    gpus = len(tf.config.list_physical_devices("GPU"))
    cpus = len(tf.config.list_logical_devices("CPU"))  # the root conftest's split
    config._hpcnn_perf = PerfSession(profile, pid, path, loaded.combinations, config.getoption("--update-baselines"),
                                     "gpu" if gpus else "cpu", gpus or cpus)


@pytest.fixture(scope="session")
def perf_session(request) -> PerfSession:
    return request.config._hpcnn_perf


def pytest_sessionfinish(session, exitstatus):
    state = getattr(session.config, "_hpcnn_perf", None)
    if state and state.update and state.recorded:
        baselines_lib.save(state.path, state.profile, state.recorded)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = getattr(config, "_hpcnn_perf", None)
    if not state or not (state.rows or state.recorded):
        return
    if state.update and state.recorded:
        terminalreporter.write_line(f"baselines for {state.profile_id}: {len(state.recorded)} combination(s) "
                                    f"written to {state.path}")
    for line in format_table(state.rows, f"hpcnn perf gate, profile {state.profile_id}"):
        terminalreporter.write_line(line)
