"""The ops that changed: TensorFlow profiler traces of a few steps, summed by op type, A against B.

``trace`` records ``steps`` steps with ``tf.profiler.experimental`` and reads
the XSpace it writes: every executed op is an event named ``op_name:OpType``
on the host's compute threads (or a GPU kernel carrying a ``tf_op`` stat of
that form), and its duration is summed per op type. ``changed_ops`` compares
two such sums per step, as milliseconds and as shares of all op time, so
"FusedBatchNormV3 went from 4% to 19% of the step" is one row.

Also imported by the paired worker (``hpcnn/perf/worker.py``) by file name.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import os
import re
import tempfile
from typing import Callable, Dict, List


def op_type_seconds(xspace_path: str) -> Dict[str, float]:
    """Seconds spent per op type in the XSpace file ``xspace_path`` (``*.xplane.pb``)."""
    try:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2
    except ImportError:  # where TensorFlow ships TSL on its own
        from tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(xspace_path, "rb") as f:
        space.ParseFromString(f.read())
    total: Dict[str, float] = collections.Counter()
    for plane in space.planes:
        tf_op = next((k for k, v in plane.stat_metadata.items() if v.name == "tf_op"), None)
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if tf_op is not None:  # a device kernel names the op it runs for in a stat
                    name = next((plane.stat_metadata[s.ref_value].name if s.ref_value else s.str_value
                                 for s in event.stats if s.metadata_id == tf_op), name)
                op_type = _op_type(name)
                if op_type:
                    total[op_type] += event.duration_ps * 1e-12
    return dict(total)


_OP_EVENT = re.compile(r"^[^\s:]+:([A-Za-z_]\w*)$")


def _op_type(event_name: str) -> str:
    """``OpType`` of an op event named ``op_name:OpType``; "" for the runtime's own events
    (``ThreadpoolListener::Record``, ``EagerLocalExecute: __inference_step_40`` ...)."""
    match = _OP_EVENT.match(event_name)
    return match.group(1) if match and not match.group(1).startswith("__inference") else ""


def trace(run_steps: Callable[[int], object], steps: int, logdir: str = "") -> Dict[str, float]:
    """Op-type seconds of ``run_steps(steps)`` under the profiler (a temporary log folder unless ``logdir``)."""
    import tensorflow as tf

    with tempfile.TemporaryDirectory() as tmp:
        where = logdir or tmp
        tf.profiler.experimental.start(where)
        try:
            run_steps(steps)
        finally:
            tf.profiler.experimental.stop()
        files = sorted(glob.glob(os.path.join(where, "**", "*.xplane.pb"), recursive=True), key=os.path.getmtime)
        if not files:
            raise RuntimeError(f"the profiler wrote no trace under {where}")
        return op_type_seconds(files[-1])


@dataclasses.dataclass(frozen=True)
class OpChange:
    """One op type in A and B: milliseconds per step and share of all op time."""

    op_type: str
    a_ms: float
    b_ms: float
    a_share: float
    b_share: float

    def describe(self) -> str:
        """One row: op type, A and B ms per step and shares, the change."""
        return (f"{self.op_type:36s} {self.a_ms:8.2f} {self.b_ms:8.2f} {self.b_ms - self.a_ms:+8.2f} ms   "
                f"{self.a_share:6.1%} -> {self.b_share:6.1%} of op time")


def changed_ops(a: Dict[str, float], a_steps: int, b: Dict[str, float], b_steps: int, top: int = 10
                ) -> List[OpChange]:
    """The ``top`` op types whose time per step changed most from A to B (sums of seconds over the steps)."""
    a_total, b_total = sum(a.values()) or 1.0, sum(b.values()) or 1.0
    rows = [OpChange(t, 1e3 * a.get(t, 0.0) / a_steps, 1e3 * b.get(t, 0.0) / b_steps, a.get(t, 0.0) / a_total,
                     b.get(t, 0.0) / b_total) for t in set(a) | set(b)]
    rows.sort(key=lambda r: (-abs(r.b_ms - r.a_ms), r.op_type))
    return rows[:top]
