"""A synthetic run of steps: every kind of channel at a known level, joined over the windows a test gives."""

from __future__ import annotations

import numpy as np

from tf_mobileperf.sensors.base import Channel
from tf_mobileperf.steps.join import join
from tf_mobileperf.steps.records import GIB, StepRecord, fill_steps

from helpers import reports

CHANNELS = [
    Channel("VDD_IN", "power", "synthetic", group="total", device="board"),
    Channel("VDD_SYS_GPU", "power", "synthetic", group="gpu", device="gpu"),
    Channel("gpu0_power", "power", "synthetic", device="gpu", rail="gpu0"),
    Channel("gpu0_energy", "energy", "synthetic", device="gpu", rail="gpu0"),
    Channel("cpu_util", "util", "synthetic", group="cpu", device="cpu"),
    Channel("cpu0_util", "util", "synthetic", group="cpu", device="cpu", core=0, cluster="Denver2"),
    Channel("cpu1_util", "util", "synthetic", group="cpu", device="cpu", core=1, cluster="A57"),
    Channel("gpu_util", "util", "synthetic", group="gpu", device="gpu"),
    Channel("ram_used", "memory", "synthetic", group="mem", device="board"),
    Channel("proc_peak", "memory", "synthetic", group="mem", device="process"),
    Channel("cpu0_freq", "clock", "synthetic", device="cpu", core=0),
    Channel("soc_temp", "temperature", "synthetic", device="board"),
]
#: A constant per channel, except ram_used, which ramps: its peak is its value at the step's end.
LEVEL = {
    "VDD_IN": 6.0,
    "VDD_SYS_GPU": 2.0,
    "gpu0_power": 50.0,
    "cpu_util": 40.0,
    "cpu0_util": 30.0,
    "cpu1_util": 50.0,
    "gpu_util": 90.0,
    "proc_peak": 1.5 * GIB,
    "cpu0_freq": 2.0e9,
    "soc_temp": 45.0,
}


def steps_of(windows, idle_w=None):
    t = np.arange(0.0, 4.0, 0.005)
    columns = []
    for c in CHANNELS:
        if c.name == "gpu0_energy":
            columns.append(40.0 * t)  # a counter: 40 W
        elif c.name == "ram_used":
            columns.append(GIB * (1.0 + t))
        else:
            columns.append(np.full(len(t), LEVEL[c.name]))
    starts, ends = np.array([w[0] for w in windows]), np.array([w[1] for w in windows])
    joined = join(t, np.column_stack(columns), CHANNELS, starts, ends, period_s=0.005)
    steps = [StepRecord(step=i, start_s=s, end_s=e) for i, (s, e) in enumerate(windows)]
    fill_steps(steps, joined, CHANNELS, idle_w)
    return steps


def report_of(steps, channels=CHANNELS, batch_size=None, idle_w=None):
    return reports.report_of(steps, channels, batch_size, idle_w)


#: Idle power per rail and in total, as the session measures it before the first step; none for NVML's counter.
IDLE_W = {"VDD_IN": 2.0, "VDD_SYS_GPU": 0.5, "gpu0_energy": None, "total": 2.0}
