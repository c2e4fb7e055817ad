"""One side of a paired comparison: a persistent process timing rounds on request.

Run by ``hpcnn.perf.paired`` as ``python worker.py CONFIG_JSON`` with PYTHONPATH
pointing at the revision under test, so it imports *that* revision's hpcnn (only
its stable API: BenchmarkConfig, Benchmark, run_steps). Protocol on stdin/stdout,
one JSON line each: it answers {"ready": ...} after building and warming up (and sizing a planted slowdown,
or planting ``plant_units`` of work where the spec names them: an amount chosen by an earlier process;
a search sends ``HEARTBEAT`` lines as it goes),
each ``run`` request with the round's step times and losses (with real data, after
``DRAIN_STEPS`` untimed steps), and each ``rebuild`` request
(a fresh model, step and input, warmed up, with the request's config ``overrides``
if any; a planted slowdown keeps its size) with {"ready": true}, and each ``profile``
request with the seconds per op type of that many steps under TensorFlow's profiler.
Every answer waits until the process is quiet (``settle``), so that the other side is
timed on an idle machine.
"""

import gc
import json
import os
import sys
import threading
import time


# Steps run untimed before each timed run of a real-data benchmark. A quiet side's pipeline has refilled
# its buffers (the map's outputs, prefetch, host and device staging), and the first steps only drain them:
# trivial on 4 JPEG shards, demo 2 of issue 14, steps after a settle (ms): input only 3 3 4 then 36-41;
# training 25 28 24 24 43 then 47-53. Synthetic batches live on the device: nothing to drain.
DRAIN_STEPS = 6

# Sent, one line each, at most every HEARTBEAT_S while the worker sizes a planted slowdown, which may take far
# longer than the parent waits for an answer (``paired.READY_TIMEOUT_S``): each one tells it the worker is alive.
HEARTBEAT = {"alive": True}
HEARTBEAT_S = 60.0


def heartbeat(every_s: float = HEARTBEAT_S):
    """A callable that prints ``HEARTBEAT`` to stdout, the pipe to the parent, when ``every_s`` have passed
    since the last."""
    last = [time.monotonic()]

    def beat():
        if time.monotonic() - last[0] >= every_s:
            print(json.dumps(HEARTBEAT), flush=True)
            last[0] = time.monotonic()

    return beat


def _runnable_threads() -> int:
    """How many of this process's other threads are running or waiting for a core (state R in Linux's
    /proc; 0 where there is none). The caller's own thread is left out: it is running as it asks."""
    own, count = str(threading.get_native_id()), 0
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return 0
    for tid in (t for t in tids if t != own):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                state = f.read().rpartition(")")[2].split()[0]  # after "pid (comm)", which may hold spaces
        except (OSError, IndexError):  # a thread that ended meanwhile
            continue
        count += state == "R"
    return count


def settle(window_s: float = 0.05, busy: float = 0.05, limit_s: float = 10.0) -> float:
    """Returns once this process has used under ``busy`` of one core for ``window_s`` and no other thread of it
    is running or waiting to run, or after ``limit_s``.

    Between requests, an input pipeline keeps decoding until its prefetch buffers are full again; answering
    before then would time the other side while this one still computes (explain's input-only variant on
    JPEG shards measured 7-9 ms a step after a quiet side and 34-48 ms after a busy one). A thread waiting
    for a core counts as busy: a pipeline starved by a neighbour's load uses little CPU, yet it has not
    finished, only been paused (Linux's schedstat run delay cannot tell this: it is added only once the
    thread runs). Returns the wait.
    """
    start = time.perf_counter()
    while time.perf_counter() - start < limit_s:
        cpu = time.process_time()
        time.sleep(window_s)
        if time.process_time() - cpu < busy * window_s and not _runnable_threads():
            break
    return time.perf_counter() - start


def main():
    """Builds and warms up the benchmark of ``argv[1]``, then answers ``run`` requests until stdin closes."""
    spec = json.loads(sys.argv[1])
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import hpcnn

    if os.path.dirname(os.path.dirname(os.path.realpath(hpcnn.__file__))) != os.path.realpath(spec["source"]):
        sys.exit(f"{spec['source']} has no hpcnn package (an installed one would have been timed instead)")
    try:  # the parent chose the backend; "auto" takes its choice from the inherited environment
        from hpcnn import backend
    except ImportError:  # a revision older than hpcnn.backend: TensorFlow reads the same environment
        backend = None
    if backend is not None:
        backend.apply("auto")
    from hpcnn.benchmark import Benchmark
    from hpcnn.config import BenchmarkConfig
    from hpcnn.devices import ensure_logical_cpus

    config = BenchmarkConfig(**spec["config"])
    if config.device == "cpu":
        ensure_logical_cpus(config.num_gpus)
    planted = None
    if spec.get("plant_slowdown"):
        # Test-only: imported from this script's own folder (last on sys.path), so a
        # revision under test need not contain it.
        from slowdown import PlantedSlowdown

        planted = PlantedSlowdown()

    def build(overrides):
        built = BenchmarkConfig(**{**spec["config"], **overrides})
        fresh = Benchmark(built, step_hook=planted.hook if planted else None)
        fresh.run_steps(spec["warmup_steps"])
        return fresh, DRAIN_STEPS if built.data_dir else 0

    bench, drain = build(spec.get("overrides", {}))
    ready = {"ready": True}
    if planted:  # sized (or, restarted, its side's amount measured) in chunks timed like a pair's, after a settle
        timed = dict(run_steps=lambda n: bench.run_steps(n)[0], chunk=spec.get("plant_chunk"), before_chunk=settle,
                     progress=heartbeat())
        if spec.get("plant_units") and not spec.get("measure_plant", True):  # planted, its size measured before
            planted.units.assign(spec["plant_units"])
        elif spec.get("plant_units"):
            ready["planted_fraction"] = planted.measure(spec["plant_units"], **timed)
        else:
            ready["planted_fraction"] = planted.calibrate(spec["plant_slowdown"], **timed)
        ready["planted_units"] = int(planted.units.numpy())
    settle()
    print(json.dumps(ready), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("cmd") == "run":
            if drain:
                bench.run_steps(drain)
            times, losses = bench.run_steps(request["steps"])
            settle()
            print(json.dumps({"step_times": times, "losses": losses}), flush=True)
        elif request.get("cmd") == "profile":
            from optrace import trace  # this script's folder, like slowdown

            seconds = trace(bench.run_steps, request["steps"])
            settle()
            print(json.dumps({"op_seconds": seconds}), flush=True)
        elif request.get("cmd") == "rebuild":
            getattr(bench, "close", lambda: None)()  # older revisions have no close()
            bench = None
            gc.collect()
            bench, drain = build(request.get("overrides", {}))
            settle()
            print(json.dumps({"ready": True}), flush=True)
        else:
            break


if __name__ == "__main__":
    # Python put this script's folder first on sys.path, where gate.py, profile.py ... would shadow modules of
    # the standard library or of the revision under test: it goes last (``slowdown`` is still found there).
    sys.path.append(sys.path.pop(0))
    main()
