"""Sampling quality of a run: rate, interval error, gaps, stale channels.

Kept as running totals and a fixed histogram of interval errors, so a long
run costs constant memory; used by the monitor's report and ``mobileperf
sensors``. A channel's *gap* is a stretch without a valid reading longer
than the join's allowed gap (``format.gaps.allowed_gap_s``): a sensor that stopped
answering, whose energy the join marks incomplete rather than integrating
across it. ``add`` returns the channels whose first gap it found, so the
monitor can warn once. A dead sampler writes no rows at all: the hole shows
as a gap of every channel once rows resume, and the monitor records the
outage itself (``add_outage``), so a report never looks healthy over it.

Per channel the summary gives its own rate (``rate_hz``: its source's where
the channel declares it, ``Channel.period_s``, else ``read_hz``), how often
it was read with a value (``read_hz``: a replayed log's line is read at every
tick) and how often its value changed (``updates_hz``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tf_mobileperf.format.gaps import allowed_gap_s
from tf_mobileperf.sampling.sampler import Sampler
from tf_mobileperf.sampling.samples import Samples
from tf_mobileperf.sensors.base import Channel


@dataclasses.dataclass
class Outage:
    """A stretch when the sampler did not run: ``end_s`` None while it lasts."""

    start_s: float
    end_s: float | None
    reason: str


#: Interval-error histogram: 0 and log-spaced edges from 1 us to 100 s (about 1% wide).
_ERROR_EDGES = np.concatenate([[0.0], np.geomspace(1e-6, 100.0, 1600)])


class SamplingStats:
    """Running figures of sampling quality, kept small for long runs.

    Args:
        period_s: The sampler's period (its grid).
        channels: The sampled channels, in column order.
        channel_periods_s: Each channel's own refresh period (a slow sensor
            is read less often); defaults to ``period_s``.
        row_period_s: How often the sampler writes a row: it wakes only when
            its fastest sensor is due; defaults to ``period_s``. Intervals
            and gaps are measured against it.
    """

    def __init__(
        self,
        period_s: float,
        channels: list,
        channel_periods_s: list[float] | None = None,
        row_period_s: float | None = None,
    ):
        self.grid_period_s = period_s
        self.period_s = row_period_s or period_s
        self.channels = channels
        self.rows = 0
        self.first: float | None = None  # the first row's time, from add()
        self.last: float | None = None  # the last row's time, from add()
        self.error_counts = np.zeros(len(_ERROR_EDGES) + 1, dtype=np.int64)
        self.gaps = 0
        self.max_interval = 0.0
        self.valid = np.zeros(len(channels), dtype=np.int64)
        self.changes = np.zeros(len(channels), dtype=np.int64)
        periods = np.asarray(channel_periods_s if channel_periods_s is not None else [period_s] * len(channels))
        self.allowed_gap = np.array([allowed_gap_s(max(period_s, p)) for p in periods])
        self.channel_gaps = np.zeros(len(channels), dtype=np.int64)
        self.channel_gap_s = np.zeros(len(channels))
        self._last_valid_t = np.full(len(channels), np.nan)
        self._open_gap = np.zeros(len(channels), dtype=bool)
        self._prev: np.ndarray | None = None
        self._prev_t: float | None = None
        self.outages: list[Outage] = []

    @classmethod
    def of(cls, sampler: Sampler) -> SamplingStats:
        """Stats for ``sampler``'s channels, each at its sensor's own rate.

        Args:
            sampler: The sampler whose period, row period, sensors and channels the stats follow.
        """
        periods = [max(sampler.period_s, s.min_period_s) for s in sampler.sensors for _ in s.channels]
        return cls(sampler.period_s, sampler.channels, periods, sampler.row_period_s)

    def add(self, rows: Samples) -> list[str]:
        """Adds drained rows to the running figures.

        Args:
            rows: The rows drained since the last call, in time order (side rows count for the channels only).

        Returns:
            The names of the channels whose first gap (ended or still open) shows in these rows.
        """
        if not len(rows):
            return []
        grid_t = rows.t if rows.on_grid is None else rows.t[rows.on_grid]  # the grid's intervals, not the side rows'
        t = grid_t if self._prev_t is None else np.concatenate([[self._prev_t], grid_t])
        intervals = np.diff(t)
        self.error_counts += np.bincount(
            np.searchsorted(_ERROR_EDGES, np.abs(intervals - self.period_s), side="right"),
            minlength=len(self.error_counts),
        )
        if len(intervals):
            self.max_interval = max(self.max_interval, float(intervals.max()))
        self.gaps += int((intervals > 2 * self.period_s).sum())
        self.rows += len(grid_t)
        self.first = rows.t[0] if self.first is None else self.first
        self.last = rows.t[-1]
        self._prev_t = grid_t[-1] if len(grid_t) else self._prev_t
        finite = np.isfinite(rows.values)
        self.valid += finite.sum(axis=0)
        had_gap = (self.channel_gaps > 0) | self._open_gap
        for i in range(rows.values.shape[1]):
            column = rows.values[finite[:, i], i]
            if len(column):
                start = self._prev[i] if self._prev is not None and np.isfinite(self._prev[i]) else column[0]
                self.changes[i] += int(np.count_nonzero(np.diff(np.concatenate([[start], column]))))
            self._add_gaps(i, rows.t[finite[:, i]])
        last_valid = np.where(finite.any(axis=0), _last_finite(rows.values, finite), np.nan)
        self._prev = last_valid if self._prev is None else np.where(np.isnan(last_valid), self._prev, last_valid)
        new = ((self.channel_gaps > 0) | self._open_gap) & ~had_gap
        return [c.name for c, is_new in zip(self.channels, new) if is_new]

    def add_outage(self, start_s: float, end_s: float | None, reason: str) -> None:
        """Records that the sampler was down; recording the same ``start_s`` again updates that outage.

        Args:
            start_s: When it stopped, seconds of the monotonic clock (the last row's time).
            end_s: When rows came again, same clock; None while it lasts.
            reason: Why, in words (``Sampler.health``).
        """
        outage = Outage(float(start_s), None if end_s is None else float(end_s), reason)
        for k, known in enumerate(self.outages):
            if known.start_s == outage.start_s:
                self.outages[k] = outage
                return
        self.outages.append(outage)

    @property
    def open_outage(self) -> Outage | None:
        """The sampler outage still going on (no end yet), if any."""
        return self.outages[-1] if self.outages and self.outages[-1].end_s is None else None

    def _valid_since(self, i: int) -> float:
        """When channel i last read a valid value (the first row if it never did); after add() had rows."""
        assert self.first is not None, "no rows yet"
        return self._last_valid_t[i] if np.isfinite(self._last_valid_t[i]) else self.first

    def _add_gaps(self, i: int, valid_t: np.ndarray) -> None:
        """Counts the stretches of channel i without a valid reading; a trailing one stays open."""
        stretches = np.diff(np.concatenate([[self._valid_since(i)], valid_t]))
        long = stretches[stretches > self.allowed_gap[i]]
        self.channel_gaps[i] += len(long)
        self.channel_gap_s[i] += float(long.sum())
        if len(valid_t):
            self._last_valid_t[i] = valid_t[-1]
        assert self.last is not None  # add() set it before counting gaps
        self._open_gap[i] = self.last - self._valid_since(i) > self.allowed_gap[i]

    def _percentile_ms(self, q: float) -> float | None:
        total = self.error_counts.sum()
        if not total:
            return None
        k = int(np.searchsorted(np.cumsum(self.error_counts), q / 100.0 * total, side="left"))
        lo = _ERROR_EDGES[min(max(k - 1, 0), len(_ERROR_EDGES) - 1)]
        hi = _ERROR_EDGES[min(k, len(_ERROR_EDGES) - 1)]
        return float(np.sqrt(lo * hi) if lo > 0 else hi) * 1e3  # the bin's geometric middle

    def summary(self, sampler: Sampler | None) -> dict:
        """The report's sampling figures: rates, interval error, gaps, outages and per-channel rates.

        Args:
            sampler: The sampler the rows came from, for its mode, drops, errors and priority; None leaves those
                empty (rows replayed or simulated).

        Returns:
            A JSON-ready dict; rates in Hz, intervals in ms, None where too few rows came to say.
        """
        first, last = self.first, self.last
        span = last - first if self.rows > 1 and first is not None and last is not None else None
        per_channel = {}
        stale = {}
        for i, c in enumerate(self.channels):
            read = self.valid[i] / span if span else None
            rate = own_rate_hz(c, read)
            update = self.changes[i] / span if span else None
            open_s = last - self._valid_since(i) if self._open_gap[i] and last is not None else 0.0
            per_channel[c.name] = {
                "rate_hz": rate,
                "read_hz": read,
                "updates_hz": update,
                "gaps": int(self.channel_gaps[i] + self._open_gap[i]),
                "gap_s": float(self.channel_gap_s[i] + open_s),
            }
            if rate and update is not None and self.valid[i] > 20 and update < 0.2 * rate:
                stale[c.name] = update
        return {
            "requested_hz": 1.0 / self.grid_period_s,
            "row_hz": 1.0 / self.period_s,
            "achieved_hz": (self.rows - 1) / span if span else None,
            "interval_error_p50_ms": self._percentile_ms(50),
            "interval_error_p99_ms": self._percentile_ms(99),
            "max_interval_ms": self.max_interval * 1e3 if self.rows > 1 else None,
            "gaps": self.gaps,
            "samples": self.rows,
            "dropped": sampler.dropped if sampler else 0,
            "mode": sampler.mode if sampler else None,
            # A stand-in for the sampler (a replay, a simulation) may not start processes or keep words.
            "start_method": getattr(sampler, "start_method", None),
            "start_reason": getattr(sampler, "start_reason", None),
            "realtime": sampler.realtime_granted if sampler else None,
            "realtime_asked": sampler.realtime if sampler else None,
            "priority_reason": sampler.priority_reason if sampler else None,
            "tick_loop": sampler.tick_loop if sampler else None,
            "sensor_errors": sampler.errors() if sampler else {},
            "sensor_error_texts": (
                sampler.error_texts() if sampler is not None and hasattr(sampler, "error_texts") else {}
            ),
            "channels": per_channel,
            "channel_gaps": {name: v["gaps"] for name, v in per_channel.items() if v["gaps"]},
            "stale_channels_updates_hz": stale,
            "sampler_outages": [dataclasses.asdict(o) for o in self.outages],
        }


def own_rate_hz(channel: Channel, read_hz: float | None) -> float | None:
    """A channel's own rate in Hz: its source's where the channel says it, else how often it was read.

    Args:
        channel: The channel; its ``period_s`` (seconds), if set, gives the rate (a replayed 1 Hz log is 1 Hz
            however often it is read).
        read_hz: How often it was read with a value, Hz; None if unknown.
    """
    return 1.0 / channel.period_s if channel.period_s else read_hz


def _last_finite(values: np.ndarray, finite: np.ndarray) -> np.ndarray:
    """Per column, the last finite value (NaN where none)."""
    n = len(values)
    idx = n - 1 - np.argmax(finite[::-1], axis=0)
    return values[idx, np.arange(values.shape[1])]
