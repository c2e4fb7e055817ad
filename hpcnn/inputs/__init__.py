"""Input sources: each yields one (images, labels) batch per replica, on its device."""

from hpcnn.inputs.synthetic import SyntheticInput

__all__ = ["SyntheticInput"]
