"""ios-bench env"""

from __future__ import annotations

import json

import click


@click.command("env")
@click.option("--device", default="cpu", show_default=True, help="Device the frameworks' availability is checked for.")
@click.option("--no-frameworks", is_flag=True, help="Skip importing the frameworks (faster).")
def command(device, no_frameworks):
    """Print, as JSON, the environment a run records in env.json: CPU, cores, memory, OS,
    Python, package and framework versions, GPU and driver, clock settings, git commit."""
    from ios_bench.machine.clocks import ClockLock
    from ios_bench.machine.envinfo import collect

    env = collect(device, frameworks=not no_frameworks)
    env["clocks"] = "unlocked (not requested; use --lock-clocks)"
    env["clock_settings"] = ClockLock(False, [device]).snapshot()
    click.echo(json.dumps(env, indent=1, default=str))
