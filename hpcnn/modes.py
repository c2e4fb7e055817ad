"""Every ``--variable_update`` mode, registered once with what it is.

The config validates against these properties, ``hpcnn --help`` lists the names,
and the factories (``hpcnn.variable_update.make_variable_update`` in one process,
``hpcnn.distributed.variable_update.make_distributed_update`` in a cluster) map a
name to its class. Nothing else compares a mode's name. TensorFlow-free.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Tuple


@dataclasses.dataclass(frozen=True)
class Mode:
    """One variable-update mode.

    ``local``: runs on the devices of one process. ``cluster``: runs across ps
    and worker processes. ``needs_ps``: in a cluster, the master copies live on
    ps tasks (else a cluster has no ps). ``stageable``: ``--staged_vars`` applies.
    ``averages``: the replicas' gradients are averaged into one update, so N
    replicas of batch B train as one device on batch N*B.
    """

    name: str
    local: bool
    cluster: bool
    needs_ps: bool
    stageable: bool
    averages: bool
    summary: str


_MODES: Dict[str, Mode] = {}


def _register(*args) -> None:
    mode = Mode(*args)
    _MODES[mode.name] = mode


_register("parameter_server", True, True, True, True, True,
          "one master copy (local parameter device, or the ps tasks); the mean gradient applied to it")
_register("replicated", True, False, False, False, True, "a copy per device; gradients all-reduced, every copy updated")
_register("independent", True, False, False, False, False,
          "a copy per device; no aggregation (the scaling upper bound)")
_register("distributed_replicated", False, True, True, False, True,
          "masters on the ps tasks plus a copy on every device of every worker")
_register("collective_all_reduce", False, True, False, False, True,
          "no ps; a copy per device, gradients all-reduced across workers by collective ops")


def names() -> Tuple[str, ...]:
    """Every mode's name, in registration order."""
    return tuple(_MODES)


def local_names() -> Tuple[str, ...]:
    """The modes that run on the devices of one process."""
    return tuple(n for n, m in _MODES.items() if m.local)


def cluster_names() -> Tuple[str, ...]:
    """The modes that run across processes."""
    return tuple(n for n, m in _MODES.items() if m.cluster)


def get(name: str) -> Mode:
    """The mode called ``name``.

    Raises:
      KeyError: no such mode (``hpcnn.config`` turns an unknown name into a usage error first).
    """
    return _MODES[name]
