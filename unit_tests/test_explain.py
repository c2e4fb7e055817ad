"""Explain: which variants a combination is timed on, and the arithmetic from variant times to stage changes."""

import numpy as np
import pytest

from hpcnn.perf import explain, optrace
from hpcnn.perf.matrix import Combination

REPLICATED = Combination("tiny_resnet", "replicated", "NHWC", 2, "fp32", 32, 20)
ONE_DEVICE = Combination("lenet", "parameter_server", "NHWC", 1, "fp32", 32, 30)


def test_variants_isolate_each_stage_the_combination_has():
    assert explain.variants(REPLICATED, None) == {"forward": {"forward_only": True},
                                                  "local": {"variable_update": "independent"}, "step": {}}
    assert list(explain.variants(REPLICATED, "/data")) == ["input", "forward", "local", "step"]
    assert explain.variants(REPLICATED, "/data")["input"] == {"data_dir": "/data", "input_only": True}
    assert explain.variants(REPLICATED, "/data")["step"] == {"data_dir": "/data"}
    assert list(explain.variants(ONE_DEVICE, None)) == ["forward", "step"]  # one device: nothing to aggregate


@pytest.mark.parametrize("combo", [REPLICATED, ONE_DEVICE])
def test_every_variant_is_a_config_this_hpcnn_accepts(combo, tmp_path):
    for overrides in explain.variants(combo, str(tmp_path)).values():
        config = combo.config("cpu", **overrides)
        assert config.model == combo.model and config.num_gpus == combo.num_devices


def test_stage_times_by_difference():
    t = {"input": 0.004, "forward": 0.010, "local": 0.030, "step": 0.036}
    assert explain.stage_times(t) == pytest.approx({"input pipeline (alone)": 0.004, "forward": 0.010,
                                                    "backward and update": 0.020, "gradient aggregation": 0.006,
                                                    "whole step": 0.036})
    assert explain.stage_times({"forward": 0.01, "step": 0.03}) == pytest.approx(
        {"forward": 0.01, "backward and update": 0.02, "whole step": 0.03})


def _pairs(grow, n=10, noise=0.02, seed=0):
    """Round pairs whose B side has ``grow`` seconds added to one stage; every variant carries multiplicative
    noise and a shared per-pair build offset (as a rebuilt pair does)."""
    rng = np.random.default_rng(seed)
    base = {"forward": 0.010, "backward and update": 0.020, "gradient aggregation": 0.006}
    out = []
    for _ in range(n):
        pair = {}
        for side in ("a", "b"):
            s = dict(base)
            if side == "b":
                for stage, seconds in grow.items():
                    s[stage] += seconds
            offset = np.exp(rng.normal(0, noise))
            fwd = s["forward"] * offset * np.exp(rng.normal(0, noise / 2))
            local = (s["forward"] + s["backward and update"]) * offset * np.exp(rng.normal(0, noise / 2))
            step = (s["forward"] + s["backward and update"] + s["gradient aggregation"]) * offset * np.exp(
                rng.normal(0, noise / 2))
            pair[side] = {"forward": fwd, "local": local, "step": step}
        out.append(pair)
    return out


@pytest.mark.parametrize("stage", ["forward", "backward and update", "gradient aggregation"])
def test_attribution_names_the_stage_that_grew_and_brackets_its_growth(stage):
    changes = {c.stage: c for c in explain.attribute(_pairs({stage: 0.006}))}
    top = explain.culprit(list(changes.values()))
    assert top is not None and top.stage == stage
    assert changes[stage].low < 0.006 < changes[stage].high
    assert changes["whole step"].low > 0  # the step grew by the same 6 ms
    others = [c for name, c in changes.items() if name not in (stage, "whole step")]
    assert all(abs(c.change) < 0.002 for c in others), others
    assert changes[stage].describe().startswith(f"{stage:26s}")
    assert f"{100 * changes[stage].change / changes[stage].a_step:+6.1f}% of A's step" in changes[stage].describe()


# Issue 14's input demo (resize to 2x and back per image), trivial-parameter_server on 4 JPEG shards:
# seconds per step of each variant in 8 round pairs, A then B, as explain measured them.
INPUT_DEMO = [((29.3, 44.7), (30.3, 44.2), (37.3, 51.8)), ((25.4, 37.6), (29.2, 42.4), (36.8, 50.6)),
              ((25.7, 38.2), (30.2, 42.0), (38.5, 50.5)), ((26.4, 39.0), (29.4, 42.7), (38.8, 52.0)),
              ((26.8, 39.4), (30.7, 44.2), (45.1, 60.7)), ((31.3, 47.0), (36.3, 53.0), (39.1, 56.8)),
              ((27.1, 39.8), (34.4, 47.2), (40.9, 57.5)), ((29.5, 44.1), (33.9, 46.7), (37.0, 50.0))]


def _input_demo_pairs(input_scale=1.0, forward_b_extra_ms=0.0):
    return [{side: {"input": input_scale * i[k] / 1e3, "forward": (f[k] + k * forward_b_extra_ms) / 1e3,
                    "step": s[k] / 1e3}
             for k, side in enumerate("ab")} for i, f, s in INPUT_DEMO]


def test_a_slower_pipeline_that_binds_the_forward_pass_is_named_before_it():
    changes = {c.stage: c for c in explain.attribute(_input_demo_pairs())}
    assert changes["forward"].low > 0 and changes["forward"].change > 0.01  # the forward pass waits for batches
    assert explain.culprit(list(changes.values())).stage == explain.INPUT
    # noise can put the forward pass's growth above the pipeline's own: the binding pipeline is still named
    changes = {c.stage: c for c in explain.attribute(_input_demo_pairs(forward_b_extra_ms=1.5))}
    assert changes["forward"].change > changes[explain.INPUT].change
    assert explain.culprit(list(changes.values())).stage == explain.INPUT
    # a pipeline that grew as much but runs far below the forward pass's time does not explain it
    loose = explain.attribute(_input_demo_pairs(input_scale=0.3))
    assert explain.culprit(loose).stage == "forward"


def test_no_stage_is_named_when_nothing_grew():
    changes = explain.attribute(_pairs({}, seed=3))
    assert explain.culprit(changes) is None
    assert not any(c.significant for c in changes if c.stage == "whole step")


def test_attribution_needs_three_pairs():
    with pytest.raises(ValueError, match="3 or more round pairs; received 2"):
        explain.attribute(_pairs({}, n=2))


# -- the ops that changed ------------------------------------------------------------------------------------
def test_op_events_are_told_from_the_runtime_s_own():
    assert optrace._op_type("gradient_tape/replica0/MatMul/MatMul:_MklMatMul") == "_MklMatMul"
    assert optrace._op_type("replica0/bn1:FusedBatchNormV3") == "FusedBatchNormV3"
    assert optrace._op_type("ThreadpoolListener::Record") == ""
    assert optrace._op_type("ExecutorState::Process") == ""
    assert optrace._op_type("MemoryAllocation") == ""
    assert optrace._op_type("EagerLocalExecute: __inference_step_40") == ""


def test_changed_ops_rank_op_types_by_their_change_per_step():
    a = {"Conv2D": 0.60, "FusedBatchNormV3": 0.04, "Relu": 0.10}  # seconds over 10 steps
    b = {"Conv2D": 0.60, "FusedBatchNormV3": 0.20, "Relu": 0.08, "Mul": 0.02}
    rows = optrace.changed_ops(a, 10, b, 10, top=3)
    assert [r.op_type for r in rows] == ["FusedBatchNormV3", "Mul", "Relu"]
    bn = rows[0]
    assert (bn.a_ms, bn.b_ms) == pytest.approx((4.0, 20.0))
    assert (bn.a_share, bn.b_share) == pytest.approx((0.04 / 0.74, 0.20 / 0.90))
    assert "FusedBatchNormV3" in bn.describe() and "+16.00 ms" in bn.describe()


class _ProfiledSide:
    """A paired side whose step spends ``op_ms`` per op type; it logs every rebuild, run and trace."""

    def __init__(self, name, op_ms, log):
        self.name, self.op_ms, self.log = name, op_ms, log

    def rebuild(self, overrides):
        self.log.append((self.name, "rebuild", overrides))

    def run(self, steps):
        self.log.append((self.name, "run", steps))

    def profile(self, steps):
        self.log.append((self.name, "profile", steps))
        return {op: steps * ms / 1e3 for op, ms in self.op_ms.items()}


@pytest.mark.parametrize("combo,steps", [(REPLICATED, 20), (Combination("alexnet", "independent", "NHWC", 2,
                                                                         "fp32", 16, 3), 10)])
def test_op_changes_trace_a_paired_round_of_steps_a_b_b_a(combo, steps):
    """Alexnet's smoke rounds are 3 steps; its traces are as long as a paired round of it, 10 steps, not 3."""
    log = []
    a = _ProfiledSide("A", {"Conv2D": 30.0, "Relu": 2.0}, log)
    b = _ProfiledSide("B", {"Conv2D": 30.0, "Relu": 5.0, "Mul": 1.0}, log)
    trace = explain.op_changes(a, b, combo, {"data_dir": None}, top=2)
    assert log == [("A", "rebuild", {"data_dir": None}), ("A", "run", max(3, steps // 3)),
                   ("B", "rebuild", {"data_dir": None}), ("B", "run", max(3, steps // 3)),
                   ("A", "profile", steps), ("B", "profile", steps), ("B", "profile", steps), ("A", "profile", steps)]
    assert trace.steps_a_side == 2 * steps
    assert [(r.op_type, round(r.a_ms, 6), round(r.b_ms, 6)) for r in trace.rows] == [("Relu", 2.0, 5.0),
                                                                                       ("Mul", 0.0, 1.0)]


def test_a_real_trace_sums_time_by_op_type():
    import tensorflow as tf

    x = tf.random.stateless_normal([256, 256], [1, 2])

    @tf.function
    def step():
        y = x
        for _ in range(8):
            y = tf.matmul(y, x) / 256.0
        return tf.reduce_sum(y)

    step()
    seconds = optrace.trace(lambda n: [step().numpy() for _ in range(n)], 3)
    top = max(seconds, key=seconds.get)
    assert "MatMul" in top, seconds  # MatMul, or oneDNN's _MklMatMul
    assert all(":" not in k and seconds[k] > 0 for k in seconds)
