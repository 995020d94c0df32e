"""A cell's record as the sweep builds it (the fields are declared once in :mod:`ios_bench.records.record`):
one round as kept in it, the record from its rounds (the figure over the undisturbed ones, every
round kept), the record of a cell whose schedule is another's, and the IOS cells' figures against
the sequential schedule."""

from __future__ import annotations

from ios_bench.planning.cells import Cell, build_options, label, node_env_path, schedule_key
from ios_bench.planning.plan import DEFAULT_IOS_PROVIDER, Plan, optimized_for
from ios_bench.records.record import SCHEMA, CellResult, RoundResult, now
from ios_bench.running.executors import Task
from ios_bench.running.schedules import schedule_fields
from ios_bench.scenarios import cells as scenario_cells


def round_record(task: Task, res: dict, index: int, position: int, started: str | None, pass_index: int) -> dict:
    """One round as kept in the record (:meth:`ios_bench.records.record.RoundResult.from_worker`)."""
    return RoundResult.from_worker(res, index=index, position=position, started=started, pass_index=pass_index,
                                   log=task.log, util_trace=task.spec.get("util_path"))


class CellRecords:
    """Builds the records of one sweep's cells. ``local``: the tasks ran on this machine (its
    environment is env.json, not a node's); ``attempts``: {cell key: the attempts stored so far}."""

    def __init__(self, plan: Plan, local: bool, attempts: dict[str, int] | None = None):
        self.plan = plan
        self.local = local
        self.attempts = attempts or {}

    def base(self, cell: Cell) -> dict:
        """What every record of the cell says, measured or not."""
        plan = self.plan
        return {"schema": SCHEMA, "cell": cell.key, "model": cell.model, "batch_size": cell.batch_size,
                "framework": cell.framework,
                "label": label(cell.framework, cell.precision) + (f" [{cell.side}]" if cell.side else ""),
                "precision": cell.precision,
                "kind": "ios" if cell.schedule else "framework",
                "schedule": cell.schedule, "device": cell.device, "adapter": cell.adapter,
                **({"provider": cell.provider or DEFAULT_IOS_PROVIDER} if cell.schedule else {}),
                **({"optimized_for": optimized_for(plan.ios_options, cell.batch_size, plan.threads)}
                   if cell.schedule and plan.ios_options else {}),
                "threads": plan.threads, "seed": plan.seed, "input_seed": plan.input_seed, "started": now(),
                "round_seed": plan.round_seed,
                **({"options": o} if (o := build_options(plan, cell)) else {}),
                **({"variant": cell.variant, "side": cell.side} if cell.side else {}),
                **({"attempt": self.attempts[cell.key] + 1} if cell.key in self.attempts else {}),
                **scenario_cells.record_fields(cell, plan)}

    def from_rounds(self, cell: Cell, rounds: list[dict], sched: dict | None, stopped: dict | None) -> dict:
        """A cell's record from its rounds (:meth:`ios_bench.records.record.CellResult.from_rounds`)."""
        return CellResult.from_rounds(self.base(cell), rounds, seed=self.plan.round_seed,
                                      schedule=schedule_fields(sched) if sched else None, stopped=stopped,
                                      node_env=(lambda node: "env.json") if self.local else node_env_path)

    def same_as(self, cell: Cell, canonical: dict, sched: dict) -> dict:
        """A cell whose schedule is the same as another's: that cell's measurement, said so."""
        return CellResult.same_as(self.base(cell), canonical, schedule_fields(sched))

    def unmeasured(self, cell: Cell, status: str, reason: str, **more) -> dict:
        """A cell that was never timed (skipped, failed before its rounds)."""
        return CellResult.unmeasured(self.base(cell), status, reason, **more)


def sequential_figures(records: dict[str, dict]) -> None:
    """IOS cells: ``sequential_ms`` from the sequential cell of the same provider
    (:meth:`ios_bench.records.record.CellResult.sequential_figures`)."""
    CellResult.sequential_figures(
        records, lambda rec: rec["cell"].replace(rec["framework"], schedule_key("sequential", rec["provider"])))
