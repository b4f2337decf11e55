"""How tests/data/old_run_v1 was made: two workers of a multi-worker run, measured by the code of
main before the report had a version (report.json and channels.json version 2, as written then), with the
synthetic sensor, a few steps each; worker-0 (the chief) combined them (combined.json and the run
``combined``). Kept for the record: rerunning it with newer code writes the newer format, not the old one.

    PYTHONPATH=.:tensorboard_plugin python tests/data/make_old_run.py tests/data/old_run_v1
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from tf_mobileperf import PerfMonitor
from tf_mobileperf.sensors import SyntheticSensor

TASKS = {"cluster": {"worker": ["localhost:1", "localhost:2"]}}


def worker(logdir: Path, index: int, watts: float) -> None:
    os.environ["TF_CONFIG"] = json.dumps(TASKS | {"task": {"type": "worker", "index": index}})
    sensor = SyntheticSensor(
        power_w={"VDD_IN": lambda t: watts},
        memory_b={"ram_used": lambda t: 2e9},
        groups={"VDD_IN": "total"},
        roles={"ram_used": {"device": "board"}},
    )
    with PerfMonitor(
        logdir, idle_s=0, sensors=[sensor], warmup_steps=1, batch_size=4, sample_period_ms=20, combine_wait_s=5
    ) as perf:
        for _ in range(4):
            with perf.step():
                time.sleep(0.03)


if __name__ == "__main__":
    out = Path(sys.argv[1])
    worker(out, 1, 3.0)
    worker(out, 0, 5.0)
