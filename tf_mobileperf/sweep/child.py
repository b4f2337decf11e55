"""One sweep configuration, run in its own process by ``mobileperf sweep``.

A child so that an out-of-memory, whether TensorFlow's ResourceExhaustedError,
Python's MemoryError or the kernel's OOM killer, ends only this configuration.
``--memory-limit`` emulates a smaller device: on CPU an RLIMIT_AS of the
child's address space at start (interpreter and TensorFlow loaded) plus the
limit, set before the model is built so weights count; on a GPU a logical
device with that memory limit.

    python -m tf_mobileperf.sweep.child --model cnn --batch-size 8 --steps 10 --logdir DIR

With ``--precision 0.03 --max-steps 400`` it trains until the 95% interval of
the mean step time of its measured steps is within 3% of the mean (at least
``--steps`` steps, at most ``--max-steps``; the same ``--steps`` batches of
data, repeated), and its summary gives ``step_time_s_ci95`` (low, high),
``step_time_precision_reached`` and ``steps_until_precise``.

It writes ``summary.json`` into the directory its measurement claimed (DIR,
or DIR/run-N if DIR held another one), atomically, a report of kind
``sweep_summary`` (``format.schema``), or exits with ``SETUP_FAILED`` and
one line on stderr if it could not set the run up.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import resource
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tf_mobileperf.format.layout import RunLayout
from tf_mobileperf.format.schema import SWEEP_SUMMARY
from tf_mobileperf.format.writer import write_report
from tf_mobileperf.sweep.defaults import MEASURED_STEPS, WARMUP_STEPS
from tf_mobileperf.sweep.launch import PARENT_ENV, SETUP_FAILED
from tf_mobileperf.sweep.sizes import parse_size

if TYPE_CHECKING:
    from tf_mobileperf.callback import MobilePerfCallback
    from tf_mobileperf.steps.records import StepRecord

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """SIGKILL for this child when its parent dies (Linux); it exits now if the parent is gone already."""
    parent = os.environ.get(PARENT_ENV)
    if parent is None or not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(parent):
        sys.exit(f"sweep child: its parent {parent} is gone")


def _emulate_memory_limit(limit: int) -> dict:
    """Sets the limit; returns the summary fields saying how, and in which quantity it caps (``limited_*``)."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        tf.config.set_logical_device_configuration(
            gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=limit // 2**20)]
        )
        return {
            "memory_limit_bytes": limit,
            "memory_limit_emulated_by": "tf logical GPU device memory_limit",
            "limited_quantity": "GPU memory (TF allocator)",
            "limited_how": "logical device memory_limit",
            "limited_cap_gb": limit / 2**30,
        }
    vm = _status_bytes("VmSize")
    resource.setrlimit(resource.RLIMIT_AS, (vm + limit, vm + limit))
    return {
        "memory_limit_bytes": limit,
        "memory_limit_emulated_by": f"RLIMIT_AS = address space at start ({vm} B) + "
        f"limit; oneDNN {'off' if os.environ.get('TF_ENABLE_ONEDNN_OPTS') == '0' else 'on'}",
        "limited_quantity": "address space",
        "limited_cap_gb": (vm + limit) / 2**30,
        "limited_how": f"RLIMIT_AS = address space at start + {limit / 2**30:g} GiB",
    }


def _status_bytes(field: str) -> int:
    """A memory field of /proc/self/status (VmSize, VmPeak, ...), in bytes."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))


def _limited_peak(limit: dict) -> dict:
    """The child's peak of the quantity its memory limit caps: address space (VmPeak) or the GPU allocator's."""
    if not limit:
        return {}
    if limit["limited_quantity"] == "address space":
        return {"limited_peak_gb": _status_bytes("VmPeak") / 2**30}
    import tensorflow as tf

    try:
        return {"limited_peak_gb": tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**30}
    except (ValueError, RuntimeError):  # no allocator statistics on this device: the peak stays unknown
        return {}


def _peak_rss_gb() -> float:
    """This process's peak resident memory (GiB): ``VmHWM`` of its own address space. Not ``ru_maxrss``, which
    Linux carries over a fork and an exec: a child of a 1.6 GB parent reported 1.6 GB at every batch size."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024 / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30  # no procfs: the best there is


def _until_precise(cb: MobilePerfCallback, precision: float, min_steps: int):
    """A Keras callback that stops training once the mean of the measured steps' times is known to ``precision``
    (``step_model.precision_reached``: the 95% interval's half-width / the mean, at least ``min_steps`` steps).

    It decides from the steps ``cb``'s monitor closed (their windows, as steps.csv records them, warm-up and
    failed steps left out), so its decision and the interval ``_precision`` reports agree; it must come after
    ``cb`` in ``fit``'s callbacks, which closes each step first."""
    import keras

    from tf_mobileperf.analysis.step_model import precision_reached

    class UntilPrecise(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.durations: list[float] = []
            self._last: StepRecord | None = None

        def on_train_batch_end(self, batch, logs=None):
            step = cb.monitor.last_step
            if step is None or step is self._last:
                return
            self._last = step
            if step.warmup or step.failed:
                return
            self.durations.append(step.duration_s)
            if precision_reached(self.durations, precision, max(min_steps, 2)):
                self.model.stop_training = True

    return UntilPrecise()


def _precision(logdir: Path, precision: float) -> dict:
    """The 95% interval of the mean step time of the run's measured steps (steps.csv), and whether it is within
    ``precision``."""
    from tf_mobileperf.analysis.step_model import ci95
    from tf_mobileperf.format.steps_csv import read_steps

    durations = [s["duration_s"] for s in read_steps(logdir) if not (s["warmup"] or s["failed"])]
    interval = ci95(durations)
    half = None if interval is None else (interval[2] - interval[1]) / 2 / interval[0]
    return {
        "step_time_s_ci95": None if interval is None else [interval[1], interval[2]],
        "step_time_precision": precision,
        "step_time_precision_reached": half is not None and half <= precision,
        "step_time_relative_half_width": half,
        "steps_until_precise": len(durations),
    }


def _parser() -> argparse.ArgumentParser:
    """The child's options, as ``launch.options`` writes them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--steps", type=int, default=WARMUP_STEPS + MEASURED_STEPS)
    parser.add_argument("--warmup-steps", type=int, default=WARMUP_STEPS)
    parser.add_argument("--input-size", type=int, default=None)
    parser.add_argument("--memory-limit", type=parse_size, default=None)
    parser.add_argument("--sensors", default="auto")
    parser.add_argument("--logdir", required=True)
    parser.add_argument(
        "--precision",
        type=float,
        default=None,
        help="train until the 95%% interval of the mean step time is within this fraction of it "
        "(--steps: the fewest, warm-up included; --max-steps: the most)",
    )
    parser.add_argument("--max-steps", type=int, default=None)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Trains one configuration under the measurement and writes its ``summary.json``.

    Args:
        argv: The child's options (``launch.options``); None: ``sys.argv[1:]``.

    Returns:
        0 once the summary is written (an out-of-memory included), or ``SETUP_FAILED`` where the run could not
        be set up (an unknown model, bad sensors, an unwritable logdir), with one line on stderr.
    """
    args = _parser().parse_args(argv)
    _die_with_parent()
    logging.basicConfig(level=logging.WARNING)

    import tensorflow as tf

    from tf_mobileperf import zoo
    from tf_mobileperf.callback import MobilePerfCallback

    rss_at_start = _peak_rss_gb()  # TF imported, no model yet
    try:
        spec = zoo.get(args.model)
        Path(args.logdir).mkdir(parents=True, exist_ok=True)
        limit = _emulate_memory_limit(args.memory_limit) if args.memory_limit else {}
        cb = MobilePerfCallback(
            args.logdir, warmup_steps=args.warmup_steps, sensors=args.sensors, batch_size=args.batch_size
        )
    except (ValueError, TypeError, OSError) as exc:  # not the model's run: the sweep retries it
        print(f"sweep child: cannot set up {args.model} batch {args.batch_size}: {exc}", file=sys.stderr)
        return SETUP_FAILED
    try:
        model = spec.build(args.input_size)
        x, y = spec.synthetic(args.batch_size, args.steps, args.input_size)
        if args.precision:  # the same data as without (--steps batches), repeated up to --max-steps
            data = tf.data.Dataset.from_tensor_slices((x, y)).batch(args.batch_size, drop_remainder=True).repeat()
            until = _until_precise(cb, args.precision, args.steps - args.warmup_steps)
            model.fit(
                data, steps_per_epoch=max(args.max_steps or 0, args.steps), epochs=1, callbacks=[cb, until], verbose=0
            )
        else:
            model.fit(x, y, batch_size=args.batch_size, epochs=1, callbacks=[cb], verbose=0)
        if cb.report is None:  # on_train_end ended the measurement as fit returned
            raise RuntimeError("the measurement has no report after fit returned")
        summary = cb.report.summary()
        if args.precision:
            summary.update(_precision(cb.monitor.logdir, args.precision))
    except (tf.errors.ResourceExhaustedError, MemoryError) as exc:  # before the first step: building, data
        summary = cb.monitor.end().summary() if cb.report is None else cb.report.summary()
        summary.update(success=False, failed_step=None, error=f"{type(exc).__name__} before training: {str(exc)[:500]}")
    summary.update(limit | _limited_peak(limit))
    # The child's own peak RSS, and its RSS before the model existed: what the batch size adds is the difference.
    summary.update(proc_peak_gb=_peak_rss_gb(), rss_at_start_gb=rss_at_start)
    # Where the callback's measurement went: the logdir, or logdir/run-N if another had claimed it.
    write_report(RunLayout(cb.monitor.logdir).sweep_summary, summary, SWEEP_SUMMARY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
