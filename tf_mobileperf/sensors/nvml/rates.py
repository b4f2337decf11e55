"""How often a library value changes and what one call of it costs, measured when a sensor is probed.

It exists because a GPU's values change at their own pace and cost very
different amounts to read: on an H200 (driver 580) the total-energy counter
costs ~4 ms a call and changes every ~100 ms, while utilization costs ~1 us
and changes every ~200 ms (``nvml``'s docstring has the figures). Reading
every value every 5 ms would spend the sampler's time on repeats, so each
value's read period is chosen from what this machine's driver does, measured
here back to back for a fraction of a second: its change period, and the
wall and CPU time (``time.thread_time``) of one call.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Collection, Mapping

#: No value is read more often than this.
MIN_PERIOD_S = 0.01
#: A value's reads may cost at most this share of one core.
CPU_SHARE = 0.002
#: ...and up to this share where less would read an energy counter slower than it changes (``NvmlEnergySensor``).
CPU_SHARE_MAX = 0.01
#: A change is placed in time only when the two calls around it span at most this long, from the start of the
#: one before it to the end of the one after (a stalled poll or call leaves it unplaced).
PLACED_S = 0.02


@dataclasses.dataclass
class QueryRate:
    """What polling one query back to back found.

    Args:
        calls: Calls made.
        wall_s: Median wall time of one call.
        cpu_s: Mean CPU time of one call (this thread's): what a budget of CPU per second adds up.
        changes: Times the value changed between two calls.
        change_period_s: The shortest time between two changes each placed within ``PLACED_S``
            (a value that repeats, such as utilization steady at 100%, skips a change and lengthens
            an interval, never shortens one); None without two such changes in a row.
        window_s: How long it was polled.
        error: The library's words if a call failed (polling it stopped there).
    """

    calls: int
    wall_s: float
    cpu_s: float
    changes: int
    change_period_s: float | None
    window_s: float
    error: str | None = None

    def to_dict(self) -> dict:
        """Every field, for the report's ``nvml_reads``."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class ReadPeriod:
    """How often a value is read, and why (which limit set it)."""

    period_s: float
    why: str


@dataclasses.dataclass
class _Track:
    """One query's calls so far."""

    walls: list[float] = dataclasses.field(default_factory=list)
    cpus: list[float] = dataclasses.field(default_factory=list)
    changed_at: list[tuple[float, float]] = dataclasses.field(default_factory=list)  # (when, within how long)
    last: tuple[float, object] | None = None  # (when the last call began, its value)
    error: str | None = None

    def call(self, query: Callable[[], object]) -> None:
        began, wall0, cpu0 = time.monotonic(), time.perf_counter(), time.thread_time()
        try:
            value = query()
        except Exception as exc:  # the library's own error: polling this query stops
            self.error = f"{type(exc).__name__}: {exc}"
            return
        cpu1, wall1 = time.thread_time(), time.perf_counter()
        self.walls.append(wall1 - wall0)
        self.cpus.append(cpu1 - cpu0)
        ended = began + (wall1 - wall0)
        if self.last is not None and value != self.last[1]:
            # The value was read somewhere inside each call: the change lies between the start of the last
            # call and the end of this one. A call that stalled (a descheduled thread, a slow driver) widens
            # that bracket, so a change it hid is never placed.
            self.changed_at.append(((self.last[0] + ended) / 2, ended - self.last[0]))
        self.last = (began, value)

    def placed_spacings(self) -> list[float]:
        """The spacings of consecutive changes both placed within ``PLACED_S``, s: what a change period is
        measured from."""
        changes = self.changed_at
        return [b[0] - a[0] for a, b in zip(changes, changes[1:]) if max(a[1], b[1]) <= PLACED_S]

    def rate(self, window_s: float) -> QueryRate:
        changes = self.changed_at
        placed = self.placed_spacings()
        period = min(placed) if placed else None
        return QueryRate(
            len(self.walls),
            statistics.median(self.walls) if self.walls else float("nan"),
            statistics.fmean(self.cpus) if self.cpus else float("nan"),
            len(changes),
            period,
            window_s,
            self.error,
        )


def watch(
    queries: Mapping[str, Callable[[], object]],
    until_changes: Collection[str] = (),
    window_s: float = 0.35,
    changes: int = 3,
    min_calls: int = 20,
    pace_s: float = 0.001,
) -> dict[str, QueryRate]:
    """Calls every query in turn, round after round (a round at most every ``pace_s``), and measures each.

    Stops after ``window_s``, or sooner once every query of ``until_changes``
    has ``changes - 1`` spacings between consecutive changes both placed in
    time (``PLACED_S``: what a period is measured from; on a loaded machine
    stalled polls leave some unplaced, and polling goes on), and every query
    was called ``min_calls`` times. A query that raises is not called again (its
    ``error`` says why).

    Args:
        queries: Name -> a call that returns the value.
        until_changes: Names of the queries whose changes polling waits for.
        window_s: The longest it polls, s.
        changes: Polling may stop once each of ``until_changes`` has ``changes - 1`` spacings between
            consecutive changes both placed (``changes`` changes in a row where no poll stalled).
        min_calls: How many calls of every query it makes before it stops early.
        pace_s: The shortest time from the start of one round to the next, s.

    Returns:
        Name -> what polling that query found, over the time it polled.
    """
    tracks = {name: _Track() for name in queries}
    start = time.monotonic()
    while True:
        round_start = time.monotonic()
        for name, query in queries.items():
            if tracks[name].error is None:
                tracks[name].call(query)
        now = time.monotonic()
        live = [t for t in tracks.values() if t.error is None]
        enough = all(len(t.walls) >= min_calls for t in live) and all(
            len(tracks[n].placed_spacings()) >= changes - 1 for n in until_changes if tracks[n].error is None
        )
        if enough or now - start >= window_s or not live:
            break
        time.sleep(max(0.0, round_start + pace_s - now))
    elapsed = time.monotonic() - start
    return {name: track.rate(elapsed) for name, track in tracks.items()}


def choose_period(basis_s: float, basis_why: str, cpu_s: float) -> ReadPeriod:
    """The read period: ``basis_s``, but never under ``MIN_PERIOD_S`` nor so often that calls cost over ``CPU_SHARE``.

    Args:
        basis_s: The period the value's pace asks for, s.
        basis_why: Why it asks for that: the ``why`` where it sets the period.
        cpu_s: The CPU time of one call, s.

    Returns:
        The longest of ``basis_s``, ``MIN_PERIOD_S`` and ``cpu_s / CPU_SHARE``; ``why`` names the one that set it.
    """
    terms = {
        basis_why: basis_s,
        f"the floor of {MIN_PERIOD_S:g} s": MIN_PERIOD_S,
        f"its CPU cost ({cpu_s * 1e6:.1f} us a call) kept within {CPU_SHARE:.1%} of a core": cpu_s / CPU_SHARE,
    }
    why, period = max(terms.items(), key=lambda item: item[1])  # the first of equals: the value's own pace
    return ReadPeriod(period, why)


def paced_period(rate: QueryRate | None, fraction: float, default_change_s: float, what: str) -> ReadPeriod:
    """Reads a value ``fraction`` of its measured change period apart, within ``choose_period``'s limits.

    Args:
        rate: What polling the value measured; None: it was not polled.
        fraction: The share of its change period between two reads.
        default_change_s: Its change period where it was not seen to change (as on an H200), s.
        what: The value's name, for ``why``.

    Returns:
        The read period and why.
    """
    if rate is not None and rate.change_period_s:
        change, how = rate.change_period_s, "measured"
    else:
        seen = f"{rate.changes} change(s) in {rate.window_s:.2f} s" if rate is not None else "not polled"
        change, how = default_change_s, f"{seen}: assumed, as on an H200"
    basis = f"{fraction:g} of its change period ({what}: {change:.3f} s, {how})"
    return choose_period(change * fraction, basis, rate.cpu_s if rate is not None and rate.calls else 0.0)
