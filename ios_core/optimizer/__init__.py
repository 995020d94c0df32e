"""Schedules for IOS graphs: sequential, greedy, and the IOS dynamic program (merge / parallel / both).

    from ios_core.optimizer import optimize
    from ios_core.cost import SyntheticCostModel
    scheduled = optimize(graph, "both", SyntheticCostModel(), batch_size=1)
    print(scheduled.optimize_stats.summary())
"""

from .merge import can_merge, merge_convs, merge_offsets
from .optimize import (
    DEFAULT_MAX_PART_SIZE,
    STRATEGIES,
    OptimizeStats,
    StageCoster,
    copy_graph,
    optimize,
    schedule_cost,
)
from .stage import Stage

__all__ = ["DEFAULT_MAX_PART_SIZE", "STRATEGIES", "OptimizeStats", "Stage", "StageCoster", "can_merge", "copy_graph",
           "merge_convs", "merge_offsets", "optimize", "schedule_cost"]
