"""Training throughput of every matrix combination, gated against the profile's baselines."""

from __future__ import annotations

import statistics

import pytest

from hpcnn.benchmark import Benchmark
from hpcnn.perf import gate
from hpcnn.perf.baselines import current_commit, entry
from hpcnn.perf.paired import warmup_steps_for
from hpcnn.stats import throughput

pytestmark = pytest.mark.perf


def test_throughput(benchmark, combo, perf_session, request):
    s = perf_session
    reason = combo.skip_reason(s.device, s.available_devices, s.profile.get("cpu_isa"))
    if reason:
        pytest.skip(reason)
    plant = request.config.getoption("--plant-slowdown")
    planted = None
    if plant:
        from hpcnn.perf.slowdown import PlantedSlowdown

        planted = PlantedSlowdown()
    bench = Benchmark(combo.config(s.device), step_hook=planted.hook if planted else None)
    warm, _ = bench.run_steps(warmup_steps_for(combo))  # untimed: tracing and first-step costs
    if planted:
        planted.calibrate(plant, statistics.median(warm))

    samples = []

    def one_round():
        times, _ = bench.run_steps(combo.steps_per_round)
        samples.append(throughput(combo.batch_size * combo.num_devices, times))

    benchmark.pedantic(one_round, rounds=request.config.getoption("--perf-rounds"), iterations=1)
    benchmark.extra_info.update(combination=combo.key, images_per_sec_rounds=samples,
                                config=bench.config.to_dict(), profile_id=s.profile_id, profile=s.profile)

    if s.update:
        s.recorded[combo.key] = entry(samples, current_commit())
        s.rows.append((combo.key, None, f"recorded: median {statistics.median(samples):.2f} images/sec"))
        return
    base = s.baselines.get(combo.key)
    if base is None:
        s.rows.append((combo.key, None, "no baseline"))
        pytest.skip(f"no baseline for {combo.key} in {s.path}; record one on this runner with "
                    f"`pytest perf_tests --update-baselines --hardware-profile={s.profile_id}`")
    v = gate.judge(base["samples"], samples, base.get("threshold", gate.DEFAULT_THRESHOLD))
    benchmark.extra_info["verdict"] = v.verdict
    note = "refresh the baselines" if v.verdict == gate.IMPROVEMENT else ""
    s.rows.append((combo.key, v, note))
    if v.failed:
        pytest.fail(f"{combo.key}: throughput regression: {v.describe()}", pytrace=False)
