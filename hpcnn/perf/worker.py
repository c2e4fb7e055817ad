"""One side of a paired comparison: a persistent process timing rounds on request.

Run by ``hpcnn.perf.paired`` as ``python worker.py CONFIG_JSON`` with PYTHONPATH
pointing at the revision under test, so it imports *that* revision's hpcnn (only
its stable API: BenchmarkConfig, Benchmark, run_steps). Protocol on stdin/stdout,
one JSON line each: it answers {"ready": ...} after building and warming up,
each ``run`` request with the round's step times and losses, and each ``rebuild`` request
(a fresh model, step and input, warmed up, with the request's config ``overrides``
if any; a planted slowdown keeps its size) with {"ready": true}, and each ``profile``
request with the seconds per op type of that many steps under TensorFlow's profiler.
"""

import gc
import json
import os
import sys


# Python put this script's folder first on sys.path, where gate.py, profile.py ... would shadow modules of
# the standard library or of the revision under test: it goes last (``slowdown`` is still found there).
sys.path.append(sys.path.pop(0))


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
        return fresh

    bench = build(spec.get("overrides", {}))
    ready = {"ready": True}
    if planted:
        ready["planted_fraction"] = planted.calibrate(spec["plant_slowdown"], lambda n: bench.run_steps(n)[0])
    print(json.dumps(ready), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("cmd") == "run":
            times, losses = bench.run_steps(request["steps"])
            print(json.dumps({"step_times": times, "losses": losses}), flush=True)
        elif request.get("cmd") == "profile":
            from optrace import trace  # this script's folder, like slowdown

            seconds = trace(bench.run_steps, request["steps"])
            print(json.dumps({"op_seconds": seconds}), flush=True)
        elif request.get("cmd") == "rebuild":
            getattr(bench, "close", lambda: None)()  # older revisions have no close()
            bench = None
            gc.collect()
            bench = build(request.get("overrides", {}))
            print(json.dumps({"ready": True}), flush=True)
        else:
            break


if __name__ == "__main__":
    main()
