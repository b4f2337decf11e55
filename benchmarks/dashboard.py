"""Latency of the dashboard's series route on 1 h of 200 Hz samples x 6 rails,
at 1000 and 4000 points, through TensorBoard's WSGI app; and the size of the
stored series per hour. Prints a table; writes benchmarks/results/dashboard.json.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from tf_mobileperf import PerfMonitor  # noqa: E402
from tf_mobileperf.sensors import SyntheticSensor  # noqa: E402

from _results import save  # noqa: E402
from test_plugin import client_for  # noqa: E402  (the same app the tests use)

RAILS = ["VDD_IN", "VDD_SYS_CPU", "VDD_SYS_GPU", "VDD_SYS_SOC", "VDD_SYS_DDR", "VDD_4V0_WIFI"]


def main() -> None:
    logdir = Path(tempfile.mkdtemp())
    sensor = SyntheticSensor(power_w={r: (lambda t: 1.0) for r in RAILS})
    with PerfMonitor(logdir, sensors=[sensor], warmup_steps=0) as perf:
        with perf.step():
            time.sleep(0.05)
    rows = 3600 * 200
    t = np.arange(rows) / 200.0
    data = np.column_stack([t] + [np.sin(t * (i + 1)) + 2 for i in range(len(RAILS))])
    samples = logdir / "train/plugins/mobileperf/samples.bin"
    data.astype("<f8").tofile(samples)
    client, _ = client_for(logdir)
    results = {"rows": rows, "rails": len(RAILS), "bytes_per_hour": samples.stat().st_size}
    print(
        f"stored series: {samples.stat().st_size / 2**20:.1f} MiB per hour ({rows} rows x {len(RAILS)} rails, float64)"
    )
    for points in (1000, 4000):
        times = []
        for _ in range(10):
            t0 = time.perf_counter()
            response = client.get(
                "/data/plugin/mobileperf/series",
                query_string={"run": "train", "channel": "VDD_SYS_GPU", "max_points": points},
            )
            times.append(time.perf_counter() - t0)
            assert response.status_code == 200, response.get_data()[:200]
        results[f"latency_ms_{points}"] = {"median": 1e3 * float(np.median(times)), "max": 1e3 * max(times)}
        median_ms, max_ms = 1e3 * np.median(times), 1e3 * max(times)
        print(f"series route, whole hour, {points} points: median {median_ms:.1f} ms, max {max_ms:.1f} ms")
    save("dashboard", results)


if __name__ == "__main__":
    main()
