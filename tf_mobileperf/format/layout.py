"""Every path of a measured run, in one place.

A measurement writes into its logdir (report, steps, progress, claim) and,
for TensorBoard, into one run folder under it (``<logdir>/train`` by
default: scalars, the profiler's traces, and the dashboard's own folder with
the series, op energy and a copy of the report). The file names are the
contract's (``names``); this says where each one lives, so writers and
readers never join paths by hand.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from . import names


def _file(folder: str, name: str) -> property:
    """A property: the file ``name`` in the layout's folder ``folder`` (an attribute)."""
    return property(lambda self: getattr(self, folder) / name, doc=f"``{name}`` in ``{folder}``")


@dataclasses.dataclass(frozen=True)
class RunLayout:
    """The paths of the run ``run`` measured into ``logdir``."""

    logdir: Path
    run: str = "train"

    def __post_init__(self) -> None:
        object.__setattr__(self, "logdir", Path(self.logdir))  # a str is taken too

    @classmethod
    def of_run(cls, run_dir: str | Path) -> RunLayout:
        """The layout whose TensorBoard run is ``run_dir``, as the dashboard finds a run.

        Args:
            run_dir: The TensorBoard run's folder, ``<logdir>/<run>``.

        Returns:
            The layout of run ``<run>`` in ``<logdir>``.
        """
        run_dir = Path(run_dir)
        return cls(run_dir.parent, run_dir.name)

    @property
    def run_dir(self) -> Path:
        """The TensorBoard run: scalars, ``profile_dir`` and ``plugin_dir``."""
        return self.logdir / self.run

    @property
    def plugin_dir(self) -> Path:
        """The dashboard's folder in the run."""
        return self.run_dir / names.PLUGIN_DIR

    @property
    def profile_dir(self) -> Path:
        """Where the TF profiler writes its sessions (``<session>/*.xplane.pb``)."""
        return self.run_dir / names.PROFILE_DIR

    report = _file("logdir", names.REPORT_FILE)
    steps_csv = _file("logdir", names.STEPS_FILE)
    progress = _file("logdir", names.PROGRESS_FILE)
    claim = _file("logdir", names.CLAIM_FILE)
    ended = _file("logdir", names.END_FILE)
    sweep_summary = _file("logdir", names.SWEEP_SUMMARY_FILE)
    combined = _file("logdir", names.COMBINED_FILE)  # of a multi-worker logdir: ``RunLayout(cluster_logdir)``

    channels = _file("plugin_dir", names.CHANNELS_FILE)
    samples = _file("plugin_dir", names.SAMPLES_FILE)
    op_energy = _file("plugin_dir", names.OP_ENERGY_FILE)
    trace = _file("plugin_dir", names.TRACE_FILE)
    dashboard_report = _file("plugin_dir", names.REPORT_FILE)  # the copy of the report the dashboard reads
