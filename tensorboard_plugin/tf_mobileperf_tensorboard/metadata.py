"""The stored format of a run, as a contract: names, versions, and the check of ``channels.json``.

Everything the writer (``tf_mobileperf.output``) and the readers (the
dashboard, the core's own reads) must agree on is declared here once: the
plugin name and summary tag, the name of every file of a run, and the schema
version of ``channels.json`` with ``parse_channels``, which refuses a version
it does not know and upgrades older files to the current shape. No
TensorFlow and no ``tf_mobileperf`` import: the core depends on this
package, never the other way.
"""

from __future__ import annotations

import re

import numpy as np

from tensorboard.compat.proto import summary_pb2

PLUGIN_NAME = "mobileperf"
#: Tag of the per-run summary tensor (JSON of the report summary).
RUN_TAG = "mobileperf/run"
PROTO_VERSION = 0

#: The run's own folder under its TensorBoard run (``<logdir>/train/``), as the profile plugin keeps its traces.
PLUGIN_DIR = "plugins/mobileperf"
#: The profile plugin's folder in a run: one folder per profiling session (``*.xplane.pb``).
PROFILE_DIR = "plugins/profile"
CHANNELS_FILE = "channels.json"  # in PLUGIN_DIR: the columns of samples.bin and each channel's roles
SAMPLES_FILE = "samples.bin"  # in PLUGIN_DIR: rows of little-endian float64 (time, channel...)
OP_ENERGY_FILE = "op_energy.json"  # in PLUGIN_DIR: energy per op of the traced steps
TRACE_FILE = "power_trace.json"  # in PLUGIN_DIR: Chrome/Perfetto trace of ops and power rails
REPORT_FILE = "report.json"  # in the logdir, and a copy in PLUGIN_DIR for the dashboard
STEPS_FILE = "steps.csv"  # in the logdir: one row per step, appended as steps are joined
PROGRESS_FILE = "progress.bin"  # in the logdir: the step running now (8 bytes, memory-mapped)
CLAIM_FILE = "mobileperf.claim"  # in the logdir: which process measures into it (pid, host, started)
#: In the logdir, beside the claim: how the claiming process ended when it ended without a report, written by
#: whoever watched it end (``mobileperf sweep``): pid, host, ended_wall_s, exit_status (None: killed on a
#: timeout), signal (a name, or None), cause, error (one line: "out of memory (SIGABRT: std::bad_alloc)"),
#: failed_step, steps_on_disk.
END_FILE = "mobileperf.ended"
COMBINED_FILE = "combined.json"  # in a multi-worker logdir: the workers' runs combined by the chief

#: The ``channels.json`` schema written now; 2 added each channel's ``device``, ``rail`` and ``core``.
CHANNELS_VERSION = 2
#: The ``channels.json`` versions this package reads (older ones are upgraded on reading).
READ_VERSIONS = (1, 2)
#: How a stored series is read: a channel's allowed gap between two valid samples is this many of its
#: periods, and at least MIN_GAP_S. Longer is a hole (the sensor stopped answering): the join marks a step
#: over it incomplete, the dashboard breaks the line there; shorter is sampling jitter.
GAP_FACTOR = 3.0
MIN_GAP_S = 0.1


def allowed_gap_s(period_s: float, gap_factor: float = GAP_FACTOR, min_gap_s: float = MIN_GAP_S) -> float:
    """Longest stretch without a valid sample that is still jitter, not a hole."""
    return max(gap_factor * period_s, min_gap_s)


def own_period_s(t: np.ndarray, column: np.ndarray) -> float | None:
    """A channel's own period: the median interval between its finite readings (None with fewer than 3)."""
    valid_t = t[np.isfinite(column)]
    return float(np.median(np.diff(valid_t))) if len(valid_t) > 2 else None


#: The keys of a channel in ``channels.json`` that every version has.
CHANNEL_KEYS = ("name", "kind", "unit")


def create_summary_metadata() -> summary_pb2.SummaryMetadata:
    """Metadata that marks a tensor as this plugin's run summary."""
    return summary_pb2.SummaryMetadata(
        display_name="MobilePerf run summary",
        summary_description="tf-mobileperf report summary (JSON)",
        data_class=summary_pb2.DATA_CLASS_TENSOR,
        plugin_data=summary_pb2.SummaryMetadata.PluginData(
            plugin_name=PLUGIN_NAME, content=str(PROTO_VERSION).encode()
        ),
    )


def parse_channels(data: dict, name: str = CHANNELS_FILE) -> dict:
    """``data`` (a loaded ``channels.json``) checked and in the shape of ``CHANNELS_VERSION``.

    ``name`` is what error messages call the file. The input is not changed.

    Raises:
        ValueError: the version is missing, not a whole number, or one this
            package does not read (a newer one asks to upgrade); or the
            columns or channels are not what the version promises.
    """
    version = data.get("version")
    if type(version) is not int or version not in READ_VERSIONS:
        raise ValueError(_version_problem(name, version))
    while version < CHANNELS_VERSION:
        data, version = _UPGRADES[version](data), version + 1
    _check_shape(data, name)
    return data


def _version_problem(name: str, version: object) -> str:
    reads = f"({', '.join(map(str, READ_VERSIONS))})"
    if version is None:
        return f"{name} has no version; this tf-mobileperf reads versions {reads}"
    if type(version) is int and version > CHANNELS_VERSION:
        return f"{name} version {version} is newer than this tf-mobileperf reads {reads}; upgrade tf-mobileperf"
    return f"{name} version {version!r} is not one this tf-mobileperf reads {reads}"


def _check_shape(data: dict, name: str) -> None:
    columns, channels = data.get("columns"), data.get("channels")
    if not isinstance(columns, list) or columns[:1] != ["t"]:
        raise ValueError(f"{name} has no column list starting with 't'")
    if not isinstance(channels, list) or not all(
            isinstance(c, dict) and all(isinstance(c.get(k), str) for k in CHANNEL_KEYS) for c in channels):
        raise ValueError(f"{name} has no list of channels, each with {', '.join(CHANNEL_KEYS)}")
    if columns[1:] != [c["name"] for c in channels]:
        raise ValueError(f"{name} lists columns that are not its channels, in order")


def _v1_to_v2(data: dict) -> dict:
    """Version 1 had no channel roles: fills ``device``, ``rail`` and ``core`` from the group and name, as 1's
    readers did (per-core utilization was ``cpuN_util`` in group "cpu")."""
    channels = data.get("channels")
    if not isinstance(channels, list) or not all(isinstance(c, dict) for c in channels):
        return data  # the shape check names what is wrong
    return {**data, "version": 2, "channels": [{**c, "device": _v1_device(c), "rail": _v1_rail(c), "core": _v1_core(c)}
                                                 for c in channels]}


def _v1_device(channel: dict) -> str:
    group, name = str(channel.get("group", "")), channel.get("name")
    if "gpu" in group:
        return "gpu"
    if group == "cpu":
        return "cpu"
    return "process" if name in ("proc_rss", "proc_peak") else "board"


def _v1_rail(channel: dict) -> str:
    if channel.get("kind") not in ("power", "energy"):
        return ""
    return re.sub(r"_(power|energy)$", "", str(channel.get("name", "")))


def _v1_core(channel: dict) -> int | None:
    match = re.fullmatch(r"cpu(\d+)_util", str(channel.get("name", "")))
    return int(match.group(1)) if match and channel.get("kind") == "util" and channel.get("group") == "cpu" else None


#: How each old version becomes the next one.
_UPGRADES = {1: _v1_to_v2}
