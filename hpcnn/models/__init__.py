"""The model zoo. Importing this package registers every model."""

from hpcnn.models import alexnet, inception, lenet, resnet, tiny, trivial, vgg  # noqa: F401  (registration)
from hpcnn.models.registry import ModelSpec, get_model, list_models, register_model

__all__ = ["ModelSpec", "get_model", "list_models", "register_model"]
