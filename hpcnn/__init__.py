"""hpcnn: TensorFlow 2 CNN training benchmarks after the High-Performance Models guide."""

__version__ = "0.1.0"
