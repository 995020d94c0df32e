"""The refusal every importer raises: one line, naming what the IR cannot represent."""

from ios_core.ir.errors import GraphError


class UnsupportedModel(GraphError):
    """A model the IR cannot represent (an operator, an attribute, a structure). The message
    is one line; the CLI prints it and exits with code 2."""
