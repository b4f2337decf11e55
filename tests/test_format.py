"""The stored format as a contract: channels.json versions (a newer one refused
by name, version 1 read and upgraded with its roles filled), the series written
by SeriesWriter read back exactly by the one reader, and the plugin package
importable without TensorFlow. Synthetic values written by the real writer (no
sensor); version-1 files are written as the version-1 writer wrote them."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tf_mobileperf.format import names
from tf_mobileperf.format.channels import CHANNELS_VERSION, parse_channels
from tf_mobileperf.format.gaps import median
from tf_mobileperf.format.layout import RunLayout
from tf_mobileperf.format.reader import OutsideLogdir, read_report, read_series
from tf_mobileperf.output.files import SeriesWriter, StepProgress, StepsCsv, claim_logdir, write_json
from tf_mobileperf.sensors.base import Channel

#: What a report written without a version (as these tests write it) is read as: the format written now.
UPGRADED = {"format_version": 2, "kind": "report"}

CHANNELS = [
    Channel("VDD_IN", "power", "synthetic", group="total"),
    Channel("VDD_SYS_GPU", "power", "synthetic", group="gpu"),
    Channel("cpu3_util", "util", "synthetic", group="cpu", cluster="A57"),
    Channel("ram_used", "memory", "synthetic", group="mem"),
]


def written_series(run_dir, rows: np.ndarray) -> None:
    writer = SeriesWriter(run_dir, CHANNELS, {"hostname": "test"})
    writer.append(rows[:, 0], rows[:, 1:])
    writer.close()


def channels_json(run_dir):
    return run_dir / names.PLUGIN_DIR / names.CHANNELS_FILE


def rewrite_header(run_dir, **changes) -> None:
    path = channels_json(run_dir)
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))


def test_series_round_trip_through_the_writer_reads_every_row_exactly(tmp_path):
    rows = np.column_stack(
        [
            np.arange(50) * 0.005 + 100.0,
            np.linspace(4.0, 6.0, 50),
            np.full(50, 2.0),
            np.arange(50) % 100.0,
            np.full(50, 2e9),
        ]
    )
    rows[7, 2] = np.nan  # a failed read stays a gap
    written_series(tmp_path, rows)
    header, read = read_series(tmp_path)
    assert header["version"] == CHANNELS_VERSION == 2
    assert header["columns"] == ["t", "VDD_IN", "VDD_SYS_GPU", "cpu3_util", "ram_used"]
    assert header["channels"] == [dataclasses.asdict(c) | {"unit": c.unit} for c in CHANNELS]
    assert header["metadata"] == {"hostname": "test"}
    np.testing.assert_array_equal(read, rows)


def test_a_torn_last_row_of_samples_is_left_out(tmp_path):
    rows = np.arange(15, dtype=float).reshape(3, 5)
    written_series(tmp_path, rows)
    samples = tmp_path / names.PLUGIN_DIR / names.SAMPLES_FILE
    with open(samples, "ab") as f:
        f.write(b"\x00" * 12)  # a writer killed inside its fourth row
    _, read = read_series(tmp_path)
    np.testing.assert_array_equal(read, rows)


def test_a_channels_json_of_a_newer_version_is_refused_naming_the_version(tmp_path):
    written_series(tmp_path, np.zeros((2, 5)))
    rewrite_header(tmp_path, version=3)
    with pytest.raises(ValueError) as refused:
        read_series(tmp_path)
    assert str(refused.value) == (
        f"{channels_json(tmp_path)} version 3 is newer than this tf-mobileperf reads (1, 2); upgrade tf-mobileperf"
    )


@pytest.mark.parametrize(
    "version,problem",
    [
        ("2", "version '2' is not one this tf-mobileperf reads (1, 2)"),
        (None, "has no version; this tf-mobileperf reads versions (1, 2)"),
        (0, "version 0 is not one"),
        (True, "version True is not one"),
    ],
)
def test_a_channels_json_without_a_known_version_is_refused(version, problem):
    header = {"columns": ["t"], "channels": []} | ({} if version is None else {"version": version})
    with pytest.raises(ValueError, match="^" + re.escape(f"channels.json {problem}")):
        parse_channels(header)


def version_1_channel(name: str, kind: str, group: str = "", cluster: str = "") -> dict:
    """A channel as the version-1 writer stored it: no device, no rail."""
    unit = {"power": "W", "energy": "J", "util": "%", "memory": "B"}[kind]
    return {"name": name, "kind": kind, "source": "synthetic", "group": group, "cluster": cluster, "unit": unit}


def test_a_version_1_channels_json_is_read_with_its_roles_filled(tmp_path):
    channels = [
        version_1_channel("VDD_IN", "power", "total"),
        version_1_channel("VDD_SYS_GPU", "power", "gpu"),
        version_1_channel("cpu_power", "power", "cpu"),
        version_1_channel("gpu_energy", "energy", "gpu"),
        version_1_channel("cpu3_util", "util", "cpu", "A57"),
        version_1_channel("gpu_util", "util", "gpu"),
        version_1_channel("proc_rss", "memory"),
        version_1_channel("ram_used", "memory", "mem"),
    ]
    directory = tmp_path / names.PLUGIN_DIR
    directory.mkdir(parents=True)
    (directory / names.CHANNELS_FILE).write_text(
        json.dumps(
            {
                "version": 1,
                "columns": ["t"] + [c["name"] for c in channels],
                "channels": channels,
                "clock": "time.monotonic (CLOCK_MONOTONIC), seconds",
                "metadata": {},
            }
        )
    )
    rows = np.arange(2 * 9, dtype="<f8").reshape(2, 9)
    rows.tofile(directory / names.SAMPLES_FILE)
    header, read = read_series(tmp_path)
    assert header["version"] == 2
    roles = {c["name"]: (c["device"], c["rail"], c["core"]) for c in header["channels"]}
    assert roles == {
        "VDD_IN": ("board", "VDD_IN", None),
        "VDD_SYS_GPU": ("gpu", "VDD_SYS_GPU", None),
        "cpu_power": ("cpu", "cpu", None),
        "gpu_energy": ("gpu", "gpu", None),
        "cpu3_util": ("cpu", "", 3),
        "gpu_util": ("gpu", "", None),
        "proc_rss": ("process", "", None),
        "ram_used": ("board", "", None),
    }
    assert [{k: c[k] for k in channels[0]} for c in header["channels"]] == channels  # the rest is kept as it was
    np.testing.assert_array_equal(read, rows)


@pytest.mark.parametrize(
    "change,problem",
    [
        ({"columns": ["VDD_IN", "t"]}, "no column list starting with 't'"),
        ({"channels": [{"name": "VDD_IN", "kind": "power"}]}, "no list of channels, each with name, kind, unit"),
        ({"columns": ["t", "VDD_IN"]}, "lists columns that are not its channels"),
    ],
)
def test_a_channels_json_of_the_wrong_shape_is_refused_naming_the_problem(tmp_path, change, problem):
    written_series(tmp_path, np.zeros((2, 5)))
    rewrite_header(tmp_path, **change)
    with pytest.raises(ValueError, match=problem):
        read_series(tmp_path)


def test_a_missing_series_is_file_not_found_naming_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no plugins/mobileperf/channels.json"):
        read_series(tmp_path)
    written_series(tmp_path, np.zeros((2, 5)))
    (tmp_path / names.PLUGIN_DIR / names.SAMPLES_FILE).unlink()
    with pytest.raises(FileNotFoundError, match="no plugins/mobileperf/samples.bin"):
        read_series(tmp_path)


def test_a_series_linked_outside_the_logdir_is_refused(tmp_path):
    outside, logdir = tmp_path / "outside", tmp_path / "logs"
    written_series(outside, np.zeros((2, 5)))
    (logdir / "run").mkdir(parents=True)
    os.symlink(outside / "plugins", logdir / "run" / "plugins")
    with pytest.raises(OutsideLogdir, match="^run/plugins/mobileperf/channels.json points outside the logdir$"):
        read_series(logdir / "run", logdir)
    header, _ = read_series(logdir / "run")  # the core reads where it wrote, links and all
    assert header["columns"][1] == "VDD_IN"


def test_read_report_refuses_steps_that_are_not_a_list_of_objects(tmp_path):
    assert read_report(tmp_path) is None
    (tmp_path / names.REPORT_FILE).write_text(json.dumps({"success": True, "steps": [{"step": 0}]}))
    assert read_report(tmp_path) == UPGRADED | {"success": True, "steps": [{"step": 0}]}
    (tmp_path / names.REPORT_FILE).write_text(json.dumps({"success": True, "steps": [1, 2]}))
    with pytest.raises(ValueError, match=r"report.json: field 'steps\[0\]' must be an object, got 1"):
        read_report(tmp_path)


def test_the_run_layout_is_where_the_writers_write_and_the_readers_read(tmp_path):
    layout = RunLayout(claim_logdir(tmp_path / "logs"), "train")
    rows = np.arange(10, dtype=float).reshape(2, 5)
    written_series(layout.run_dir, rows)
    StepsCsv(layout.steps_csv, ["step"]).close()
    StepProgress(layout.progress).close()
    write_json(layout.report, {"success": True, "steps": []})
    assert json.loads(layout.claim.read_text())["pid"] == os.getpid()
    assert [p.exists() for p in (layout.channels, layout.samples, layout.steps_csv, layout.progress)] == [True] * 4
    assert layout.plugin_dir == tmp_path / "logs/train/plugins/mobileperf"
    np.testing.assert_array_equal(read_series(layout.run_dir)[1], rows)
    assert (
        read_report(layout.logdir) == UPGRADED | {"success": True, "steps": []}
        and read_report(layout.plugin_dir) is None
    )
    assert StepProgress.read(layout.progress) == 0


def test_the_plugin_package_imports_without_tensorflow():
    code = (
        "import sys\n"
        "import tf_mobileperf_tensorboard.mobileperf_plugin\n"
        "import tf_mobileperf.format.reader, tf_mobileperf.format.summary, tf_mobileperf.format.layout\n"
        "heavy = ('tensorflow', 'keras', 'matplotlib', 'tf_mobileperf')\n"
        "print(' '.join(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = proc.stdout.split()
    # Neither TensorFlow, Keras nor matplotlib; of the core only what the dashboard shares with it: the stored
    # format, and the cross-run analysis (with the model colours) that `plot` draws too.
    shared = (
        "tf_mobileperf",
        "tf_mobileperf.analysis",
        "tf_mobileperf.analysis.crossrun",
        "tf_mobileperf.analysis.boards",
        "tf_mobileperf.analysis.colours",
        "tf_mobileperf.analysis.rows",
        "tf_mobileperf.analysis.values",
    )
    assert [m for m in loaded if m not in shared and not m.startswith("tf_mobileperf.format")] == []


def test_the_report_is_written_once_and_the_logdir_names_the_dashboards_copy(tmp_path):
    """Synthetic channel: the logdir's report.json is the same file as the dashboard's, never a second write."""
    from tf_mobileperf.output.writers import RunWriters

    layout = RunLayout(tmp_path)
    writers = RunWriters.open(layout, CHANNELS, {"hostname": "test"}, ["step"])
    writers.finish({"success": True, "steps": []}, 0, lambda what, fn, *args: fn(*args))
    assert os.path.samefile(layout.report, layout.dashboard_report)
    assert read_report(tmp_path) == read_report(layout.plugin_dir) == UPGRADED | {"success": True, "steps": []}


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=2000), max_size=5))
def test_record_file_writes_the_bytes_tensorboards_record_writer_writes(tmp_path_factory, payloads):
    # Generated payloads: our C CRC-32C framing, byte for byte TensorBoard's pure-Python one (what it reads).
    import io

    from tensorboard.summary.writer.record_writer import RecordWriter

    from tf_mobileperf.output.tfrecord import RecordFile

    path = tmp_path_factory.mktemp("records") / "events"
    ours, theirs = RecordFile(path), io.BytesIO()
    reference = RecordWriter(theirs)
    for data in payloads:
        ours.write(data)
        reference.write(data)
    ours.close()
    assert path.read_bytes() == theirs.getvalue()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=300))
def test_median_equals_numpys_on_generated_values(values):
    """The joins' median (one sort) and np.median agree exactly, even and odd counts, ties and extremes."""
    array = np.array(values)
    assert median(array) == float(np.median(array))
