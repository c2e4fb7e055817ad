"""The CPU backend, chosen before TensorFlow is imported: oneDNN on or off.

TensorFlow reads ``TF_ENABLE_ONEDNN_OPTS`` once, as it loads, and then keeps
that setting for the life of the process. Left alone, TensorFlow 2.21 turns
oneDNN on only for CPUs with AVX512-VNNI, AVX512-BF16, AVX-VNNI or AMX
(tensorflow/core/util/port.cc); on an AVX2 CPU it stays off, although there it
trains faster with oneDNN and only oneDNN has NCHW convolutions on the CPU.

hpcnn therefore makes the choice itself (``--onednn=auto|on|off``):

* ``auto``: ``TF_ENABLE_ONEDNN_OPTS`` if the user set it; else oneDNN wherever
  TensorFlow would turn it on, and also on AVX2+FMA CPUs (measured faster there:
  see the README); else TensorFlow's default (off).
* ``on`` / ``off``: forced.

The console scripts call ``apply`` before importing TensorFlow. Library users do
the same, first thing::

    import hpcnn.backend
    hpcnn.backend.apply("auto")    # before TensorFlow (or hpcnn.benchmark) is imported

Nothing here imports TensorFlow at module level.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Iterable, Mapping, Optional

from hpcnn import hardware
from hpcnn.config import ONEDNN as CHOICES, ConfigError

ENV = "TF_ENABLE_ONEDNN_OPTS"
# TensorFlow 2.21's own rule: oneDNN on by default for CPUs with any of these (Linux x86).
TF_DEFAULT_ON = ("avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16")
# hpcnn's rule where TensorFlow leaves it off: oneDNN's AVX2 kernels beat Eigen's.
HPCNN_ON = ("avx2", "fma")
_ENV_VALUES = {"1": True, "true": True, "0": False, "false": False}


@dataclasses.dataclass(frozen=True)
class Decision:
    """Whether oneDNN is (to be) on, what was asked for, and why."""

    onednn: bool
    requested: str
    reason: str

    def line(self) -> str:
        """The header line: what ran and why."""
        name = "oneDNN" if self.onednn else "TensorFlow's default kernels (oneDNN off)"
        return f"{name}; --onednn={self.requested}: {self.reason}"


def decide(requested: str = "auto", env: Optional[Mapping[str, str]] = None,
           flags: Optional[Iterable[str]] = None) -> Decision:
    """The backend for ``requested`` on a CPU with ``flags`` under environment ``env`` (pure).

    Raises:
      ConfigError: ``requested`` is not one of CHOICES, or the environment's
        TF_ENABLE_ONEDNN_OPTS is a value TensorFlow does not read.
    """
    if requested not in CHOICES:
        raise ConfigError(f"--onednn={requested!r} is not allowed; allowed: {', '.join(CHOICES)}")
    if requested != "auto":
        return Decision(requested == "on", requested, "forced")
    env = os.environ if env is None else env
    flags = set(hardware.cpu_flags() if flags is None else flags)
    if ENV in env:
        value = env[ENV].strip().lower()
        if value not in _ENV_VALUES:
            raise ConfigError(f"{ENV}={env[ENV]!r} in the environment is not a value TensorFlow reads; "
                              f"allowed: 0, 1, true, false (or unset it and use --onednn)")
        return Decision(_ENV_VALUES[value], requested, f"{ENV}={env[ENV]} in the environment")
    if flags & set(TF_DEFAULT_ON):
        return Decision(True, requested, "TensorFlow's own default on this CPU")
    if flags.issuperset(HPCNN_ON):
        return Decision(True, requested, "hpcnn's default on AVX2 CPUs, where TensorFlow leaves it off "
                                         "(measured faster)")
    return Decision(False, requested, "TensorFlow's default on this CPU")


_applied: Optional[Decision] = None


def apply(requested: str = "auto") -> Decision:
    """Sets the backend for this process; must run before TensorFlow is imported.

    If TensorFlow is already loaded its setting stands: ``auto`` accepts it,
    a forced ``on``/``off`` that contradicts it is an error.

    Raises:
      ConfigError: a bad choice, or a forced choice TensorFlow can no longer honour.
    """
    global _applied
    decision = decide(requested)
    if "tensorflow" in sys.modules:
        live = onednn_enabled()
        if live != decision.onednn:
            if requested != "auto":
                raise ConfigError(_too_late(requested, live))
            decision = Decision(live, requested, "TensorFlow was imported before hpcnn chose; its setting stands")
    else:
        os.environ[ENV] = "1" if decision.onednn else "0"
    _applied = decision
    return decision


def onednn_enabled() -> bool:
    """Whether this process's TensorFlow runs oneDNN (imports TensorFlow)."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


def current() -> Decision:
    """The backend this process runs, with the reason (imports TensorFlow)."""
    live = onednn_enabled()
    if _applied is not None and _applied.onednn == live:
        return _applied
    return Decision(live, "auto", "TensorFlow's setting (hpcnn.backend.apply was not called before it loaded)")


def check(requested: str) -> Decision:
    """The live backend, if it honours ``requested`` (a run's --onednn).

    Raises:
      ConfigError: ``requested`` is forced and TensorFlow runs the other backend.
    """
    live = current()
    if requested != "auto" and live.onednn != (requested == "on"):
        raise ConfigError(_too_late(requested, live.onednn))
    return live


def describe() -> dict:
    """The backend fields of a run's hardware record (imports TensorFlow)."""
    live = current()
    return {"onednn": live.onednn, "onednn_reason": live.reason}


def _too_late(requested: str, live: bool) -> str:
    return (f"--onednn={requested} cannot take effect: TensorFlow is already loaded in this process with oneDNN "
            f"{'on' if live else 'off'}; call hpcnn.backend.apply({requested!r}) before importing TensorFlow, "
            f"or set {ENV}={'1' if requested == 'on' else '0'}")
