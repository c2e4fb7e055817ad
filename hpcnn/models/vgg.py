"""VGG-11/16/19 (configurations A, D and E of Simonyan & Zisserman), no batch norm."""

import functools

from hpcnn.models.registry import register_model

_CONVS_PER_STAGE = {"vgg11": (1, 1, 2, 2, 2), "vgg16": (2, 2, 3, 3, 3), "vgg19": (2, 2, 4, 4, 4)}


def _vgg(net, images, num_classes, convs_per_stage):
    x = images
    for stage, (count, filters) in enumerate(zip(convs_per_stage, (64, 128, 256, 512, 512))):
        for i in range(count):
            x = net.conv(f"block{stage + 1}_conv{i + 1}", x, filters, 3, use_batch_norm=False)
        x = net.max_pool(x, 2, 2)
    x = net.flatten(x)
    x = net.dense("fc1", x, 4096)
    x = net.dense("fc2", x, 4096)
    return net.dense("logits", x, num_classes, activation="linear")


for _name, _convs in _CONVS_PER_STAGE.items():
    register_model(_name, image_size=224)(functools.partial(_vgg, convs_per_stage=_convs))
