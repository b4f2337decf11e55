"""A training run on the harder fake GPU (``fake_nvml_training``), simulated without sleeping: step windows
as a Keras loop makes them, and the energy counter read as the sampler reads it.

The sampler reads the counter in a thread of its own every ~30 ms (0.3 of the
100 ms update period); each call takes 3.9-4.8 ms, its value is the counter at
a random instant inside the call, and the read is stamped at the call's
middle. The thread's wake-ups jitter by a millisecond or two, as on a busy
machine.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from helpers import fake_nvml_training as fake


@dataclasses.dataclass
class Run:
    """Step windows, the GPU's schedule (busy exactly inside each step), and the counter's reads."""

    starts: np.ndarray
    ends: np.ndarray
    schedule: fake.Schedule
    t: np.ndarray  # read stamps
    counter_j: np.ndarray  # the counter read at each stamp

    def exact_j(self) -> np.ndarray:
        """Each step's exact energy."""
        return self.schedule.energy_j(self.starts, self.ends)


def steps(rng: np.random.Generator, n: int, step_s=(0.04, 0.26), gap_s=(0.0, 0.06), t0: float = 1000.0):
    """``n`` step windows of ``step_s`` seconds (uniform) with idle gaps of ``gap_s`` between them."""
    durations = rng.uniform(*step_s, n)
    gaps = rng.uniform(*gap_s, n)
    starts = t0 + np.cumsum(gaps + np.concatenate([[0.0], durations[:-1]]))
    return starts, starts + durations


def run(
    rng: np.random.Generator,
    n: int,
    read_s: float = 0.03,
    lead_s: float = 1.0,
    scale: float = 1.0,
    lag_s: float = 0.0,
    **shape,
) -> Run:
    """A run of ``n`` steps (``steps``' ``shape``) with the counter read from ``lead_s`` before the first
    step to ``lead_s`` after the last; ``scale`` as ``$FAKE_NVML_COUNTER_SCALE``; the GPU busy ``lag_s``
    after each step's window (an asynchronous device: 0 is busy exactly inside it)."""
    starts, ends = steps(rng, n, **shape)
    schedule = fake.Schedule.from_steps(starts + lag_s, np.minimum(ends + lag_s, np.append(starts[1:], np.inf)))
    reads = []
    t = starts[0] - lead_s
    while t < ends[-1] + lead_s:
        cost = rng.uniform(*fake.ENERGY_CALL_S)
        value = schedule.counter_mj(t + rng.random() * cost, scale) / 1000.0
        reads.append((t + cost / 2, value))
        t += max(read_s + rng.normal(0.0, 0.001), cost)
    stamps, values = np.array(reads).T
    return Run(starts, ends, schedule, stamps, values)
