"""Importers into the IOS IR. ``ios_core.frontend.onnx.load(path_or_model) -> Graph``."""

from ios_core.frontend.errors import UnsupportedModel

__all__ = ["UnsupportedModel"]
