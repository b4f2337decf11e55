"""What one sampler tick costs, against the floor a minimal C loop sets, in one interleaved run.

Variants, at each period, round after round in rotating order: ``floor``
(``floor.c``, built here with the system compiler: an absolute
CLOCK_MONOTONIC grid and the reads of ``fake``, each file with ``pread`` at
its sensor's own period); ``fake`` (the ``Sampler``, mode="process", with its
C tick loop, on six INA3221 hwmon rails of a fake sysfs tree, two files each
as with JetPack 5-7, plus ``CpuSensor`` and ``MemorySensor`` on the real
/proc); ``fake_python`` (the same with the Python tick loop,
MOBILEPERF_NATIVE=0); ``own`` (the ``Sampler`` on ``detect()``) and ``own_floor`` (``floor.c`` doing
``own``'s reads at their rates, the floor ``own`` is held to). For each: the sampling process's CPU
per second of wall time (all threads, /proc/<pid>/task/*/schedstat;
utime+stime too), wake-ups per second (voluntary context switches), achieved
rate and p99 interval error. Then ``perf_counter_ns`` around each step of
the Python tick loop, in this process. Prints a table with CPU ratios to the floor
and writes benchmarks/results/sampler_cost.json (--fifo: sampler_cost_fifo.json).

    python benchmarks/sampler_cost.py [--seconds 5] [--rounds 3] [--periods 5,1] [--fifo]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tf_mobileperf.sampling.loop import SamplingLoop
from tf_mobileperf.sampling.offload import read_sensor
from tf_mobileperf.sampling.ring import EPOCH, SharedRing
from tf_mobileperf.sampling.sampler import Sampler
from tf_mobileperf.sampling.schedule import every_ticks, grid_periods, plan
from tf_mobileperf.sensors import detect
from tf_mobileperf.sensors.base import Sensor
from tf_mobileperf.sensors.ina3221 import Ina3221HwmonSensor
from tf_mobileperf.sensors.procfs import CpuSensor, MemorySensor

from _results import save  # noqa: E402

FLOOR_SOURCE = Path(__file__).with_name("floor.c")
#: Six rails on two INA3221s, as JetPack 5-7 names them in hwmon (TX2's rails, new driver).
RAILS = {
    "1-0040/hwmon/hwmon1": ["VDD_IN", "VDD_SYS_GPU", "VDD_SYS_CPU"],
    "1-0041/hwmon/hwmon2": ["VDD_SYS_SOC", "VDD_SYS_DDR", "VDD_4V0_WIFI"],
}
VARIANTS = ("floor", "fake", "fake_python", "own_floor", "own")
#: The floor each variant is held to (``cpu_ratio_to_floor``): the C loop doing the same reads.
FLOOR_OF = {"fake": "floor", "fake_python": "floor", "floor": "floor", "own": "own_floor", "own_floor": "own_floor"}


def fake_rails(root: Path) -> Path:
    """Six hwmon ina3221 rails under ``root`` (5 V, 100*k mA)."""
    for device, labels in RAILS.items():
        base = root / "sys/bus/i2c/drivers/ina3221" / device
        base.mkdir(parents=True)
        for k, label in enumerate(labels, start=1):
            (base / f"in{k}_label").write_text(label + "\n")
            (base / f"in{k}_input").write_text("5000\n")
            (base / f"curr{k}_input").write_text(f"{100 * k}\n")
    return root


def sensor_files(sensor: Sensor) -> list[str]:
    """The files a sensor reads, from its channels' sources ("a * b", "/proc/meminfo MemTotal-...")."""
    return list(dict.fromkeys(p.split()[0] for c in sensor.channels for p in c.source.split(" * ")))


def floor_specs(sensors: list[Sensor], period_s: float) -> list[str]:
    """The C loop's EVERY:KIND:PATH arguments: every file the sensors read, on the ticks the sampler reads it
    (``schedule.plan``: a slower sensor's reads on the fastest one's wake-ups)."""
    every, _ = plan(grid_periods(sensors), period_s)
    return [
        f"{every[i]}:{'sum' if path.startswith('/proc/') else 'num'}:{path}"
        for i, sensor in enumerate(sensors)
        for path in sensor_files(sensor)
    ]


def build_floor(workdir: Path) -> tuple[Path | None, str]:
    """Compiles floor.c with the system compiler; (None, why) without one."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None, "no C compiler (cc, gcc) on PATH: floor skipped"
    binary = workdir / "floor"
    done = subprocess.run([compiler, "-O2", "-o", str(binary), str(FLOOR_SOURCE)], capture_output=True, text=True)
    if done.returncode != 0:
        return None, f"{compiler} failed: {done.stderr.strip()[:300]}"
    return binary, compiler


def snapshot(pid: int) -> dict:
    """CPU seconds (schedstat, and utime+stime) and voluntary context switches of all of ``pid``'s threads."""
    run_ns = switches = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            run_ns += int((task / "schedstat").read_text().split()[0])
            status = (task / "status").read_text()
        except (OSError, IndexError, ValueError):
            continue  # a thread that just ended
        switches += int(status.split("voluntary_ctxt_switches:")[1].split()[0])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    return {
        "t": time.monotonic(),
        "run_s": run_ns * 1e-9,
        "ticks_s": ticks / os.sysconf("SC_CLK_TCK"),
        "wakeups": switches,
    }


def window(pid: int, warmup_s: float, seconds: float) -> tuple[dict, dict]:
    """Snapshots of ``pid`` after ``warmup_s`` and ``seconds`` later."""
    time.sleep(warmup_s)
    first = snapshot(pid)
    time.sleep(seconds)
    return first, snapshot(pid)


def cpu_figures(first: dict, last: dict) -> dict:
    """The window's length, CPU share of a core (schedstat, and utime+stime) and wake-ups per second, from two
    ``snapshot``s."""
    wall = last["t"] - first["t"]
    return {
        "wall_s": wall,
        "cpu_pct": 100.0 * (last["run_s"] - first["run_s"]) / wall,
        "cpu_pct_utime_stime": 100.0 * (last["ticks_s"] - first["ticks_s"]) / wall,
        "wakeups_per_s": (last["wakeups"] - first["wakeups"]) / wall,
    }


def figures(first: dict, last: dict, t: np.ndarray, period_s: float) -> dict:
    """``cpu_figures``, and the rate and interval error of the rows ``t`` inside the window."""
    t = t[(t >= first["t"]) & (t <= last["t"])]
    error_ms = np.abs(np.diff(t) - period_s) * 1e3
    return cpu_figures(first, last) | {
        "rows": int(len(t)),
        "achieved_hz": (len(t) - 1) / (t[-1] - t[0]) if len(t) > 1 else float("nan"),
        "err_p99_ms": float(np.percentile(error_ms, 99)) if len(error_ms) else float("nan"),
        "cpu_us_per_row": 1e6 * (last["run_s"] - first["run_s"]) / max(1, len(t)),
    }


def run_floor(
    binary: Path, sensors: list[Sensor], period_s: float, warmup_s: float, seconds: float, fifo: bool
) -> dict:
    """The floor loop doing ``sensors``' reads on a ``period_s`` grid; its rows' intervals against its wake-up
    stride (``schedule.plan``), as the sampler's rows are held to its row period."""
    _, stride = plan(grid_periods(sensors), period_s)
    with tempfile.NamedTemporaryFile(suffix=".f64") as times:
        args = [str(binary), str(int(period_s * 1e9)), str(warmup_s + seconds + 0.5), times.name, str(int(fifo))]
        child = subprocess.Popen(args + floor_specs(sensors, period_s), stdout=subprocess.PIPE, text=True)
        first, last = window(child.pid, warmup_s, seconds)
        out, _ = child.communicate(timeout=60)
        t = np.fromfile(times.name, np.float64)
    result = figures(first, last, t, period_s * stride)
    report = json.loads(out)
    result["work_us_per_tick"] = report["work_ns"] / report["rows"] / 1e3
    return result


def run_sampler(
    sensors: list[Sensor], period_s: float, warmup_s: float, seconds: float, fifo: bool, python: bool = False
) -> dict:
    sampler = Sampler(sensors, period_s, mode="process", realtime=fifo)
    if python:
        os.environ["MOBILEPERF_NATIVE"] = "0"  # read by the child when it starts
    sampler.start()
    os.environ.pop("MOBILEPERF_NATIVE", None)
    try:
        sampler.wait_for_first_row(5.0)
        first, last = window(sampler.pid, warmup_s, seconds)
        rows = sampler.drain()
    finally:
        sampler.stop()
    grid_t = rows.t if rows.on_grid is None else rows.t[rows.on_grid]  # not the rows of sensors in their own thread
    return figures(first, last, grid_t, sampler.row_period_s) | {
        "realtime_granted": sampler.realtime_granted,
        "errors": sampler.errors(),
    }


def breakdown(sensors: list[Sensor], period_s: float, ticks: int) -> dict:
    """Microseconds per tick of each step of the Python tick loop, run back to back (no sleep) in this process.

    "inline" is a due sensor's whole step as the forked child runs it (arming
    SIGALRM, the lock, read, store); "read", "store" and "pread only" (the
    system calls of its files alone) split it, outside the loop's total."""
    shared = SharedRing(1 << 12, 1 + sum(len(s.channels) for s in sensors), len(sensors))
    loop = SamplingLoop(sensors, period_s, shared, shared.header[EPOCH], parent=None)
    loop.alarm = True
    every = [every_ticks(s.min_period_s, period_s) for s in sensors]
    steps = [
        "alive",
        "row_reset",
        *(f"{step} {s.name}" for step in ("inline", "read", "store", "pread only") for s in sensors),
        "publish",
    ]
    n, ns = len(sensors), np.zeros((ticks, len(steps)), np.int64)
    fds = [[os.open(path, os.O_RDONLY) for path in sensor_files(s)] for s in sensors]
    clock = time.perf_counter_ns
    previous = signal.signal(signal.SIGALRM, lambda *_: None)
    for tick in range(ticks):
        marks = [clock(), loop.alive(), clock()]
        row = loop._slot()
        row[:] = np.nan
        row[0] = time.monotonic()
        ns[tick, :2] = marks[2] - marks[0], clock() - marks[2]
        for i, sensor in enumerate(sensors):
            if tick % every[i]:
                continue
            t0 = clock()
            loop._read_inline(i, loop.leader, row)
            t1 = clock()
            values = read_sensor(sensor)
            t2 = clock()
            loop._store(i, values, row)
            t3 = clock()
            for fd in fds[i]:
                os.pread(fd, 1 << 16, 0)
            ns[tick, 2 + i :: n][:4] = t1 - t0, t2 - t1, t3 - t2, clock() - t3
        t0 = clock()
        loop._publish()
        ns[tick, -1] = clock() - t0
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)
    for fd in (fd for group in fds for fd in group):
        os.close(fd)
    in_loop = ns[:, [0, 1, *range(2, 2 + n), -1]].sum(axis=1)
    return {
        "ticks": ticks,
        "every_ticks": dict(zip([s.name for s in sensors], every)),
        "us_per_tick_mean": dict(zip(steps, (ns.mean(axis=0) / 1e3).tolist())),
        "us_per_call_median": {
            step: float(np.median(col[col > 0]) / 1e3) if (col > 0).any() else 0.0 for step, col in zip(steps, ns.T)
        },
        "total_us_per_tick_mean": float(in_loop.mean() / 1e3),
    }


def one_round(variants: dict, binary: Path | None, args: argparse.Namespace, shift: int) -> list[dict]:
    """Every (variant, period) once; the order of the variants rotates by ``shift``."""
    results = []
    order = VARIANTS[shift % len(VARIANTS) :] + VARIANTS[: shift % len(VARIANTS)]
    for period_ms in args.periods:
        period_s = period_ms / 1e3
        for name in (n for n in order if n not in FLOOR_OF.values() or binary is not None):
            sensors = variants["own" if name.startswith("own") else "fake"]
            if name in FLOOR_OF.values():
                result = run_floor(binary, sensors, period_s, args.warmup, args.seconds, args.fifo)
            else:
                result = run_sampler(sensors, period_s, args.warmup, args.seconds, args.fifo, name == "fake_python")
            due_per_s = 1.0 / (
                period_s * min(every_ticks(s.min_period_s, period_s) for s in sensors)
            )  # the fastest sensor's rate
            results.append({"variant": name, "period_ms": period_ms, "due_per_s": due_per_s} | result)
            print(
                f"  {name:<5} {period_ms:g} ms: {result['cpu_pct']:.2f}% cpu, "
                f"{result['wakeups_per_s']:.0f} wake-ups/s, "
                f"{result['achieved_hz']:.1f} Hz, p99 {result['err_p99_ms']:.3f} ms",
                flush=True,
            )
    return results


KEYS = ("cpu_pct", "cpu_pct_utime_stime", "wakeups_per_s", "due_per_s", "achieved_hz", "err_p99_ms", "cpu_us_per_row")


def summarize(results: list[dict], periods: list[float], breakdowns: dict) -> list[dict]:
    """Median over rounds of each figure per (variant, period), the CPU ratio to its floor (``FLOOR_OF``), and
    the CPU per tick outside the loop's work (the wake-up, the sleep, the rest): a floor's own count of its
    work, the sampler's from the in-process breakdown."""
    summary = []
    for period_ms in periods:
        for name in VARIANTS:
            floor = [r["cpu_pct"] for r in results if r["variant"] == FLOOR_OF[name] and r["period_ms"] == period_ms]
            floor_cpu = float(np.median(floor)) if floor else None
            runs = [r for r in results if r["variant"] == name and r["period_ms"] == period_ms]
            if runs:
                row = {"variant": name, "period_ms": period_ms, "rounds": len(runs)}
                row |= {key: float(np.median([r[key] for r in runs])) for key in KEYS}
                row["cpu_pct_range"] = [min(r["cpu_pct"] for r in runs), max(r["cpu_pct"] for r in runs)]
                row["cpu_ratio_to_floor"] = row["cpu_pct"] / floor_cpu if floor_cpu else None
                if name in FLOOR_OF.values():
                    row["loop_us_per_tick"] = float(np.median([r["work_us_per_tick"] for r in runs]))
                elif name == "fake_python":  # the C loop's own work is not timed apart from its wake-up
                    row["loop_us_per_tick"] = breakdowns[f"fake at {period_ms:g} ms"]["total_us_per_tick_mean"]
                else:
                    row["loop_us_per_tick"] = None
                row["outside_loop_us_per_tick"] = (
                    row["cpu_us_per_row"] - row["loop_us_per_tick"] if row["loop_us_per_tick"] is not None else None
                )
                summary.append(row)
    return summary


def _or_dash(value: float | None) -> str:
    return f"{value:>8.1f}" if value is not None else f"{'-':>8}"


def table_lines(summary: list[dict]) -> list[str]:
    """The table of ``summary`` (a results file's), as printed and as docs/benchmarks.md quotes it."""
    lines = [
        f"{'variant':<9} {'period':>6} {'cpu %':>7} {'range':>13} {'x floor':>8} {'us/row':>7} {'loop us':>8} "
        f"{'rest us':>8} {'wake/s':>7} {'due/s':>6} {'Hz':>7} {'p99 ms':>7}"
    ]
    for r in summary:
        ratio = f"{r['cpu_ratio_to_floor']:.2f}" if r["cpu_ratio_to_floor"] else "-"
        span = f"{r['cpu_pct_range'][0]:.2f}-{r['cpu_pct_range'][1]:.2f}"
        lines.append(
            f"{r['variant']:<9} {r['period_ms']:>4g}ms {r['cpu_pct']:>7.2f} {span:>13} {ratio:>8} "
            f"{r['cpu_us_per_row']:>7.1f} {_or_dash(r['loop_us_per_tick'])} {_or_dash(r['outside_loop_us_per_tick'])} "
            f"{r['wakeups_per_s']:>7.0f} {r['due_per_s']:>6.0f} {r['achieved_hz']:>7.1f} {r['err_p99_ms']:>7.3f}"
        )
    return lines


def print_table(summary: list[dict], breakdowns: dict) -> None:
    print("\n" + "\n".join(table_lines(summary)))
    for key, b in breakdowns.items():
        print(f"\nper-tick breakdown, {key} ({b['ticks']} ticks in-process; mean us/tick | median us/call):")
        for step, us in b["us_per_tick_mean"].items():
            print(f"  {step:<34} {us:8.2f} | {b['us_per_call_median'][step]:8.2f}")
        print(f"  {'total':<34} {b['total_us_per_tick_mean']:8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured window of each run")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds before the window")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--periods", type=lambda s: [float(p) for p in s.split(",")], default=[5.0, 1.0])
    parser.add_argument("--ticks", type=int, default=4000, help="ticks of the in-process breakdown")
    parser.add_argument("--fifo", action="store_true", help="SCHED_FIFO for the floor and the sampler")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        binary, compiler = build_floor(Path(tmp))
        print(f"floor: {compiler}", flush=True)
        variants = {"fake": [Ina3221HwmonSensor(fake_rails(Path(tmp))), CpuSensor(), MemorySensor()], "own": detect()}
        results = []
        for shift in range(args.rounds):
            print(f"round {shift + 1}/{args.rounds}", flush=True)
            results += one_round(variants, binary, args, shift)
        breakdowns = {
            f"{name} at {p:g} ms": breakdown(variants[name], p / 1e3, args.ticks)
            for name in ("fake",)
            for p in args.periods
        }
        specs = {f"{n} at {p:g} ms": floor_specs(variants[n], p / 1e3) for n in ("fake", "own") for p in args.periods}
    summary = summarize(results, args.periods, breakdowns)
    print_table(summary, breakdowns)
    save(
        "sampler_cost_fifo" if args.fifo else "sampler_cost",
        {
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "cores": os.cpu_count(),
            "compiler": compiler,
            "fifo": args.fifo,
            "seconds": args.seconds,
            "warmup_s": args.warmup,
            "sensors": {name: [s.name for s in sensors] for name, sensors in variants.items()},
            "floor_files": specs,
            "summary": summary,
            "breakdown": breakdowns,
            "runs": results,
        },
    )


if __name__ == "__main__":
    main()
