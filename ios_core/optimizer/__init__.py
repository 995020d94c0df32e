"""Schedules for IOS graphs: sequential, greedy, and the IOS dynamic program (merge / parallel / both).

    from ios_core.optimizer import schedule
    from ios_core.cost import SyntheticCostModel
    result = schedule(graph, "both", SyntheticCostModel(), batch_size=1)
    result.graph          # a new graph carrying its stages (what ``optimize`` returns)
    result.schedule       # Schedule: per block, Stage(kind, groups of nodes)
    print(result.stats.summary())
"""

from ios_core.optimizer.merge import can_merge, merge_convs, merge_offsets
from ios_core.optimizer.optimize import (
    DEFAULT_MAX_PART_SIZE,
    STRATEGIES,
    OptimizeResult,
    OptimizeStats,
    StageCoster,
    copy_graph,
    graph_states,
    optimize,
    schedule,
    schedule_cost,
)
from ios_core.optimizer.stage import Schedule, Stage

__all__ = ["DEFAULT_MAX_PART_SIZE", "STRATEGIES", "OptimizeResult", "OptimizeStats", "Schedule", "Stage",
           "StageCoster", "can_merge", "copy_graph", "graph_states", "merge_convs", "merge_offsets", "optimize",
           "schedule", "schedule_cost"]
