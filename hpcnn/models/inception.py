"""Inception-v3 (Szegedy et al. 2015) for 299x299 inputs, batch norm without scale."""

import functools

from hpcnn.models.registry import register_model


def _conv(net, name, x, filters, kernel, stride=1, padding="SAME"):
    return net.conv(name, x, filters, kernel, stride=stride, padding=padding, bn_scale=False)


def _pool_branch(net, name, x, filters):
    return _conv(net, name, net.avg_pool(x, 3, 1, padding="SAME"), filters, 1)


def _block_35(net, name, x, pool_filters):
    c = functools.partial(_conv, net)
    b1 = c(f"{name}/b1x1", x, 64, 1)
    b5 = c(f"{name}/b5x5_2", c(f"{name}/b5x5_1", x, 48, 1), 64, 5)
    b3 = c(f"{name}/b3x3dbl_1", x, 64, 1)
    b3 = c(f"{name}/b3x3dbl_3", c(f"{name}/b3x3dbl_2", b3, 96, 3), 96, 3)
    return net.concat([b1, b5, b3, _pool_branch(net, f"{name}/pool", x, pool_filters)])


def _reduce_35(net, name, x):
    c = functools.partial(_conv, net)
    b3 = c(f"{name}/b3x3", x, 384, 3, stride=2, padding="VALID")
    bd = c(f"{name}/b3x3dbl_2", c(f"{name}/b3x3dbl_1", x, 64, 1), 96, 3)
    bd = c(f"{name}/b3x3dbl_3", bd, 96, 3, stride=2, padding="VALID")
    return net.concat([b3, bd, net.max_pool(x, 3, 2)])


def _block_17(net, name, x, mid):
    c = functools.partial(_conv, net)
    b1 = c(f"{name}/b1x1", x, 192, 1)
    b7 = c(f"{name}/b7x7_1", x, mid, 1)
    b7 = c(f"{name}/b7x7_3", c(f"{name}/b7x7_2", b7, mid, (1, 7)), 192, (7, 1))
    bd = c(f"{name}/b7x7dbl_1", x, mid, 1)
    bd = c(f"{name}/b7x7dbl_3", c(f"{name}/b7x7dbl_2", bd, mid, (7, 1)), mid, (1, 7))
    bd = c(f"{name}/b7x7dbl_5", c(f"{name}/b7x7dbl_4", bd, mid, (7, 1)), 192, (1, 7))
    return net.concat([b1, b7, bd, _pool_branch(net, f"{name}/pool", x, 192)])


def _reduce_17(net, name, x):
    c = functools.partial(_conv, net)
    b3 = c(f"{name}/b3x3_2", c(f"{name}/b3x3_1", x, 192, 1), 320, 3, stride=2, padding="VALID")
    b7 = c(f"{name}/b7x7x3_1", x, 192, 1)
    b7 = c(f"{name}/b7x7x3_3", c(f"{name}/b7x7x3_2", b7, 192, (1, 7)), 192, (7, 1))
    b7 = c(f"{name}/b7x7x3_4", b7, 192, 3, stride=2, padding="VALID")
    return net.concat([b3, b7, net.max_pool(x, 3, 2)])


def _block_8(net, name, x):
    c = functools.partial(_conv, net)
    b1 = c(f"{name}/b1x1", x, 320, 1)
    b3 = c(f"{name}/b3x3_1", x, 384, 1)
    b3 = net.concat([c(f"{name}/b3x3_2a", b3, 384, (1, 3)), c(f"{name}/b3x3_2b", b3, 384, (3, 1))])
    bd = c(f"{name}/b3x3dbl_2", c(f"{name}/b3x3dbl_1", x, 448, 1), 384, 3)
    bd = net.concat([c(f"{name}/b3x3dbl_3a", bd, 384, (1, 3)), c(f"{name}/b3x3dbl_3b", bd, 384, (3, 1))])
    return net.concat([b1, b3, bd, _pool_branch(net, f"{name}/pool", x, 192)])


@register_model("inception3", image_size=299, learning_rate=0.005, has_batch_norm=True)
def inception3(net, images, num_classes):
    c = functools.partial(_conv, net)
    x = c("conv0", images, 32, 3, stride=2, padding="VALID")
    x = c("conv1", x, 32, 3, padding="VALID")
    x = c("conv2", x, 64, 3)
    x = net.max_pool(x, 3, 2)
    x = c("conv3", x, 80, 1, padding="VALID")
    x = c("conv4", x, 192, 3, padding="VALID")
    x = net.max_pool(x, 3, 2)
    for i, pool_filters in enumerate((32, 64, 64)):
        x = _block_35(net, f"mixed{i}", x, pool_filters)
    x = _reduce_35(net, "mixed3", x)
    for i, mid in enumerate((128, 160, 160, 192)):
        x = _block_17(net, f"mixed{4 + i}", x, mid)
    x = _reduce_17(net, "mixed8", x)
    x = _block_8(net, "mixed9", x)
    x = _block_8(net, "mixed10", x)
    x = net.global_avg_pool(x)
    return net.dense("logits", x, num_classes, activation="linear")
