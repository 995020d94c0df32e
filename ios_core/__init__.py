"""ios_core: the IOS graph IR, model zoo, oracle, scheduler and runtime."""

from ios_core.ir import Graph, GraphError

__all__ = ["Graph", "GraphError", "optimize"]


def optimize(graph, strategy, cost_model, batch_size=1, max_group_size=3, max_num_groups=8, **kwargs):
    """Schedule ``graph`` (see ``ios_core.optimizer``); returns a new graph carrying its stages."""
    from ios_core.optimizer import optimize as _optimize

    return _optimize(graph, strategy, cost_model, batch_size=batch_size, max_group_size=max_group_size,
                     max_num_groups=max_num_groups, **kwargs)
