"""tiny_resnet: a two-block residual net on 32x32 inputs, for fast tests of BN paths."""

import tensorflow as tf

from hpcnn.models.registry import register_model


@register_model("tiny_resnet", image_size=32, learning_rate=0.05, has_batch_norm=True)
def tiny_resnet(net, images, num_classes):
    x = net.conv("conv1", images, 8, 3, stride=2, padding="SAME_RESNET")
    y = net.conv("block1/conv1", x, 8, 3)
    y = net.conv("block1/conv2", y, 8, 3, activation=None)
    x = tf.nn.relu(x + y)
    shortcut = net.conv("block2/shortcut", x, 16, 1, stride=2, activation=None)
    y = net.conv("block2/conv1", x, 16, 3, stride=2, padding="SAME_RESNET")
    y = net.conv("block2/conv2", y, 16, 3, activation=None)
    x = tf.nn.relu(shortcut + y)
    x = net.global_avg_pool(x)
    return net.dense("logits", x, num_classes, activation="linear")
