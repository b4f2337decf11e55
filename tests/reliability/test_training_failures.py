"""Training that fails: real OOMs (a child under RLIMIT_AS), Python's
MemoryError, Ctrl-C and SIGTERM, an error in the input pipeline. Each ends
with ``success: False``, the right ``failed_step``, and every completed step
kept on disk in files that read back."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest

from tf_mobileperf import MobilePerfCallback
from tf_mobileperf.format.reader import read_series

from helpers.training import constant_sensor, data, small_model

HELPERS = Path(__file__).parent.parent / "helpers"


def run_child(script: str, *args, expect_rc: int = 0) -> subprocess.CompletedProcess:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(HELPERS.parent))
    proc = subprocess.run(
        [sys.executable, str(HELPERS / script), *map(str, args)], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == expect_rc, proc.stderr[-3000:]
    return proc


def assert_files_read_back(logdir: Path, report: dict) -> None:
    """steps.csv has every step of the report; the series is whole rows in time order."""
    rows = list(csv.DictReader((logdir / "steps.csv").open()))
    assert [int(r["step"]) for r in rows] == [s["step"] for s in report["steps"]]
    header, series = read_series(logdir / "train")
    assert series.shape[1] == len(header["columns"]) and len(series) > 10
    assert np.all(np.diff(series[:, 0]) > 0)


@pytest.mark.slow
@pytest.mark.parametrize(
    "fail_at,after",
    [(1, 2), (2, 2), (5, 2), (4, 0)],
    ids=["warmup-step", "first-measured-step", "later-step", "last-step"],
)
def test_real_oom_under_rlimit_stops_cleanly_and_keeps_steps(tmp_path, fail_at, after):
    out = run_child("oom_child.py", tmp_path, fail_at, "stop", after).stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert "FIT_RETURNED" in out
    assert report["success"] is False and report["failed_step"] == fail_at
    assert "ResourceExhaustedError" in report["error"]
    steps = report["steps"]
    assert [s["step"] for s in steps] == list(range(fail_at + 1)) and steps[-1]["failed"]
    assert all(s["energy_j"]["total"] > 0 for s in steps[:-1])
    assert report["steps_measured"] == max(0, fail_at - 2)
    assert_files_read_back(tmp_path, report)


@pytest.mark.slow
def test_real_oom_with_on_oom_raise_writes_report_then_raises(tmp_path):
    out = run_child("oom_child.py", tmp_path, 3, "raise").stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert "RAISED_OOM" in out and report["failed_step"] == 3 and report["success"] is False


def test_python_memory_error_is_an_oom(tmp_path):
    batch = {"index": -1}

    class AllocatesAtBatch4(keras.layers.Layer):
        """Asks Python for 1 PiB in batch 4: a real MemoryError, raised by bytearray."""

        def call(self, x):
            if batch["index"] == 4:
                bytearray(1 << 50)
            return x

    model = keras.Sequential([keras.Input((16,)), AllocatesAtBatch4(), keras.layers.Dense(1)])
    model.compile("sgd", "mse", run_eagerly=True)
    counter = keras.callbacks.LambdaCallback(on_train_batch_begin=lambda i, logs: batch.update(index=i))
    cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=[constant_sensor()], warmup_steps=2)
    model.fit(*data(320), batch_size=32, epochs=1, callbacks=[counter, cb], verbose=0)  # returns: on_oom="stop"
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["success"] is False and report["failed_step"] == 4 and "MemoryError" in report["error"]
    assert [s["failed"] for s in report["steps"]] == [False] * 4 + [True]
    assert report["steps_measured"] == 2


@pytest.mark.slow
@pytest.mark.parametrize("signame,rc,printed", [("SIGINT", 130, "INTERRUPTED"), ("SIGTERM", -signal.SIGTERM, "")])
def test_signal_during_fit_writes_partial_report_and_series(tmp_path, signame, rc, printed):
    proc = run_child("signal_child.py", tmp_path, signame, expect_rc=rc)
    assert printed in proc.stdout and "FIT_RETURNED" not in proc.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["success"] is False and report["steps_measured"] > 10
    assert f"KeyboardInterrupt: {signame}" in report["error"]
    assert report["failed_step"] == report["steps"][-1]["step"]
    assert_files_read_back(tmp_path, report)


@pytest.mark.slow
def test_ctrl_c_in_process_restores_the_previous_handler(tmp_path):
    import threading

    cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=[constant_sensor()])
    # Started after batch 30, so the machine's load cannot make it land in the first step, whose
    # tracing runs Python inside finalizers, where an exception is printed and dropped.
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    start_timer = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: timer.start() if batch == 30 else None
    )
    x, y = data(200_000)
    with pytest.raises(KeyboardInterrupt):
        small_model().fit(x, y, batch_size=8, epochs=1, callbacks=[start_timer, cb], verbose=0)
    assert json.loads((tmp_path / "report.json").read_text())["success"] is False
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


class CtrlCWhenCollected:
    """Raises SIGINT from its ``__del__``: the KeyboardInterrupt lands inside a finalizer, where Python prints
    it and drops it (TensorFlow's tracing runs Python in finalizers; a loaded machine delivers Ctrl-C there)."""

    def __del__(self):
        signal.raise_signal(signal.SIGINT)


@pytest.mark.slow
def test_ctrl_c_swallowed_in_a_finalizer_still_stops_fit_at_the_next_batch(tmp_path):
    cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=[constant_sensor()])
    batches = []

    def at_batch_end(batch, logs):
        batches.append(batch)
        if batch == 5:
            CtrlCWhenCollected()  # collected at once: Ctrl-C inside its __del__

    x, y = data(8 * 40)
    with pytest.raises(KeyboardInterrupt):
        small_model().fit(
            x,
            y,
            batch_size=8,
            epochs=1,
            verbose=0,
            callbacks=[keras.callbacks.LambdaCallback(on_train_batch_end=at_batch_end), cb],
        )
    assert batches[-1] == 5  # not one batch trained unmeasured
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["success"] is False and "SIGINT" in report["error"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_other_error_in_a_step_writes_the_partial_report_and_propagates(tmp_path):
    def batches():
        for i in range(20):
            if i == 6:
                raise RuntimeError("corrupt record")
            yield np.ones((8, 16), "float32"), np.ones((8, 1), "float32")

    cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=[constant_sensor()])
    with pytest.raises(Exception, match="corrupt record"):  # the type is the data pipeline's
        small_model().fit(batches(), epochs=1, steps_per_epoch=20, callbacks=[cb], verbose=0)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["success"] is False and report["failed_step"] == 6 and "corrupt record" in report["error"]
    assert report["steps_measured"] == 3


@pytest.mark.slow
def test_sweep_child_killed_by_sigkill_keeps_its_steps(tmp_path):
    import threading
    import time

    import psutil

    from tf_mobileperf.sweep.config import SweepConfig
    from tf_mobileperf.sweep.runner import run_name, run_one

    rows = []
    config = SweepConfig(out=tmp_path, steps=3000, warmup_steps=1)
    runner = threading.Thread(target=lambda: rows.append(run_one("cnn", 1, config)))
    runner.start()
    steps_csv = tmp_path / "runs" / run_name("cnn", 1, config) / "steps.csv"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (steps_csv.exists() and len(steps_csv.read_text().splitlines()) > 6):
        time.sleep(0.1)
    child = next(p for p in psutil.Process().children(recursive=True) if "tf_mobileperf.sweep.child" in p.cmdline())
    child.send_signal(signal.SIGKILL)  # as the kernel's OOM killer would
    runner.join(timeout=60)
    row = rows[0]
    assert row["success"] is False and row["cause"].startswith("killed by SIGKILL")
    on_disk = list(csv.DictReader(steps_csv.open()))
    assert row["steps_on_disk"] == len(on_disk) >= 6
    assert row["failed_step"] >= len(on_disk)  # the step it died in: none after it was written
    assert row["steps_measured"] == len(on_disk) - 1 and row["step_time_s_mean"] > 0
