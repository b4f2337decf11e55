"""Readers check what they read against the report's schema (``tf_mobileperf.format.schema``): a
malformed report.json stops ``mobileperf combine`` with one line naming the file and the field and exit
status 2 (never a traceback, never a wrong combine); a NaN is null, read and written; ``mobileperf plot``
skips a result row with a null or text batch size with a warning naming it and plots the rest. Real files,
the real command line (in-process, and one case as a real process)."""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tf_mobileperf.cli.parser import main
from tf_mobileperf.format import finite_json, schema
from tf_mobileperf.format.layout import RunLayout
from tf_mobileperf.format.reader import read_report
from tf_mobileperf.output.writers import RunWriters
from tf_mobileperf.sensors.base import Channel

GOOD = {
    "success": True,
    "failed_step": None,
    "energy_total": 3.0,
    "mem_peak_gb": 1.5,
    "device": {"hostname": "b", "started_wall_s": 1.0},
    "steps": [],
}

#: The malformed reports of the issue, and what the one line each gives says after the file's name.
MALFORMED = {
    "empty": ("{}", ": field 'success' is missing"),
    "steps_only": ('{"steps": []}', ": field 'success' is missing"),
    "device_a_list": (
        '{"success": true, "steps": [], "device": []}',
        ": field 'device' must be an object or null, got []",
    ),
    "success_no": ('{"success": "no", "steps": []}', ": field 'success' must be true or false, got 'no'"),
    "energy_text": (
        '{"success": true, "steps": [], "energy_total": "12.5"}',
        ": field 'energy_total' must be a number or null, got '12.5'",
    ),
    "step_text": (
        '{"success": true, "steps": [{"step": 0, "duration_s": "1"}]}',
        ": field 'steps[0].duration_s' must be a number or null, got '1'",
    ),
    "a_list": ("[1, 2]", " is a JSON list, not an object"),
}


def fleet(tmp_path: Path, worker0: str) -> Path:
    """A multi-worker logdir: worker-0's report is ``worker0``, worker-1's a good one."""
    for task, text in (("worker-0", worker0), ("worker-1", json.dumps(GOOD))):
        (tmp_path / task).mkdir(parents=True)
        (tmp_path / task / "report.json").write_text(text)
    return tmp_path


def strict(text: str):
    """JSON as a browser parses it: NaN and Infinity are errors."""
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} written"))


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_combine_refuses_a_malformed_report_in_one_line_naming_the_file_and_the_field(tmp_path, case, capsys):
    text, problem = MALFORMED[case]
    logdir = fleet(tmp_path, text)
    assert main(["combine", str(logdir)]) == 2
    err = capsys.readouterr().err
    assert err == f"mobileperf: error: {logdir / 'worker-0' / 'report.json'}{problem}\n"
    assert not (logdir / "combined.json").exists()  # nothing combined over a report it cannot trust


def test_combine_refuses_a_malformed_report_as_a_real_process(tmp_path):
    logdir = fleet(tmp_path, MALFORMED["success_no"][0])
    proc = subprocess.run(
        [sys.executable, "-m", "tf_mobileperf.cli.parser", "combine", str(logdir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("mobileperf")]
    assert lines == [
        f"mobileperf: error: {logdir}/worker-0/report.json: field 'success' must be true or false, got 'no'"
    ]


def test_combine_reads_a_nan_as_null_and_writes_json_a_browser_reads(tmp_path, capsys):
    logdir = fleet(tmp_path, json.dumps(GOOD | {"energy_total": math.nan, "mem_peak_gb": math.inf}))
    assert main(["combine", str(logdir)]) == 0
    combined = strict((logdir / "combined.json").read_text())
    assert (
        combined["hosts"]["worker-0"]["energy_total"] is None and combined["hosts"]["worker-0"]["mem_peak_gb"] is None
    )
    assert combined["hosts"]["worker-1"]["energy_total"] == 3.0 and combined["success"] is True
    assert "worker-0   ok" in capsys.readouterr().out


def test_the_report_is_written_with_nan_as_null(tmp_path):
    """Synthetic channel: a NaN that reaches the writer is written as null; the report is not lost to it."""
    layout = RunLayout(tmp_path)
    channels = [Channel("VDD_IN", "power", "synthetic", group="total")]
    writers = RunWriters.open(layout, channels, {"hostname": "test"}, ["step"])
    report = GOOD | {
        "energy_total": math.nan,
        "power_avg_w": {"VDD_IN": math.inf},
        "steps": [{"step": 0, "duration_s": 0.1, "energy_j": {"total": math.nan}}],
    }
    writers.finish(report, 1, lambda what, fn, *args: fn(*args))
    for path in (layout.report, layout.dashboard_report):
        written = strict(path.read_text())
        assert written["energy_total"] is None and written["power_avg_w"] == {"VDD_IN": None}
        assert written["steps"][0]["energy_j"] == {"total": None}
    assert read_report(tmp_path)["energy_total"] is None


def test_check_report_reads_non_finite_numbers_as_null_and_keeps_fields_it_does_not_know():
    data = finite_json.loads(
        '{"success": true, "steps": [], "energy_total": NaN, "samples_per_s": 1e999, '
        '"step_time_s": {"mean": -Infinity}, "new_field": {"anything": [1]}}'
    )
    checked = schema.check_report(data, "r.json")
    assert checked["energy_total"] is None and checked["samples_per_s"] is None
    assert checked["step_time_s"] == {"mean": None} and checked["new_field"] == {"anything": [1]}
    with pytest.raises(
        schema.ReportError,
        match=r"^r.json: field 'batch_size' must be a whole number >= 1 or null, "
        r"got true$",
    ):
        schema.check_report({"success": True, "steps": [], "batch_size": True}, "r.json")


ROWS = [
    {"model": "cnn", "batch_size": 1, "success": True, "step_time_s_mean": 0.01, "samples_per_s": 100.0},
    {"model": "cnn", "batch_size": None, "success": True, "step_time_s_mean": 0.02},
    {"model": "cnn", "batch_size": "8", "success": True, "step_time_s_mean": 0.03},
    {"model": "cnn", "batch_size": 4, "success": True, "step_time_s_mean": 0.04, "samples_per_s": 90.0},
    {"model": "cnn", "batch_size": 16, "success": False, "cause": "out of memory"},
]


@pytest.mark.slow
def test_plot_skips_rows_with_a_null_or_text_batch_size_with_a_warning_naming_each(tmp_path, capsys, caplog):
    results = tmp_path / "results.json"
    results.write_text(json.dumps(ROWS))
    with caplog.at_level(logging.WARNING):
        assert main(["plot", str(tmp_path)]) == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"skipped {results} row 2 (model 'cnn'): field 'batch_size' must be a whole number >= 1, got null",
        f"skipped {results} row 3 (model 'cnn'): field 'batch_size' must be a whole number >= 1, got '8'",
    ]
    assert (tmp_path / "step_time.png").exists()
    page = (tmp_path / "report.html").read_text()
    assert "3 configurations of cnn" in page and "out of memory" in page
    from tf_mobileperf.figures.specs import figures
    from tf_mobileperf.sweep.results import load_results

    step_time = figures(load_results(results))[0].panels[0]
    assert step_time.series[0].points == [(1, 10.0), (4, 40.0)]


def test_plot_of_rows_none_of_which_can_be_read_is_one_line_and_status_2(tmp_path, capsys):
    (tmp_path / "results.json").write_text(json.dumps([ROWS[1], ROWS[2]]))
    assert main(["plot", str(tmp_path)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("mobileperf")]
    assert err == [
        f"mobileperf: error: {tmp_path / 'results.json'} has no row to read (each is skipped, with a "
        "warning saying why)"
    ]
