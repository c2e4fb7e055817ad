"""Training across processes on TensorFlow's gRPC runtime: ps and worker tasks.

``hpcnn.benchmark.run_benchmark`` runs whichever task ``--job_name``/``--task_index``
name (``ps.run_ps``, or ``worker_task.ClusterWorker`` measured like a one-process
run); the local launcher (``launcher``) starts a whole cluster on one machine.
Nothing here imports TensorFlow at package level, so the launcher starts fast.
"""
