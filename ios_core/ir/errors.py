"""Errors raised by the IR."""


class GraphError(ValueError):
    """A malformed graph: the message names the offending node."""
