"""A run's status in the dashboard is what is true: "running" only while the process that claimed the run is
alive. Real runs, measured by the callback in child processes that die inside a step without their report:
killed with SIGKILL (as by the OOM killer), or aborted (SIGABRT) on ``std::bad_alloc`` under a sweep,
which writes how the child ended into its run; the dashboard's backend through TensorBoard's WSGI app."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from tf_mobileperf.format import names
from tf_mobileperf.sweep import causes, launch
from tf_mobileperf_tensorboard import run_status

from helpers.plugin_client import client_for, get
from helpers.sweep_runs import DIE_AT, aborted_sweep_run, start_run


def listed(logdir: Path) -> dict[str, dict]:
    status, runs = get(client_for(logdir)[0], "runs")
    assert status == 200
    return {r["run"]: r["summary"] for r in runs}


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> Path:
    """A logdir with one run whose process was alive at first (checked: "running"), then SIGKILLed."""
    root = tmp_path_factory.mktemp("killed")
    proc = start_run(root / "cnn-bs8", 8, "wait")
    try:
        assert proc.stdout.readline().strip() == "MEASURING", proc.stderr.read()[-3000:]
        summary = listed(root)["cnn-bs8/train"]
        assert (summary["status"], summary["status_text"]) == ("running", "running")
        assert "success" not in summary
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    return root


@pytest.mark.slow
def test_a_run_whose_process_was_killed_is_ended_without_a_report_not_running(killed):
    pid = json.loads((killed / "cnn-bs8" / names.CLAIM_FILE).read_text())["pid"]
    summary = listed(killed)["cnn-bs8/train"]
    assert summary["status"] == "ended" and summary["success"] is False and summary["batch_size"] == 8
    assert summary["status_text"] == f"ended without a report: its process (pid {pid}) is gone"
    assert summary["failed_step"] == DIE_AT and summary["error"] == summary["status_text"]
    status, steps = get(client_for(killed)[0], "steps", run="cnn-bs8/train")
    assert status == 200 and steps["steps"] == [] and steps["status"] == "ended"
    assert steps["message"] == f"no report: ended without a report: its process (pid {pid}) is gone"


def _on_host(killed: Path, tmp_path: Path, host: str, quiet_s: float) -> Path:
    """A copy of the killed run as if measured on ``host``, its files last written ``quiet_s`` ago."""
    root = tmp_path / "logs"
    shutil.copytree(killed, root)
    claim = root / "cnn-bs8" / names.CLAIM_FILE
    claim.write_text(json.dumps(json.loads(claim.read_text()) | {"host": host}))
    when = time.time() - quiet_s
    for path in (root / "cnn-bs8").rglob("*"):
        os.utime(path, (when, when))
    return root


def test_a_run_on_another_host_is_running_there_until_its_files_go_quiet(killed, tmp_path):
    fresh = listed(_on_host(killed, tmp_path / "fresh", "jetson-7", 5))["cnn-bs8/train"]
    assert (fresh["status"], fresh["status_text"]) == ("running", "running (on host jetson-7)")
    quiet = listed(_on_host(killed, tmp_path / "quiet", "jetson-7", 3 * run_status.HEARTBEAT_S))["cnn-bs8/train"]
    assert quiet["status"] == "ended" and quiet["success"] is False
    assert quiet["status_text"] == "ended without a report: no write to its files from host jetson-7 for 30 min"


def test_a_pid_reused_by_a_later_process_is_not_the_claimer(killed, tmp_path):
    root = tmp_path / "logs"
    shutil.copytree(killed, root)
    claim = root / "cnn-bs8" / names.CLAIM_FILE
    # This test's own process is alive, but it started long after this claim was made.
    claim.write_text(json.dumps(json.loads(claim.read_text()) | {"pid": os.getpid(), "started": 1000.0}))
    summary = listed(root)["cnn-bs8/train"]
    assert summary["status"] == "ended"
    assert summary["status_text"] == f"ended without a report: its process (pid {os.getpid()}) is gone"


@pytest.mark.parametrize("pid", [2**40, 2**31, -1, 0])
def test_a_claims_pid_out_of_range_is_a_gone_process_not_a_server_error(killed, tmp_path, pid):
    # 2**40 made os.kill raise OverflowError: /runs and /crossrun answered 500 and listed no run at all.
    root = tmp_path / "logs"
    shutil.copytree(killed, root)
    claim = root / "cnn-bs8" / names.CLAIM_FILE
    claim.write_text(json.dumps(json.loads(claim.read_text()) | {"pid": pid}))
    summary = listed(root)["cnn-bs8/train"]
    assert summary["status"] == "ended"
    assert summary["status_text"] == f"ended without a report: its process (pid {pid}) is gone"


@pytest.mark.slow
def test_a_sweep_child_aborted_on_bad_alloc_is_failed_in_its_run_with_the_cause(tmp_path):
    row = aborted_sweep_run(tmp_path / "sweep")
    assert row["success"] is False and causes.is_oom(row) and row["failed_step"] == DIE_AT
    logdir = Path(row["logdir"])
    record = json.loads((logdir / names.END_FILE).read_text())
    assert record["signal"] == "SIGABRT" and record["exit_status"] == -signal.SIGABRT
    assert record["error"] == "out of memory (SIGABRT: std::bad_alloc)" and record["failed_step"] == DIE_AT
    run = f"{logdir.name}/train"
    summary = listed(tmp_path / "sweep" / "runs")[run]
    assert summary["status"] == "ended" and summary["success"] is False and summary["batch_size"] == 32
    assert summary["status_text"] == "ended without a report: out of memory (SIGABRT: std::bad_alloc)"
    assert summary["error"] == "out of memory (SIGABRT: std::bad_alloc)" and summary["failed_step"] == DIE_AT
    status, steps = get(client_for(tmp_path / "sweep" / "runs")[0], "steps", run=run)
    assert status == 200 and "out of memory (SIGABRT: std::bad_alloc)" in steps["message"]


def test_a_finished_run_is_not_given_an_end_record(tmp_path):
    """The end record is only for a child without its report: one that wrote it keeps its own status."""
    logdir = tmp_path / "run"
    logdir.mkdir()
    (logdir / names.CLAIM_FILE).write_text(json.dumps({"pid": 42}))
    (logdir / names.REPORT_FILE).write_text(json.dumps({"success": False, "steps": []}))
    done = launch.Exit(42, -signal.SIGKILL, "")
    assert launch.record_end(logdir, done, {"cause": "killed by SIGKILL"}, oom=True) is None
    with contextlib.suppress(FileNotFoundError):
        (logdir / names.REPORT_FILE).unlink()
    assert launch.record_end(logdir, launch.Exit(43, -9, ""), {"cause": "x"}, oom=False) is None  # not its claim
    path = launch.record_end(
        logdir, done, {"cause": "killed by SIGKILL (the kernel's OOM killer, most likely)"}, oom=True
    )
    assert json.loads(path.read_text())["error"] == "out of memory (SIGKILL)"


def test_a_run_that_ended_before_any_step_says_so_not_trained(tmp_path):
    """A real monitor opened and closed without a step: its report says "no step ran", and so does its status."""
    from tf_mobileperf import PerfMonitor

    with PerfMonitor(tmp_path / "empty", sensors="none"):
        pass
    summary = listed(tmp_path)["empty/train"]
    assert summary["success"] is True and summary["steps_measured"] == 0
    assert (summary["status"], summary["status_text"]) == ("finished", "no step measured: no step ran")
