"""LeNet-5 style network (as in tf_cnn_benchmarks), for 28x28 inputs."""

from hpcnn.models.registry import register_model


@register_model("lenet", image_size=28)
def lenet(net, images, num_classes):
    x = net.conv("conv0", images, 32, 5, use_batch_norm=False)
    x = net.max_pool(x, 2, 2)
    x = net.conv("conv1", x, 64, 5, use_batch_norm=False)
    x = net.max_pool(x, 2, 2)
    x = net.flatten(x)
    x = net.dense("affine0", x, 512)
    return net.dense("logits", x, num_classes, activation="linear")
