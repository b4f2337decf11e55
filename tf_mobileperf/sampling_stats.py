"""Sampling quality of a run: rate, interval error, gaps, stale channels.

Kept as running totals (plus the interval errors as float32) so a long run
costs little memory; used by the monitor's report and ``mobileperf sensors``.
"""

from __future__ import annotations

import numpy as np

from .sampler import Sampler, Samples


class SamplingStats:
    """Running figures of sampling quality, kept small for long runs."""

    def __init__(self, period_s: float, channels: list):
        self.period_s = period_s
        self.channels = channels
        self.rows = 0
        self.first = self.last = None
        self.errors: list[np.ndarray] = []
        self.gaps = 0
        self.max_interval = 0.0
        self.valid = np.zeros(len(channels), dtype=np.int64)
        self.changes = np.zeros(len(channels), dtype=np.int64)
        self._prev: np.ndarray | None = None
        self._prev_t: float | None = None

    def add(self, rows: Samples) -> None:
        t = rows.t if self._prev_t is None else np.concatenate([[self._prev_t], rows.t])
        intervals = np.diff(t)
        self.errors.append(np.abs(intervals - self.period_s).astype(np.float32))
        if len(intervals):
            self.max_interval = max(self.max_interval, float(intervals.max()))
        self.gaps += int((intervals > 2 * self.period_s).sum())
        self.rows += len(rows)
        self.first = rows.t[0] if self.first is None else self.first
        self.last = rows.t[-1]
        self._prev_t = rows.t[-1]
        finite = np.isfinite(rows.values)
        self.valid += finite.sum(axis=0)
        for i in range(rows.values.shape[1]):
            column = rows.values[finite[:, i], i]
            if len(column):
                start = self._prev[i] if self._prev is not None and np.isfinite(self._prev[i]) else column[0]
                self.changes[i] += int(np.count_nonzero(np.diff(np.concatenate([[start], column]))))
        last_valid = np.where(finite.any(axis=0), _last_finite(rows.values, finite), np.nan)
        self._prev = last_valid if self._prev is None else np.where(np.isnan(last_valid), self._prev, last_valid)

    def summary(self, sampler: Sampler | None) -> dict:
        span = (self.last - self.first) if self.rows > 1 else None
        errors = np.concatenate(self.errors) if self.errors else np.array([])
        per_channel = {}
        stale = {}
        for i, c in enumerate(self.channels):
            rate = self.valid[i] / span if span else None
            update = self.changes[i] / span if span else None
            per_channel[c.name] = {"read_hz": rate, "updates_hz": update}
            if rate and update is not None and self.valid[i] > 20 and update < 0.2 * rate:
                stale[c.name] = update
        return {
            "requested_hz": 1.0 / self.period_s,
            "achieved_hz": (self.rows - 1) / span if span else None,
            "interval_error_p50_ms": float(np.percentile(errors, 50) * 1e3) if len(errors) else None,
            "interval_error_p99_ms": float(np.percentile(errors, 99) * 1e3) if len(errors) else None,
            "max_interval_ms": self.max_interval * 1e3 if self.rows > 1 else None,
            "gaps": self.gaps,
            "samples": self.rows,
            "dropped": sampler.dropped if sampler else 0,
            "mode": sampler.mode if sampler else None,
            "realtime": sampler.realtime_granted if sampler else None,
            "sensor_errors": sampler.errors() if sampler else {},
            "channels": per_channel,
            "stale_channels_updates_hz": stale,
        }


def _last_finite(values: np.ndarray, finite: np.ndarray) -> np.ndarray:
    """Per column, the last finite value (NaN where none)."""
    n = len(values)
    idx = n - 1 - np.argmax(finite[::-1], axis=0)
    return values[idx, np.arange(values.shape[1])]
