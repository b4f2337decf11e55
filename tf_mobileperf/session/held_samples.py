"""The samples the collector holds in memory for the steps not yet joined, and how long it keeps them.

Samples are kept for ``COUNTER_HISTORY`` update periods of the slowest energy counter before the oldest step not
yet joined: the join places a counter's changes on its update grid, fitted over the changes on either side of
a step (``steps.counter``).
"""

from __future__ import annotations

import numpy as np

from tf_mobileperf.sampling.samples import Samples
from tf_mobileperf.sensors.base import Channel
from tf_mobileperf.steps.counter import settled_until
from tf_mobileperf.steps.join import StepValues

#: Update periods of the slowest counter kept before the oldest step not yet joined (at most
#: ``COUNTER_HISTORY_MAX_S``): the join fits the counter's update grid through the changes on either side of
#: a step, and over 8 changes its rate was off by 1.6% (an edge placed 7 ms off), over 32 by well under 0.1%.
COUNTER_HISTORY, COUNTER_HISTORY_MAX_S = 32, 5.0


class HeldSamples:
    """Drained samples, held until no step needs them.

    Args:
        channels: The sampler's channels, one column each.
        slowest_s: The slowest sensor's period: samples within 4 of them before a step are kept for its edge.
    """

    def __init__(self, channels: list[Channel], slowest_s: float):
        self.channels = channels
        self.counters = any(c.kind == "energy" for c in channels)
        self._slowest_s = slowest_s
        self._held: list[Samples] = []
        # Samples kept before the oldest step not yet joined: a few updates of the slowest counter once known.
        self._counter_margin_s = COUNTER_HISTORY_MAX_S if self.counters else 0.0

    @property
    def rows(self) -> int:
        """Samples held."""
        return sum(len(b) for b in self._held)

    @property
    def last_t(self) -> float:
        """The time of the latest sample held (-inf: none)."""
        return float(self._held[-1].t[-1]) if self._held and len(self._held[-1]) else -np.inf

    def append(self, rows: Samples) -> None:
        """Holds ``rows``.

        Args:
            rows: Samples drained from the sampler, later than those held.
        """
        self._held.append(rows)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Every sample held, as one time array and one (samples, channels) array."""
        return (
            np.concatenate([b.t for b in self._held]) if self._held else np.empty(0),
            np.concatenate([b.values for b in self._held]) if self._held else np.empty((0, len(self.channels))),
        )

    def settled_until(self, settle_max_s: float) -> float:
        """Up to when every energy counter's interpolation is final in the samples held (``counter.settled_until``).

        Args:
            settle_max_s: A counter with no valid reading within this many seconds of the latest sample is left out.

        Returns:
            The time, in seconds of the sampler's clock; inf without a counter, -inf with no sample held.
        """
        t, values = self.arrays()
        return settled_until(t, values, self.channels, settle_max_s) if len(t) else -np.inf

    def note_update_periods(self, joined: dict[str, StepValues]) -> None:
        """Keeps ``COUNTER_HISTORY`` update periods (at most ``COUNTER_HISTORY_MAX_S``) of the slowest counter
        the join found.

        Args:
            joined: The join's values by channel; energy channels without an update period are skipped.
        """
        periods = [v.update_period_s for v in joined.values() if v.channel.kind == "energy" and v.update_period_s]
        if periods:
            self._counter_margin_s = min(COUNTER_HISTORY_MAX_S, COUNTER_HISTORY * max(periods))

    def trim(self, oldest_needed: float | None) -> None:
        """Forgets the samples older than a step starting at ``oldest_needed`` needs: whole drained batches that
        end before the larger of 4 periods of the slowest sensor and the counters' history ahead of it.

        Args:
            oldest_needed: The start of the oldest step not yet joined, in seconds; None when no step is
                pending (the margin is then kept before the latest sample).
        """
        if not self._held:
            return
        margin = max(4 * self._slowest_s, self._counter_margin_s)
        keep_from = (oldest_needed if oldest_needed is not None else self._held[-1].t[-1]) - margin
        self._held = [b for b in self._held if len(b) and b.t[-1] >= keep_from]
