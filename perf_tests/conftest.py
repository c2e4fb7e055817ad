"""The perf suite's fixtures: matrix parametrisation, profile, baselines, end-of-run table."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import pytest

from hpcnn import jsonfile
from hpcnn.perf import baselines as baselines_lib
from hpcnn.perf import gate, profile as profile_lib, review
from hpcnn.perf.matrix import build_matrix
from hpcnn.perf.profile import detect, differences, profile_id
from hpcnn.perf.report import Row, format_markdown, format_table, investigate_commands

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


Remeasure = Callable[[], Tuple[Sequence[float], Sequence[float]]]  # a fresh measurement: (rounds, yardstick rates)


@dataclasses.dataclass
class Held:
    """A judged combination as the session's end needs it: its first verdict, at its Bonferroni share; how to
    judge the same rounds at another level; its benchmark's extra_info; how to measure it again; and when the
    first measurement ended (``time.monotonic``)."""

    verdict: gate.Verdict
    rejudge: Callable[[float], gate.Verdict]
    extra_info: dict
    remeasure: Optional[Remeasure] = None
    measured: float = dataclasses.field(default_factory=time.monotonic)


@dataclasses.dataclass
class PerfSession:
    """What every perf test of one pytest session shares."""

    profile: dict
    profile_id: str
    path: str
    baselines: baselines_lib.Baselines
    update: bool
    device: str
    available_devices: int
    judged: int = 0  # combinations this session judges against baselines: the family of the alpha split
    commit: Optional[str] = None  # the checkout's commit (read once): recorded with a session, named on failures
    machine: Optional[str] = None  # this machine (``profile.machine_id``): recorded with a session, and judged by
    recorded: Dict[str, dict] = dataclasses.field(default_factory=dict)
    rows: List[Row] = dataclasses.field(default_factory=list)
    # seconds between a failing measurement and its confirming re-measurement; None: failures stand unconfirmed
    confirm_pause: Optional[float] = 60.0
    held: Dict[str, Held] = dataclasses.field(default_factory=dict)
    # {combination: units of planted work} (--plant-units): planted as they are instead of searched
    plant_units: Dict[str, int] = dataclasses.field(default_factory=dict)
    failed_at_end: Dict[str, gate.Verdict] = dataclasses.field(default_factory=dict)  # ``finish``
    saved: Optional[baselines_lib.Baselines] = None  # the file as --update-baselines wrote it

    def hold(self, key: str, verdict: gate.Verdict, rejudge: Callable[[float], gate.Verdict], extra_info: dict,
             remeasure: Optional[Remeasure] = None):
        """Keeps a judged combination (its first verdict) for the session's end (``finish``)."""
        self.held[key] = Held(verdict, rejudge, extra_info, remeasure)

    def confirm(self, key: str, verdict: gate.Verdict) -> gate.Verdict:
        """A failure of ``key`` once re-measured (``gate.confirm``): after ``confirm_pause`` seconds counted from
        its first measurement, its rounds and yardstick rates are measured again, judged against the same
        baselines at ``gate.CONFIRM_ALPHA``, and kept in its benchmark's extra_info beside the verdict. The
        failure unchanged where confirmation is off or nothing can re-measure it, and where the re-measurement
        itself fails (its error in the note: a failure is not cleared by what did not run)."""
        held = self.held[key]
        if self.confirm_pause is None or held.remeasure is None:
            return verdict
        time.sleep(max(0.0, held.measured + self.confirm_pause - time.monotonic()))
        pause = time.monotonic() - held.measured
        now = datetime.datetime.now(datetime.timezone.utc)
        try:
            samples, rates = held.remeasure()
        except Exception as e:  # a model that no longer builds or fits: the first measurement stands
            error = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
            out = dataclasses.replace(verdict, note="; ".join(
                x for x in (verdict.note, f"could not re-measure ({error}): it stands unconfirmed") if x))
            held.extra_info.update(confirm_error=error)
        else:
            again = self.baselines.judge(key, samples, rates, gate.CONFIRM_ALPHA, now, self.machine)
            out = gate.confirm(verdict, again, pause)
            held.extra_info.update(verdict=out.verdict, confirm_images_per_sec_rounds=samples,
                                   confirm_yardstick_rates=rates, confirm_time=now.timestamp(),
                                   confirm_pause_s=pause, confirm_verdict=again.verdict, confirm_ratio=again.ratio,
                                   confirm_p_slower=again.p_slower, confirm_alpha=again.alpha)
        self._show({key: out})
        return out

    def step_down(self) -> Dict[str, gate.Verdict]:
        """Holm's step-down over every combination judged, on their first measurements: each was judged as it
        ran at its Bonferroni share of the level; those Holm rejects at a larger level once others failed are
        judged again, and a failure so found replaces the row's verdict and its benchmark's. Returns those."""
        verdicts = {k: h.verdict for k, h in self.held.items()}
        after = gate.family(verdicts, {k: v.p_slower for k, v in verdicts.items()},
                            lambda k, level: self.held[k].rejudge(level), gate.DEFAULT_ALPHA)
        found = {k: after[k] for k in verdicts if after[k] is not verdicts[k]}
        for k, v in found.items():
            self.held[k].extra_info.update(verdict=v.verdict, alpha=v.alpha)
        self._show(found)
        return found

    def _show(self, verdicts: Dict[str, gate.Verdict]):
        """The end-of-session table's rows with these combinations' verdicts replaced."""
        self.rows = [(key, verdicts.get(key, v), note) for key, v, note in self.rows]

    def finish(self) -> Dict[str, gate.Verdict]:
        """The session's decision once every combination is judged: Holm's step-down (``step_down``), then, with
        confirmation on, every failure re-measured in the order measured (``confirm``), so that one pause serves
        them all. Returns the failures the tests did not report themselves (``failed_at_end``): with
        confirmation on, every confirmed one (no test fails on its first measurement); off, those Holm found."""
        found = self.step_down()
        if self.confirm_pause is not None:
            first = {k: v for k, v, _ in self.rows if v is not None and v.failed}
            found = {k: v for k, v in ((k, self.confirm(k, v)) for k, v in first.items()) if v.failed}
        self.failed_at_end = found
        return found

    def failure_lines(self, key: str, verdict: gate.Verdict, matrix: str) -> List[str]:
        """A regression's message: the verdict, then the bisect and explain commands, indented."""
        return [f"{key}: throughput regression: {verdict.describe()}",
                *(f"  {what}: {command}" for what, command in self.investigate(key, matrix).items())]

    def investigate(self, key: str, matrix: str) -> Dict[str, str]:
        """Bisect and explain commands for a slower ``key``: from its newest baseline's commit to this checkout."""
        return investigate_commands(key, self.baselines.last_commit(key), self.commit, matrix)

    @property
    def alpha(self) -> float:
        """Each judged combination's level, so that the session's family-wise level is gate.DEFAULT_ALPHA."""
        return gate.combination_alpha(gate.DEFAULT_ALPHA, self.judged)

    def skip_reason(self, combo) -> Optional[str]:
        return combo.skip_reason(self.device, self.available_devices, self.profile.get("cpu_isa"))


def pytest_generate_tests(metafunc):
    if "combo" in metafunc.fixturenames:
        combos = build_matrix(metafunc.config.getoption("--perf-matrix"))
        metafunc.parametrize("combo", combos, ids=[c.key for c in combos])


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Refuses what the flags alone get wrong before the root conftest loads TensorFlow (2 s, not 10)."""
    rounds = config.getoption("--perf-rounds")
    if rounds < gate.min_rounds():
        raise pytest.UsageError(f"--perf-rounds={rounds} is too few for the gate to detect anything; "
                                f"allowed: {gate.min_rounds()} or more")
    pause = config.getoption("--confirm-pause")
    if not 0 <= pause < math.inf:  # inf passed ">= 0" and ended a whole session in time.sleep's OverflowError
        raise pytest.UsageError(f"--confirm-pause={pause:g} is not a pause; allowed: 0 or more seconds")
    plant = config.getoption("--plant-slowdown")
    if not 0 <= plant < math.inf:  # nan or inf failed in the plant's search, after TensorFlow had loaded
        raise pytest.UsageError(f"--plant-slowdown={plant:g} is not a fraction of a step; allowed: 0 or more")
    if config.getoption("--baseline-sessions") < 1:
        raise pytest.UsageError(f"--baseline-sessions={config.getoption('--baseline-sessions')} must be at least 1")
    config._hpcnn_plant_units = read_plant_units(config.getoption("--plant-units"))


def pytest_sessionstart(session):
    import tensorflow as tf

    config = session.config
    pause = config.getoption("--confirm-pause")
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
    update = config.getoption("--update-baselines")
    config._hpcnn_perf = PerfSession(profile, pid, path, loaded, update, "gpu" if gpus else "cpu", gpus or cpus,
                                     commit=baselines_lib.current_commit(), machine=profile_lib.machine_id(),
                                     confirm_pause=None if config.getoption("--no-confirm") else pause,
                                     plant_units=config._hpcnn_plant_units)


def read_plant_units(path: Optional[str]) -> Dict[str, int]:
    """--plant-units: a JSON object of {combination: units of planted work (an integer, 0 or more)}."""
    if path is None:
        return {}
    try:
        with open(path) as f:
            units = json.load(f)
    except (OSError, ValueError) as e:
        raise pytest.UsageError(f"--plant-units={path} cannot be read as JSON ({e}); allowed: a JSON object of "
                                f"{{combination: units of work}}") from None
    if not isinstance(units, dict) or not all(
            isinstance(u, int) and not isinstance(u, bool) and u >= 0 for u in units.values()):
        raise pytest.UsageError(f"--plant-units={path} holds {json.dumps(units)[:200]}; allowed: a JSON object of "
                                f"{{combination: units of work, an integer 0 or more}}")
    return units


def pytest_collection_finish(session):
    """Counts the combinations this session will judge (after -k and skips), for the alpha split."""
    state = getattr(session.config, "_hpcnn_perf", None)
    if state is None or state.update:
        return
    combos = [item.callspec.params["combo"] for item in session.items
              if hasattr(item, "callspec") and "combo" in item.callspec.params]
    state.judged = sum(1 for c in combos if state.skip_reason(c) is None and c.key in state.baselines.combinations)


@pytest.fixture(scope="session")
def perf_session(request) -> PerfSession:
    return request.config._hpcnn_perf


@pytest.fixture(scope="session")
def yardstick():
    """The fixed workload timed beside every round (``hpcnn.perf.yardstick``): the runner's speed at the time."""
    from hpcnn.perf.yardstick import Yardstick

    return Yardstick()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session):
    """Once every test has run: Holm's step-down over the combinations judged, and each failure confirmed
    (``PerfSession.finish``). Here, not at the session's end, because pytest-benchmark writes --benchmark-json as
    the session finishes, and it must carry the verdicts."""
    yield
    state = getattr(session.config, "_hpcnn_perf", None)
    if state and not state.update and state.held:
        state.finish()


def pytest_sessionfinish(session, exitstatus):
    state = getattr(session.config, "_hpcnn_perf", None)
    if state and state.update and state.recorded:
        state.saved = baselines_lib.save(state.path, state.profile, state.recorded,
                                         keep=session.config.getoption("--baseline-sessions"))
    if state and state.failed_at_end:  # failures the tests could not report: they had passed as they ran
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = getattr(config, "_hpcnn_perf", None)
    if not state or not (state.rows or state.recorded):
        return
    if state.update and state.recorded:
        terminalreporter.write_line(f"baselines for {state.profile_id}: a session of {len(state.recorded)} "
                                    f"combination(s) added to {state.path}")
        if state.saved is not None:  # would the file's own unchanged sessions pass, each on a new occasion?
            terminalreporter.write_line(review.backtest_line(review.backtest(state.saved)))
    title = (f"hpcnn perf gate, profile {state.profile_id}: {state.judged} combination(s) judged, each at "
             f"alpha {state.alpha:.2g}, then Holm's step-down (family-wise {gate.DEFAULT_ALPHA:g})"
             + ("" if state.confirm_pause is None else
                f"; a failure stands only if re-measured {state.confirm_pause:g} s later it fails again at alpha "
                f"{gate.CONFIRM_ALPHA:g}"))
    for line in format_table(state.rows, title):
        terminalreporter.write_line(line)
    for key, v in state.failed_at_end.items():
        first, *rest = state.failure_lines(key, v, config.getoption("--perf-matrix"))
        terminalreporter.write_line(first, red=True)
        for line in rest:
            terminalreporter.write_line(line)
    report = config.getoption("--perf-report")
    if report and not state.update:
        text = format_markdown(state.rows, title, lambda key: reproduce_command(config, key),
                               lambda key: state.investigate(key, config.getoption("--perf-matrix")))
        jsonfile.write_text_atomically(report, text)
        terminalreporter.write_line(f"merge-request report written to {report}")


def reproduce_command(config, key: str) -> str:
    """The command that re-runs one combination of this session against the same baselines."""
    options = [f"--perf-matrix={config.getoption('--perf-matrix')}"]
    for name in ("--baselines-dir", "--hardware-profile"):
        if config.getoption(name):
            options.append(f"{name}={config.getoption(name)}")
    return f"python -m pytest 'perf_tests/test_throughput.py::test_throughput[{key}]' {' '.join(options)}"
