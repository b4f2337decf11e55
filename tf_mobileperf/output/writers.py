"""The files a measurement writes while it runs, opened and closed together.

``RunWriters`` opens, for one claimed run layout, the series (``samples.bin``
and ``channels.json``), ``steps.csv``, the TensorBoard scalars and the
progress page; at the end it publishes the report and closes them all. The
report is written once, in the dashboard's folder, and the logdir's
``report.json`` is a hard link to it (a copy where the file system has no
hard links), so the two can never disagree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from tf_mobileperf.format.finite_json import finite
from tf_mobileperf.format.layout import RunLayout
from tf_mobileperf.format.schema import REPORT, stamped
from tf_mobileperf.output.events import ScalarWriter
from tf_mobileperf.output.files import SeriesWriter, StepProgress, StepsCsv, link_or_copy, write_json
from tf_mobileperf.sensors.base import Channel

#: Runs monitoring work: ``guard(what, fn, *args)`` logs a failure instead of raising it.
Guard = Callable[..., object]


@dataclasses.dataclass
class RunWriters:
    """The open files of one measured run."""

    layout: RunLayout
    series: SeriesWriter | None  # None without channels
    csv: StepsCsv
    scalars: ScalarWriter
    progress: StepProgress

    @classmethod
    def open(cls, layout: RunLayout, channels: list[Channel], device: dict, csv_fields: list[str]) -> RunWriters:
        """Creates the run's folders and opens all its files (truncating any there).

        Args:
            layout: The claimed run's layout.
            channels: The sampled channels; empty means no series is written (``series`` is None).
            device: The run's metadata, written into ``channels.json``.
            csv_fields: The columns of ``steps.csv``.

        Returns:
            The open writers.
        """
        layout.plugin_dir.mkdir(parents=True, exist_ok=True)
        return cls(
            layout,
            SeriesWriter(layout.run_dir, channels, device) if channels else None,
            StepsCsv(layout.steps_csv, csv_fields),
            ScalarWriter(layout.run_dir),
            StepProgress(layout.progress),
        )

    def finish(self, report: dict, steps: int, guard: Guard) -> None:
        """Publishes the report and the finished run's summary, then closes every file.

        A NaN or infinity anywhere in the report is written as null: a reader never meets one. The report says
        its format's version and kind (``format.schema``).

        Args:
            report: The report as a dict (``Report.to_dict``); its ``steps`` are left out of the summary.
            steps: The global step the summary is written at (the number of steps joined).
            guard: Runs each write and close, logging a failure instead of raising it.
        """
        report = stamped(finite(report), REPORT)
        guard("write report", self._publish, report)
        summary = {k: v for k, v in report.items() if k != "steps"} | {"status": "finished"}
        guard("write run summary", self.scalars.write_run_summary, summary, steps)
        for closer in (
            self.series.close if self.series else None,
            self.csv.close,
            self.scalars.close,
            self.progress.close,
        ):
            if closer:
                guard("close", closer)

    def _publish(self, report: dict) -> None:
        write_json(self.layout.dashboard_report, report)
        link_or_copy(self.layout.dashboard_report, self.layout.report)
