"""The ops of the steps traced with ``profile_steps``, from the TF profiler's XSpace
(``<run>/plugins/profile/<session>/<host>.xplane.pb``), read with xprof's ``ProfileData`` (the parser the
Profile tab itself uses), on the clock of our samples.

Clocks: the profiler stamps events in wall-clock nanoseconds (the XSpace's
``profile_start_time`` plus each event's offset); our samples and step
windows are on ``time.monotonic()``. ``ClockPair.now()`` reads monotonic,
wall, monotonic, keeps the tightest of a few tries, and the offset between
the two clocks is taken from it when the trace starts; its uncertainty is
half the time between the two monotonic reads (reported as
``alignment_uncertainty_us``). The XSpace lists events thread by thread, in
no particular order of threads, and TF runs each call of a step on whichever
inter-op thread ("tf_Compute") is free: under load, consecutive steps land on
different threads, so a later step's ops can come first. ``read_ops`` puts
the ops in time order.
"""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path
from typing import overload

import numpy as np

#: An op event: "scope/name:OpType" (framework events have "::" or spaces).
_OP = re.compile(r"^([^:\s]+):([A-Za-z_]\w*)$")
_WRAPPERS = {"StatefulPartitionedCall", "PartitionedCall", "gradient_tape"}
#: tf.data's wait for the next batch; counted as an op "IteratorGetNext" (layer "(input)").
_INPUT_EVENT = "IteratorGetNextOp::DoCompute"
INPUT_OP = "IteratorGetNext"
NO_LAYER = "(no layer)"
#: The suffix TF adds to make a name scope unique ("dense_1" -> "dense_1_2").
_UNIQUE = re.compile(r"_\d+$")


@dataclasses.dataclass(frozen=True)
class ClockPair:
    """A monotonic and a wall-clock reading taken together, in seconds."""

    monotonic_s: float
    wall_s: float
    uncertainty_s: float

    @classmethod
    def now(cls, tries: int = 5) -> ClockPair:
        """Reads monotonic, wall, monotonic ``tries`` times and keeps the tightest reading.

        Args:
            tries: How many readings to take; at least 1.

        Returns:
            The pair: the midpoint of the two monotonic reads, the wall reading, and half the time between the
            monotonic reads as its uncertainty (all in s).

        Raises:
            ValueError: ``tries`` is below 1.
        """
        if tries < 1:
            raise ValueError(f"tries must be at least 1, got {tries}")
        best: tuple[int, int, int] | None = None
        for _ in range(tries):
            before = time.monotonic_ns()
            wall = time.time_ns()
            after = time.monotonic_ns()
            if best is None or after - before < best[2] - best[0]:
                best = (before, wall, after)
        assert best is not None  # tries >= 1
        before, wall, after = best
        return cls((before + after) / 2e9, wall / 1e9, (after - before) / 2e9)

    @overload
    def to_monotonic(self, wall_s: np.ndarray) -> np.ndarray: ...

    @overload
    def to_monotonic(self, wall_s: float) -> float: ...

    def to_monotonic(self, wall_s: np.ndarray | float) -> np.ndarray | float:
        """Moves wall-clock times to the monotonic clock by this pair's offset.

        Args:
            wall_s: Wall-clock time(s) (s since the epoch): a number or an array.

        Returns:
            The same time(s) on ``time.monotonic()`` (s), of the same shape.
        """
        return wall_s - self.wall_s + self.monotonic_s


@dataclasses.dataclass
class Ops:
    """Op events of a trace, on the monotonic clock (arrays of equal length)."""

    name: np.ndarray
    op_type: np.ndarray
    layer: np.ndarray
    device: np.ndarray  # "cpu" or "gpu"
    thread: np.ndarray
    start_s: np.ndarray
    end_s: np.ndarray

    def __len__(self) -> int:
        return len(self.start_s)

    def select(self, index: np.ndarray) -> Ops:
        """The ops at some positions.

        Args:
            index: A boolean mask or an array of positions; positions give the ops in that order.

        Returns:
            A new ``Ops`` with those ops.
        """
        return Ops(*(getattr(self, f.name)[index] for f in dataclasses.fields(self)))


def layer_of(scope: str) -> str:
    """The layer's name scope of an op, forward or gradient: the part after the model's.

    TF makes name scopes unique with a suffix: in a traced train step, Keras
    layer "dense" shows as "dense_1" and "dense_1" as "dense_1_2", and repeated
    scopes as "Add", "Add_1", ... So one trailing ``_<digits>`` is taken off
    each part, which gives back Keras's layer names and groups the repeats.
    Ops outside any layer (optimizer, input) are "(no layer)".

    Args:
        scope: The op event's name scope: the part of "scope/name:OpType" before the colon.

    Returns:
        The layer's name, or ``NO_LAYER``.

    >>> layer_of("StatefulPartitionedCall/gradient_tape/sequential_1/dense_1_2/MatMul")
    'dense_1'
    """
    parts = [_UNIQUE.sub("", p) for p in scope.split("/") if p not in _WRAPPERS]
    return parts[1] if len(parts) > 2 else NO_LAYER


def read_ops(xplane: str | Path, clocks: ClockPair) -> Ops:
    """The op events of an XSpace file, moved to the monotonic clock, in time order.

    Args:
        xplane: The ``<host>.xplane.pb`` file.
        clocks: The clock pair read when the trace started, to move the profiler's wall-clock times.

    Returns:
        The ops (and tf.data's waits, as ``INPUT_OP``) with positive duration, sorted by start, then end.

    Raises:
        ValueError: No plane of the file has a ``profile_start_time``.
    """
    from xprof.profile_data import ProfileData

    rows: list[tuple[str, str, str, str, str, float, float]] = []
    data = ProfileData.from_file(str(xplane))
    start_ns = None
    for plane in data.planes:
        stats = dict(plane.stats)
        if "profile_start_time" in stats:
            start_ns = int(stats["profile_start_time"])
    if start_ns is None:
        raise ValueError(f"{xplane} has no profile_start_time")
    for plane in data.planes:
        device = "gpu" if "GPU" in plane.name.upper() and not plane.name.startswith("/host") else "cpu"
        for line in plane.lines:
            for event in line.events:
                match = _OP.match(event.name)
                if event.duration_ns <= 0 or not (match or event.name == _INPUT_EVENT):
                    continue
                name, op_type, layer = (
                    (event.name, match.group(2), layer_of(match.group(1))) if match else (INPUT_OP, INPUT_OP, "(input)")
                )
                rows.append(
                    (
                        name,
                        op_type,
                        layer,
                        device,
                        line.name,
                        (start_ns + event.start_ns) / 1e9,
                        (start_ns + event.start_ns + event.duration_ns) / 1e9,
                    )
                )

    def column(k: int, dtype: type = object) -> np.ndarray:
        return np.array([row[k] for row in rows], dtype=dtype)

    ops = Ops(
        column(0),
        column(1),
        column(2),
        column(3),
        column(4),
        clocks.to_monotonic(column(5, float)),
        clocks.to_monotonic(column(6, float)),
    )
    return ops.select(np.lexsort((ops.end_s, ops.start_s)))
