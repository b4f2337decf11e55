"""The report's format has a version and a kind, as ``channels.json`` has a version: a run's ``report.json``,
a multi-worker logdir's ``combined.json`` and a sweep child's ``summary.json`` are three declared variants,
each written with ``format_version`` and ``kind`` and read through one reader that upgrades a report written
without them (version 1) and refuses a newer version by name, or a report of another kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tf_mobileperf.format import schema
from tf_mobileperf.format.layout import RunLayout
from tf_mobileperf.format.reader import read_combined, read_report, read_sweep_summary
from tf_mobileperf.format.writer import write_report
from tf_mobileperf.output.writers import RunWriters
from tf_mobileperf.session.cluster import combine
from tf_mobileperf.sweep import runner as sweep

OLD_RUN = Path(__file__).parent / "data" / "old_run_v1"


def test_a_new_run_writes_its_version_and_kind_and_its_summary_says_them_too(tmp_path):
    layout = RunLayout(tmp_path)
    writers = RunWriters.open(layout, [], {"hostname": "test"}, ["step"])
    writers.finish({"success": True, "steps": []}, 0, lambda what, fn, *args: fn(*args))
    on_disk = json.loads(layout.report.read_text())
    assert on_disk == {"format_version": schema.REPORT_VERSION, "kind": "report", "success": True, "steps": []}
    assert read_report(tmp_path) == on_disk


def test_an_old_report_and_an_old_combined_report_are_read_upgraded():
    report = read_report(OLD_RUN / "worker-0")
    assert report["format_version"] == 2 and report["kind"] == "report" and len(report["steps"]) == 4
    assert read_report(OLD_RUN / "worker-0/train/plugins/mobileperf") == report
    combined = read_combined(OLD_RUN)
    assert combined["format_version"] == 2 and combined["kind"] == "combined"
    assert set(combined["hosts"]) == {"worker-0", "worker-1"} and combined["steps_measured"] == 3


def test_a_combine_writes_a_combined_report_that_the_report_reader_does_not_take_for_a_run(tmp_path):
    for task, watts in (("worker-0", 5.0), ("worker-1", 3.0)):
        (tmp_path / task).mkdir()
        (tmp_path / task / "steps.csv").write_text(
            f"step,duration_s,warmup,failed,energy_j/total,mem_peak_gb\n0,1,0,0,{watts},1.5\n"
        )
    written = combine(tmp_path, ("worker-0", "worker-1"))
    assert written["format_version"] == 2 and written["kind"] == "combined"
    assert read_combined(tmp_path) == written and written["steps"][0]["energy_j"] == 8.0
    (tmp_path / "report.json").write_text((tmp_path / "combined.json").read_text())
    with pytest.raises(schema.ReportError, match=r"report.json: field 'kind' must be 'report', got 'combined'"):
        read_report(tmp_path)


def test_a_newer_version_is_refused_by_name(tmp_path):
    (tmp_path / "report.json").write_text(
        json.dumps({"format_version": 3, "kind": "report", "success": True, "steps": []})
    )
    with pytest.raises(
        schema.ReportError,
        match=r"report.json: field 'format_version' is 3, newer than this "
        r"tf-mobileperf reads \(1, 2\); upgrade tf-mobileperf",
    ):
        read_report(tmp_path)
    with pytest.raises(schema.ReportError, match="'format_version' is 'two', not a version"):
        schema.check_summary({"format_version": "two", "success": True}, "run summary")
    with pytest.raises(schema.ReportError, match="'format_version' is 3, newer"):
        schema.check_summary({"format_version": 3, "kind": "report", "success": True}, "run summary")


def test_the_sweep_summary_is_written_atomically_as_its_kind_and_read_back_as_a_row(tmp_path):
    layout = RunLayout(tmp_path)
    write_report(
        layout.sweep_summary,
        {"success": True, "steps_measured": 3, "batch_size": 2, "limited_cap_gb": float("nan")},
        schema.SWEEP_SUMMARY,
    )
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]  # no temporary file left
    summary = read_sweep_summary(tmp_path)
    assert summary["kind"] == "sweep_summary" and summary["limited_cap_gb"] is None
    row = sweep._row(0, "", tmp_path, None)
    assert row == {"success": True, "steps_measured": 3, "batch_size": 2, "limited_cap_gb": None, "cause": None}
    layout.sweep_summary.write_text(json.dumps({"success": True, "steps_measured": 1}))  # as main wrote it
    assert read_sweep_summary(tmp_path)["kind"] == "sweep_summary"
    with pytest.raises(schema.ReportError, match="'kind' must be 'sweep_summary', got 'report'"):
        write_report(layout.sweep_summary, {"success": True, "steps": []}, schema.REPORT)
        read_sweep_summary(tmp_path)


def test_the_dashboard_lists_a_run_of_a_newer_format_as_unreadable_naming_its_version(tmp_path):
    import shutil

    from helpers.plugin_client import client_for, get, write_summary

    root = tmp_path / "logs"
    shutil.copytree(OLD_RUN, root)
    write_summary(root / "future/train", json.dumps({"format_version": 3, "kind": "report", "success": True}))
    client, _ = client_for(root)
    status, runs = get(client, "runs")
    by_run = {r["run"]: r["summary"] for r in runs}
    assert status == 200 and by_run["worker-0/train"]["status"] == "finished"
    assert by_run["future/train"]["status"] == "unreadable"
    assert (
        "'format_version' is 3, newer than this tf-mobileperf reads (1, 2); upgrade" in by_run["future/train"]["error"]
    )
