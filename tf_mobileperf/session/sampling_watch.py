"""What the collector says about its sampler and its channels, each thing once: a sampler that died or stopped
writing, gaps, channels never read, values their source leaves out, sources that ran out, energy counters that
froze.

A sampler that died or stopped writing is recorded as an outage, warned about once and restarted once.

Channels that never gave a valid value are named once, at the first
measured step (``warn_unread``), with the library's own words for the
failure where the sampler has them (``unread_reasons``); a channel that
stops answering later is warned about as a gap. A channel its source itself
leaves without a value at times (``Sensor.absent_in_source``: a core a
tegrastats log says is "off") is neither: it is named once at info level,
and its reason is the report's. A source that ends (a replayed log,
``Sensor.covers_s``) is no gap either once it has: a run that outlasted it is
said once, at its end (``Sensor.ran_out``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import numpy as np

from tf_mobileperf.sampling.sampler import Sampler
from tf_mobileperf.sampling.samples import Samples
from tf_mobileperf.sampling.stats import SamplingStats
from tf_mobileperf.session import cpu_times
from tf_mobileperf.session.guard import Guard
from tf_mobileperf.session.unread import absent_in_source, ending_sources, never_valued, unread_reasons
from tf_mobileperf.steps.counter import frozen

log = logging.getLogger(__name__)

#: The hypervisor's steal (CPU seconds, all cores) between two drains from which a gap is said to be the host's:
#: half of one core's 100 ms. A VM's host that throttles it to its CPU quota holds it back 100 ms at a time,
#: sampler and trainer alike, and each such hold is a gap of every channel.
HELD_BACK_S = 0.05


class SamplingWatch:
    """Warnings about the sampler and the channels of one run, each said once.

    Args:
        sampler: The run's sampler (None: a run without sensors, nothing to say).
        stats: The run's sampling statistics, updated by the collector before each call.
        clock: The steps' clock, for an outage that starts before any row.
        guard: Runs the sampler's restart, logging a failure instead of raising it.

    Example:
        >>> watch = SamplingWatch(sampler, stats, time.monotonic, Guard())  # doctest: +SKIP
        >>> watch.rows_added(rows, stats.add(rows))
    """

    def __init__(self, sampler: Sampler | None, stats: SamplingStats, clock: Callable[[], float], guard: Guard):
        self.sampler = sampler
        self.stats = stats
        self._clock = clock
        self._guard = guard
        self._restarted = False  # the sampler is restarted once at most
        self.channels = sampler.channels if sampler else []
        self._lock = threading.RLock()  # warn_unread comes from the main thread (a signal handler too)
        self._absent = absent_in_source(sampler)  # no value there is the source's word, not a gap
        self._absent_noted: set[str] = set()
        self._unread_warned: set[str] = set()
        self._steal_s = cpu_times.steal_s()  # at the last rows, for a gap the host caused
        self.frozen_since_s: dict[str, float] = {}  # energy counter -> when it last changed, once it froze
        self._measured_seen = False  # the first measured step has closed: unread channels are named now
        self._ran_out_said = False

    def check_sampler(self, sampler: Sampler, rows: Samples) -> None:
        """Records a sampler that died or stopped writing as an outage in the statistics, with one warning per
        outage, and restarts it (once per run); an open outage is closed when rows come again.

        Args:
            sampler: The run's sampler, asked for its ``health()``.
            rows: The rows drained last; the outage starts at their last sample (else at the last one seen).
        """
        outage = self.stats.open_outage
        if outage is not None and len(rows) and rows.t[-1] > outage.start_s:  # rows again: it ended
            self.stats.add_outage(outage.start_s, float(rows.t[0]), outage.reason)
            outage = None
        reason = sampler.health()
        if reason is None or outage is not None:
            return
        start = float(rows.t[-1]) if len(rows) else (self.stats.last if self.stats.last is not None else self._clock())
        self.stats.add_outage(start, None, reason)
        restart = not self._restarted
        log.warning(
            "mobileperf: %s; %s",
            reason,
            "restarting it once: the steps in the hole have no energy"
            if restart
            else "it was restarted once already: the steps from now on have no energy",
        )
        if restart:
            self._restarted = True
            self._guard("restart the sampler", sampler.restart)

    def rows_added(self, rows: Samples, gapped: list[str]) -> None:
        """Says what the rows just added to the statistics showed: channels that stopped answering, and,
        after the first measured step, channels never read.

        Args:
            rows: The rows just added; not empty.
            gapped: The channels whose gap grew past the allowed one (``SamplingStats.add``'s result).
        """
        held = self._held_back()
        self._note_absent([name for name in gapped if name in self._absent])
        gapped = [name for name in gapped if name not in self._absent and name not in self._ended(rows.t[-1])]
        unread = set(never_valued(self.stats))
        stopped = [name for name in gapped if name not in unread]
        if stopped:
            cause = "a sensor stopped answering?"
            if held is not None and held >= HELD_BACK_S:
                cause = f"the host held this VM back meanwhile: the hypervisor's steal rose {held:.2f} CPU s"
            log.warning(
                "mobileperf: no valid reading of %s for longer than the allowed gap (%s); energy over the "
                "gap is marked incomplete, the sampling section of the report counts the gaps",
                ", ".join(stopped),
                cause,
            )
        if self._measured_seen and any(name in unread for name in gapped):
            self._warn_unread([name for name in gapped if name in unread])

    def _held_back(self) -> float | None:
        """The hypervisor's steal since the last rows (CPU seconds), None where ``/proc/stat`` does not say."""
        before, self._steal_s = self._steal_s, cpu_times.steal_s()
        return self._steal_s - before if self._steal_s is not None and before is not None else None

    def _ended(self, t: float) -> set[str]:
        """The channels of the sources that have ended by ``t`` (a replayed log: ``covers_s`` after the first
        sample): no value after that is the source's end, not a gap."""
        if self.stats.first is None:
            return set()
        return {
            c.name
            for sensor, covers in ending_sources(self.sampler)
            if t > self.stats.first + covers
            for c in sensor.channels
        }

    def _note_absent(self, names: list[str]) -> None:
        """Once per channel, at info level: its source leaves it without a value (``absent_in_source``)."""
        names = [name for name in names if name not in self._absent_noted]
        self._absent_noted.update(names)
        if names:
            log.info(
                "mobileperf: no value of %s in some stretches, as its source says (not a sensor gap)",
                ", ".join(f"{name} ({self._absent[name]})" for name in names),
            )

    def warn_ran_out(self, last_end: float | None) -> None:
        """Warns once, at the end, of each source (a replayed log) that ended before the run did, and from when
        on the samples are missing.

        Args:
            last_end: When the run's last step ended, seconds on the sampler's clock; None: the last sample.
        """
        first, last = self.stats.first, self.stats.last
        if first is None or last is None or self._ran_out_said:
            return
        self._ran_out_said = True
        run_s = (last_end if last_end is not None else last) - first
        for sensor, covers in ending_sources(self.sampler):
            if run_s > covers:
                log.warning("mobileperf: %s", sensor.ran_out(run_s))

    def warn_unread(self) -> None:
        """At the first measured step: one warning naming the channels with no valid value yet, each with its
        error where the sampler has one. A channel still within its first allowed gap, without an error,
        is not named now: if it stays without a value, it is once its gap shows."""
        self._measured_seen = True
        unread = never_valued(self.stats)
        self._note_absent([name for name in unread if name in self._absent])
        unread = [name for name in unread if name not in self._absent]
        reasons = unread_reasons(unread, self.sampler, "")
        first, last = self.stats.first, self.stats.last
        waited = last - first if self.stats.rows and first is not None and last is not None else 0.0
        past_gap = {c.name for c, gap in zip(self.stats.channels, self.stats.allowed_gap) if waited > gap}
        self._warn_unread([name for name in unread if reasons[name] or name in past_gap])

    def _warn_unread(self, names: list[str]) -> None:
        """One warning line for those of ``names`` not named yet."""
        with self._lock:
            names = [
                c.name
                for c in self.channels
                if c.name in names and c.name not in self._unread_warned and c.name not in self._absent
            ]
            self._unread_warned.update(names)
        if names:
            reasons = unread_reasons(names, self.sampler, "no reading yet")
            log.warning(
                "mobileperf: no valid value yet from %s; their quantities are null in the report, "
                "which lists them under 'unavailable'",
                ", ".join(f"{name} ({reasons[name]})" for name in names),
            )

    def warn_frozen_counters(self, t: np.ndarray, values: np.ndarray) -> None:
        """Warns once per energy counter that stopped changing while it was still read (``counter.frozen``),
        and keeps when it last changed (``frozen_since_s``: the report's ``sampling.frozen_counters``).

        Args:
            t: The times of the samples held, seconds.
            values: Their values, one column per channel.
        """
        for i, channel in enumerate(self.channels):
            if channel.kind != "energy" or channel.name in self.frozen_since_s:
                continue
            found = frozen(t, values[:, i])
            if found is not None:
                self.frozen_since_s[channel.name], unchanged_s = found
                log.warning(
                    "mobileperf: the energy counter %s stopped changing %.1f s before its last reading, while it "
                    "was still read: a stuck counter or driver; the steps since have no energy from it (null), "
                    "not 0",
                    channel.name,
                    unchanged_s,
                )
