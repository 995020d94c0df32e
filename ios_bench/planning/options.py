"""Bounded option types for the CLI: numbers that are finite and in range, thread budgets that
fit the cores this process may run on. A bad value is refused before any work starts."""

from __future__ import annotations

import math

import click

# Longest timeout accepted anywhere (a week): beyond it a number is a typo, not a plan.
MAX_SECONDS = 7 * 24 * 3600.0
MAX_SEED = 2**32 - 1


class FiniteFloat(click.FloatRange):
    """A float in [min, max] that is not NaN or infinite (click's FloatRange lets NaN through)."""

    name = "finite float"

    def convert(self, value, param, ctx):
        rv = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(rv, param, ctx)


class Threads(click.IntRange):
    """A thread budget from 1 to the number of cores in this process's CPU affinity mask."""

    name = "threads"

    def __init__(self):
        super().__init__(min=1)

    def convert(self, value, param, ctx):
        rv = super().convert(value, param, ctx)
        problem = threads_problem(rv)
        if problem:
            self.fail(problem, param, ctx)
        return rv


def threads_problem(threads: int) -> str | None:
    """Why ``threads`` is more than this process may use, or None."""
    from ios_core.measurement.threads import usable_cores

    cores = usable_cores()
    if threads > cores:
        return (f"{threads} threads, but this process may use only {cores} core{'s' * (cores > 1)} "
                "(its CPU affinity mask)")
    return None


def check_threads(threads: int, option: str) -> None:
    from ios_bench.errors import InputError

    problem = threads_problem(threads)
    if problem:
        raise InputError(f"{option}: {problem}")


SEED = click.IntRange(0, MAX_SEED)


def finite_json(text: str):
    """``json.loads`` that refuses NaN and Infinity (for KEY=VALUE options)."""
    import json

    def reject(name):
        raise ValueError(f"{name} is not a finite number")

    return json.loads(text, parse_constant=reject)
