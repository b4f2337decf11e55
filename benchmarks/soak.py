"""Memory of a long measurement: the sampler child and the training process.

Runs a PerfMonitor with this machine's sensors plus six synthetic rails at
5 ms, and 20 ms steps (sleeps: the training itself would only add noise to
the memory figures), for ``--minutes``. Every 30 s it records the sampler
child's RSS and PSS and the training process's RSS, and prints how much each
grew from the first minute to the end. (The child's USS is no measure of
its own memory: it is forked, so every page the parent writes to after the
fork becomes unique to the child.) Writes benchmarks/results/soak.json.

    python benchmarks/soak.py [--minutes 10]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import psutil

from tf_mobileperf import PerfMonitor
from tf_mobileperf.sensors import SyntheticSensor, detect

from _results import save  # noqa: E402

RAILS = ["VDD_IN", "VDD_SYS_CPU", "VDD_SYS_GPU", "VDD_SYS_SOC", "VDD_SYS_DDR", "VDD_4V0_WIFI"]
MIB = 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    args = parser.parse_args()
    sensors = detect() + [SyntheticSensor(power_w={r: (lambda t: 1.0) for r in RAILS})]
    me = psutil.Process()
    points = []
    with PerfMonitor(tempfile.mkdtemp(), sensors=sensors, sample_period_ms=5.0) as perf:
        child = psutil.Process(perf.sampler.pid)
        start = time.monotonic()
        next_point = start
        while (elapsed := time.monotonic() - start) < 60 * args.minutes:
            with perf.step():
                time.sleep(0.02)
            if time.monotonic() >= next_point:
                next_point += 30
                full = child.memory_full_info()
                points.append(
                    {
                        "minute": elapsed / 60,
                        "steps": perf.next_step,
                        "sampler_rss_mib": full.rss / MIB,
                        "sampler_pss_mib": full.pss / MIB,
                        "trainer_rss_mib": me.memory_info().rss / MIB,
                        "buffered_rows": perf.collector.held.rows,
                    }
                )
                print(
                    " ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in points[-1].items()),
                    flush=True,
                )
    report = perf.report.to_dict()["sampling"]
    first = next(p for p in points if p["minute"] >= 1.0) if args.minutes > 1.5 else points[0]
    last = points[-1]
    growth = {k: last[k] - first[k] for k in ("sampler_rss_mib", "sampler_pss_mib", "trainer_rss_mib")}
    print(
        f"after {last['minute']:.1f} min, {last['steps']} steps, {report['samples']} samples at "
        f"{report['achieved_hz']:.1f} Hz: sampler RSS {last['sampler_rss_mib']:.1f} MiB "
        f"(+{growth['sampler_rss_mib']:.2f} since minute {first['minute']:.1f}), trainer RSS "
        f"{last['trainer_rss_mib']:.1f} MiB (+{growth['trainer_rss_mib']:.2f})"
    )
    save(
        "soak",
        {
            "minutes": args.minutes,
            "points": points,
            "growth_mib": growth,
            "samples": report["samples"],
            "achieved_hz": report["achieved_hz"],
            "dropped": report["dropped"],
        },
    )


if __name__ == "__main__":
    main()
