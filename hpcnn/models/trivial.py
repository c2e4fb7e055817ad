"""The trivial model: one tiny affine layer, measures everything but the model."""

from hpcnn.models.registry import register_model


@register_model("trivial", image_size=227)
def trivial(net, images, num_classes):
    x = net.flatten(images)
    x = net.dense("affine0", x, 1, activation="linear")
    x = net.dense("affine1", x, 4096)
    return net.dense("logits", x, num_classes, activation="linear")
