"""The model zoo: ``names()`` and ``get(name, **options)``."""

from ios_core.models import (  # noqa: F401  (registers the builders)
    alexnet,
    convnext,
    inception_v3,
    nasnet,
    randwire,
    resnet,
    sample,
    squeezenet,
    vgg,
    vit,
)
from ios_core.models.registry import UnknownModel, default_names, describe, get, names, register

__all__ = ["UnknownModel", "default_names", "describe", "get", "names", "register"]
