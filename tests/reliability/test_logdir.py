"""Where a run writes: a logdir that cannot be written, a disk that fills up
mid-run, and several measurements aimed at one logdir (two callbacks, two
processes, ``fit`` twice): each gets its own directory, nothing mixes."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import pytest

from tf_mobileperf import MobilePerfCallback, PerfMonitor
from tf_mobileperf.format.reader import read_series

from helpers.training import constant_sensor, data, small_model

HELPERS = Path(__file__).parent.parent / "helpers"


def test_unwritable_logdir_is_a_clear_error_before_the_first_step(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    batches = []
    counter = keras.callbacks.LambdaCallback(on_train_batch_begin=lambda i, logs: batches.append(i))
    cb = MobilePerfCallback(blocker / "run", idle_s=0, sensors=[constant_sensor()])
    with pytest.raises(OSError, match=f"cannot write to logdir {blocker / 'run'}"):
        small_model().fit(*data(), batch_size=32, epochs=1, callbacks=[counter, cb], verbose=0)
    assert batches == []


@pytest.mark.slow
def test_disk_full_mid_run_warns_once_and_keeps_the_report_in_memory(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(HELPERS.parent))
    proc = subprocess.run(
        [sys.executable, str(HELPERS / "disk_full_child.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"steps": 2000, "steps_measured": 1997, "power_avg": pytest.approx(5.0), "success": True}
    assert proc.stderr.count("write samples failed") == 1  # one warning, then debug
    header, rows = read_series(tmp_path / "train")  # cut back to whole rows: still aligned
    samples = tmp_path / "train/plugins/mobileperf/samples.bin"
    assert samples.stat().st_size % (8 * len(header["columns"])) == 0 and samples.stat().st_size <= 32 * 1024
    assert len(rows) > 100 and (rows[:, 1] == 5.0).all()
    lines = list(csv.reader((tmp_path / "steps.csv").open()))  # whole rows only (a write of many may fail whole)
    assert lines[0][0] == "step" and all(len(line) == len(lines[0]) for line in lines)


def test_two_callbacks_into_one_logdir_get_separate_directories(tmp_path):
    a = MobilePerfCallback(tmp_path, idle_s=0, sensors=[constant_sensor(5.0)])
    b = MobilePerfCallback(tmp_path, idle_s=0, sensors=[constant_sensor(7.0)])
    small_model().fit(*data(), batch_size=32, epochs=1, callbacks=[a, b], verbose=0)
    assert a.monitor.logdir == tmp_path and b.monitor.logdir == tmp_path / "run-2"
    for cb, watts in ((a, 5.0), (b, 7.0)):
        report = json.loads((cb.monitor.logdir / "report.json").read_text())
        assert len(report["steps"]) == 20 and report["power_avg"] == pytest.approx(watts)
        _, rows = read_series(cb.monitor.logdir / "train")
        assert (rows[:, 1] == watts).all()


CHILD = """
import sys, time
from tf_mobileperf import PerfMonitor
from helpers.training import constant_sensor
with PerfMonitor(sys.argv[1], idle_s=0, sensors=[constant_sensor(float(sys.argv[2]))], warmup_steps=0) as perf:
    for _ in range(10):
        with perf.step():
            time.sleep(0.02)
print(perf.logdir)
"""


@pytest.mark.slow
def test_two_processes_into_one_logdir_at_once_get_separate_directories(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(HELPERS.parent))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(tmp_path), str(w)], stdout=subprocess.PIPE, text=True, env=env
        )
        for w in (5.0, 7.0)
    ]
    dirs = {Path(p.communicate(timeout=300)[0].strip()): w for p, w in zip(procs, (5.0, 7.0))}
    assert set(dirs) == {tmp_path, tmp_path / "run-2"}
    for logdir, watts in dirs.items():
        report = json.loads((logdir / "report.json").read_text())
        assert len(report["steps"]) == 10 and report["power_avg"] == pytest.approx(watts)
        claim = json.loads((logdir / "mobileperf.claim").read_text())
        assert claim["pid"] in {p.pid for p in procs}


@pytest.mark.slow
def test_fit_twice_with_one_callback_writes_a_second_run(tmp_path):
    cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=[constant_sensor()], warmup_steps=1)
    model = small_model()
    model.fit(*data(320), batch_size=32, epochs=1, callbacks=[cb], verbose=0)
    first = (tmp_path / "report.json").read_text()
    model.fit(*data(160), batch_size=32, epochs=1, callbacks=[cb], verbose=0)
    assert (tmp_path / "report.json").read_text() == first and len(json.loads(first)["steps"]) == 10
    assert len(cb.report.steps) == 5 and cb.monitor.logdir == tmp_path / "run-2"
    assert len(json.loads((tmp_path / "run-2" / "report.json").read_text())["steps"]) == 5


@pytest.mark.parametrize("logdir", ["gs://bucket/runs/x", "s3://b/x", "ram://runs/x"])
def test_a_remote_logdir_is_refused_by_name_and_no_local_folder_appears(tmp_path, monkeypatch, logdir):
    from tf_mobileperf.sweep.config import SweepConfig

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=f"logdir '{logdir}' is on a remote file system"):
        MobilePerfCallback(logdir, sensors="none")
    with pytest.raises(ValueError, match="remote file system"):
        SweepConfig(out=logdir)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("logdir", ["", "  ", b""])
def test_an_empty_logdir_is_refused_in_one_line_and_nothing_is_written_here(tmp_path, monkeypatch, logdir):
    # '' was taken as the current directory: report.json, steps.csv and train/ landed wherever it ran.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"logdir is empty \((''|'  '|b'')\): name a directory"):
        MobilePerfCallback(logdir, sensors="none")
    with pytest.raises(ValueError, match="logdir is empty"):
        PerfMonitor(logdir, sensors="none")
    assert list(tmp_path.iterdir()) == []
