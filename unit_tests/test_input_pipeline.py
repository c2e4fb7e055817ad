"""The real-data pipeline: software-pipelining order, the stages' output, bad input."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from hpcnn.benchmark import Benchmark
from hpcnn.config import ConfigError
from hpcnn.data_tool import main as data_main
from hpcnn.inputs import StagedInput, pipeline, records, source
from hpcnn.inputs.records import DataError
from unit_tests.helpers import config, write_bad_dataset

DEVICES = ["/device:CPU:0", "/device:CPU:1"]


def _id_dataset(num_devices):
    """Element n: images filled with 100*n + device, labels filled with n."""
    def element(n):
        n = tf.cast(n, tf.float32)
        images = tf.stack([tf.fill([2, 4, 4, 3], 100 * n + d) for d in range(num_devices)])
        return images, tf.cast(tf.fill([num_devices, 2], n), tf.int32)

    return tf.data.Dataset.range(1000).map(element)


def _held(staged):
    host = int(staged.host[1].numpy()[0, 0])
    device = [int(v[0].numpy()[0, 0, 0, 0]) for v in staged.staged]
    return host, device


def test_warm_up_runs_a0_then_a1_b0_and_every_step_runs_c_n_b_n1_a_n2():
    staged = StagedInput(_id_dataset(2), DEVICES)
    warm_a, warm_ab = [source._for_effect(stage) for stage in staged.warm_up_stages()]
    warm_a()
    assert _held(staged) == (0, [0, 0])  # A0: batch 0 on the host, devices still empty (zeros)
    assert not staged.staged[1][1].numpy().any()
    warm_ab()
    assert _held(staged) == (1, [0, 1])  # A1 B0: device d holds batch 0 (100*0 + d)
    step = tf.function(lambda: [(x[0, 0, 0, 0], y[0]) for x, y in staged.next_batches().batches], autograph=False)
    consumed = []
    for n in range(6):
        out = step()
        consumed.append(int(out[0][1]))
        assert [int(x) for x, _ in out] == [100 * n, 100 * n + 1]  # C(n) on each device gets its slice
        assert _held(staged) == (n + 2, [100 * (n + 1), 100 * (n + 1) + 1])  # B(n+1), A(n+2)
    assert consumed == list(range(6))  # every batch consumed once, in order


def test_the_same_stages_run_in_a_graph_session_as_a_cluster_worker_runs_them():
    graph = tf.Graph()
    with graph.as_default():
        staged = StagedInput(_id_dataset(2), DEVICES)
        warm = [stage() for stage in staged.warm_up_stages()]
        batches, staging = staged.next_batches()
        step = [(x[0, 0, 0, 0], y[0]) for x, y in batches], staging
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=graph) as session:
        session.run([init, staged.initializer])
        for ops in warm:
            session.run(ops)
        for n in range(4):
            out, _ = session.run(step)
            assert [int(x) for x, _ in out] == [100 * n, 100 * n + 1] and int(out[0][1]) == n


def test_each_buffer_holds_one_batch_and_compute_never_waits_on_the_other_stages():
    staged = StagedInput(_id_dataset(2), DEVICES)
    staged.warm_up()
    consumed = []

    def step():
        consumed.extend(x for x, _ in staged.next_batches().batches)
        return list(consumed)

    graph = tf.function(step, autograph=False).get_concrete_function().graph
    assert all(v.shape[0] == 2 for v in staged.host)  # the host buffer: one global batch (2 devices)
    assert all(v.shape == (2, 4, 4, 3) for v, _ in staged.staged)  # a device buffer: one batch
    # The tensors C computes on depend only on reading the device buffers: neither
    # the dataset (A) nor the copy (B) is upstream of them, so after warm-up a
    # step's compute starts at once while A and B run beside it. (The function's
    # own outputs wait for every side effect; that is tf.function's contract.)
    for tensor in consumed:
        ancestors, todo = set(), [tensor.op]
        while todo:
            op = todo.pop()
            if op.name in ancestors:
                continue
            ancestors.add(op.name)
            todo += [t.op for t in op.inputs] + list(op.control_inputs)
        types = {graph.get_operation_by_name(n).type for n in ancestors}
        assert "IteratorGetNext" not in types and "AssignVariableOp" not in types


def test_nchw_staging_transposes_on_the_device():
    pixels = np.arange(2 * 2 * 4 * 5 * 3, dtype=np.float32).reshape(2, 2, 4, 5, 3)  # every value distinct
    source = tf.data.Dataset.from_tensors((pixels, np.zeros([2, 2], np.int32))).repeat()
    staged = StagedInput(source, DEVICES, data_format="NCHW")
    staged.warm_up()
    for d in range(2):  # a reshape to (2, 3, 4, 5) would keep the shape and scramble the values
        np.testing.assert_array_equal(staged.staged[d][0].numpy(), pixels[d].transpose(0, 3, 1, 2))


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("imagenet")
    assert data_main(["make-synthetic", "--out", str(out), "--num-images", "80", "--num-classes", "5",
                      "--height", "64", "--width", "80", "--shards", "3"]) == 0
    return str(out)


def test_dataset_tool_writes_imagenet_layout_shards(dataset_dir):
    names = sorted(os.listdir(dataset_dir))
    assert names == ["train-00000-of-00003", "train-00001-of-00003", "train-00002-of-00003",
                     "validation-00000-of-00001"]
    seen = 0
    for path in records.list_shards(dataset_dir):
        for rec in tf.data.TFRecordDataset(path):
            encoded, label, bbox = records.parse(rec)
            assert tf.io.decode_jpeg(encoded).shape == (64, 80, 3)
            assert 0 <= int(label) < 5 and bbox.shape == (1, 1, 4)
            seen += 1
    assert seen == 72  # 80 images, a tenth held out for validation


@pytest.mark.parametrize("distortions", [True, False])
def test_processing_stage_yields_one_normalised_batch_per_device(dataset_dir, distortions):
    ds = pipeline.process_images(pipeline.read_records(records.list_shards(dataset_dir)), 32, distortions,
                                 tf.bfloat16, batch_size=4, num_devices=2)
    images, labels = next(iter(ds))
    assert images.shape == (2, 4, 32, 32, 3) and images.dtype == tf.bfloat16 and labels.shape == (2, 4)
    x = images.numpy().astype(np.float32)
    assert x.min() >= -1.0 and x.max() <= 1.0 and x.std() > 0.05


def test_central_crop_is_deterministic_and_distortion_is_not(dataset_dir):
    record = next(iter(tf.data.TFRecordDataset(records.list_shards(dataset_dir)[0])))
    encoded, _, bbox = records.parse(record)
    from hpcnn.inputs import preprocessing

    a, b = preprocessing.central(encoded, 32), preprocessing.central(encoded, 32)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    distorted = [preprocessing.distorted(encoded, bbox, 32).numpy() for _ in range(4)]
    assert any(not np.array_equal(distorted[0], d) for d in distorted[1:])


@pytest.mark.parametrize("data_format", ["NHWC", pytest.param("NCHW", marks=pytest.mark.nchw)])
def test_training_on_real_data_across_two_devices(dataset_dir, data_format):
    bench = Benchmark(config(model="tiny_resnet", data_dir=dataset_dir, num_gpus=2, batch_size=4, num_classes=5,
                             variable_update="replicated", data_format=data_format))
    # After warm-up each device's buffer holds its batch of the first step: the step's loss is the
    # replicas' mean loss on exactly those images and labels, with the initial weights.
    params = {n: tf.identity(v) for n, v in bench.strategy.copies()[0].items()}
    expected = np.mean([bench.model.loss(params, images.read_value(), labels.read_value())[0].numpy()
                        for images, labels in bench.input.staged])
    _, losses = bench.run_steps(3)
    np.testing.assert_allclose(losses[0], expected, rtol=1e-3)
    assert len(set(losses)) == 3  # later steps train on new batches with new weights


def test_input_only_mode_runs_the_pipeline_without_a_model(dataset_dir):
    lines = []
    result = Benchmark(config(model="tiny_resnet", data_dir=dataset_dir, input_only=True, batch_size=8)).run(
        lines.append)
    assert result.workload == "input-only" and result.images_per_sec > 0
    assert f"Dataset:     imagenet ({dataset_dir})" in lines


def test_bad_data_dirs_are_usage_errors(tmp_path):
    with pytest.raises(ConfigError, match="is not a directory"):
        records.list_shards(str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="is empty"):
        records.list_shards(str(tmp_path))
    (tmp_path / "readme.txt").write_text("x")
    with pytest.raises(ConfigError, match="has no train-NNNNN-of-NNNNN TFRecord shards"):
        records.list_shards(str(tmp_path))
    with pytest.raises(ConfigError, match="--input_only .* needs --data_dir"):
        config(input_only=True)


@pytest.mark.parametrize("kind,what", [("image", "record 1 holds an unreadable example or image"),
                                       ("record", "corrupt record")])
def test_a_bad_record_or_image_is_an_error_naming_the_file(tmp_path, kind, what):
    bad_file = write_bad_dataset(tmp_path, kind)
    with pytest.raises(DataError) as e:
        bench = Benchmark(config(model="tiny_resnet", data_dir=str(tmp_path), batch_size=2, num_classes=5,
                                 distortions=False))
        # One record in six is bad and the shuffle draws at random: 60 steps of 2
        # images miss it with probability (5/6)**120, about 1e-10.
        bench.run_steps(60)
    assert bad_file in str(e.value) and what in str(e.value)


def test_cli_reports_bad_data_in_one_line(tmp_path):
    bad_file = write_bad_dataset(tmp_path, "image")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    p = subprocess.run([sys.executable, "-m", "hpcnn.cli", "--model=tiny_resnet", f"--data_dir={tmp_path}",
                        "--batch_size=2", "--num_batches=60", "--num_warmup_batches=0", "--nodistortions"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith("hpcnn: error: bad input data: " + bad_file)
    check = subprocess.run([sys.executable, "-m", "hpcnn.data_tool", "check", str(tmp_path)], capture_output=True,
                           text=True, timeout=300)
    assert check.returncode == 1 and bad_file in check.stdout


def test_make_imagenet_from_class_folders(tmp_path):
    for cls, color in (("cat", 10), ("dog", 200)):
        (tmp_path / "src" / cls).mkdir(parents=True)
        for i in range(3):
            png = tf.io.encode_png(tf.fill([20, 30, 3], tf.constant(color + i, tf.uint8))).numpy()
            (tmp_path / "src" / cls / f"{i}.png").write_bytes(png)
    assert data_main(["make-imagenet", "--from", str(tmp_path / "src"), "--out", str(tmp_path / "out"),
                      "--shards", "1"]) == 0
    labels = sorted(int(records.parse(r)[1]) for r in tf.data.TFRecordDataset(
        records.list_shards(str(tmp_path / "out"))))
    assert labels == [0, 0, 1, 1, 1]  # 6 images, one held out for validation; cat=0, dog=1 after the shift
    assert data_main(["make-imagenet", "--from", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")]) == 2
