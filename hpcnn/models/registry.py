"""Model registry: models register themselves by name; lookups name the known ones."""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List

from hpcnn.models.layers import ForwardFn


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A registered model.

    Attributes:
      name: registry key, as given to ``--model``.
      forward: ``forward(net, images, num_classes) -> logits``.
      image_size: height and width of the input images.
      learning_rate: default initial learning rate (tf_cnn_benchmarks' value).
      has_batch_norm: whether the model normalises with (fused) batch norm.
    """

    name: str
    forward: Callable
    image_size: int
    learning_rate: float = 0.005
    has_batch_norm: bool = False


_REGISTRY: Dict[str, ModelSpec] = {}


def register_model(name: str, image_size: int, **kwargs) -> Callable[[ForwardFn], ForwardFn]:
    """Decorator registering ``forward`` under ``name``; a duplicate name raises."""

    def wrap(forward):
        if name in _REGISTRY:
            raise ValueError(f"Model {name!r} is already registered")
        _REGISTRY[name] = ModelSpec(name=name, forward=forward, image_size=image_size, **kwargs)
        return forward

    return wrap


def get_model(name: str) -> ModelSpec:
    """Returns the ModelSpec for ``name``; raises ValueError naming the known models."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"Unknown model {name!r}; known models: {', '.join(list_models())}") from None


def list_models() -> List[str]:
    """Names of every registered model, sorted."""
    return sorted(_REGISTRY)
