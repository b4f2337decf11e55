"""What the example scripts share: their common arguments, the data they download, and their closing lines.

Examples are scripts: a bad argument is one line and exit status 2, a data
set that cannot be downloaded (no network) is replaced by synthetic data of
the same shapes with one line saying so, and a run too short to measure a
step says so instead of failing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from tf_mobileperf.analysis.rows import process_peak_gb
from tf_mobileperf.cli.arguments import OneLineParser, int_at_least
from tf_mobileperf.cli.shell import tool_command
from tf_mobileperf.output.files import local_dir
from tf_mobileperf.session.options import MonitorOptions
from tf_mobileperf.session.reporting import by_cause
from tf_mobileperf.sweep.config import open_sensors_once

log = logging.getLogger("examples")
T = TypeVar("T")

#: Seconds a download may wait on the network at a time before the example gives up on it.
DOWNLOAD_TIMEOUT_S = 30.0
#: The callback's warm-up steps (the seed's 3).
WARMUP_STEPS = MonitorOptions.warmup_steps


def _argument(check: Callable[[str], object]) -> Callable[[str], str]:
    """An argparse type that gives ``check``'s ValueError as the one-line error."""

    def parse(text: str) -> str:
        try:
            check(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    return parse


def parser(description: str, batch_size: int, steps: int, logdir: str) -> argparse.ArgumentParser:
    p = OneLineParser(description=description)
    p.add_argument("--batch-size", type=int_at_least(1), default=batch_size)
    p.add_argument(
        "--steps", type=int_at_least(1), default=steps, help=f"training steps (the first {WARMUP_STEPS} are warm-up)"
    )
    p.add_argument("--logdir", type=_argument(local_dir), default=logdir, help="a local directory")
    p.add_argument(
        "--sensors", type=_argument(open_sensors_once), default="auto", help="auto, none, replay:PATH[@SPEED]"
    )
    return p


@contextlib.contextmanager
def _socket_timeout(seconds: float) -> Iterator[None]:
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)


def download_or(what: str, download: Callable[[], T], synthetic: Callable[[], T]) -> T:
    """``download()``, or where it fails (no network, a proxy that refuses, a server gone) ``synthetic()``,
    with one line saying so."""
    try:
        with _socket_timeout(DOWNLOAD_TIMEOUT_S):
            return download()
    except Exception as exc:  # Keras's get_file raises a bare Exception ("URL fetch failure on ...")
        log.warning(
            "%s could not be downloaded (%s): training on synthetic data of the same shapes instead "
            "(--synthetic does so without trying)",
            what,
            " ".join(str(exc).split()),
        )
        return synthetic()


def every(steps: int) -> int:
    """How often to print progress: about ten lines per run."""
    return max(1, steps // 10)


def progress(steps: int):
    """A Keras callback printing the step and its loss about ten times a run (and at the last step)."""
    import keras

    class Progress(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if (batch + 1) % every(steps) == 0 or batch + 1 == steps:
                print(f"step {batch + 1}/{steps}  loss {(logs or {}).get('loss', float('nan')):.4f}", flush=True)

    return Progress()


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")


def with_prefetch(data, prefetch: bool):
    """``data.prefetch(AUTOTUNE)``, or no prefetch at all: tf.data would otherwise inject one itself."""
    import tensorflow as tf

    if prefetch:
        return data.prefetch(tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    return data.with_options(options)


def traced_steps(steps: int) -> tuple[int, int] | None:
    """Steps 5 and 6 are traced (for the input wait and energy per op) when the run has them."""
    return (5, 6) if steps > 6 else None


def measured(summary: dict) -> str:
    """How many steps were measured, or why none was: "steps measured: 5", "no step was measured (all 2 steps
    were warm-up steps (warmup_steps=3))"."""
    if summary["steps_measured"]:
        return f"steps measured: {summary['steps_measured']} (after {summary['warmup_steps']} warm-up)"
    return f"no step was measured ({summary['unavailable'].get('step_time_s', 'no step ran')})"


def show(value: float | None, unit: str, fmt: str = ".3f") -> str:
    return "n/a" if value is None else f"{value:{fmt}} {unit}"


def print_unavailable(summary: dict) -> None:
    """The report's quantities without a value, one line per cause ("power, energy, ...: n/a (no power
    sensor, see above)"); the full reasons are in report.json's ``unavailable`` and ``mobileperf sensors``."""
    no_step = None if summary["steps_measured"] else summary["unavailable"].get("step_time_s")
    grouped = by_cause(
        (what, "no step was measured, see above" if why == no_step else why)
        for what, why in summary["unavailable"].items()
    )
    if grouped:
        print('without a value (report.json\'s "unavailable" says why in full):')
    for cause, whats in grouped.items():
        said = ", see above" if cause == "no power sensor" else ""  # the run's one line at its start
        print(f"  {', '.join(whats)}: n/a ({cause}{said})")


def memory_text(s: dict) -> str:
    """Peak memory with whose it is: the training process's peak first, then system RAM in use (every
    process: the report's ``mem_peak_gb``), and the GPU allocator's peak where there is one."""
    text = f"memory: process peak {show(process_peak_gb(s), 'GiB')}, system RAM in use {show(s['mem_peak_gb'], 'GiB')}"
    gpu = s.get("gpu_mem_peak_gb")
    return text + (f", GPU allocator peak {show(gpu, 'GiB')}" if gpu is not None else "")


def cpu_text(s: dict) -> str:
    """CPU with whose it is: the training process's own share of all cores first, then every process's
    (the report's ``cpu_util_avg``), and whether others used the machine (``contention``)."""
    text = f"CPU: this process {show(s['process_cpu_util_avg'], '%', '.1f')} of all cores, "
    text += f"every process {show(s['cpu_util_avg'], '%', '.1f')}"
    block = s.get("contention")
    if block:
        text += f"; machine {block['verdict']} (others {block['other_cpu_pct']:.0f}%, steal {block['steal_pct']:.0f}%)"
    return text


def finish(report, logdir) -> None:
    """Prints the summary, the input wait of the traced steps, and where the run was written."""
    s = report.summary()
    step = s["step_time_s"]["mean"]
    print(
        f"success: {s['success']}  {measured(s)}  energy: {show(s['energy_total'], 'J')}  "
        f"step time: {show(None if step is None else step * 1e3, 'ms', '.1f')}"
    )
    print(memory_text(s))
    print(cpu_text(s))
    between = s["between_steps_fraction"]
    print(f"time between steps: {'n/a' if between is None else format(100 * between, '.1f') + '%'} of the run")
    traced = Path(logdir) / "train" / "plugins" / "mobileperf" / "op_energy.json"
    if traced.exists():
        for step in json.loads(traced.read_text())["steps"]:
            duration = next(x.duration_s for x in report.steps if x.step == step["step"])
            print(
                f"traced step {step['step']}: waited {1e3 * step['input_wait_s']:.1f} ms for input "
                f"({100 * step['input_wait_s'] / duration:.0f}% of the step)"
            )
    print_unavailable(s)
    print(f"logdir: {logdir}")
    print(f"open it: {tool_command('tensorboard')} --logdir {logdir}")
