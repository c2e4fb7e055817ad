"""AlexNet, single-tower variant of tf_cnn_benchmarks (no LRN, no dropout)."""

from hpcnn.models.registry import register_model


@register_model("alexnet", image_size=227, learning_rate=0.005)
def alexnet(net, images, num_classes):
    x = net.conv("conv0", images, 64, 11, stride=4, padding="VALID", use_batch_norm=False)
    x = net.max_pool(x, 3, 2)
    x = net.conv("conv1", x, 192, 5, use_batch_norm=False)
    x = net.max_pool(x, 3, 2)
    x = net.conv("conv2", x, 384, 3, use_batch_norm=False)
    x = net.conv("conv3", x, 384, 3, use_batch_norm=False)
    x = net.conv("conv4", x, 256, 3, use_batch_norm=False)
    x = net.max_pool(x, 3, 2)
    x = net.flatten(x)
    x = net.dense("fc0", x, 4096)
    x = net.dense("fc1", x, 4096)
    return net.dense("logits", x, num_classes, activation="linear")
