"""Running a sweep: the orchestrator, the interleaved rounds and their statistics, the oracle
references, the IOS schedules, workers and where they run (local, fleet), and the paired A/B
sweep."""
