"""What reading NVML costs the sampler, against the least any sampler could spend on the same reads.

Variants, round after round in rotating order, each for ``--seconds``:
``procfs``, a ``Sampler`` (mode="process") at 5 ms with this machine's
``CpuSensor`` and ``MemorySensor``; ``procfs+nvml``, the same plus
``nvml_sensors()`` on a fake NVML (``--fake``: the H200 as measured,
tests/helpers/fake_nvml_h200.py, or the GPU under training) with ``--gpus``
GPUs; and ``nvml_floor`` (benchmarks/nvml_floor.py), one bare thread in a
process of its own making the same NVML calls at the read periods the
sampler chose, on the counter's wake-ups. CPU is a process's share of a core
from schedstat (nanoseconds, all its threads; utime+stime beside it, which
ticks at 10 ms and resolves 0.1% of a core in 10 s). The NVML part is each
round's ``procfs+nvml`` minus its ``procfs``; the figures are medians over
rounds with the rounds' range, and the part against the floor as a ratio.
The target is 1% of a core.

``--call`` is how the counter call's 4.3 ms (measured on an H200: wall time;
its CPU was not measured) is spent: ``sleep`` (a driver round trip, the
default) or ``cpu`` (a driver that spins). Then, in this process, the CPU
and wall time of one read of each NVML sensor. Prints a table and writes
benchmarks/results/nvml_cost[_training][_cpu_call].json.

    python benchmarks/nvml_cost.py [--seconds 10] [--rounds 5] [--gpus 1] [--fake h200|training] [--call sleep|cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))  # the fake NVML, imported by name wherever the sensors are read
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))

from tf_mobileperf.sensors.base import Sensor  # noqa: E402
from tf_mobileperf.sensors.nvml import NvmlEnergySensor, nvml_sensors  # noqa: E402
from tf_mobileperf.sensors.procfs import CpuSensor, MemorySensor  # noqa: E402

from _results import STARTED, save  # noqa: E402
from sampler_cost import cpu_figures, run_sampler, window  # noqa: E402

#: The fakes it can read: the H200 as measured (smooth power), and the GPU under training (jittered updates,
#: the counter's value at a random instant of its 3.9-4.8 ms call; idle here, nothing marks steps).
LIBRARIES = {"h200": "helpers.fake_nvml_h200", "training": "helpers.fake_nvml_training"}
VARIANTS = ("procfs", "procfs+nvml", "nvml_floor")
FLOOR = Path(__file__).with_name("nvml_floor.py")
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


def read_periods(nvml: list[Sensor]) -> dict[str, dict[str, float]]:
    """GPU index -> {query key -> the read period the sensors chose, s}: the floor's reads."""
    energy = next((sensor.min_period_s for sensor in nvml if isinstance(sensor, NvmlEnergySensor)), None)
    return {
        str(gpu.index): {key: energy if key == "energy" else gpu.periods[key].period_s for key in gpu.queries}
        for gpu in nvml[0].probed.gpus
    }


def run_floor(library: str, reads: dict, warmup_s: float, seconds: float) -> dict:
    """``nvml_floor.py`` making ``reads``: its CPU share of a core and wake-ups over the window."""
    child = subprocess.Popen(
        [sys.executable, str(FLOOR), library, str(warmup_s + seconds + 0.5), json.dumps(reads)],
        stdout=subprocess.PIPE,
        text=True,
    )
    first, last = window(child.pid, warmup_s, seconds)
    out, _ = child.communicate(timeout=60)
    return cpu_figures(first, last) | {"reads": json.loads(out)["reads"]}


def run_round(variants: dict, library: str, reads: dict, args: argparse.Namespace, shift: int) -> list[dict]:
    """Every variant once, their order rotated by ``shift``."""
    results = []
    for name in VARIANTS[shift % 3 :] + VARIANTS[: shift % 3]:
        if name == "nvml_floor":
            result = run_floor(library, reads, args.warmup, args.seconds)
        else:
            result = run_sampler(variants[name], args.period_ms / 1e3, args.warmup, args.seconds, fifo=False)
        results.append({"variant": name, "round": shift} | result)
        print(
            f"  round {shift + 1} {name:<12} {result['cpu_pct']:.3f}% of a core (schedstat), "
            f"{result['cpu_pct_utime_stime']:.2f}% (utime+stime), {result['wakeups_per_s']:.0f} wake-ups/s",
            flush=True,
        )
    return results


def nvml_part(results: list[dict], rounds: int) -> dict:
    """Per round: the NVML part (``procfs+nvml`` minus ``procfs``), the floor, and their ratio; the median of
    each over rounds, and the rounds' range."""
    pct = {(r["round"], r["variant"]): r["cpu_pct"] for r in results}
    part = [pct[k, "procfs+nvml"] - pct[k, "procfs"] for k in range(rounds)]
    floor = [pct[k, "nvml_floor"] for k in range(rounds)]
    ratio = [p / f for p, f in zip(part, floor)]
    return {
        name: {"median": float(np.median(values)), "low": float(min(values)), "high": float(max(values))}
        for name, values in (("part_pct", part), ("floor_pct", floor), ("ratio", ratio))
    } | {"part_pct_per_round": part, "floor_pct_per_round": floor}


def table_lines(runs: list[dict]) -> list[str]:
    """A table of runs' figures: the NVML part, its floor and their ratio (median over rounds, [range]).

    Args:
        runs: Results files of this benchmark, a row each, named by their commit.
    """
    lines = [
        "| commit | fake | counter call | reads every | NVML part | its floor | part / floor |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        part, ratio = run["nvml_part"], run["nvml_part"]["ratio"]
        cells = [
            f"{part[k]['median']:.2f}% [{part[k]['low']:.2f}, {part[k]['high']:.2f}]" for k in ("part_pct", "floor_pct")
        ]
        lines.append(
            f"| {run['provenance']['commit'][:7]} | {run['fake']} | {run['call']} | "
            f"{1e3 * run['energy_read_period_s']:.0f} ms | {cells[0]} | {cells[1]} | "
            f"{ratio['median']:.2f}x [{ratio['low']:.2f}, {ratio['high']:.2f}] |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured window of each run")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds before the window")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--period-ms", type=float, default=5.0)
    parser.add_argument("--reads", type=int, default=200, help="reads of each NVML sensor timed in-process")
    parser.add_argument("--gpus", type=int, default=1, choices=(1, 2), help="fake H200s read")
    parser.add_argument("--fake", choices=sorted(LIBRARIES), default="h200", help="which fake GPU (training: one)")
    parser.add_argument("--call", choices=("sleep", "cpu"), default="sleep", help="how the counter call waits")
    args = parser.parse_args()
    if args.fake == "training" and args.gpus != 1:
        parser.error("the fake GPU under training has one GPU: --gpus 1")
    os.environ["FAKE_NVML_ENERGY_CALL"] = args.call  # before the probe: it measures the call's cost
    library = LIBRARIES[args.fake]
    nvml = nvml_sensors(indices=list(range(args.gpus)), library=library)
    reads = read_periods(nvml)
    variants = {"procfs": [CpuSensor(), MemorySensor()], "procfs+nvml": [CpuSensor(), MemorySensor(), *nvml]}
    results = [r for shift in range(args.rounds) for r in run_round(variants, library, reads, args, shift)]
    measured = {
        "fake": args.fake,
        "call": args.call,
        "cores": os.cpu_count(),
        "gpus": args.gpus,
        "seconds": args.seconds,
        "warmup_s": args.warmup,
        "period_ms": args.period_ms,
        "target_pct": TARGET_PCT,
        "energy_read_period_s": reads["0"]["energy"],
        "energy_read_why": next(sensor.read_period.why for sensor in nvml if isinstance(sensor, NvmlEnergySensor)),
        "read_periods_s": reads,
        "nvml_part": nvml_part(results, args.rounds),
        "reads": [read_cost(sensor, args.reads) for sensor in nvml],
        "runs": results,
    }
    for sensor in nvml:
        sensor.close()
    print("\n" + "\n".join(table_lines([{"provenance": STARTED} | measured])))
    part = measured["nvml_part"]["part_pct"]["median"]
    print(f"\nthe NVML part is {part / TARGET_PCT:.2f}x the {TARGET_PCT:g}% target")
    for r in measured["reads"]:
        print(
            f"  {r['sensor']:<12} every {r['read_period_s'] * 1e3:6.1f} ms: {r['wall_ms']:.3f} ms wall, "
            f"{r['cpu_us']:.1f} us CPU a read in-process -> {r['cpu_pct_at_period']:.3f}% of a core at that period"
        )
    suffix = ("" if args.fake == "h200" else f"_{args.fake}") + ("" if args.call == "sleep" else "_cpu_call")
    save(f"nvml_cost{suffix}", measured)


if __name__ == "__main__":
    main()
