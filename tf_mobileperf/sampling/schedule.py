"""When the sampler wakes and which sensors it reads: ticks of the period on the monotonic clock.

It exists so that the Python tick loop (``loop.py``), the C one (``_tick.c``,
which follows the same rules) and the owner (``sampler.Sampler``, whose
stall detection and report need the row rate) share one definition. A
sensor is read every ``every_ticks`` ticks on its own grid; the loop wakes
only every ``stride`` ticks, its fastest sensor's. A slower sensor's
``every`` is rounded up to a multiple of the stride (``plan``), so each of
its readings falls on a wake-up and its readings are evenly spaced (a 50 ms
sensor beside a 20 ms one is read every 60 ms, never 40 then 60 ms).
"""

from __future__ import annotations

import math


def inline_budget_s(period_s: float) -> float:
    """How long one sensor's ``read()`` may hold up the others before it is moved to its own thread.

    Long enough that a busy machine's scheduling delays rarely move a
    healthy sensor, short enough that the hole it leaves in the other
    channels stays well inside the join's allowed gap (0.1 s at 5 ms).

    Args:
        period_s: The sample period, seconds.

    Returns:
        Seconds: 4 periods, at least 20 ms.
    """
    return max(4 * period_s, 0.020)


def every_ticks(min_period_s: float, period_s: float) -> int:
    """Every how many ticks a sensor is read: 0.95 of its period in ticks, rounded up, at least 1.

    Args:
        min_period_s: The sensor's shortest period between reads, seconds.
        period_s: The tick period (the sample period), seconds.
    """
    return max(1, math.ceil(min_period_s * 0.95 / period_s - 1e-9))


#: The ``every`` of a sensor read in its own thread (``Sensor.own_thread``): never due on the loop's grid.
NEVER = 1 << 40


def grid_periods(sensors) -> list[float | None]:
    """Each sensor's ``min_period_s`` for ``plan``, in order.

    Args:
        sensors: The sensors of the loop.

    Returns:
        One entry per sensor: its ``min_period_s`` in seconds, or None for a sensor read in its own thread,
        which paces its reads itself and so never wakes the loop.
    """
    return [None if sensor.own_thread else sensor.min_period_s for sensor in sensors]


def plan(min_periods_s: list[float | None], period_s: float) -> tuple[list[int], int]:
    """Every how many ticks each sensor is read, and the ticks between wake-ups.

    The stride is the fastest sensor's ``every_ticks``; every other sensor's
    is rounded up to a multiple of it, never down (a sensor is never read
    faster than its ``min_period_s``).

    Args:
        min_periods_s: Each sensor's ``min_period_s``, seconds; None for a sensor read in its own thread,
            which is never due (``NEVER``).
        period_s: The tick period (the sample period), seconds.

    Returns:
        (each sensor's ``every`` in ticks, the stride in ticks).
    """
    every = [None if p is None else every_ticks(p, period_s) for p in min_periods_s]
    step = stride([e for e in every if e is not None])
    return [NEVER if e is None else -(-e // step) * step for e in every], step


def next_due(tick: int, due: int, every: int) -> int:
    """The tick a sensor read at ``tick`` is due next: on its own grid, after ``tick``.

    Args:
        tick: The tick it was read at (the due tick, or later if the loop was late).
        due: A tick on its grid (the one it was due at).
        every: Its ticks between reads.
    """
    return tick - (tick - due) % every + every


def stride(every: list[int]) -> int:
    """Ticks between wake-ups: the fastest sensor's ``every`` (1 without sensors).

    Args:
        every: Each sensor's ticks between reads.
    """
    return min(every, default=1)


def next_wake(tick: int, stride: int, period_s: float, origin_s: float, now_s: float) -> int:
    """The tick of the next wake-up after ``tick``.

    Args:
        tick: The tick of this wake-up.
        stride: Ticks between wake-ups.
        period_s: The tick period, seconds.
        origin_s: When tick 0 is, seconds of the monotonic clock; tick n is at ``origin_s + n * period_s``.
        now_s: The time now, seconds of the monotonic clock.

    Returns:
        ``tick + stride``, or, if the loop overran, the first tick a whole number of strides on that is still
        ahead of ``now_s``.
    """
    tick += stride
    behind = now_s - (origin_s + tick * period_s)
    if behind >= 0:
        tick += (math.floor(behind / (stride * period_s)) + 1) * stride
    return tick
