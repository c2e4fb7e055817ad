"""Training across processes on TensorFlow's gRPC runtime: ps and worker tasks.

``run_task`` runs whichever task ``--job_name``/``--task_index`` name; the local
launcher (``hpcnn.distributed.launcher``) starts a whole cluster on one machine.
"""

from __future__ import annotations

from typing import Callable, Optional

from hpcnn.benchmark import BenchmarkResult
from hpcnn.config import BenchmarkConfig
from hpcnn.distributed.cluster import ClusterError


def run_task(config: BenchmarkConfig, log: Callable[[str], None] = print) -> Optional[BenchmarkResult]:
    """Runs this process's task; a worker returns its result (and writes ``--result_json``)."""
    if config.job_name == "ps":
        from hpcnn.distributed.ps import run_ps

        run_ps(config, log)
        return None
    from hpcnn.distributed.worker import DistributedBenchmark

    result = DistributedBenchmark(config).run(log)
    if config.result_json:
        result.write_json(config.result_json)
    return result


__all__ = ["ClusterError", "run_task"]
