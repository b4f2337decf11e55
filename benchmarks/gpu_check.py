"""Checks the tool on this machine's NVIDIA GPU: each line PASS, FAIL or SKIP with its threshold; exit 1 on a FAIL.

With whichever Keras backend is installed (KERAS_BACKEND), it trains a small
conv net and reads NVML in this process, apart from the tool's sampler:

(a) counter against power field: over a steady training window of
    ``--steady-s`` (at least 5 s on a GPU), the energy counter's mean power
    against the mean of ``nvmlDeviceGetPowerUsage``. Threshold: 5% (the
    power fields' steady-state error, Yang et al. SC'24, over 70 GPUs) plus
    the field's 1 s lag (its highest minus lowest reading times 1 s over the
    window) plus twice its standard error (one independent value a second).
(b) steps against the counter: the report's GPU energy of the measured steps
    (``MobilePerfCallback``) against the counter read here at its updates
    just before the first step and just after the last. The time outside the
    steps in that span (gaps, the wait for the updates) holds between 0 and
    the highest step's power; allowed besides: the report's stated bound and
    the update instants' uncertainty (one counter call each).
(c) allocator: the report's peak GPU memory of the framework's allocator is
    at least the ``--tensor-mib`` tensor the check holds through the steps.
(d) utilization: the report's GPU utilization of one step that runs a
    matmul for ``--kernel-s`` is above 50%.
(e) sampler CPU: the sampler process's CPU time (all threads,
    /proc/<pid>/task/*/schedstat) per second of the measured steps is at most
    ``--sampler-max-pct`` (1) % of a core.
(f) overhead: step time (the median after 5 steps) with the callback over
    without it, in ``--repeats`` alternating pairs: the mean ratio with a
    bootstrap 95% interval over the pairs. FAIL where the interval lies above
    3% (docs/benchmarks.md's target); PASS otherwise, saying where it reaches
    over. ``--overhead-max-pct`` sets the threshold.

Without an NVIDIA GPU every line is SKIP with the reason, a short CPU version
of the training path still runs (``--steps`` and the others keep working),
and it exits 0. Nothing is written unless ``--out FILE`` asks for the figures
as JSON.

    KERAS_BACKEND=torch .venv/bin/python benchmarks/gpu_check.py [--steps 200] [--out FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import keras
import numpy as np

from tf_mobileperf import MobilePerfCallback, PerfMonitor

from overhead import StepClock, paired  # noqa: E402
from sampler_cost import snapshot  # noqa: E402

#: The settings of the full check on a GPU, and of the short one on a machine without.
GPU_DEFAULTS = {
    "steps": 200,
    "warmup_steps": 10,
    "batch_size": 256,
    "size": 64,
    "overhead_steps": 100,
    "repeats": 5,
    "steady_s": 5,
    "kernel_s": 2,
    "tensor_mib": 1024,
}
CPU_DEFAULTS = GPU_DEFAULTS | {
    "steps": 12,
    "warmup_steps": 2,
    "batch_size": 8,
    "size": 16,
    "overhead_steps": 10,
    "repeats": 3,
    "tensor_mib": 16,
}
#: The thresholds, each with where it comes from (the module docstring says how each is used).
FIELD_ERROR = 0.05  # the power fields' steady-state error (Yang et al., SC'24)
FIELD_AVERAGE_S = 1.0  # nvmlDeviceGetPowerUsage: a 1 s average on Ampere and newer
UTIL_MIN_PCT = 50.0
POWER_READ_EVERY_S = 0.02


# -- the GPU, read directly ---------------------------------------------------------------------------------
class Nvml:
    """One GPU's energy counter and averaged power, read in this process, apart from the tool's sampler."""

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

    def energy_mj(self) -> float:
        return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))

    def power_w(self) -> float:
        return self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0

    def next_update(self, limit_s: float = 0.5) -> Update:
        """The counter at its next update, polled: the value is exact at the update's instant, which lies
        between the start of the last unchanged read and the end of the first changed one."""
        before = time.monotonic()
        first = self.energy_mj()
        while True:
            start = time.monotonic()
            value = self.energy_mj()
            end = time.monotonic()
            if value != first or end - before > limit_s:
                return Update(value, (before + end) / 2, (end - before) / 2)
            before = start


@dataclasses.dataclass
class Update:
    """A counter value (mJ) and the instant it holds for, known within ``within_s`` either way."""

    energy_mj: float
    t: float
    within_s: float


def find_gpu(index: int) -> tuple[Nvml | None, str | None]:
    """The GPU's counter, or None and why there is none."""
    try:
        return Nvml(index), None
    except ImportError:
        return None, "nvidia-ml-py is not installed (pip install tf-mobileperf[nvidia])"
    except Exception as exc:  # pynvml.NVMLError and its subclasses: no driver, no GPU, no counter
        return None, f"NVML: {exc}" if str(exc) else f"NVML: {type(exc).__name__}"


class PowerReads(threading.Thread):
    """Reads the GPU's averaged power every POWER_READ_EVERY_S until stopped: ``reads`` is (t, W)."""

    def __init__(self, gpu: Nvml):
        super().__init__(daemon=True)
        self.gpu, self.reads, self.done = gpu, [], threading.Event()

    def run(self) -> None:
        while not self.done.wait(POWER_READ_EVERY_S):
            self.reads.append((time.monotonic(), self.gpu.power_w()))

    def between(self, t0: float, t1: float) -> np.ndarray:
        return np.array([w for t, w in self.reads if t0 <= t <= t1])


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
    """At most ``steps`` steps, one epoch, cycling over ``data``'s batches."""

    def forever():
        while True:
            yield from data

    model.fit(forever(), steps_per_epoch=steps, epochs=1, shuffle=False, callbacks=callbacks, verbose=0)


def hold(mib: int):
    """A tensor of ``mib`` MiB on the backend's default device (the GPU where there is one)."""
    return keras.ops.ones((mib * 2**18,), dtype="float32")


def long_kernel(seconds: float, n: int) -> None:
    """Matrix products of n x n, each waited for, until ``seconds`` have passed."""
    a = keras.ops.ones((n, n), dtype="float32")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        keras.ops.convert_to_numpy(keras.ops.sum(keras.ops.matmul(a, a)))


class AtSteps(keras.callbacks.Callback):
    """Calls ``at_begin(step)`` before every step's begin and ``at_end(step)`` after its end."""

    def __init__(self, at_begin=None, at_end=None):
        super().__init__()
        self.at_begin, self.at_end, self.step = at_begin, at_end, 0

    def on_train_batch_begin(self, batch, logs=None):
        if self.at_begin:
            self.at_begin(self.step)

    def on_train_batch_end(self, batch, logs=None):
        if self.at_end:
            self.at_end(self.step)
        self.step += 1


# -- the measurements --------------------------------------------------------------------------------------
def measured_run(gpu: Nvml | None, model, data, settings: dict, logdir: Path) -> dict:
    """The measured steps with the callback, the counter's updates around them, the held tensor and the
    sampler's CPU time: the report and what was read here."""
    warmup, steps = settings["warmup_steps"], settings["steps"]
    callback = MobilePerfCallback(
        logdir, warmup_steps=warmup, batch_size=settings["batch_size"], **({} if gpu else {"idle_s": 0})
    )  # an idle baseline only on a GPU
    seen: dict = {"held": None}

    def before(step: int) -> None:
        if step == warmup:
            seen["held"] = hold(settings["tensor_mib"])
            seen["first"] = gpu.next_update() if gpu else None
            seen["cpu0"] = sampler_cpu_s(callback), time.monotonic()

    def after(step: int) -> None:
        if step == warmup + steps - 1:
            seen["cpu1"] = sampler_cpu_s(callback), time.monotonic()
            seen["last"] = gpu.next_update() if gpu else None
            seen["held"] = None

    fit(model, data, warmup + steps, [AtSteps(at_begin=before), callback, AtSteps(at_end=after)])
    (cpu0, t0), (cpu1, t1) = seen["cpu0"], seen["cpu1"]
    share = (cpu1 - cpu0) / (t1 - t0) if cpu0 is not None and cpu1 is not None and t1 > t0 else None
    return {"report": callback.report.to_dict(), "first": seen["first"], "last": seen["last"], "sampler_share": share}


def steady_window(gpu: Nvml, model, data, seconds: float) -> dict:
    """Training for 1 s (the averaged field settles) and then ``seconds`` between two counter updates,
    the averaged power read every POWER_READ_EVERY_S throughout."""
    reads = PowerReads(gpu)
    edges: dict = {}
    start = time.monotonic()

    def after(step: int) -> None:
        now = time.monotonic()
        if "first" not in edges and now - start >= FIELD_AVERAGE_S:
            edges["first"] = gpu.next_update()
        elif "first" in edges and now - edges["first"].t >= seconds:
            edges["last"] = gpu.next_update()
            model.stop_training = True

    reads.start()
    fit(model, data, 10**9, [AtSteps(at_end=after)])
    reads.done.set()
    reads.join()
    first, last = edges["first"], edges["last"]
    return {"first": first, "last": last, "power_w": reads.between(first.t, last.t)}


def kernel_step(settings: dict, logdir: Path, n: int) -> dict:
    """One measured step that runs ``long_kernel`` (custom loop), its report."""
    with PerfMonitor(logdir, warmup_steps=0, idle_s=0) as perf:
        with perf.step():
            long_kernel(settings["kernel_s"], n)
    return json.loads((logdir / "report.json").read_text())


def overhead(model, data, settings: dict, tmp: Path) -> dict:
    """Median step time (after 5 steps) with and without the callback, in alternating pairs."""
    steps, batch_size = settings["overhead_steps"], settings["batch_size"]
    times = {"with": [], "without": []}
    for i in range(settings["repeats"]):
        for variant in ("with", "without") if i % 2 else ("without", "with"):
            clock = StepClock()
            callbacks = [clock] + (
                [MobilePerfCallback(tmp / f"overhead-{i}", idle_s=0, warmup_steps=1, batch_size=batch_size)]
                if variant == "with"
                else []
            )
            fit(model, data, steps, callbacks)
            times[variant].append(clock.median_step(skip=min(5, max(0, len(clock.ends) - 3))))
    return overhead_result(times["with"], times["without"])


def overhead_result(with_: list[float], without: list[float]) -> dict:
    """The overhead of paired step times: the mean ratio minus 1, with a bootstrap 95% interval over pairs."""
    ratio = paired(np.array(with_), np.array(without), None, np.random.default_rng(0))
    pairs = {"with": list(with_), "without": list(without)}
    return {"pairs_s": pairs, "overhead": ratio["ratio"] - 1, "ci95": [r - 1 for r in ratio["ci95"]]}


def sampler_cpu_s(callback: MobilePerfCallback) -> float | None:
    """CPU seconds (all threads) the sampler's process has used, where it is a process of its own."""
    pid = getattr(getattr(callback.monitor, "sampler", None), "pid", None)
    if not pid or pid == os.getpid():
        return None
    try:
        return snapshot(pid)["run_s"]
    except (OSError, ValueError, IndexError):
        return None


# -- the checks ----------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Line:
    """One check's outcome: PASS, FAIL or SKIP, what was measured and the threshold, or why."""

    name: str
    verdict: str
    text: str

    def __str__(self) -> str:
        return f"{self.verdict:<4}  {self.name}: {self.text}"


def gpu_key(values, index: int) -> str | None:
    """The key of GPU ``index``'s energy in a report's per-rail dict (``gpu0_energy``, else ``gpu0_power``)."""
    if not isinstance(values, dict):
        return None
    return next((k for k in (f"gpu{index}_energy", f"gpu{index}_power") if k in values), None)


def check_counter(steady: dict) -> Line:
    """(a) The counter's mean power over the window against the averaged power field's."""
    name = "(a) counter against power field"
    first, last, field = steady["first"], steady["last"], steady["power_w"]
    span = last.t - first.t
    if len(field) < 2 or span <= 0:
        return Line(name, "FAIL", f"{len(field)} power readings over {span:.2f} s: the field gave nothing to compare")
    counter_w = (last.energy_mj - first.energy_mj) / 1e3 / span
    field_w = float(field.mean())
    lag = (field.max() - field.min()) * FIELD_AVERAGE_S / span
    noise = 2 * field.std() / np.sqrt(max(1.0, span / FIELD_AVERAGE_S))
    limit = FIELD_ERROR + (lag + noise) / field_w
    off = counter_w / field_w - 1
    text = (
        f"counter {counter_w:.1f} W, field {field_w:.1f} W over {span:.1f} s: {off:+.1%} "
        f"(threshold {limit:.1%} = {FIELD_ERROR:.0%} field error + {lag / field_w:.1%} its 1 s lag "
        f"+ {noise / field_w:.1%} its noise)"
    )
    if abs(off) <= limit:
        return Line(name, "PASS", text)
    return Line(name, "FAIL", f"{text}; the counter runs {counter_w / field_w:.2f}x the power the GPU reports")


def check_steps(run: dict, index: int) -> Line:
    """(b) The report's steps' GPU energy against the counter over the span that holds them."""
    name = "(b) steps against counter"
    report = run["report"]
    key = gpu_key(report.get("energy_j"), index)
    if key is None:
        return Line(name, "FAIL", f"the report has no GPU {index} energy: {report.get('unavailable', {})}")
    steps_j, bound_j = report["energy_j"][key], (report.get("energy_bound_j") or {}).get(key)
    if steps_j is None or bound_j is None:
        return Line(name, "FAIL", f"the report's GPU energy is {steps_j} with bound {bound_j}")
    complete = report["energy_steps_complete_per_rail"][key]
    steps = [s for s in report["steps"] if not s["warmup"] and (s.get("energy_j") or {}).get(key) is not None]
    p_high = max(s["energy_j"][key] / (s["end_s"] - s["start_s"]) for s in steps)
    first, last = run["first"], run["last"]
    counter_j = (last.energy_mj - first.energy_mj) / 1e3
    outside_s = (last.t - first.t) - complete["time_s"]
    edges_j = (first.within_s + last.within_s) * p_high
    low, high = counter_j - outside_s * p_high - bound_j - edges_j, counter_j + bound_j + edges_j
    text = (
        f"{steps_j:.4g} J in {complete['complete']} steps ({complete['time_s']:.2f} s), counter {counter_j:.4g} J "
        f"over {last.t - first.t:.2f} s: allowed {low:.4g}..{high:.4g} J (the {outside_s:.2f} s outside the steps "
        f"at 0..{p_high:.0f} W, the stated bound {bound_j:.3g} J, the update instants {edges_j:.3g} J)"
    )
    return Line(name, "PASS" if low <= steps_j <= high else "FAIL", text)


def check_allocator(run: dict, mib: int) -> Line:
    """(c) The allocator's peak holds the tensor the check held."""
    name = "(c) allocator peak"
    report = run["report"]
    peak, source = report.get("gpu_mem_peak_gb"), report.get("gpu_mem_source")
    if peak is None:
        why = (report.get("unavailable") or {}).get("gpu_mem_peak_gb", "no reason given")
        return Line(name, "FAIL", f"the allocator reported nothing while a {mib} MiB tensor was held: {why}")
    text = f"{peak * 1024:.0f} MiB from {source}, threshold the {mib} MiB tensor held through the steps"
    return Line(name, "PASS" if peak * 1024 >= mib else "FAIL", text)


def check_util(report: dict, seconds: float) -> Line:
    """(d) Utilization while one long kernel runs."""
    name = "(d) utilization"
    util = report.get("gpu_util_avg")
    if util is None:
        why = (report.get("unavailable") or {}).get("gpu_util", "no reason given")
        return Line(name, "FAIL", f"no utilization while a {seconds:g} s kernel ran: {why}")
    text = f"{util:.0f}% while a {seconds:g} s matmul ran, threshold above {UTIL_MIN_PCT:.0f}%"
    return Line(name, "PASS" if util > UTIL_MIN_PCT else "FAIL", text)


def check_sampler(share: float | None, max_pct: float) -> Line:
    """(e) The sampler process's CPU share of one core."""
    name = "(e) sampler CPU"
    if share is None:
        return Line(name, "FAIL", "the sampler is no process of its own to read (/proc/<pid>/task)")
    text = f"{share:.2%} of a core over the measured steps, threshold {max_pct:g}%"
    return Line(name, "PASS" if share * 100 <= max_pct else "FAIL", text)


def check_overhead(result: dict, max_pct: float = 3.0) -> Line:
    """(f) The callback's overhead on step time, with its interval."""
    name = "(f) callback overhead"
    low, high = result["ci95"]
    text = (
        f"{result['overhead']:+.1%} on step time, 95% interval {low:+.1%}..{high:+.1%} over "
        f"{len(result['pairs_s']['with'])} pairs, threshold {max_pct:g}%"
    )
    if low * 100 > max_pct:
        return Line(name, "FAIL", text)
    return Line(name, "PASS", text + ("; the interval reaches over it: more --repeats" if high * 100 > max_pct else ""))


NAMES = (
    "(a) counter against power field",
    "(b) steps against counter",
    "(c) allocator peak",
    "(d) utilization",
    "(e) sampler CPU",
    "(f) callback overhead",
)


def run_checks(gpu: Nvml, index: int, settings: dict, tmp: Path) -> tuple[list[Line], dict]:
    model, data = conv_net(settings["size"]), batches(settings["size"], settings["batch_size"])
    run = measured_run(gpu, model, data, settings, tmp / "run")
    steady = steady_window(gpu, model, data, settings["steady_s"])
    kernel = kernel_step(settings, tmp / "kernel", n=4096 if settings["size"] >= 64 else 256)
    cost = overhead(model, data, settings, tmp)
    lines = [
        check_counter(steady),
        check_steps(run, index),
        check_allocator(run, settings["tensor_mib"]),
        check_util(kernel, settings["kernel_s"]),
        check_sampler(run["sampler_share"], settings["sampler_max_pct"]),
        check_overhead(cost, settings["overhead_max_pct"]),
    ]
    figures = {"gpu": gpu.name, "report": run["report"], "kernel_report": kernel, "overhead": cost}
    return lines, figures


def run_without_gpu(no_gpu: str, settings: dict, tmp: Path) -> tuple[list[Line], dict]:
    """The short CPU version of the training path; every line SKIP."""
    model, data = conv_net(settings["size"]), batches(settings["size"], settings["batch_size"])
    run = measured_run(None, model, data, settings, tmp / "run")
    lines = [Line(name, "SKIP", f"no NVIDIA GPU: {no_gpu}") for name in NAMES]
    return lines, {"gpu": None, "report": run["report"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in GPU_DEFAULTS:
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            type=int,
            default=None,
            help=f"default {GPU_DEFAULTS[name]} on a GPU, {CPU_DEFAULTS[name]} without",
        )
    parser.add_argument("--sampler-max-pct", type=float, default=1.0, help="(e)'s threshold, %% of a core")
    parser.add_argument("--overhead-max-pct", type=float, default=3.0, help="(f)'s threshold, %% of step time")
    parser.add_argument("--gpu", type=int, default=0, help="NVML index of the GPU the backend trains on")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    gpu, no_gpu = find_gpu(args.gpu)
    defaults = CPU_DEFAULTS if no_gpu else GPU_DEFAULTS
    settings = {k: getattr(args, k) if getattr(args, k) is not None else defaults[k] for k in GPU_DEFAULTS}
    settings["sampler_max_pct"], settings["overhead_max_pct"] = args.sampler_max_pct, args.overhead_max_pct
    print(f"GPU: {gpu.name if gpu else 'none: ' + no_gpu}; backend {keras.backend.backend()}; {settings}", flush=True)
    with tempfile.TemporaryDirectory(prefix="gpu_check-") as tmp:
        if gpu:
            lines, figures = run_checks(gpu, args.gpu, settings, Path(tmp))
        else:
            lines, figures = run_without_gpu(no_gpu, settings, Path(tmp))
    for line in lines:
        print(line)
    failed = [line.name for line in lines if line.verdict == "FAIL"]
    print(f"FAILED: {', '.join(failed)}" if failed else "no check failed")
    if args.out:
        out = figures | {"settings": settings, "lines": [dataclasses.asdict(line) for line in lines]}
        args.out.write_text(json.dumps(out, indent=2, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
