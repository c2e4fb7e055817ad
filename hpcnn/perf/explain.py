"""Explain: which stage of a training step got slower between two revisions.

The guide splits a step into the input pipeline, the forward and backward
computation, and the aggregation of gradients and update of variables. hpcnn
can run each alone or leave it out, so A and B are timed, interleaved, on the
variants that isolate them:

* ``input``: the input pipeline alone (``--input_only``; only with real data,
  synthetic batches live on the device and cost nothing);
* ``forward``: the forward pass and loss (``--forward_only``);
* ``local``: a whole training step with ``independent`` updates (every replica
  applies its own gradients: no aggregation);
* ``step``: the combination itself.

Stage times follow by difference: backward and local update = local - forward,
aggregation = step - local. The input pipeline runs beside the computation, so
its time is reported as the pipeline's own (it slows the step only when it
exceeds it). Each round pair rebuilds both sides on every variant (builds
differ by a steady offset, see ``hpcnn.perf.paired``), so a stage's change per
pair is an independent draw; its Hodges-Lehmann estimate and 95% interval over
the pairs are what is reported.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Dict, List, Optional, Sequence

from hpcnn.perf import optrace, paired, sequential
from hpcnn.perf.matrix import Combination
from hpcnn.stats import interleaved

MIN_PAIRS = sequential.MIN_PAIRS
INPUT = "input pipeline (alone)"


def variants(combo: Combination, data_dir: Optional[str]) -> Dict[str, dict]:
    """The variants timed for ``combo`` (name -> config overrides), in the order they run."""
    base = {"data_dir": data_dir} if data_dir else {}
    out = {}
    if data_dir:
        out["input"] = {**base, "input_only": True}
    out["forward"] = {**base, "forward_only": True}
    if combo.variable_update != "independent" and combo.num_devices > 1:
        out["local"] = {**base, "variable_update": "independent"}
    out["step"] = base
    return out


def stage_times(t: Dict[str, float]) -> Dict[str, float]:
    """Seconds per step of each stage from the variants' seconds per step ``t`` (keys as ``variants``).

    Without a ``local`` variant (one device, or a mode with no aggregation) the
    aggregation is taken as part of backward and update.
    """
    local = t.get("local", t["step"])
    out = {}
    if "input" in t:
        out[INPUT] = t["input"]
    out["forward"] = t["forward"]
    out["backward and update"] = local - t["forward"]
    if "local" in t:
        out["gradient aggregation"] = t["step"] - local
    out["whole step"] = t["step"]
    return out


@dataclasses.dataclass(frozen=True)
class StageChange:
    """How one stage's seconds per step moved from A to B: estimate and 95% interval, seconds and share of A."""

    stage: str
    a_seconds: float
    b_seconds: float
    change: float
    low: float
    high: float
    a_step: float

    @property
    def significant(self) -> bool:
        """Whether the interval excludes no change."""
        return self.low > 0 or self.high < 0

    def describe(self) -> str:
        """One table row: the stage, A and B per step, the change with its interval, as ms and % of A's step."""
        pct = 100.0 / self.a_step
        return (f"{self.stage:26s} {1e3 * self.a_seconds:9.2f} {1e3 * self.b_seconds:9.2f} "
                f"{1e3 * self.change:+9.2f} ms [{1e3 * self.low:+.2f}, {1e3 * self.high:+.2f}] "
                f"{pct * self.change:+6.1f}% of A's step")


def attribute(pairs: Sequence[Dict[str, Dict[str, float]]]) -> List[StageChange]:
    """Per stage, the change from A to B over round pairs.

    ``pairs[r]`` = {"a": variant -> seconds per step, "b": the same} for round
    pair r. Raises ValueError with fewer than ``MIN_PAIRS`` pairs.
    """
    if len(pairs) < MIN_PAIRS:
        raise ValueError(f"attribute() needs {MIN_PAIRS} or more round pairs; received {len(pairs)}")
    a = [stage_times(p["a"]) for p in pairs]
    b = [stage_times(p["b"]) for p in pairs]
    a_step = statistics.median(x["whole step"] for x in a)
    out = []
    for stage in a[0]:
        d = [y[stage] - x[stage] for x, y in zip(a, b)]
        change, low, high = sequential.hodges_lehmann(d)
        out.append(StageChange(stage, statistics.median(x[stage] for x in a),
                               statistics.median(y[stage] for y in b), change, low, high, a_step))
    return out


# B's forward variant is input-bound when its pipeline alone takes at least this share of its time: the
# forward pass then waits for batches, and its growth is the pipeline's (issue 14's input demo: pipeline
# alone 26.9 -> 39.6 ms, forward 30.5 -> 44.2 ms, both +13 ms).
INPUT_BOUND = 0.8


def culprit(changes: Sequence[StageChange]) -> Optional[StageChange]:
    """The stage (not the whole step) that grew the most among those whose growth is significant, or None.

    A pipeline that grew and binds B's forward pass is named before the forward pass, whose time is then
    the pipeline's.
    """
    by_stage = {c.stage: c for c in changes}
    pipeline = by_stage.get(INPUT)
    if pipeline is not None and pipeline.low > 0 and pipeline.b_seconds >= INPUT_BOUND * by_stage["forward"].b_seconds:
        return pipeline
    grown = [c for c in changes if c.stage != "whole step" and c.low > 0]
    return max(grown, key=lambda c: c.change) if grown else None


def measure(a: paired.Side, b: paired.Side, combo: Combination, plan: Dict[str, dict], pairs: int,
            log=print) -> List[Dict[str, Dict[str, float]]]:
    """``pairs`` round pairs; in each, both sides rebuild on every variant and run it in alternating chunks,
    a round as long and as finely cut as the paired gate's (``paired.round_chunks``; alexnet's 3-step smoke
    rounds alternated in 3 chunks, and the paired gate's pairs of those spread 1.4-2x as wide as 10 steps in
    10, ``paired.round_steps``).

    Returns per pair {"a": variant -> median seconds per step, "b": ...}.
    """
    sizes = paired.round_chunks(combo)
    out = []
    for r in range(pairs):
        record = {"a": {}, "b": {}}
        for name, overrides in plan.items():
            for side in interleaved([a, b], r):
                side.rebuild(overrides)
            times = paired.alternate(a, b, sizes, r)
            record["a"][name], record["b"][name] = (statistics.median(times[s]) for s in (a, b))
        out.append(record)
        log(f"pair {r + 1}/{pairs}: " + ", ".join(
            f"{name} {1e3 * record['a'][name]:.1f} -> {1e3 * record['b'][name]:.1f} ms" for name in plan))
    return out


@dataclasses.dataclass(frozen=True)
class OpTrace:
    """The op types whose time per step changed most, and how many steps each side was traced for."""

    steps_a_side: int
    rows: List[optrace.OpChange]


def op_changes(a: paired.Side, b: paired.Side, combo: Combination, step_overrides: dict, top: int = 8
               ) -> OpTrace:
    """Both sides rebuilt on the combination's own step, traced A B B A for a paired round's steps each
    (``paired.round_steps``: alexnet's 3-step smoke rounds are 10 steps here too, 20 a side in all); the op
    types whose time per step changed most."""
    steps = paired.round_steps(combo)
    for side in (a, b):
        side.rebuild(step_overrides)
        side.run(max(3, steps // 3))  # past the first steps of the fresh build
    sums = {a: {}, b: {}}
    for side in (a, b, b, a):
        for op_type, seconds in side.profile(steps).items():
            sums[side][op_type] = sums[side].get(op_type, 0.0) + seconds
    traced = 2 * steps  # a side's two traces
    return OpTrace(traced, optrace.changed_ops(sums[a], traced, sums[b], traced, top))
