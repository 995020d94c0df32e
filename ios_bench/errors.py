"""Errors that mean *bad input*: the CLI prints them as one line and exits with code 2."""


class InputError(Exception):
    pass


def input_error_types() -> tuple[type[BaseException], ...]:
    """Exception types that the CLI reports as one-line input errors (exit 2)."""
    from adapters import UnknownFramework
    from ios_core.ir import GraphError
    from ios_core.models import UnknownModel

    return (InputError, GraphError, UnknownModel, UnknownFramework)
