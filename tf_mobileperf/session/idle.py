"""The idle baseline's outcome: each rail's power before the first step, or why there is none."""

from __future__ import annotations

import dataclasses

from tf_mobileperf.session.options import MonitorOptions


@dataclasses.dataclass(frozen=True)
class IdleBaseline:
    """The idle baseline's outcome, as measured before the first step and read by the report.

    ``power_w``: each rail's and the total's idle power (None for a rail with no complete power), or None
    when none was measured; ``reason``: why it, or some rail of it, has no value; ``measured_s``: the
    window's length, when one was sampled."""

    power_w: dict[str, float | None] | None = None
    reason: str | None = None
    measured_s: float | None = None

    @classmethod
    def not_measured(cls, options: MonitorOptions) -> IdleBaseline:
        """The outcome before (or without) a measurement: skipped by ``idle_s=0``, else failed until it succeeds.

        Args:
            options: The measurement's options; only ``idle_s`` is read.

        Returns:
            An outcome with no power and the ``reason``.
        """
        if options.idle_s == 0:
            return cls(reason="idle_s=0: no idle baseline was measured")
        return cls(reason="the idle baseline failed (see the log)")
