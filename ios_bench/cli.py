"""The ``ios-bench`` command line.

Subcommands live one per module in ``ios_bench/commands/``; each module defines ``command``
(a click command) and is discovered here, so adding a command touches only its own file.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import click

from ios_bench import commands as _commands_pkg
from ios_bench.errors import input_error_types
from ios_bench.reporting.escape import one_line


class _Group(click.Group):
    """Loads subcommands lazily so that ``ios-bench --help`` stays fast."""

    def _modules(self) -> dict[str, str]:
        # a module named after a Python keyword carries a trailing underscore (import_.py -> import)
        return {m.name.rstrip("_").replace("_", "-"): m.name for m in pkgutil.iter_modules(_commands_pkg.__path__)
                if not m.name.startswith("_")}

    def list_commands(self, ctx):
        return sorted(self._modules())

    def get_command(self, ctx, name):
        module = self._modules().get(name)
        if module is None:
            return None
        return importlib.import_module(f"{_commands_pkg.__name__}.{module}").command


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def cli():
    """ios-bench: benchmark CNN inference frameworks on the same networks, with IOS.

    \b
    Typical use:
      ios-bench list models              the model zoo
      ios-bench list frameworks          adapters and whether they run here
      ios-bench show inception_v3        a graph (and its schedule) as text
      ios-bench run                      the default quick CPU sweep, then its report
    """


def main(argv: list[str] | None = None) -> None:
    from ios_bench.running.sideeffects import quiet_environment
    from ios_core.measurement.threads import apply_spin_policy

    quiet_environment()  # library switches that keep a run's files out of the home folder
    try:  # the one spin/wait policy (docs/threads.md), before any framework import
        apply_spin_policy()
    except ValueError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    errors = input_error_types()
    try:
        cli.main(args=argv, prog_name="ios-bench", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as e:  # `ios-bench` alone: the help, as click shows it
        e.show()
        sys.exit(2)
    except click.UsageError as e:  # a bad option or argument: one line, like every input error
        where = f" (see: {e.ctx.command_path} --help)" if e.ctx is not None else ""
        click.echo(f"error: {one_line(e.format_message())}{where}", err=True)
        sys.exit(2)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except errors as e:
        click.echo(f"error: {one_line(e)}", err=True)
        sys.exit(2)
    except FileNotFoundError as e:
        click.echo(f"error: {one_line(e.filename or e)}: no such file", err=True)
        sys.exit(2)
    except OSError as e:  # a path the user named that the system refuses (name too long, not a folder, ...)
        where = f"{one_line(_short(e.filename))}: " if e.filename else ""
        click.echo(f"error: {where}{one_line(e.strerror or e)}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    else:
        sys.exit(0)


def _short(name, limit: int = 200) -> str:
    text = str(name)
    return text if len(text) <= limit else f"{text[:limit // 2]}...{text[-limit // 2:]}"
