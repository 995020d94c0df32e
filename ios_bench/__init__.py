"""ios_bench: the harness (CLI, sweeps, isolated cells, results store, reports)."""
