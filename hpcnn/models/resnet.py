"""ResNet v1.5 (stride on the 3x3 convolution of the bottleneck), 50/101/152 layers."""

import functools

import tensorflow as tf

from hpcnn.models.registry import register_model

_BLOCKS = {"resnet50": (3, 4, 6, 3), "resnet101": (3, 4, 23, 3), "resnet152": (3, 8, 36, 3)}


def _bottleneck(net, name, x, filters, stride, project):
    shortcut = x
    if project:
        shortcut = net.conv(f"{name}/shortcut", x, 4 * filters, 1, stride=stride, activation=None)
    y = net.conv(f"{name}/conv1", x, filters, 1)
    y = net.conv(f"{name}/conv2", y, filters, 3, stride=stride, padding="SAME_RESNET")
    y = net.conv(f"{name}/conv3", y, 4 * filters, 1, activation=None)
    return tf.nn.relu(y + shortcut)


def _resnet(net, images, num_classes, blocks):
    x = net.conv("conv1", images, 64, 7, stride=2, padding="SAME_RESNET")
    x = net.max_pool(x, 3, 2, padding="SAME")
    for stage, (count, filters) in enumerate(zip(blocks, (64, 128, 256, 512))):
        for i in range(count):
            stride = 2 if (i == 0 and stage > 0) else 1
            x = _bottleneck(net, f"stage{stage + 1}/block{i + 1}", x, filters, stride, project=(i == 0))
    x = net.global_avg_pool(x)
    return net.dense("logits", x, num_classes, activation="linear")


for _name, _blocks in _BLOCKS.items():
    register_model(_name, image_size=224, learning_rate=0.1, has_batch_norm=True)(
        functools.partial(_resnet, blocks=_blocks))
