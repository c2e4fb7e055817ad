"""Training throughput of every matrix combination, gated against the profile's baselines."""

from __future__ import annotations

import datetime
import statistics

import pytest

from hpcnn.benchmark import Benchmark
from hpcnn.perf import gate
from hpcnn.perf.baselines import session_record
from hpcnn.perf.paired import warmup_steps_for
from hpcnn.perf.yardstick import VERSION as YARDSTICK_VERSION
from hpcnn.stats import throughput

pytestmark = pytest.mark.perf


def measure(combo, device, rounds, yardstick, plant=0.0, pedantic=None, plant_units=None):
    """One measurement of ``combo``: a fresh benchmark (with ``plant`` of planted work), warmed up, then
    ``rounds`` timed rounds, each just after a timing of the yardstick (the machine's speed at that moment).
    Returns (images/sec per round, yardstick rate per round, the benchmark, the units of work planted or None).
    ``plant_units``: plant this amount of work instead of searching the amount worth ``plant`` (a code change
    is the same work in every session: an earlier session's search). ``pedantic``: pytest-benchmark's, to time
    the rounds as its own; None times them here (a confirming re-measurement)."""
    planted = None
    if plant or plant_units is not None:
        from hpcnn.perf.slowdown import PlantedSlowdown

        planted = PlantedSlowdown()
    bench = Benchmark(combo.config(device), step_hook=planted.hook if planted else None)
    bench.run_steps(warmup_steps_for(combo))  # untimed: tracing and first-step costs
    if plant_units is not None:
        planted.units.assign(plant_units)
    elif planted:
        planted.calibrate(plant, lambda n: bench.run_steps(n)[0])

    samples, rates = [], []

    def one_round():
        times, _ = bench.run_steps(combo.steps_per_round)
        samples.append(throughput(combo.batch_size * combo.num_devices, times))

    def time_the_yardstick():  # just before each round, outside its timing: the machine's speed at that moment
        rates.append(yardstick.rate())

    if pedantic is not None:
        pedantic(one_round, setup=time_the_yardstick, rounds=rounds, iterations=1)
    else:
        for _ in range(rounds):
            time_the_yardstick()
            one_round()
    return samples, rates, bench, None if planted is None else int(planted.units.numpy())


def test_throughput(benchmark, combo, perf_session, yardstick, request):
    s = perf_session
    reason = s.skip_reason(combo)
    if reason:
        pytest.skip(reason)
    rounds, plant = request.config.getoption("--perf-rounds"), request.config.getoption("--plant-slowdown")
    given = s.plant_units.get(combo.key)  # --plant-units: an earlier session's search; None: search here
    samples, rates, bench, units = measure(combo, s.device, rounds, yardstick, plant, benchmark.pedantic, given)
    benchmark.extra_info.update(combination=combo.key, images_per_sec_rounds=samples,
                                yardstick_rates=rates, yardstick_version=YARDSTICK_VERSION,
                                config=bench.config.to_dict(), profile_id=s.profile_id, profile=s.profile)
    if units is not None:  # the confirming re-measurement plants the same amount
        benchmark.extra_info.update(planted_units=units, planted_searched=given is None)

    if s.update:
        s.recorded[combo.key] = session_record(samples, s.commit, statistics.median(rates), s.machine)
        s.rows.append((combo.key, None, f"recorded: median {statistics.median(samples):.2f} images/sec"))
        return
    if not s.baselines.sessions(combo.key):
        s.rows.append((combo.key, None, "no baseline"))
        pytest.skip(f"no baseline for {combo.key} in {s.path}; record sessions on this runner with "
                    f"`pytest perf_tests --update-baselines --hardware-profile={s.profile_id}`")
    now = datetime.datetime.now(datetime.timezone.utc)
    v = s.baselines.judge(combo.key, samples, rates, s.alpha, now, s.machine)
    runner = s.baselines.judging(combo.key, s.machine).runner(combo.key, statistics.median(rates))
    benchmark.extra_info.update(verdict=v.verdict, ratio=v.ratio, mds=v.mds, p_slower=v.p_slower, alpha=v.alpha,
                                runner_speed=runner and runner.speed, machine=s.machine)
    note = "refresh the baselines" if v.verdict == gate.IMPROVEMENT else ""
    s.rows.append((combo.key, v, note))
    s.hold(combo.key, v, lambda level: s.baselines.judge(combo.key, samples, rates, level, now, s.machine),
           benchmark.extra_info, lambda: measure(combo, s.device, rounds, yardstick, plant_units=units)[:2])
    if v.failed and s.confirm_pause is None:  # else the session's end re-measures it, and fails it if confirmed
        pytest.fail("\n".join(s.failure_lines(combo.key, v, request.config.getoption("--perf-matrix"))), pytrace=False)
