"""The benchmark loop and training step: printed lines, result object, what a step computes."""

import json
import re

import numpy as np
import pytest
import tensorflow as tf

from hpcnn.benchmark import print_header, run_benchmark
from unit_tests.helpers import build, config, snapshot

LINE = re.compile(r"^(\d+)\timages/sec: [\d.]+ \+/- [\d.]+ \(jitter = [\d.]+\)\t-?[\d.]+$")


def test_run_prints_the_familiar_lines_and_returns_one_result(tmp_path):
    lines = []
    path = tmp_path / "result.json"
    result = run_benchmark(config(model="lenet", num_batches=4, display_every=2, result_json=str(path)),
                           lines.append)
    assert lines.index("Step\tImg/sec\ttotal_loss") < lines.index("-" * 64, 14)
    steps = [int(LINE.match(line).group(1)) for line in lines if LINE.match(line)]
    assert steps == [2, 4]
    assert re.fullmatch(r"total images/sec: [\d.]+", lines[-2]) and lines[-1] == lines[-3] == "-" * 64
    assert len(result.step_times) == len(result.losses) == 4
    assert result.images_per_sec > 0 and result.images_per_step == 32
    assert all(np.isfinite(result.losses))
    saved = json.loads(path.read_text())
    assert saved["losses"] == result.losses and saved["config"]["model"] == "lenet"
    assert saved["config"]["data_format"] == "NHWC" and saved["hardware"]["cpu_cores"] >= 1
    assert float(lines[-2].split()[-1]) == pytest.approx(result.images_per_sec, abs=0.01)


def test_repeated_steps_on_a_fixed_batch_reduce_the_loss():
    bench = build(model="tiny_resnet", batch_size=16, optimizer="momentum", num_classes=10)
    _, losses = bench.run_steps(40)
    assert losses[-1] < 0.5 * losses[0]


def test_same_seed_same_losses_other_seed_other_losses():
    a = build(model="lenet", tf_random_seed=7).run_steps(3)[1]
    b = build(model="lenet", tf_random_seed=7).run_steps(3)[1]
    c = build(model="lenet", tf_random_seed=8).run_steps(3)[1]
    assert a == b and a != c


def _reference(name, w, g, slots, c, t):
    """One optimizer step in NumPy, TensorFlow's kernel semantics."""
    lr = c.learning_rate
    if name == "sgd":
        return w - lr * g
    if name == "momentum":
        return w - lr * (c.momentum * slots.get("m", 0) + g)
    if name == "rmsprop":
        ms = c.rmsprop_decay * 1.0 + (1 - c.rmsprop_decay) * g * g
        return w - lr * g / np.sqrt(ms + c.rmsprop_epsilon)
    if name == "adam":
        m, v = (1 - c.adam_beta1) * g, (1 - c.adam_beta2) * g * g
        lr_t = lr * np.sqrt(1 - c.adam_beta2 ** t) / (1 - c.adam_beta1 ** t)
        return w - lr_t * m / (np.sqrt(v) + c.adam_epsilon)
    raise AssertionError(name)


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "rmsprop", "adam"])
def test_one_step_applies_the_optimizer_to_the_models_gradients(optimizer):
    bench = build(model="lenet", batch_size=8, optimizer=optimizer, init_learning_rate=0.01, weight_decay=1e-3)
    params = bench.strategy.replica_params(0)
    before = snapshot(params)
    images, labels = bench.input.next_batches().batches[0]
    grads = bench.model.forward_backward(dict(params), images, labels).grads
    loss = float(bench.step())
    after = snapshot(params)
    for name, g in grads.items():
        expected = _reference(optimizer, before[name], g.numpy(), {}, bench.config, 1)
        np.testing.assert_allclose(after[name], expected, rtol=1e-4, atol=1e-6, err_msg=name)
    assert loss == pytest.approx(float(bench.model.loss(before, images, labels)[0]), rel=1e-5)


def test_weight_decay_adds_half_the_squared_weights_to_the_loss():
    bench = build(model="lenet", weight_decay=0.01)
    params = snapshot(bench.strategy.replica_params(0))
    images, labels = bench.input.next_batches().batches[0]
    with_decay = float(bench.model.loss(params, images, labels)[0])
    bench.model.weight_decay = 0.0
    without = float(bench.model.loss(params, images, labels)[0])
    kernels = [v for n, v in params.items() if n.endswith("kernel")]
    assert with_decay - without == pytest.approx(0.01 * sum(float((k ** 2).sum()) / 2 for k in kernels), rel=1e-4)


def test_forward_only_leaves_weights_unchanged_and_uses_moving_statistics():
    bench = build(model="tiny_resnet", forward_only=True)
    before = snapshot(bench.strategy.replica_params(0))
    images, labels = bench.input.next_batches().batches[0]
    expected = float(bench.model.loss(before, images, labels, training=False)[0])
    losses = bench.run_steps(2)[1]
    after = snapshot(bench.strategy.replica_params(0))
    assert losses == pytest.approx([expected] * 2, rel=1e-5)
    assert all(np.array_equal(before[n], after[n]) for n in before)


def test_training_updates_batch_norm_moving_statistics():
    bench = build(model="tiny_resnet")
    before = snapshot(bench.strategy.replica_params(0))
    bench.run_steps(1)
    after = snapshot(bench.strategy.replica_params(0))
    assert not np.allclose(before["conv1/bn/moving_mean"], after["conv1/bn/moving_mean"])


def test_bfloat16_computes_in_bfloat16_and_stays_close_to_float32():
    fp32, bf16 = build(model="tiny_resnet"), build(model="tiny_resnet", precision="bf16")
    graph = bf16.step.get_concrete_function().graph
    conv_types = {op.get_attr("T") for op in graph.get_operations() if op.type == "Conv2D"}
    assert conv_types == {tf.bfloat16}
    assert bf16.strategy.replica_params(0)["conv1/kernel"].dtype == tf.float32  # float32 master weights
    a, b = fp32.run_steps(3)[1], bf16.run_steps(3)[1]
    np.testing.assert_allclose(a, b, rtol=0.05)


def test_header_names_the_cpu_backend_and_says_when_bfloat16_is_emulated():
    from hpcnn import backend, hardware

    lines = []
    bench = build(model="lenet", precision="bf16")
    print_header(bench, lines.append)
    assert f"CPU backend: {backend.current().line()}" in lines
    precision = next(line for line in lines if line.startswith("Precision:"))
    tier = hardware.isa_tier(hardware.cpu_flags())
    emulated = not hardware.has_native_bf16(tier)  # AVX2 or plain AVX-512: no bfloat16 hardware
    assert ("emulated" in precision and f"({tier})" in precision) is emulated
    fp32 = []
    print_header(build(model="lenet"), fp32.append)
    assert "Precision:   fp32" in fp32
