"""The model zoo: ``names()`` and ``get(name, **options)``."""

from . import sample, squeezenet  # noqa: F401  (registers the builders)
from .registry import UnknownModel, describe, get, names, register

__all__ = ["UnknownModel", "describe", "get", "names", "register"]
