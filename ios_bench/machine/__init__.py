"""The machine's state beside every figure: its environment, clocks, utilization, system facts, GPU
paths and memory."""
