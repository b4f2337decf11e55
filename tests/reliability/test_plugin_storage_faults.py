"""Broken and hostile files in a logdir, and files written or read while
another writer is at them: the dashboard answers each request promptly with
a 4xx naming the file (never a 500 or a hang, never failing other runs), and
the readers of steps.csv keep every whole row and count the torn ones.
Runs are made by the real callback with the synthetic sensor."""

from __future__ import annotations

import json
import os
import shutil
import stat
import threading
import time

import pytest
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.util import tensor_util

from tf_mobileperf.format import names
from tf_mobileperf.format.reader import MAX_JSON_BYTES
from tf_mobileperf.format.steps_csv import read_steps, read_steps_counted
from tf_mobileperf.format.summary import create_summary_metadata
from tf_mobileperf.output.files import StepsCsv, write_json
from tf_mobileperf.session.cluster import combine

from helpers.plugin_client import client_for, get

DEEP = "[" * 100_000 + "]" * 100_000  # valid JSON, nested deeper than any parser's recursion limit


@pytest.fixture
def logdir(two_runs, tmp_path):
    """A fresh copy of two real runs (a and b) to break."""
    root = tmp_path / "logs"
    shutil.copytree(two_runs, root)
    return root


def series_file(root, run, name):
    return root / run / "train/plugins/mobileperf" / name


@pytest.mark.parametrize(
    "name,route,text",
    [
        ("channels.json", "channels", "[1, 2, 3]"),
        ("channels.json", "series", '["t", "VDD_IN"]'),
        ("report.json", "steps", '[{"steps": []}]'),
        ("report.json", "steps", '{"steps": {"0": 1}}'),
        ("channels.json", "channels", DEEP),
        ("report.json", "steps", DEEP),
        ("op_energy.json", "steps", '"MatMul"'),
    ],
)
def test_json_of_the_wrong_shape_or_nested_too_deep_is_422_naming_the_file(logdir, name, route, text):
    series_file(logdir, "a", name).write_text(text)
    client, _ = client_for(logdir)
    status, body = get(client, route, run="a/train", channel="VDD_IN")
    assert status == 422 and name in body["error"]
    assert get(client, route, run="b/train", channel="VDD_IN")[0] == 200  # the other run is untouched


@pytest.mark.parametrize(
    "name,route",
    [("report.json", "steps"), ("channels.json", "channels"), ("channels.json", "series"), ("samples.bin", "series")],
)
def test_a_fifo_in_a_run_is_refused_promptly_and_other_runs_still_load(logdir, name, route):
    fifo = series_file(logdir, "a", name)
    fifo.unlink()
    os.mkfifo(fifo)
    client, _ = client_for(logdir)
    answer = {}
    reader = threading.Thread(
        target=lambda: answer.update(got=get(client, route, run="a/train", channel="VDD_IN")), daemon=True
    )
    reader.start()
    reader.join(60)
    if reader.is_alive():  # blocked in open(): give it a writer and an end of file, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
        pytest.fail(f"a request for a run with a FIFO named {name} blocked")
    status, body = answer["got"]
    assert status == 422 and name in body["error"] and "not a regular file" in body["error"]
    assert get(client, "steps", run="b/train")[0] == 200
    status, runs = get(client, "runs")
    assert status == 200 and [r["run"] for r in runs] == ["a/train", "b/train"]


@pytest.mark.parametrize(
    "name,route", [("report.json", "steps"), ("channels.json", "channels"), ("channels.json", "series")]
)
def test_a_symlink_loop_or_a_folder_in_a_run_is_422_naming_the_file_and_leaks_no_descriptor(logdir, name, route):
    # A link to itself answered 500 (RuntimeError: Symlink loop); a folder leaked one descriptor per request and
    # its error named the descriptor's number ("[Errno 21] Is a directory: 312"), not the file.
    path = series_file(logdir, "a", name)
    path.unlink()
    path.symlink_to(path.name)
    client, _ = client_for(logdir)
    status, body = get(client, route, run="a/train", channel="VDD_IN")
    assert status == 422 and name in body["error"] and "symlink loop" in body["error"], body
    path.unlink()
    path.mkdir()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        status, body = get(client, route, run="a/train", channel="VDD_IN")
        assert status == 422 and name in body["error"] and "not a regular file" in body["error"], body
    assert len(os.listdir("/proc/self/fd")) <= before + 2
    assert get(client, "steps", run="b/train")[0] == 200


@pytest.mark.parametrize("name,route", [("report.json", "steps"), ("channels.json", "channels")])
def test_an_oversize_file_is_422_naming_the_file_and_the_limit(logdir, name, route):
    with open(series_file(logdir, "a", name), "r+b") as f:
        f.truncate(MAX_JSON_BYTES + 1)  # sparse: nothing is written, and nothing may be read
    client, _ = client_for(logdir)
    status, body = get(client, route, run="a/train")
    assert status == 422 and name in body["error"] and f"{MAX_JSON_BYTES}-byte limit" in body["error"]


def write_run_summary(run_dir, text: str) -> None:
    """A run whose summary tensor (what the runs list shows) holds ``text``."""
    value = summary_pb2.Summary.Value(
        tag=names.RUN_TAG, metadata=create_summary_metadata(), tensor=tensor_util.make_tensor_proto(text.encode())
    )
    writer = EventFileWriter(str(run_dir))
    writer.add_event(event_pb2.Event(wall_time=time.time(), step=0, summary=summary_pb2.Summary(value=[value])))
    writer.close()


def test_runs_list_shows_a_run_with_a_bad_summary_as_an_error_and_every_other_run(logdir):
    write_run_summary(logdir / "listed/train", "[1, 2]")
    write_run_summary(logdir / "deep/train", DEEP)
    client, _ = client_for(logdir)
    status, runs = get(client, "runs")
    assert status == 200
    by_run = {r["run"]: r["summary"] for r in runs}
    assert set(by_run) == {"a/train", "b/train", "deep/train", "listed/train"}
    assert "not an object" in by_run["listed/train"]["error"] and "RecursionError" in by_run["deep/train"]["error"]
    assert by_run["a/train"]["batch_size"] == 8 and by_run["a/train"]["status"] == "finished"
    status, steps = get(client, "steps", run="a/train")  # every route reads the summaries: none fails
    assert status == 200 and len(steps["steps"]) == 12


# -- steps.csv and JSON files on disk ----------------------------------------------

FIELDS = [
    "step",
    "start_s",
    "end_s",
    "duration_s",
    "batches",
    "warmup",
    "traced",
    "failed",
    "cpu_util",
    "gpu_util",
    "mem_peak_gb",
    "gap_before_s",
    "energy_j/total",
]


def steps_csv(path, n=4):
    """A real steps.csv of ``n`` steps (the callback's writer); returns its bytes."""
    csv = StepsCsv(path / "steps.csv", FIELDS)
    csv.write(
        [
            {
                "step": i,
                "start_s": 10.0 + i,
                "end_s": 10.25 + i,
                "duration_s": 0.25,
                "batches": 1,
                "warmup": int(i == 0),
                "traced": 0,
                "failed": 0,
                "cpu_util": 50.0,
                "gpu_util": "",
                "mem_peak_gb": 1.5,
                "gap_before_s": 0.001,
                "energy_j/total": 1.0 + i,
            }
            for i in range(n)
        ]
    )
    csv.close()
    return (path / "steps.csv").read_bytes()


@pytest.mark.parametrize(
    "cut", ["inside the first field", "after the first field", "inside later fields", "before the newline"]
)
def test_a_torn_last_row_is_skipped_and_counted(tmp_path, cut):
    raw = steps_csv(tmp_path, n=13)
    last = raw.rstrip(b"\r\n").rfind(b"\n") + 1  # where the row of step 12 starts
    row = raw[last:]
    keep = {
        "inside the first field": 1,
        "after the first field": 3,
        "inside later fields": row.index(b",0.25,") + 3,
        "before the newline": len(row.rstrip(b"\r\n")),
    }[cut]
    (tmp_path / "steps.csv").write_bytes(raw[:last] + row[:keep])
    whole = [
        {"step": i, "duration_s": 0.25, "warmup": i == 0, "failed": False, "energy_total": 1.0 + i, "mem_peak_gb": 1.5}
        for i in range(12)
    ]
    result = read_steps_counted(tmp_path)
    assert result.rows == whole and result.torn == 1
    assert read_steps(tmp_path) == whole


def test_torn_rows_inside_the_file_are_skipped_and_counted(tmp_path):
    lines = steps_csv(tmp_path).split(b"\r\n")
    lines[2:2] = [b"1", b"7,10.0,10.2", b"8,10.0,10.2,x,1,0,0,0,,,,,", b"9" + b",0" * 20]
    (tmp_path / "steps.csv").write_bytes(b"\r\n".join(lines))
    result = read_steps_counted(tmp_path)
    assert [r["step"] for r in result.rows] == [0, 1, 2, 3] and result.torn == 4


def test_combine_keeps_the_whole_rows_of_a_host_killed_mid_row(tmp_path):
    (tmp_path / "worker-0").mkdir()
    raw = steps_csv(tmp_path / "worker-0")
    (tmp_path / "worker-0" / "steps.csv").write_bytes(raw + b"4")  # killed one byte into the row of step 4
    combined = combine(tmp_path, ("worker-0",))
    assert combined["missing_hosts"] == ["worker-0"]
    assert [s["step"] for s in combined["steps"]] == [0, 1, 2, 3]
    assert [s["energy_j"] for s in combined["steps"]] == [1.0, 2.0, 3.0, 4.0]


def test_two_writers_of_one_json_file_never_collide(tmp_path):
    path = tmp_path / "results.json"
    errors = []

    def writer(who: str) -> None:
        try:
            for i in range(200):
                write_json(path, {"writer": who, "i": i, "rows": list(range(i))})
        except Exception as exc:  # the test's result: collected, then asserted empty
            errors.append(repr(exc))

    threads = [threading.Thread(target=writer, args=(w,)) for w in ("first", "second")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    final = json.loads(path.read_text())
    assert final["writer"] in ("first", "second") and final["rows"] == list(range(final["i"]))
    assert os.listdir(tmp_path) == ["results.json"]  # no temporary file left
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_failed_json_write_leaves_no_temporary_file(tmp_path):
    (tmp_path / "report.json").mkdir()  # the rename onto it fails
    with pytest.raises(OSError):
        write_json(tmp_path / "report.json", {"success": True})
    assert os.listdir(tmp_path) == ["report.json"]
