"""Writes load_traces.json: /proc readings (cumulative clock ticks at 100 per second, 2 CPUs) at the
two edges of ten 1-second windows 0.5 s apart, as a sweep's rounds would take them, for five
co-tenants: a one-core busy loop, one at 50 % duty (short periods: about half a core in every
window), a burst (two windows), one that comes and goes (seven windows of ten), and the busy loop with
a burst of another process on top. Each reading: ``t`` (s), ``stat`` (user, system, idle, steal
ticks) and ``procs`` ({pid: [name, ppid, utime + stime ticks]}). Deterministic (seeded)."""

import json
import random
from pathlib import Path

HZ, CPUS, WINDOW, GAP = 100, 2, 1.0, 0.5


def trace(use, seed):
    """``use(window) -> {(pid, name): ticks used in that window}``; background: sshd 1 tick a window."""
    rng = random.Random(seed)
    counters = {(1, "systemd"): 50, (700, "sshd"): 120}
    t, busy, steal, out = 100.0, 5000, 0, []
    for i in range(10):
        edges = []
        for edge in range(2):
            procs = {str(pid): [name, 1, ticks] for (pid, name), ticks in counters.items()}
            idle = int(t * HZ * CPUS) - busy - steal
            edges.append({"t": round(t, 3), "stat": [busy, 0, idle, steal], "procs": procs})
            if edge == 0:  # the window: the co-tenants' ticks, a little background
                used = {**use(i, rng), (700, "sshd"): 1}
                for key, ticks in used.items():
                    counters[key] = counters.get(key, 0) + ticks
                busy += sum(used.values()) + rng.randint(0, 2)
                t += WINDOW
        out.append(edges)
        t += GAP
    return out


CASES = {
    "steady": lambda i, rng: {(4242, "python3"): rng.randint(97, 100)},
    "duty50": lambda i, rng: {(4343, "python3"): rng.randint(46, 54)},
    "burst": lambda i, rng: {(4444, "make"): 100} if i in (3, 4) else {},
    "comes_and_goes": lambda i, rng: {(4545, "python3"): rng.randint(95, 100)} if i not in (3, 5, 8) else {},
    "steady_with_burst": lambda i, rng: {(4242, "python3"): rng.randint(97, 100),
                                          **({(4444, "make"): 100} if i == 5 else {})},
}

if __name__ == "__main__":
    data = {name: trace(use, seed) for seed, (name, use) in enumerate(CASES.items())}
    Path(__file__).with_name("load_traces.json").write_text(json.dumps(data, indent=None) + "\n")
