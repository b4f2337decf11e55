"""Checks the tool on this machine's NVIDIA GPU, with whichever Keras backend is installed (KERAS_BACKEND).

Trains a small conv net (64x64x3 inputs, batch 256, ~200 steps) with
``MobilePerfCallback`` and, beside it, reads NVML's total-energy counter of
the GPU directly in this process, at the first measured step's begin and the
last one's end (callbacks before and after ours, so the 4 ms the read costs
is outside every step). It prints, side by side:

- the report's GPU energy and the counter's difference (and their ratio;
  the counter spans the steps and the time between them, and updates every
  ~100 ms, so each edge is uncertain by one update period), and both as
  mean power;
- the report's GPU utilization, per-step energy resolution (steps measured
  vs interpolated, the counter's update period), GPU peak memory of the
  framework's allocator and NVML's device memory in use;
- the sampler's CPU share (the report's ``sampling`` block where it gives
  one, else ``/proc/<sampler pid>/stat`` over the measured steps);
- the callback's step-time overhead: runs with and without it, alternating,
  the median of ``--repeats`` pairs.

Fields the report does not have (an older or newer report) read "n/a (field
missing)". Without an NVIDIA GPU it says so in one line, runs a short CPU
version of the same path (a few steps, small inputs) and prints what it can.
Writes the figures as JSON (``--out``, default benchmarks/results/gpu_check.json).

    KERAS_BACKEND=torch .venv/bin/python benchmarks/gpu_check.py [--steps 200] [--out FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import keras
import numpy as np

from tf_mobileperf import MobilePerfCallback

from _results import RESULTS  # noqa: E402
from overhead import StepClock  # noqa: E402
from sampler_cost import snapshot  # noqa: E402

MISSING = "n/a (field missing)"
#: The settings of the full check on a GPU, and of the short one on a machine without.
GPU_DEFAULTS = {"steps": 200, "warmup_steps": 10, "batch_size": 256, "size": 64, "overhead_steps": 100, "repeats": 3}
CPU_DEFAULTS = {"steps": 12, "warmup_steps": 2, "batch_size": 8, "size": 16, "overhead_steps": 10, "repeats": 3}


# -- the GPU, read directly ---------------------------------------------------------------------------------
class Nvml:
    """NVML's total-energy counter of one GPU, read in this process, apart from the tool's sampler."""

    def __init__(self, index: int):
        import pynvml  # ImportError: not installed

        self.nvml = pynvml
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        if index >= count:
            raise RuntimeError(f"NVML found {count} GPU(s), no GPU {index}")
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        name = pynvml.nvmlDeviceGetName(self.handle)
        self.name = name.decode() if isinstance(name, bytes) else str(name)
        self.energy_mj()  # raises NVMLError where the GPU has no counter (before Volta)

    def energy_mj(self) -> tuple[float, float]:
        """(the counter in mJ, the monotonic time in the middle of its read)."""
        before = time.monotonic()
        value = float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        return value, (before + time.monotonic()) / 2


def find_gpu(index: int) -> tuple[Nvml | None, str | None]:
    """The GPU's counter, or None and why there is none."""
    try:
        return Nvml(index), None
    except ImportError:
        return None, "nvidia-ml-py is not installed (pip install tf-mobileperf[nvidia])"
    except Exception as exc:  # pynvml.NVMLError and its subclasses: no driver, no GPU, no counter
        return None, f"NVML: {exc}" if str(exc) else f"NVML: {type(exc).__name__}"


# -- training -----------------------------------------------------------------------------------------------
def conv_net(size: int) -> keras.Model:
    model = keras.Sequential(
        [
            keras.Input((size, size, 3)),
            keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
            keras.layers.Conv2D(64, 3, strides=2, padding="same", activation="relu"),
            keras.layers.Conv2D(128, 3, strides=2, padding="same", activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(10),
        ]
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def batches(size: int, batch_size: int, n: int = 16) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n`` batches of random images and labels, cycled over by ``fit`` (memory stays small)."""
    rng = np.random.default_rng(0)
    return [
        (rng.random((batch_size, size, size, 3), dtype=np.float32), rng.integers(0, 10, batch_size).astype("int32"))
        for _ in range(n)
    ]


def fit(model: keras.Model, data: list, steps: int, callbacks: list) -> None:
    """Exactly ``steps`` steps, one epoch, cycling over ``data``'s batches."""

    def forever():
        while True:
            yield from data

    model.fit(forever(), steps_per_epoch=steps, epochs=1, shuffle=False, callbacks=callbacks, verbose=0)


class Edges(keras.callbacks.Callback):
    """Reads ``read()`` at the begin of step ``first`` (listed before our callback) or at the end of step
    ``last`` (listed after it): the measured steps' edges, with the read itself outside them."""

    def __init__(self, first: int | None = None, last: int | None = None, read=None):
        super().__init__()
        self.first, self.last, self.read = first, last, read
        self.step = 0
        self.value = None

    def on_train_batch_begin(self, batch, logs=None):
        if self.step == self.first:
            self.value = self.read()

    def on_train_batch_end(self, batch, logs=None):
        if self.step == self.last:
            self.value = self.read()
        self.step += 1


@dataclasses.dataclass
class Edge:
    """What is read at a measured edge: the counter (where there is a GPU), the sampler's CPU time."""

    energy_mj: float | None
    energy_t: float | None
    sampler_cpu_s: float | None
    t: float


def reader(gpu: Nvml | None, callback: MobilePerfCallback):
    def read() -> Edge:
        energy, t_energy = gpu.energy_mj() if gpu else (None, None)
        return Edge(energy, t_energy, sampler_cpu_s(callback), time.monotonic())

    return read


def sampler_cpu_s(callback: MobilePerfCallback) -> float | None:
    """CPU seconds (all threads) the sampler's process has used, where it is a process of its own."""
    pid = getattr(getattr(callback.monitor, "sampler", None), "pid", None)
    if not pid or pid == os.getpid():
        return None
    try:
        return snapshot(pid)["run_s"]
    except (OSError, ValueError, IndexError):
        return None


# -- the report, read defensively ----------------------------------------------------------------------------
def get(report: dict, *path):
    """``report[path[0]][path[1]]...``, or MISSING where a key is absent."""
    value = report
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return MISSING
        value = value[key]
    return value


def gpu_key(values, index: int) -> str | None:
    """The key of GPU ``index``'s rail in a report's per-rail dict (``energy_j``, ``power_avg_w``)."""
    if not isinstance(values, dict):
        return None
    for key in (f"gpu{index}_energy", f"gpu{index}", f"gpu{index}_power"):
        if key in values:
            return key
    return next((k for k in values if k.startswith(f"gpu{index}")), None)


def energy_resolution(report: dict, energy_key: str | None) -> dict:
    """How many measured steps had their GPU energy measured (the step spans at least two counter updates)
    and how many interpolated, and the counter's update period: the report's ``energy_sources`` entry."""
    steps = sum(1 for s in report.get("steps") or [] if not s.get("warmup") and not s.get("failed"))
    source = get(report, "energy_sources", energy_key or "")
    if not isinstance(source, dict):
        return {
            "steps": steps,
            "steps_measured": MISSING,
            "steps_interpolated": MISSING,
            "update_period_s": MISSING,
            "from": MISSING,
        }
    return {
        "steps": steps,
        "steps_measured": source.get("steps_measured", MISSING),
        "steps_interpolated": source.get("steps_interpolated", MISSING),
        "update_period_s": source.get("update_period_s", MISSING),
        "from": source.get("from", MISSING),
    }


def sampler_share(report: dict, first: Edge | None, last: Edge | None) -> tuple[float | str, str]:
    """The sampler's CPU time per wall second (1.0 = one core): the report's, else /proc over the steps."""
    share = get(report, "sampling", "cpu_share")
    if isinstance(share, (int, float)):
        return share, "report sampling.cpu_share"
    if first and last and first.sampler_cpu_s is not None and last.sampler_cpu_s is not None and last.t > first.t:
        return (last.sampler_cpu_s - first.sampler_cpu_s) / (
            last.t - first.t
        ), "/proc/<sampler pid> over the measured steps"
    return MISSING, "no sampling.cpu_share in the report and no sampler process to read"


def gpu_figures(report: dict, first: Edge | None, last: Edge | None, index: int) -> dict:
    """The report's GPU energy beside the counter read here."""
    energy_j = get(report, "energy_j")
    key = gpu_key(energy_j, index)
    report_j = energy_j[key] if key else MISSING
    done = get(report, "energy_steps_complete")
    steps_time = get(done, "time_s") if isinstance(done, dict) else MISSING
    out = {"report_energy_key": key, "report_energy_j": report_j, "report_steps_time_s": steps_time}
    if first and last and first.energy_mj is not None and last.energy_mj is not None:
        span = last.energy_t - first.energy_t
        counter_j = (last.energy_mj - first.energy_mj) / 1e3
        out |= {
            "counter_energy_j": counter_j,
            "counter_span_s": span,
            "counter_power_w": counter_j / span if span > 0 else None,
        }
        if isinstance(report_j, (int, float)) and counter_j > 0:
            out["energy_ratio"] = report_j / counter_j
        if isinstance(report_j, (int, float)) and isinstance(steps_time, (int, float)) and steps_time > 0:
            out["report_power_w"] = report_j / steps_time
            out["steps_share_of_span"] = steps_time / span if span > 0 else None
            if out.get("counter_power_w"):
                out["power_ratio"] = out["report_power_w"] / out["counter_power_w"]
    return out


# -- overhead ---------------------------------------------------------------------------------------------------
def overhead(model, data, steps: int, batch_size: int, repeats: int, tmp: Path) -> dict:
    """Median step time with and without the callback, alternating; the overhead is the median of the
    per-pair ratios (step time: the median interval between batch ends after 5 steps)."""
    pairs = []
    for i in range(repeats):
        times = {}
        for variant in ("with", "without") if i % 2 else ("without", "with"):
            clock = StepClock()
            callbacks = (
                [clock]
                if variant == "without"
                else [MobilePerfCallback(tmp / f"overhead-{i}", idle_s=0, warmup_steps=1, batch_size=batch_size), clock]
            )
            fit(model, data, steps, callbacks)
            times[variant] = clock.median_step(skip=min(5, max(0, len(clock.ends) - 3)))
        pairs.append(times)
    ratios = [p["with"] / p["without"] for p in pairs]
    return {
        "pairs_s": pairs,
        "overhead": float(np.median(ratios)) - 1.0,
        "step_s_with": float(np.median([p["with"] for p in pairs])),
        "step_s_without": float(np.median([p["without"] for p in pairs])),
    }


# -- output -----------------------------------------------------------------------------------------------------
def number(value, unit: str = "", scale: float = 1.0, digits: str = ".4g") -> str:
    """A figure for the table: the number with its unit, MISSING as it is, None as "null"."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value * scale:{digits}}" + (f" {unit}" if unit else "")
    return "null" if value is None else str(value)


def rows_of(figures: dict, no_gpu: str | None) -> list[tuple[str, str]]:
    """The table's rows: (quantity, value); GPU rows say "no NVIDIA GPU: <reason>" where there is none."""
    g, r, res, mem = figures["gpu_energy"], figures["report"], figures["energy_resolution"], figures["memory"]
    gpu = (lambda text: f"no NVIDIA GPU: {no_gpu}") if no_gpu else (lambda text: text)
    ratio = g.get("energy_ratio")
    period = res.get("update_period_s")
    rows = [
        ("backend", f"{figures['backend']} (KERAS_BACKEND={os.environ.get('KERAS_BACKEND', 'unset')})"),
        ("GPU", figures["gpu"] or f"no NVIDIA GPU: {no_gpu}"),
        (
            "steps",
            f"{res['steps']} measured after {figures['settings']['warmup_steps']} warm-up, batch "
            f"{figures['settings']['batch_size']}, {figures['settings']['size']}x{figures['settings']['size']}x3",
        ),
        ("step time (report, mean)", number(r["step_time_s_mean"], "ms", 1e3)),
        (
            "GPU energy: report",
            gpu(
                f"{number(g['report_energy_j'], 'J')} over the steps "
                f"({number(g['report_steps_time_s'], 's')}; field energy_j.{g['report_energy_key']})"
            ),
        ),
        (
            "GPU energy: NVML counter here",
            gpu(
                f"{number(g.get('counter_energy_j'), 'J')} over "
                f"{number(g.get('counter_span_s'), 's')} (first step's begin to last's end)"
            ),
        ),
        (
            "  ratio report / counter",
            gpu(
                f"{number(ratio, digits='.3f')} (the steps are "
                f"{number(g.get('steps_share_of_span'), '', 100, '.1f')}% of the span; "
                f"each edge ± one counter update)"
            ),
        ),
        (
            "  mean power report / counter",
            gpu(
                f"{number(g.get('report_power_w'), 'W')} / "
                f"{number(g.get('counter_power_w'), 'W')} = "
                f"{number(g.get('power_ratio'), digits='.3f')}"
            ),
        ),
        ("GPU utilization (report, mean)", gpu(number(r["gpu_util_avg"], "%"))),
        (
            "per-step energy",
            gpu(
                f"{number(res['steps_measured'])} steps measured (at least two updates long), "
                f"{number(res['steps_interpolated'])} interpolated, from {res['from']}"
            ),
        ),
        ("  counter update period", gpu(number(period, "ms", 1e3))),
        ("GPU peak memory (allocator)", gpu(f"{number(mem['gpu_mem_peak_gb'], 'GiB')} ({mem['gpu_mem_source']})")),
        ("GPU memory in use (device, NVML)", gpu(f"{number(mem['gpu_device_mem_peak_gb'], 'GiB')}")),
        ("system RAM peak (not the GPU's)", number(mem["mem_peak_gb"], "GiB")),
        (
            "sampler CPU share",
            f"{number(figures['sampler_cpu'][0], '% of a core', 100, '.2f')} ({figures['sampler_cpu'][1]})",
        ),
        (
            "callback overhead on step time",
            f"{number(figures['overhead']['overhead'], '%', 100, '+.1f')} (median of "
            f"{len(figures['overhead']['pairs_s'])}: "
            f"{number(figures['overhead']['step_s_with'], 'ms', 1e3)} with, "
            f"{number(figures['overhead']['step_s_without'], 'ms', 1e3)} without"
            f"{'; a short CPU run, noisy' if no_gpu else ''})",
        ),
    ]
    if not no_gpu and r["unavailable"]:
        rows += [
            (f"  unavailable: {k}", str(v)[:100]) for k, v in r["unavailable"].items() if "gpu" in k or "energy" in k
        ]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in GPU_DEFAULTS:
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            type=int,
            default=None,
            help=f"default {GPU_DEFAULTS[name]} on a GPU, {CPU_DEFAULTS[name]} without",
        )
    parser.add_argument("--gpu", type=int, default=0, help="NVML index of the GPU the backend trains on")
    parser.add_argument("--out", type=Path, default=RESULTS / "gpu_check.json")
    args = parser.parse_args(argv)
    gpu, no_gpu = find_gpu(args.gpu)
    if no_gpu:
        print(f"no NVIDIA GPU: {no_gpu}; running the short CPU version of the check", flush=True)
    settings = {
        k: getattr(args, k) if getattr(args, k) is not None else (CPU_DEFAULTS if no_gpu else GPU_DEFAULTS)[k]
        for k in GPU_DEFAULTS
    }
    steps, warmup, batch_size = settings["steps"], settings["warmup_steps"], settings["batch_size"]
    model = conv_net(settings["size"])
    data = batches(settings["size"], batch_size)
    with tempfile.TemporaryDirectory(prefix="gpu_check-") as tmp:
        tmp = Path(tmp)
        callback = MobilePerfCallback(
            tmp / "run", warmup_steps=warmup, batch_size=batch_size, **({"idle_s": 0} if no_gpu else {})
        )  # an idle baseline only on a GPU
        read = reader(gpu, callback)
        first, last = Edges(first=warmup, read=read), Edges(last=warmup + steps - 1, read=read)
        fit(model, data, warmup + steps, [first, callback, last])
        report = callback.report.to_dict()
        figures = {
            "backend": keras.backend.backend(),
            "gpu": gpu.name if gpu else None,
            "no_gpu": no_gpu,
            "settings": settings,
            "report": {
                "step_time_s_mean": get(report, "step_time_s", "mean"),
                "gpu_util_avg": get(report, "gpu_util_avg"),
                "unavailable": get(report, "unavailable"),
            },
            "gpu_energy": gpu_figures(report, first.value, last.value, args.gpu),
            "energy_resolution": energy_resolution(report, gpu_key(get(report, "energy_j"), args.gpu)),
            "memory": {
                k: get(report, k)
                for k in (
                    "gpu_mem_peak_gb",
                    "gpu_mem_source",
                    "gpu_device_mem_peak_gb",
                    "gpu_device_mem_source",
                    "mem_peak_gb",
                )
            },
            "sampler_cpu": sampler_share(report, first.value, last.value),
            "overhead": overhead(model, data, settings["overhead_steps"], batch_size, settings["repeats"], tmp),
        }
    rows = rows_of(figures, no_gpu)
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures | {"rows": rows}, indent=2, default=str))
    print(f"figures: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
