"""The ``mobileperf`` command line.

``mobileperf sensors`` answers the first question of anyone on a new board:
what can this machine measure, from where, and how fast?

Every error a user can cause (a bad argument, a missing or unreadable file,
a sweep directory in use, a Ray cluster that does not answer) is one line on
stderr, ``mobileperf: error: ...`` or argparse's ``mobileperf CMD: error: ...``,
and exit status 2. Ctrl-C is one line too, ``mobileperf: CMD interrupted``,
and exit status 130.

This module owns the parser and ``main``; the arguments' types are in
``arguments``, what each command does in ``commands``.
"""

from __future__ import annotations

import argparse
import logging
import sys

from tf_mobileperf.cli.arguments import (
    OneLineParser,
    board_types,
    existing_dir,
    finite,
    int_at_least,
    int_list,
    memory_size,
    model_names,
    out_dir,
    period_ms,
    positive,
    power_mode_ids,
    zoo_names,
)
from tf_mobileperf.cli.commands import cmd_combine, cmd_plot, cmd_sensors
from tf_mobileperf.cli.predict_command import cmd_predict
from tf_mobileperf.cli.sweep_command import cmd_sweep
from tf_mobileperf.sweep.defaults import MEASURED_STEPS, WARMUP_STEPS
from tf_mobileperf.sweep.results import SweepError

#: The exit status after Ctrl-C, as a shell gives a command that SIGINT ended.
INTERRUPTED = 130


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """The options of a sweep configuration, shared by sweep and predict."""
    p.add_argument(
        "--steps",
        type=int_at_least(1),
        default=WARMUP_STEPS + MEASURED_STEPS,
        help=f"training steps per configuration, warm-up included (fewer than {MEASURED_STEPS} measured "
        "steps are warned about: their mean is noise)",
    )
    p.add_argument(
        "--warmup-steps",
        type=int_at_least(0),
        default=WARMUP_STEPS,
        help="first steps recorded but left out of averages and totals",
    )
    p.add_argument(
        "--input-size",
        type=int_at_least(1),
        default=None,
        help="image side (32 CIFAR-10, 224 ImageNet) or sequence length",
    )
    p.add_argument("--sensors", default="auto", help="auto, none or replay:PATH[@SPEED] (a tegrastats log)")
    p.add_argument(
        "--out",
        required=True,
        type=out_dir,
        help="sweep directory: results.json/.csv, a TensorBoard run per configuration",
    )


def _add_sweep(sub: argparse._SubParsersAction) -> None:
    """The sweep command: its models and batch sizes, a run's options, power modes, the fleet (--ray)."""
    p = sub.add_parser(
        "sweep",
        help="models x batch sizes, each in its own process, OOM recorded as a result",
        description="Train models x batch sizes, each in its own process; an OOM is a result.",
    )
    p.add_argument(
        "--models", type=model_names, required=True, help="comma-separated zoo names: " + ", ".join(zoo_names())
    )
    p.add_argument("--batch-sizes", type=int_list, default="1,2,4,8,16,32,64", help="comma-separated")
    _add_run_options(p)
    p.add_argument("--memory-limit", type=memory_size, default=None, help="emulate a smaller device, e.g. 8GiB")
    p.add_argument("--find-max-batch", action="store_true", help="largest batch that fits, by doubling then bisection")
    p.add_argument(
        "--predict",
        action="store_true",
        help="with --find-max-batch: measure batch sizes 1,4,16 first and start the search at the predicted limit",
    )
    p.add_argument(
        "--power-modes",
        type=power_mode_ids,
        default=(),
        help="Jetson nvpmodel modes, comma-separated: every configuration runs in each (root); "
        "the board's own mode and clocks are restored at the end",
    )
    p.add_argument(
        "--jetson-clocks",
        choices=("on", "off"),
        default=None,
        help="run jetson_clocks (on) or keep the mode's own clock limits (off) in every mode (root)",
    )
    p.add_argument(
        "--settle-s",
        type=lambda text: finite(text, 0.0),
        default=5.0,
        help="seconds to wait after a mode change for the clocks to settle",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        default=None,
        help="run every configuration on the boards of the Ray cluster at ADDRESS (the head's "
        "host:port), one task per configuration and board type; needs the [fleet] extra",
    )
    p.add_argument(
        "--ray-timeout",
        metavar="SECONDS",
        type=positive,
        default=30.0,
        help="with --ray: how long to wait for the cluster to answer before giving up",
    )
    p.add_argument(
        "--boards",
        type=board_types,
        default=None,
        help="with --ray: comma-separated board types (the nodes' board:<type> resources); "
        "none: every board type of the cluster",
    )
    p.set_defaults(func=cmd_sweep)


def build_parser() -> argparse.ArgumentParser:
    """The ``mobileperf`` parser: ``-v`` and the sensors, sweep, predict, plot and combine commands."""
    parser = OneLineParser(
        prog="mobileperf",
        description="What a training step costs on this device: its sensors, "
        "sweeps of models x batch sizes, predictions and figures.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_sensors(sub)
    _add_sweep(sub)
    _add_predict(sub)
    _add_plot(sub)
    _add_combine(sub)
    return parser


def _add_sensors(sub: argparse._SubParsersAction) -> None:
    """``mobileperf sensors``: the sensors found, and a sampling test."""
    p = sub.add_parser(
        "sensors",
        help="list the sensors on this machine and test the sampling rate",
        description="List the sensors on this machine, why the others are absent, and test the sampling rate.",
    )
    p.add_argument("--root", default="/", help="root of the sysfs/procfs tree")
    p.add_argument("--period-ms", type=period_ms, default=5.0, help="sampling period for the test")
    p.add_argument(
        "--seconds", type=lambda text: finite(text, 0.0), default=2.0, help="length of the sampling test (0 skips it)"
    )
    p.set_defaults(func=cmd_sensors)


def _add_predict(sub: argparse._SubParsersAction) -> None:
    """``mobileperf predict``: a few batch sizes measured, the others predicted."""
    p = sub.add_parser(
        "predict",
        help="measure a few batch sizes, predict memory, time and energy at others",
        description="Measure a few batch sizes; predict memory, time and energy at others.",
    )
    p.add_argument(
        "--model", required=True, type=lambda text: model_names(text)[0], help="a zoo name: " + ", ".join(zoo_names())
    )
    p.add_argument(
        "--measure",
        type=lambda text: None if text == "auto" else int_list(text),
        default="auto",
        help="batch sizes to run; auto (default): 1, 4, 16, then doubling until the device saturates, "
        "then the gaps where the fit is least certain, at most --budget sizes up to the largest target",
    )
    p.add_argument("--budget", type=int_at_least(2), default=7, help="with --measure auto: the most sizes measured")
    p.add_argument("--target", type=int_list, default="8,16,32,64", help="batch sizes to predict")
    p.add_argument(
        "--precision",
        type=lambda text: finite(text, 0.0),
        default=0.03,
        help="run each measured size until the 95%% interval of its mean step time is within this "
        "fraction of the mean (0: exactly --steps steps)",
    )
    p.add_argument(
        "--max-steps", type=int_at_least(1), default=400, help="with --precision: the most steps a size runs"
    )
    _add_run_options(p)
    p.add_argument("--memory-limit", type=memory_size, default=None, help="say which targets would run out of it")
    p.set_defaults(func=cmd_predict)


def _add_plot(sub: argparse._SubParsersAction) -> None:
    """``mobileperf plot``: a sweep's figures and report.html."""
    p = sub.add_parser(
        "plot",
        help="figures of a sweep (one PNG each) and its report.html",
        description="Figures of a sweep against batch size, one PNG each, and a one-page report.html.",
    )
    p.add_argument("directory", type=existing_dir, help="a sweep's --out directory (holds results.json)")
    p.set_defaults(func=cmd_plot)


def _add_combine(sub: argparse._SubParsersAction) -> None:
    """``mobileperf combine``: a multi-worker logdir's runs combined."""
    p = sub.add_parser(
        "combine",
        help="combine the workers' runs of a multi-worker logdir (the chief does it at its end)",
        description="Combine the workers' runs of a multi-worker logdir into one report.",
    )
    p.add_argument("logdir", type=existing_dir, help="the logdir holding chief-N/worker-N folders")
    p.add_argument(
        "--tasks",
        type=lambda text: tuple(t for t in text.split(",") if t),
        default=None,
        help="comma-separated task names (none: every chief-N/worker-N folder in logdir)",
    )
    p.set_defaults(func=cmd_combine)


def main(argv: list[str] | None = None) -> int:
    """Runs the ``mobileperf`` command in ``argv``; a user's error or Ctrl-C is one line on stderr.

    Args:
        argv: The arguments after the program's name (None: ``sys.argv[1:]``).

    Returns:
        The command's exit status; 2 after a ``SweepError``, ``ValueError`` or ``OSError``, ``INTERRUPTED``
        (130) after Ctrl-C.
    """
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return args.func(args)
    except (SweepError, ValueError, OSError) as exc:  # what a user can cause; a bug still shows its traceback
        logging.getLogger(__name__).debug("mobileperf %s failed", args.command, exc_info=True)
        print(f"mobileperf: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: what it stopped has cleaned up on its way out
        logging.getLogger(__name__).debug("mobileperf %s interrupted", args.command, exc_info=True)
        print(f"mobileperf: {args.command} interrupted", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
