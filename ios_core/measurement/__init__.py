"""Measurement and the machine's state during it: the one measurement function, its statistics,
what else used the machine, the thread budget, the GPU's clock and timers."""
