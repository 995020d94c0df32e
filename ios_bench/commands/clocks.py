"""ios-bench clocks status|reset"""

from __future__ import annotations

from pathlib import Path

import click


@click.group("clocks")
def command():
    """Clock locking state: what a sweep with --lock-clocks changed and has not restored yet."""


def _state_path(run: str | None) -> Path:
    from ios_bench.errors import InputError
    from ios_bench.machine.clocks import STATE_FILE, machine_state_path

    if run is None:
        return machine_state_path()
    folder = Path(run)
    if not folder.is_dir():
        raise InputError(f"{run}: not a run folder")
    return folder / STATE_FILE


@command.command("reset")
@click.argument("run", required=False)
def reset(run):
    """Restore the clock settings a sweep saved before locking them (after a SIGKILL, or when its
    own restore failed): from RUN/clocks.json, or by default from the machine-wide saved state.
    Refused while a sweep holds the clocks locked."""
    from ios_bench.errors import InputError
    from ios_bench.machine.clocks import machine_lock_path, reset_from
    from ios_bench.running.locks import Busy, FileLock

    path = _state_path(run)
    try:
        lock = FileLock(machine_lock_path(), "ios-bench clocks reset").acquire()
    except Busy as e:
        raise InputError(f"a running sweep holds the clocks locked; it restores them itself ({e})") from None
    try:
        if not path.exists():
            click.echo(f"nothing to restore ({path} does not exist)")
            return
        done, problems = reset_from(path)
        if problems:
            raise InputError(f"could not restore every clock setting: {'; '.join(problems)} (still saved in {path})")
        click.echo(f"restored {done} clock setting(s) saved in {path}")
        if run is not None:  # the machine-wide copy describes the same changes
            from ios_bench.machine.clocks import machine_state_path

            machine_state_path().unlink(missing_ok=True)
    finally:
        lock.release()


@command.command("status")
@click.argument("run", required=False)
def status(run):
    """Print what is saved for restoring (nothing when the clocks are as they were)."""
    import json

    from ios_bench.machine.clocks import read_state

    path = _state_path(run)
    state = read_state(path)
    click.echo(json.dumps({"state_file": str(path), "saved": state}, indent=1))
