"""The names of a run's files and folders, and of the dashboard's plugin and summary tag.

Where each file lives is ``layout.RunLayout``; what is in it is ``channels``
(``channels.json``) and ``schema`` (the report). No TensorFlow.
"""

from __future__ import annotations

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
SWEEP_SUMMARY_FILE = "summary.json"  # in a sweep configuration's logdir: the child's summary, the sweep's row
