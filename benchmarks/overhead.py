"""Training-step overhead of monitors, paired and interleaved in one process, with the floor loop beside.

The same model and data are trained with each variant, in a rotating order
per repeat, so drifts of a noisy machine hit all alike; each repeat's step
time of a variant is divided by that repeat's step time with no callback
(paired), and the mean ratio gets a bootstrap 95% interval over repeats.
Step time is the median interval between consecutive batch ends after 5
steps (a last callback records them), so starting and stopping a monitor
(fork, final report) is not per-step overhead; fit wall time is printed
apart. Variants:

- ``none``; ``keras_tensorboard_batch`` (``update_freq="batch"``);
  CodeCarbon's tracker around fit where codecarbon is installed;
- ``mobileperf``: our callback with this machine's sensors, the sampler's
  priority chosen by ``sampler_priority="auto"``; ``mobileperf_fifo`` and
  ``mobileperf_normal`` ask for SCHED_FIFO or the normal policy;
  ``mobileperf_no_sampler``: ``sensors="none"`` (hooks, collector, writers);
- ``rails6``: our callback on six INA3221 rails of a fake sysfs tree plus
  CPU and memory at 5 ms (what a TX2 or an Orin reads), C tick loop;
  ``rails6_python``: the same with the Python tick loop;
- ``floor6``: no callback, and ``floor.c`` (the minimal C loop of
  ``sampler_cost.py``) doing the same wake-ups and reads beside training,
  with the policy ``mobileperf`` gets.

The rails6 line also gives its overhead as a multiple of floor6's, with an
interval from the same resampled repeats. The report of each of our runs
gives the sampler's p99 interval error while training. Every callback runs
with ``idle_s=0`` (the idle baseline is not per-step work).

    python benchmarks/overhead.py [--repeats 9] [--cases 10,100] [--variants mobileperf,...] [--name overhead]

``KERAS_BACKEND`` picks the backend (the results file records it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import keras
import numpy as np

from tf_mobileperf import MobilePerfCallback
from tf_mobileperf.sampling.priority import choose
from tf_mobileperf.sensors.ina3221 import Ina3221HwmonSensor
from tf_mobileperf.sensors.procfs import CpuSensor, MemorySensor

from _results import save  # noqa: E402
from sampler_cost import build_floor, fake_rails, floor_specs  # noqa: E402

PERIOD_S = 0.005


def model_for(width: int) -> keras.Model:
    model = keras.Sequential(
        [
            keras.Input((256,)),
            keras.layers.Dense(width, activation="relu"),
            keras.layers.Dense(width, activation="relu"),
            keras.layers.Dense(1),
        ]
    )
    model.compile("adam", "mse")
    return model


@contextlib.contextmanager
def environment(**values: str):
    """``values`` in os.environ for the duration (the sampler's child reads MOBILEPERF_NATIVE when it starts)."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)


@contextlib.contextmanager
def floor_beside(binary: Path, specs: list[str], fifo: bool):
    """The floor loop running (for up to an hour) until the block ends."""
    child = subprocess.Popen(
        [str(binary), str(int(PERIOD_S * 1e9)), "3600", os.devnull, str(int(fifo)), *specs], stdout=subprocess.DEVNULL
    )
    try:
        yield
    finally:
        child.kill()
        child.wait()


def variants(tmp: Path, floor: Path | None) -> dict:
    """name -> () -> (callbacks, context around fit, logdir of our callback or None)."""
    rails = fake_rails(tmp / "rails")

    def ours(**options):
        def make():
            logdir = Path(tempfile.mkdtemp(dir=tmp))
            return [MobilePerfCallback(logdir, idle_s=0, **options)], contextlib.nullcontext(), logdir

        return make

    def six():
        return [Ina3221HwmonSensor(rails), CpuSensor(), MemorySensor()]

    out = {
        "none": lambda: ([], contextlib.nullcontext(), None),
        "mobileperf": ours(),
        "mobileperf_fifo": ours(sampler_priority="fifo"),
        "mobileperf_normal": ours(sampler_priority="normal"),
        "mobileperf_no_sampler": ours(sensors="none"),
        "rails6": lambda: ours(sensors=six())(),
        "rails6_python": lambda: (lambda made: (made[0], environment(MOBILEPERF_NATIVE="0"), made[2]))(
            ours(sensors=six())()
        ),
        "keras_tensorboard_batch": lambda: (
            [keras.callbacks.TensorBoard(tempfile.mkdtemp(dir=tmp), update_freq="batch")],
            contextlib.nullcontext(),
            None,
        ),
    }
    if floor is not None:
        specs = floor_specs(six(), PERIOD_S)
        out["floor6"] = lambda: ([], floor_beside(floor, specs, choose("auto")[0]), None)
    try:
        from codecarbon import OfflineEmissionsTracker

        out["codecarbon"] = lambda: (
            [],
            OfflineEmissionsTracker(
                country_iso_code="USA", output_dir=tempfile.mkdtemp(dir=tmp), log_level="error", save_to_file=False
            ),
            None,
        )
    except ImportError:
        pass
    return out


class StepClock(keras.callbacks.Callback):
    """Records when each batch ends."""

    def __init__(self):
        super().__init__()
        self.ends: list[float] = []

    def on_train_batch_end(self, batch, logs=None):
        self.ends.append(time.perf_counter())

    def median_step(self, skip: int = 5) -> float:
        return float(np.median(np.diff(self.ends[skip:])))


def paired(times: np.ndarray, base: np.ndarray, floor: np.ndarray | None, rng) -> dict:
    """Mean of the per-repeat ratios to ``base`` with a bootstrap 95% interval over repeats; with ``floor``,
    the overhead as a multiple of floor's, from the same resampled repeats."""
    ratios = times / base
    picks = rng.integers(0, len(ratios), (4000, len(ratios)))
    boot = ratios[picks].mean(axis=1)
    out = {"ratio": float(ratios.mean()), "ci95": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))]}
    if floor is not None and (floor / base).mean() > 1:  # else the floor's overhead is not measurable here
        floor_boot = (floor / base)[picks].mean(axis=1) - 1
        multiple = (boot - 1) / np.where(floor_boot > 0, floor_boot, np.nan)
        out["x_floor"] = float((ratios.mean() - 1) / ((floor / base).mean() - 1))
        out["x_floor_ci95"] = [float(np.nanpercentile(multiple, 2.5)), float(np.nanpercentile(multiple, 97.5))]
    return out


def sampling_of(logdir: Path | None) -> dict:
    """The sampler's figures from our run's report (p99 interval error while training, priority)."""
    if logdir is None:
        return {}
    sampling = json.loads((logdir / "report.json").read_text())["sampling"]
    return {k: sampling.get(k) for k in ("interval_error_p99_ms", "achieved_hz", "row_hz", "realtime", "tick_loop")}


def measure(label: str, width: int, batch: int, steps: int, kinds: dict, repeats: int, rng) -> list[dict]:
    x = rng.random((batch * steps, 256), dtype=np.float32)
    y = rng.random((batch * steps, 1), dtype=np.float32)
    model = model_for(width)
    model.fit(x, y, batch_size=batch, epochs=1, verbose=0)  # compile and warm up once
    names = list(kinds)
    per_step, wall, sampling = ({k: [] for k in names} for _ in range(3))
    for repeat in range(repeats):
        for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
            callbacks, around, logdir = kinds[name]()
            clock = StepClock()
            with around:
                t0 = time.perf_counter()
                model.fit(x, y, batch_size=batch, epochs=1, verbose=0, callbacks=callbacks + [clock])
                wall[name].append(time.perf_counter() - t0)
            per_step[name].append(clock.median_step())
            sampling[name].append(sampling_of(logdir))
    base = np.array(per_step["none"])
    floor = np.array(per_step["floor6"]) if "floor6" in per_step else None
    print(f"\n{label}: no callback {1e3 * base.mean():.1f} ms per step ({repeats} paired, interleaved repeats)")
    results = []
    for name in names:
        times = np.array(per_step[name])
        row = {
            "case": label,
            "variant": name,
            "step_ms": 1e3 * float(times.mean()),
            "fit_wall_s": float(np.median(wall[name])),
        }
        row |= paired(times, base, floor if name.startswith("rails6") else None, rng)
        p99 = [s["interval_error_p99_ms"] for s in sampling[name] if s.get("interval_error_p99_ms") is not None]
        row["sampler_p99_ms"] = float(np.median(p99)) if p99 else None
        row["sampling"] = sampling[name][-1]
        results.append(row)
        extra = (
            f"   x floor {row['x_floor']:.2f} [{row['x_floor_ci95'][0]:.2f}, {row['x_floor_ci95'][1]:.2f}]"
            if "x_floor" in row
            else ""
        )
        jitter = f"   sampler p99 {row['sampler_p99_ms']:.2f} ms" if row["sampler_p99_ms"] is not None else ""
        print(
            f"  {name:<24} {row['step_ms']:7.2f} ms   ratio {row['ratio']:.3f}  [{row['ci95'][0]:.3f}, "
            f"{row['ci95'][1]:.3f}]   fit wall {row['fit_wall_s']:.2f} s{jitter}{extra}",
            flush=True,
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--cases", default="10,100", help="step sizes to run: 10 (~10 ms), 100 (~100 ms)")
    parser.add_argument("--variants", help="the variants to run, comma-separated (all by default; none is kept)")
    parser.add_argument("--name", default="overhead", help="the results file: benchmarks/results/NAME.json")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    floor, compiler = build_floor(tmp)
    print(f"floor: {compiler}; cores: {os.cpu_count()}; auto priority: {choose('auto')}", flush=True)
    rng = np.random.default_rng(0)
    # Enough steps (about 2 s and 6 s of training) that the monitor's start (its sampler's first readings)
    # is not what the step times and the sampler's p99 describe; sizes give ~10 and ~100 ms steps on 2 cores.
    cases = {"10": ("~10 ms step", 512, 512, 200), "100": ("~100 ms step", 1024, 3584, 60)}
    table, results = variants(tmp, floor), []
    if args.variants:
        asked = ["none"] + [v for v in args.variants.split(",") if v != "none"]
        unknown = sorted(set(asked) - set(table))
        if unknown:
            parser.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(table)}")
        table = {name: table[name] for name in asked}
    for case in args.cases.split(","):
        results += measure(*cases[case], table, args.repeats, rng)
    save(
        args.name,
        {
            "command": "python overhead.py " + " ".join(f"--{k} {v}" for k, v in vars(args).items() if v is not None),
            "backend": keras.backend.backend(),
            "cores": os.cpu_count(),
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
