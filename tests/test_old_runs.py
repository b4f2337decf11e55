"""A run directory written before the report had a version still opens: ``tests/data/old_run_v1`` holds two
workers of a multi-worker run and their combined report as main wrote them then (``make_old_run.py`` there
says how). The dashboard lists its three runs and answers every route of them, and ``mobileperf combine``
combines the workers again, to the same numbers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tf_mobileperf.cli.parser import main

from helpers.plugin_client import client_for, get

OLD_RUN = Path(__file__).parent / "data" / "old_run_v1"


@pytest.fixture
def old_run(tmp_path):
    root = tmp_path / "old"
    shutil.copytree(OLD_RUN, root)
    return root


def test_the_fixture_is_of_the_old_format():
    report = json.loads((OLD_RUN / "worker-0" / "report.json").read_text())
    combined = json.loads((OLD_RUN / "combined.json").read_text())
    assert not {"format_version", "kind"} & (set(report) | set(combined))
    assert json.loads((OLD_RUN / "worker-0/train/plugins/mobileperf/channels.json").read_text())["version"] == 2


def test_an_old_run_opens_in_the_dashboard(old_run):
    client, _ = client_for(old_run)
    status, runs = get(client, "runs")
    assert status == 200
    by_run = {r["run"]: r["summary"] for r in runs}
    assert set(by_run) == {"worker-0/train", "worker-1/train", "combined"}
    assert all(s["status"] == "finished" and s["success"] is True for s in by_run.values())
    assert by_run["combined"]["combined"] is True and by_run["combined"]["missing_hosts"] == []
    for run in ("worker-0/train", "worker-1/train"):
        status, steps = get(client, "steps", run=run)
        assert status == 200 and [s["step"] for s in steps["steps"]] == [0, 1, 2, 3]
        assert steps["warmup_steps"] == 1 and steps["steps"][0]["warmup"] is True
        status, header = get(client, "channels", run=run)
        assert status == 200 and header["columns"] == ["t", "VDD_IN", "ram_used"] and header["samples"] > 0
        status, series = get(client, "series", run=run, channel="VDD_IN")
        assert status == 200 and set(series["min"]) == {5.0 if run.startswith("worker-0") else 3.0}


def test_an_old_run_combines_again_to_the_same_numbers(old_run, capsys):
    before = json.loads((old_run / "combined.json").read_text())
    (old_run / "combined.json").unlink()
    shutil.rmtree(old_run / "combined")
    assert main(["combine", str(old_run)]) == 0
    after = json.loads((old_run / "combined.json").read_text())
    assert after["success"] is True and after["missing_hosts"] == []
    for key in ("steps_measured", "energy_total", "mem_peak_gb", "mem_peak_gb_per_host", "steps"):
        assert after[key] == pytest.approx(before[key]) if key == "energy_total" else after[key] == before[key]
    assert after["hosts"] == before["hosts"]
    assert "worker-0" in capsys.readouterr().out
