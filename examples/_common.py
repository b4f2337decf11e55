"""What the example scripts share: their common arguments and closing lines."""

from __future__ import annotations

import argparse
import logging


def parser(description: str, batch_size: int, steps: int, logdir: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--batch-size", type=int, default=batch_size)
    p.add_argument("--steps", type=int, default=steps, help="training steps (the first 3 are warm-up)")
    p.add_argument("--logdir", default=logdir)
    p.add_argument("--sensors", default="auto", help="auto, none, replay:PATH[@SPEED]")
    return p


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")


def finish(report, logdir) -> None:
    """Prints the summary and where the run was written (the logdir it claimed)."""
    s = report.summary()
    energy = "not measured on this device" if s["energy_total"] is None else f"{s['energy_total']:.3f} J"
    print(f"success: {s['success']}  steps measured: {s['steps_measured']}  energy: {energy}  "
          f"step time: {(s['step_time_s']['mean'] or 0) * 1e3:.1f} ms  peak memory: {'not measured' if s['mem_peak_gb'] is None else format(s['mem_peak_gb'], '.3f') + ' GiB'}")
    print(f"logdir: {logdir}")
    print(f"open it: tensorboard --logdir {logdir}")
