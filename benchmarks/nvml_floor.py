"""The least a sampler can spend on NVML, the floor ``nvml_cost.py`` holds the sampler's NVML part to.

One thread, nothing else: it wakes on the energy counter's grid (the read
period the sampler chose), reads every GPU's counter there, and reads each
other value at those wake-ups when it is due, so that it adds no wake-up of
its own (in the sampler they ride on the 5 ms loop's). No rows, no ring, no
error handling. It runs ``SECONDS`` and prints the reads it made as JSON.

    python benchmarks/nvml_floor.py LIBRARY SECONDS READS

``LIBRARY`` is the NVML module's import name; ``READS`` is JSON, GPU index ->
{query key (``tf_mobileperf.sensors.nvml.queries.BY_KEY``) -> read period, s}.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
import time

from tf_mobileperf.sensors.nvml.queries import BY_KEY


def main(argv: list[str]) -> None:
    library, seconds, reads = argv[0], float(argv[1]), json.loads(argv[2])
    nvml = importlib.import_module(library)
    nvml.nvmlInit()
    due = [
        (BY_KEY[key], nvml.nvmlDeviceGetHandleByIndex(int(gpu)), period)
        for gpu, periods in reads.items()
        for key, period in periods.items()
    ]
    grid = min(period for query, _, period in due if query.key == "energy")
    last = [-math.inf] * len(due)
    origin, tick, count = time.monotonic(), 0, 0
    while (now := time.monotonic()) < origin + seconds:
        for k, (query, handle, period) in enumerate(due):
            if now - last[k] >= period - grid / 2:
                query.read(nvml, handle)
                last[k], count = now, count + 1
        tick = max(tick + 1, math.floor((time.monotonic() - origin) / grid) + 1)
        time.sleep(max(0.0, origin + tick * grid - time.monotonic()))
    print(json.dumps({"reads": count}))


if __name__ == "__main__":
    main(sys.argv[1:])
