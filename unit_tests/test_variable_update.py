"""What each --variable_update mode computes, on 2 and 4 logical CPU devices."""

import numpy as np
import pytest
import tensorflow as tf

from hpcnn import modes
from hpcnn.config import BenchmarkConfig, ConfigError
from hpcnn.distributed import variable_update as distributed_update
from hpcnn import variable_update as local_update
from hpcnn.variable_update import (Independent, ParameterServer, Replicated, StagedParameterServer,
                                   make_variable_update)
from hpcnn.model import Model
from unit_tests.helpers import build, snapshot

STEPS = 4
# lenet has no batch norm, so N replicas on batch B compute exactly what one
# device computes on batch N*B (batch statistics would differ per replica).
COMMON = dict(model="lenet", optimizer="momentum", init_learning_rate=0.02, tf_random_seed=3)


def _losses(num_gpus, per_device, **kw):
    return build(num_gpus=num_gpus, batch_size=per_device, **{**COMMON, **kw}).run_steps(STEPS)[1]


AVERAGING = [m for m in modes.local_names() if modes.get(m).averages]


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("mode", AVERAGING)
def test_losses_equal_one_device_on_the_global_batch(mode, n):
    single = _losses(1, 8 * n)
    multi = _losses(n, 8, variable_update=mode)
    np.testing.assert_allclose(multi, single, rtol=2e-5)
    assert single[-1] < single[0]


@pytest.mark.parametrize("mode", modes.local_names())
def test_forward_only_computes_one_device_loss_on_the_global_batch_and_changes_nothing(mode):
    bench = build(num_gpus=2, batch_size=8, variable_update=mode, forward_only=True, **COMMON)
    before = [snapshot(c) for c in bench.strategy.copies()]
    losses = bench.run_steps(2)[1]
    single = build(num_gpus=1, batch_size=16, forward_only=True, **COMMON).run_steps(1)[1]
    np.testing.assert_allclose(losses, single * 2, rtol=2e-5)
    for copy, start in zip(bench.strategy.copies(), before):
        for name, value in snapshot(copy).items():
            np.testing.assert_array_equal(value, start[name], err_msg=name)


@pytest.mark.parametrize("n", [2, 4])
def test_replicated_copies_stay_identical_after_every_step(n):
    bench = build(model="tiny_resnet", num_gpus=n, batch_size=4, variable_update="replicated", optimizer="adam")
    copies = bench.strategy.copies()
    assert len(copies) == n
    for _ in range(3):
        bench.run_steps(1)
        first = snapshot(copies[0])
        for other in copies[1:]:
            for name, value in snapshot(other).items():
                np.testing.assert_array_equal(value, first[name], err_msg=name)
    start = snapshot(build(model="tiny_resnet", num_gpus=n, batch_size=4).strategy.copies()[0])
    assert not np.allclose(first["conv1/kernel"], start["conv1/kernel"])  # they did train


@pytest.mark.parametrize("n", [2, 4])
def test_independent_copies_each_train_alone_on_their_own_data(n):
    bench = build(num_gpus=n, batch_size=8, variable_update="independent", **COMMON)
    bench.run_steps(STEPS)
    copies = [snapshot(c) for c in bench.strategy.copies()]
    assert not np.allclose(copies[0]["conv0/kernel"], copies[1]["conv0/kernel"])  # diverged
    # Replica i equals one device trained on exactly replica i's slice of the data.
    for i in (0, n - 1):
        alone = build(num_gpus=1, batch_size=8, **COMMON)
        images, labels = bench.input.batches[i]
        alone.input.batches[0][0].assign(images)
        alone.input.batches[0][1].assign(labels)
        alone.run_steps(STEPS)
        for name, value in snapshot(alone.strategy.copies()[0]).items():
            np.testing.assert_allclose(copies[i][name], value, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("n", [1, 2])
def test_staged_update_uses_weights_exactly_one_step_stale(n):
    bench = build(num_gpus=n, batch_size=8, staged_vars=True, **{**COMMON, "optimizer": "sgd"})
    assert isinstance(bench.strategy, StagedParameterServer)
    master = bench.strategy.master
    lr = bench.config.learning_rate
    # The global batch as one device sees it: gradients are averaged over replicas.
    batches = bench.input.next_batches().batches
    images = tf.concat([b[0] for b in batches], 0)
    labels = tf.concat([b[1] for b in batches], 0)
    reference = Model(bench.config.replace(num_gpus=1, batch_size=8 * n))

    def grad(weights):
        tensors = {k: tf.constant(v) for k, v in weights.items()}
        return {k: v.numpy() for k, v in reference.forward_backward(tensors, images, labels).grads.items()}

    w = [snapshot(master)]
    for _ in range(3):
        bench.run_steps(1)
        w.append(snapshot(master))
    stale = [w[0], w[0], w[1]]  # step 0 has no earlier weights; step n uses w[n-1]
    for step in range(3):
        g = grad(stale[step])
        for name in g:
            np.testing.assert_allclose(w[step + 1][name], w[step][name] - lr * g[name], rtol=1e-4, atol=1e-6,
                                       err_msg=f"step {step} {name}")
    # And it really is a different algorithm: plain SGD at step 2 would use w[2].
    fresh = grad(w[2])
    assert not np.allclose(w[3]["conv0/kernel"], w[2]["conv0/kernel"] - lr * fresh["conv0/kernel"], atol=1e-7)


def test_parameter_server_keeps_one_master_copy_on_the_parameter_device():
    bench = build(model="tiny_resnet", num_gpus=2, batch_size=4)
    strategy = bench.strategy
    assert type(strategy) is ParameterServer and len(strategy.copies()) == 1
    assert {v.device for v in strategy.master.values()} == {"/job:localhost/replica:0/task:0/device:CPU:0"}
    slots = [s for per_var in strategy.slots[0].values() for s in per_var.values()]
    assert all(s.device.endswith("CPU:0") for s in slots)


@pytest.mark.parametrize("mode,cls", [("replicated", Replicated), ("independent", Independent)])
def test_per_device_modes_hold_a_copy_on_each_device(mode, cls):
    bench = build(model="tiny_resnet", num_gpus=4, batch_size=2, variable_update=mode)
    assert type(bench.strategy) is cls
    for i, params in enumerate(bench.strategy.copies()):
        assert {v.device for v in params.values()} == {f"/job:localhost/replica:0/task:0/device:CPU:{i}"}


def test_parameter_server_spreads_variables_over_gpus_balanced_by_size():
    config = BenchmarkConfig(model="resnet50", device="gpu", num_gpus=4, local_parameter_device="gpu")
    devices = [f"/device:GPU:{i}" for i in range(4)]
    strategy = make_variable_update(Model(config), devices, config)  # placement only: nothing is created
    placement = strategy.placement()
    assert set(placement) == set(strategy.specs) and set(placement.values()) == set(devices)
    load = {d: sum(strategy.specs[n].size for n, p in placement.items() if p == d) for d in devices}
    largest = max(s.size for s in strategy.specs.values())
    assert max(load.values()) - min(load.values()) <= largest


def test_nccl_is_refused_on_the_cpu():
    with pytest.raises(ConfigError, match="NCCL"):
        BenchmarkConfig(variable_update="replicated", use_nccl=True, num_gpus=2)


@pytest.mark.gpu
def test_nccl_all_reduce_keeps_gpu_copies_identical():
    n = len(tf.config.list_physical_devices("GPU"))
    if n < 2:
        pytest.skip("NCCL all-reduce needs at least 2 GPUs")
    bench = build(model="tiny_resnet", device="gpu", num_gpus=2, variable_update="replicated", use_nccl=True)
    bench.run_steps(2)
    a, b = (snapshot(c) for c in bench.strategy.copies())
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-6, err_msg=name)


def _ancestors(op):
    """Every op ``op`` depends on, through data or control edges."""
    seen, todo = set(), [op]
    while todo:
        current = todo.pop()
        for parent in [t.op for t in current.inputs] + list(current.control_inputs):
            if parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return seen


@pytest.mark.parametrize("mode,n", [("parameter_server", 1), ("parameter_server", 2), ("replicated", 2)])
def test_every_update_waits_for_every_gradient_so_weights_update_in_place(mode, n):
    """An update that ran while the backward pass still read the weight would copy the whole variable."""
    bench = build(model="lenet", num_gpus=n, variable_update=mode)
    graph = bench.step.get_concrete_function().graph
    applies = [op for op in graph.get_operations() if op.type.startswith("ResourceApply")]
    assert len(applies) == 8 * len(bench.strategy.copies())  # lenet: 4 kernels + 4 biases, per copy
    gradients = {op.inputs[-1].op for op in applies}  # ResourceApplyGradientDescent(var, alpha, delta)
    for op in applies:
        assert gradients <= _ancestors(op), f"{op.name} may run before every gradient exists"


@pytest.mark.parametrize("name", modes.names())
def test_every_registered_mode_has_a_strategy_exactly_where_it_says_it_runs(name):
    mode = modes.get(name)
    assert (name in local_update._LOCAL_CLASSES) == mode.local
    assert (name in distributed_update._CLUSTER_CLASSES) == mode.cluster
    if mode.cluster:
        assert issubclass(distributed_update._CLUSTER_CLASSES[name], distributed_update.DistributedUpdate)
    if not mode.local:  # a cluster-only mode asked of one process is a usage error naming it
        with pytest.raises(ConfigError, match=f"--variable_update={name} runs across processes"):
            BenchmarkConfig(variable_update=name)
    if mode.local and not mode.stageable:
        with pytest.raises(ConfigError, match="--staged_vars needs --variable_update=parameter_server"):
            BenchmarkConfig(variable_update=name, staged_vars=True)
