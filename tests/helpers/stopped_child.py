"""A custom loop with PerfMonitor, 20 ms steps, that its parent stops (SIGSTOP) and
continues (SIGCONT) mid-run, as Ctrl-Z and fg do. Args: LOGDIR STEPS."""

import sys
import time

from tf_mobileperf import PerfMonitor

from helpers.training import constant_sensor

with PerfMonitor(sys.argv[1], idle_s=0, sensors=[constant_sensor()], warmup_steps=1, batch_size=4) as perf:
    print("STARTED", flush=True)
    for _ in range(int(sys.argv[2])):
        with perf.step():
            time.sleep(0.02)
print("DONE", flush=True)
