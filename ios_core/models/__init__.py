"""The model zoo: ``names()`` and ``get(name, **options)``."""

from ios_core.models import (  # noqa: F401  (registers the builders)
    alexnet,
    inception_v3,
    nasnet,
    randwire,
    resnet,
    sample,
    squeezenet,
    vgg,
)
from ios_core.models.registry import UnknownModel, describe, get, names, register

__all__ = ["UnknownModel", "describe", "get", "names", "register"]
