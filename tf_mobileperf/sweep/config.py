"""How every configuration of a sweep runs (``SweepConfig``), its arguments checked when it is made."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from tf_mobileperf.output.files import local_dir
from tf_mobileperf.session.options import check_int, resolve_sensors
from tf_mobileperf.sweep.defaults import MEASURED_STEPS, WARMUP_STEPS


@dataclasses.dataclass
class SweepConfig:
    """How every configuration of a sweep runs; ValueError (or FileNotFoundError) for a bad argument."""

    out: Path
    steps: int = WARMUP_STEPS + MEASURED_STEPS
    warmup_steps: int = WARMUP_STEPS
    input_size: int | None = None
    memory_limit: int | None = None
    sensors: str = "auto"
    timeout_s: float = 1800.0
    power_mode: int | None = None  #: the nvpmodel mode the configuration runs in (None: the board's, untouched)
    jetson_clocks: str | None = None  #: "on" or "off" (None: as the board had it)
    board_type: str | None = None  #: the Ray board resource it runs on, "orin-nano" (None: a local sweep)
    #: Train each configuration until the 95% interval of its mean step time is within this fraction of the mean
    #: (``steps``: the fewest, ``max_steps``: the most); None: exactly ``steps``.
    precision: float | None = None
    max_steps: int | None = None

    def __post_init__(self) -> None:
        self.out = local_dir(self.out)
        check_int("steps", self.steps, 1)
        check_int("warmup_steps", self.warmup_steps, 0)
        if self.warmup_steps >= self.steps:
            raise ValueError(
                f"steps ({self.steps}) must be more than warmup_steps ({self.warmup_steps}): no step would be measured"
            )
        if self.input_size is not None:
            check_int("input_size", self.input_size, 1)
        if self.memory_limit is not None:
            check_int("memory_limit", self.memory_limit, 1)
        if not (isinstance(self.timeout_s, (int, float)) and math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise ValueError(f"timeout_s must be a finite number > 0, got {self.timeout_s!r}")
        if self.precision is not None:
            if not (isinstance(self.precision, (int, float)) and 0 < self.precision < 1):
                raise ValueError(f"precision must be a fraction between 0 and 1, got {self.precision!r}")
            self.max_steps = self.max_steps if self.max_steps is not None else max(self.steps, 200)
            check_int("max_steps", self.max_steps, self.steps)
        elif self.max_steps is not None:
            raise ValueError("max_steps caps a run with a precision: give precision too")
        open_sensors_once(self.sensors)

    @property
    def measured_steps(self) -> int:
        """Steps measured in each configuration: those after the warm-up."""
        return self.steps - self.warmup_steps

    def key(self) -> dict:
        """What a result depends on besides its model and batch size."""
        key = {
            "steps": self.steps,
            "warmup_steps": self.warmup_steps,
            "input_size": self.input_size,
            "memory_limit": self.memory_limit,
            "sensors": self.sensors,
        }
        # Only where set, so that the rows of sweeps that leave the board alone keep their keys.
        board = {
            "power_mode": self.power_mode,
            "jetson_clocks": self.jetson_clocks,
            "board_type": self.board_type,
            "precision": self.precision,
            "max_steps": self.max_steps,
        }
        return key | {k: v for k, v in board.items() if v is not None}

    @property
    def runs(self) -> Path:
        """Where its TensorBoard runs go: DIR/runs, or DIR/runs/<board type> in a fleet sweep."""
        return self.out / "runs" / (self.board_type or "")


def open_sensors_once(spec: str) -> None:
    """Opens and closes the sensors ``spec`` names, so that a bad one fails now rather than in every child.

    Args:
        spec: The sweep's sensors option: "auto" (not opened: probing the machine is the child's work), "none"
            or "replay:PATH[@SPEED]".

    Raises:
        ValueError: the children would fail on ``spec`` (a missing replay log, a bad speed); it names ``spec``.
    """
    if spec == "auto":  # probing the machine is the child's work
        return
    try:
        for sensor in resolve_sensors(spec).sensors:
            sensor.close()
    except (ValueError, TypeError, OSError) as exc:
        raise ValueError(f"sensors {spec!r}: {exc}") from None
