"""Training across processes on TensorFlow's gRPC runtime: ps and worker tasks.

``run_task`` runs whichever task ``--job_name``/``--task_index`` name; the local
launcher (``hpcnn.distributed.launcher``) starts a whole cluster on one machine.
"""

from __future__ import annotations

from typing import Callable

# Nothing here imports TensorFlow at module level, so the launcher starts fast.


def run_task(config, log: Callable[[str], None] = print):
    """Runs this process's task (a ``BenchmarkConfig`` with ``job_name`` set).

    A worker returns its ``BenchmarkResult`` (and writes ``--result_json``); a ps returns None.
    Raises ``hpcnn.distributed.cluster.ClusterError`` when the cluster fails.
    """
    if config.job_name == "ps":
        from hpcnn.distributed.ps import run_ps

        run_ps(config, log)
        return None
    from hpcnn.distributed.worker import DistributedBenchmark

    result = DistributedBenchmark(config).run(log)
    if config.result_json:
        result.write_json(config.result_json)
    return result

