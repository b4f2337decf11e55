"""What reading NVML costs the sampler, with and without the NVML sensors, in one interleaved run.

Variants, round after round in alternating order, each a ``Sampler``
(mode="process") at 5 ms for ``--seconds``: ``procfs`` (this machine's
``CpuSensor`` and ``MemorySensor``) and ``procfs+nvml`` (the same plus
``nvml_sensors()`` on the fake H200 NVML of tests/helpers/fake_nvml_h200.py,
``--gpus`` GPUs (1 by default) whose calls cost what an H200's were measured
to cost: the energy counter a 4.3 ms driver round trip, the others
microseconds). For each: the
sampling process's CPU share of one core from /proc/<pid>/stat
(utime+stime, all its threads; schedstat too), achieved row rate and p99
interval error. The NVML part is the difference (median over rounds, and the
range of each round's own difference); the target is at most 1% of a core.
``--fake training`` reads the fake GPU under training instead. Then, in
this process, the CPU and wall time of one read of each NVML sensor and the
CPU per second that its read period implies.

The energy sensor (``own_thread``) is read in a thread of its own in the
sampler process, so its 4.3 ms calls never sit in the 5 ms loop: the row
rate and interval error of both variants show whether they do. Prints a
table and writes benchmarks/results/nvml_cost.json.

    python benchmarks/nvml_cost.py [--seconds 10] [--rounds 2] [--gpus 1] [--fake h200|training]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))  # the fake NVML, imported by name wherever the sensors are read
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))

from tf_mobileperf.sensors.base import Sensor  # noqa: E402
from tf_mobileperf.sensors.nvml import nvml_sensors  # noqa: E402
from tf_mobileperf.sensors.procfs import CpuSensor, MemorySensor  # noqa: E402

from _results import save  # noqa: E402
from sampler_cost import run_sampler  # noqa: E402

#: The fakes it can read: the H200 as measured (smooth power), and the GPU under training (jittered updates,
#: the counter's value at a random instant of its 3.9-4.8 ms call; idle here, nothing marks steps).
LIBRARIES = {"h200": "helpers.fake_nvml_h200", "training": "helpers.fake_nvml_training"}
VARIANTS = ("procfs", "procfs+nvml")
TARGET_PCT = 1.0


def read_cost(sensor: Sensor, reads: int) -> dict:
    """Median wall and CPU time of one ``read()`` here (every value due: the slowest read), and the CPU
    share of a core its read period implies."""
    walls, cpus = [], []
    for _ in range(reads):
        if hasattr(sensor, "_due"):
            sensor._due = (None, {})  # every value due
        wall0, cpu0 = time.perf_counter(), time.thread_time()
        sensor.read()
        cpus.append(time.thread_time() - cpu0)
        walls.append(time.perf_counter() - wall0)
    cpu = float(np.median(cpus))
    return {
        "sensor": sensor.name,
        "read_period_s": sensor.min_period_s,
        "wall_ms": 1e3 * float(np.median(walls)),
        "cpu_us": 1e6 * cpu,
        "cpu_pct_at_period": 100.0 * cpu / sensor.min_period_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured window of each run")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds before the window")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--period-ms", type=float, default=5.0)
    parser.add_argument("--reads", type=int, default=200, help="reads of each NVML sensor timed in-process")
    parser.add_argument("--gpus", type=int, default=1, choices=(1, 2), help="fake H200s read")
    parser.add_argument("--fake", choices=sorted(LIBRARIES), default="h200", help="which fake GPU (training: one)")
    args = parser.parse_args()
    if args.fake == "training" and args.gpus != 1:
        parser.error("the fake GPU under training has one GPU: --gpus 1")
    nvml = nvml_sensors(indices=list(range(args.gpus)), library=LIBRARIES[args.fake])
    procfs = [CpuSensor(), MemorySensor()]
    variants = {"procfs": procfs, "procfs+nvml": procfs + nvml}
    results = []
    for shift in range(args.rounds):
        order = VARIANTS[shift % 2 :] + VARIANTS[: shift % 2]
        for name in order:
            result = run_sampler(variants[name], args.period_ms / 1e3, args.warmup, args.seconds, fifo=False)
            results.append({"variant": name, "round": shift} | result)
            print(
                f"  round {shift + 1} {name:<12} {result['cpu_pct_utime_stime']:.2f}% of a core (utime+stime), "
                f"{result['cpu_pct']:.2f}% (schedstat), {result['achieved_hz']:.1f} Hz, "
                f"p99 {result['err_p99_ms']:.3f} ms, failed reads {result['errors']}",
                flush=True,
            )
    summary = {
        name: {
            key: float(np.median([r[key] for r in results if r["variant"] == name]))
            for key in ("cpu_pct_utime_stime", "cpu_pct", "achieved_hz", "err_p99_ms")
        }
        for name in VARIANTS
    }
    nvml_part = summary["procfs+nvml"]["cpu_pct_utime_stime"] - summary["procfs"]["cpu_pct_utime_stime"]
    # Each round's own difference (its two variants ran one after the other): their range is the interval.
    per_round = [
        next(r for r in results if r["round"] == k and r["variant"] == "procfs+nvml")["cpu_pct_utime_stime"]
        - next(r for r in results if r["round"] == k and r["variant"] == "procfs")["cpu_pct_utime_stime"]
        for k in range(args.rounds)
    ]
    reads = [read_cost(sensor, args.reads) for sensor in nvml]
    probed = {
        g.index: {
            key: {
                "wall_us": 1e6 * rate.wall_s,
                "cpu_us": 1e6 * rate.cpu_s,
                "change_period_s": rate.change_period_s,
                "read_period_s": g.periods[key].period_s,
                "why": g.periods[key].why,
            }
            for key, rate in g.rates.items()
        }
        for g in nvml[0].probed.gpus
    }
    for sensor in nvml:
        sensor.close()

    print(f"\n{'variant':<12} {'cpu % utime+stime':>18} {'cpu % schedstat':>16} {'Hz':>7} {'p99 ms':>7}")
    for name in VARIANTS:
        row = summary[name]
        print(
            f"{name:<12} {row['cpu_pct_utime_stime']:>18.2f} {row['cpu_pct']:>16.2f} {row['achieved_hz']:>7.1f} "
            f"{row['err_p99_ms']:>7.3f}"
        )
    verdict = "within" if nvml_part <= TARGET_PCT else "OVER"
    print(
        f"\nNVML part ({args.fake} fake): {nvml_part:.2f}% of a core, rounds {min(per_round):.2f}..{max(per_round):.2f}"
        f" ({verdict} the {TARGET_PCT:g}% target; {nvml_part / TARGET_PCT:.2f} x target)"
    )
    print("\nper read, in-process (every value due):")
    for r in reads:
        print(
            f"  {r['sensor']:<12} every {r['read_period_s'] * 1e3:6.1f} ms: {r['wall_ms']:.3f} ms wall, "
            f"{r['cpu_us']:.1f} us CPU -> {r['cpu_pct_at_period']:.3f}% of a core at that period"
        )
    print(f"\nprobed on the {args.fake} fake (GPU 0):")
    for key, figs in probed[0].items():
        change = f"{figs['change_period_s']:.3f} s" if figs["change_period_s"] else "not seen"
        print(
            f"  {key:<14} {figs['wall_us']:9.1f} us wall {figs['cpu_us']:7.1f} us CPU, changes every {change:>9}, "
            f"read every {figs['read_period_s'] * 1e3:6.1f} ms ({figs['why']})"
        )
    save(
        "nvml_cost" if args.fake == "h200" else f"nvml_cost_{args.fake}",
        {
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "fake": args.fake,
            "nvml_part_pct_per_round": per_round,
            "cores": os.cpu_count(),
            "gpus": args.gpus,
            "seconds": args.seconds,
            "warmup_s": args.warmup,
            "period_ms": args.period_ms,
            "nvml_part_pct": nvml_part,
            "target_pct": TARGET_PCT,
            "summary": summary,
            "reads": reads,
            "probed": probed,
            "runs": results,
        },
    )


if __name__ == "__main__":
    main()
