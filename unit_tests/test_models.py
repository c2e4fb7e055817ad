"""What the models compute: parameter counts, output shapes, layout invariance, fused BN."""

import numpy as np
import pytest
import tensorflow as tf

from hpcnn.models import get_model, list_models, register_model
from hpcnn.model import Model
from unit_tests.helpers import config, init_params

# Published parameter counts for 1000 classes. ResNets count trainable parameters
# (torchvision's convention: convolutions without bias, BN gamma/beta). Inception-v3
# counts every parameter including BN moving statistics, as Keras does, because its
# batch norm has no gamma (scale=False).
TRAINABLE = {"resnet50": 25_557_032, "resnet101": 44_549_160, "resnet152": 60_192_808,
             "vgg11": 132_863_336, "vgg16": 138_357_544, "vgg19": 143_667_240}
TOTAL = {"inception3": 23_851_784}


def _lenet_count():  # by hand: two 5x5 convs, 2x2 pools 28 -> 14 -> 7, fc 512, fc 1000
    return (5 * 5 * 3 * 32 + 32) + (5 * 5 * 32 * 64 + 64) + (7 * 7 * 64 * 512 + 512) + (512 * 1000 + 1000)


def _alexnet_count():  # 227 -> conv11/4 55 -> pool 27 -> pool 13 -> pool 6
    convs = [(11, 3, 64), (5, 64, 192), (3, 192, 384), (3, 384, 384), (3, 384, 256)]
    return (sum(k * k * i * o + o for k, i, o in convs) + 6 * 6 * 256 * 4096 + 4096 + 4096 * 4096 + 4096
            + 4096 * 1000 + 1000)


def _trivial_count():
    return 227 * 227 * 3 + 1 + 1 * 4096 + 4096 + 4096 * 1000 + 1000


def _tiny_resnet_count():  # convolutions without bias, each followed by BN (gamma, beta); fc 16 -> 1000
    convs = [(3, 3, 8), (3, 8, 8), (3, 8, 8), (1, 8, 16), (3, 8, 16), (3, 16, 16)]
    return sum(k * k * i * o + 2 * o for k, i, o in convs) + 16 * 1000 + 1000


HAND_COUNTED = {"lenet": _lenet_count, "alexnet": _alexnet_count, "trivial": _trivial_count,
                "tiny_resnet": _tiny_resnet_count}


def _counts(name):
    specs = Model(config(model=name)).specs.values()
    return sum(s.size for s in specs if s.trainable), sum(s.size for s in specs)


@pytest.mark.parametrize("name", list_models())
def test_every_registered_model_has_the_published_or_hand_counted_parameter_count(name):
    trainable, total = _counts(name)
    if name in TRAINABLE:
        assert trainable == TRAINABLE[name]
    elif name in TOTAL:
        assert total == TOTAL[name]
    else:
        assert name in HAND_COUNTED, f"model {name!r} is registered without a published or hand count"
        assert trainable == HAND_COUNTED[name]()


def test_inception3_trainable_count_leaves_out_the_moving_statistics():
    assert _counts("inception3")[0] == 23_817_352  # Keras's total minus 2 x 17,216 BN moving statistics


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("name", list_models())
def test_output_shape(name, data_format):
    model = Model(config(model=name, data_format=data_format, num_classes=17))
    fn = tf.function(lambda x: model.logits(init_params(model), x, training=True)[0], autograph=False)
    out = fn.get_concrete_function(tf.TensorSpec([3] + model.input_shape)).structured_outputs
    assert out.shape.as_list() == [3, 17]
    assert out.dtype == tf.float32


# VGG and AlexNet at full size are slow on 2 cores; their layout logic is the same
# layer vocabulary exercised by the models below.
LAYOUT_MODELS = ["lenet", "tiny_resnet", "resnet50", "inception3", "trivial"]


@pytest.mark.nchw
@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("name", LAYOUT_MODELS)
def test_nchw_and_nhwc_give_the_same_logits(name, training):
    nhwc = Model(config(model=name, data_format="NHWC", num_classes=10))
    nchw = Model(config(model=name, data_format="NCHW", num_classes=10))
    params = init_params(nhwc)
    images = tf.random.stateless_normal([2] + nhwc.input_shape, [1, 2])
    a, a_bn = nhwc.logits(params, images, training)
    b, b_bn = nchw.logits(params, tf.transpose(images, [0, 3, 1, 2]), training)
    scale = float(tf.reduce_max(tf.abs(a)))
    # Training-mode batch norm over 2 images divides by small batch variances,
    # which magnifies the different rounding of oneDNN's NCHW kernels; a layout
    # bug would show as differences of the order of the logits themselves.
    tol = 2e-3 if training else 1e-4
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol * scale)
    assert sorted(a_bn) == sorted(b_bn)
    for key in a_bn:
        np.testing.assert_allclose(a_bn[key].numpy(), b_bn[key].numpy(), rtol=tol, atol=1e-5)


def _op_types(model_name):
    model = Model(config(model=model_name))
    params = init_params(model)
    fn = tf.function(lambda x, y: model.forward_backward(params, x, y).loss, autograph=False)
    graph = fn.get_concrete_function(tf.TensorSpec([2] + model.input_shape), tf.TensorSpec([2], tf.int32)).graph
    return {op.type for op in graph.get_operations()}


@pytest.mark.parametrize("name", [n for n in list_models() if get_model(n).has_batch_norm])
def test_batch_norm_is_fused_in_the_traced_training_graph(name):
    types = _op_types(name)
    assert "FusedBatchNormV3" in types and "FusedBatchNormGradV3" in types
    assert not {"BatchNormWithGlobalNormalization", "Rsqrt"} & types  # no unfused batch norm


def test_unknown_model_lists_known_ones():
    with pytest.raises(ValueError, match="known models: .*resnet50"):
        get_model("resnet51")


def test_duplicate_registration_raises():
    with pytest.raises(ValueError, match="already registered"):
        register_model("resnet50", image_size=224)(lambda net, x, n: x)


def test_initial_values_depend_only_on_seed_and_name():
    model = Model(config(model="lenet"))
    a, b, c = init_params(model, 1), init_params(model, 1), init_params(model, 2)
    for n in a:
        np.testing.assert_array_equal(a[n].numpy(), b[n].numpy())
    assert not np.array_equal(a["conv0/kernel"].numpy(), c["conv0/kernel"].numpy())
    assert not np.array_equal(a["conv0/kernel"].numpy()[..., 0], a["conv0/kernel"].numpy()[..., 1])
