"""Every way a measured ``fit`` can end leaves a true report.

Forks while measuring, errors outside the train function (another callback,
validation), Ctrl-C while the report is written, garbage collection and exit
of an unfinished measurement, the JAX backend, ``steps_per_execution``, a
step with a hole in its samples (Ctrl-Z), a NaN loss, no measured step.
Power comes from the synthetic sensor (a known constant), so energies are
checked against power x time.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import psutil
import pytest

from tf_mobileperf import MobilePerfCallback, PerfMonitor

from helpers.training import constant_sensor, data, small_model

HELPERS = Path(__file__).parent.parent / "helpers"


def child(script: str, *args, env: dict | None = None, **popen) -> subprocess.Popen:
    path = os.pathsep.join([str(HELPERS.parent), str(HELPERS.parent.parent)])  # tests/ and the tree under test
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=path) | (env or {})
    return subprocess.Popen(
        [sys.executable, str(HELPERS / script), *map(str, args)],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **popen,
    )


def finish(proc: subprocess.Popen, expect_rc: int = 0) -> str:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == expect_rc, err[-3000:]
    return out


def report_of(logdir: Path) -> dict:
    return json.loads((logdir / "report.json").read_text())


def measured(report: dict) -> list[dict]:
    return [s for s in report["steps"] if not s["warmup"] and not s["failed"]]


@pytest.mark.slow
def test_forked_children_leave_the_parents_sampler_running(tmp_path):
    """Synthetic sensor. A child of os.fork exits with sys.exit at batch 5; a fork-started
    multiprocessing helper is terminated at batch 15: every later step still has its energy."""
    out = finish(child("fork_child.py", tmp_path))
    assert "FIT_RETURNED" in out and "HELPER_EXIT -15" in out
    report = report_of(tmp_path)
    assert report["success"] is True and report["steps_measured"] == 57
    assert all(s["energy_j"]["total"] is not None for s in measured(report))
    assert report["sampling"]["sampler_outages"] == []
    assert report["energy_steps_complete"]["complete"] == 57


def test_error_in_another_callback_writes_the_report_and_frees_everything(tmp_path):
    """Synthetic sensor. Another callback raises at the end of epoch 1."""

    def explode(epoch, logs):
        raise ValueError("checkpoint disk is gone")

    cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=[constant_sensor()], batch_size=8)
    failing = keras.callbacks.LambdaCallback(on_epoch_end=explode)
    model = small_model()
    with pytest.raises(ValueError, match="checkpoint disk"):
        model.fit(*data(80), batch_size=8, epochs=2, callbacks=[cb, failing], verbose=0)
    report = report_of(tmp_path)
    assert report["success"] is False and "ValueError: checkpoint disk is gone" in report["error"]
    assert report["steps_measured"] == 7
    assert not cb.monitor.sampler.running
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert "evaluate" not in vars(model) and model.train_function is not None

    model.fit(*data(40), batch_size=8, epochs=1, callbacks=[cb], verbose=0)  # a notebook's next fit
    again = report_of(tmp_path / "run-2")
    assert again["success"] is True and [s["step"] for s in again["steps"]] == [0, 1, 2, 3, 4]
    assert report_of(tmp_path)["steps_measured"] == 7  # the first measurement is left as it was


def test_validation_data_of_the_wrong_shape_writes_the_report(tmp_path):
    """Synthetic sensor. Validation data with 3 features for a model of 16."""
    cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=[constant_sensor()], batch_size=8)
    bad_validation = (np.zeros((16, 3), np.float32), np.zeros((16, 1), np.float32))
    with pytest.raises(Exception):  # noqa: B017 - whichever error the backend raises for the shape
        small_model().fit(*data(80), batch_size=8, epochs=1, validation_data=bad_validation, callbacks=[cb], verbose=0)
    report = report_of(tmp_path)
    assert report["success"] is False and report["error"]
    assert report["steps_measured"] == 7 and not cb.monitor.sampler.running


@pytest.mark.slow
def test_ctrl_c_while_the_report_is_written_still_writes_it(tmp_path):
    """Synthetic sensor. A real SIGINT lands inside the monitor's last collection."""
    out = finish(child("finish_interrupt_child.py", tmp_path), expect_rc=130)
    assert "INTERRUPTED sampler_running=False handler_restored=True" in out
    report = report_of(tmp_path)
    assert report["success"] is True and report["steps_measured"] == 17  # fit had finished every step


def test_an_abandoned_measurement_is_ended_when_garbage_collected(tmp_path):
    """Synthetic sensor. A custom loop that never calls end()."""
    before = {p.pid for p in psutil.Process().children()}
    perf = PerfMonitor(tmp_path, idle_s=0, sensors=[constant_sensor()], warmup_steps=0).begin()
    for _ in range(3):
        with perf.step():
            time.sleep(0.01)
    sampler_pids = {p.pid for p in psutil.Process().children()} - before
    del perf
    gc.collect()
    report = report_of(tmp_path)
    assert report["success"] is False and "garbage collected" in report["error"]
    assert report["steps_measured"] == 3
    deadline = time.monotonic() + 10
    while any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in sampler_pids):
        assert time.monotonic() < deadline, "the sampler outlived its measurement"
        time.sleep(0.05)


@pytest.mark.slow
def test_jax_backend_trains_measured_and_its_oom_counts(tmp_path):
    """Synthetic sensor, KERAS_BACKEND=jax."""
    pytest.importorskip("jax")
    out = finish(child("backend_child.py", tmp_path, env={"KERAS_BACKEND": "jax"}))
    assert "BACKEND jax" in out
    assert "OOM_ERROR" in out and out.strip().endswith("True")
    report = report_of(tmp_path)
    assert report["success"] is True and report["steps_measured"] == 9
    for step in measured(report):
        assert step["energy_j"]["total"] == pytest.approx(5.0 * step["duration_s"], rel=1e-6)


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch is not installed (pip install torch runs this test)"
)
def test_torch_backend_trains_measured_and_its_oom_counts(tmp_path):
    """Synthetic sensor, KERAS_BACKEND=torch."""
    out = finish(child("backend_child.py", tmp_path, env={"KERAS_BACKEND": "torch"}))
    assert "BACKEND torch" in out and "OOM_ERROR" in out and out.strip().endswith("True")
    assert report_of(tmp_path)["steps_measured"] == 9


def test_steps_per_execution_counts_the_batches_that_ran(tmp_path):
    """Synthetic sensor. 10 batches an epoch at steps_per_execution=4: executions of 4, 4 and 2."""
    cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=[constant_sensor()], batch_size=8, warmup_steps=0)
    small_model(steps_per_execution=4).fit(*data(80), batch_size=8, epochs=2, callbacks=[cb], verbose=0)
    report = report_of(tmp_path)
    assert [s["batches"] for s in report["steps"]] == [4, 4, 2, 4, 4, 2]
    time_s = sum(s["duration_s"] for s in report["steps"])
    assert report["samples_per_s"] == pytest.approx(160 / time_s)
    # energy per sample is over the steps whose energy is known (all of them unless the machine stalled the sampler)
    samples = 8 * sum(s["batches"] for s in report["steps"] if s["energy_j"]["total"] is not None)
    assert report["energy_per_sample_j"] == pytest.approx(report["energy_total"] / samples)


@pytest.mark.slow
def test_a_stopped_process_costs_its_step_not_the_run(tmp_path):
    """Synthetic sensor. SIGSTOP then SIGCONT of the process group mid-run (Ctrl-Z, fg)."""
    proc = child("stopped_child.py", tmp_path, 100, start_new_session=True)
    assert proc.stdout.readline().strip() == "STARTED"
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGSTOP)
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGCONT)
    finish(proc)
    report = report_of(tmp_path)
    complete = report["energy_steps_complete"]
    assert 0 < complete["complete"] < complete["measured"] == 99
    steps = [s for s in measured(report) if s["energy_j"]["total"] is not None]
    assert report["energy_total"] == pytest.approx(sum(s["energy_j"]["total"] for s in steps))
    assert complete["time_s"] == pytest.approx(sum(s["duration_s"] for s in steps))
    assert report["power_avg"] == pytest.approx(5.0, rel=1e-6)
    assert complete["measured_time_s"] > complete["time_s"] + 0.9  # the stopped step's second is left out


@pytest.mark.slow
def test_terminate_on_nan_is_a_failure_with_the_reason(tmp_path):
    """Synthetic sensor. The targets of batch 6 are NaN, so the loss turns NaN there."""
    x, y = data(160)
    y[48:56] = np.nan
    cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=[constant_sensor()], batch_size=8)
    small_model().fit(
        x, y, batch_size=8, epochs=1, shuffle=False, callbacks=[keras.callbacks.TerminateOnNaN(), cb], verbose=0
    )
    report = report_of(tmp_path)
    assert report["success"] is False and report["failed_step"] == 6
    assert "loss is nan" in report["error"]


def test_no_measured_step_says_why(tmp_path):
    """Synthetic sensor. Two steps, both warm-up."""
    cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=[constant_sensor()], batch_size=8, warmup_steps=3)
    small_model().fit(*data(16), batch_size=8, epochs=1, callbacks=[cb], verbose=0)
    report = report_of(tmp_path)
    assert report["steps_measured"] == 0 and report["energy_total"] is None
    assert report["unavailable"]["energy"] == "all 2 steps were warm-up steps (warmup_steps=3)"


def test_a_killed_sampler_is_reported_restarted_once_and_costs_only_the_hole(tmp_path, caplog):
    """Synthetic sensor. The sampler process is killed with SIGKILL after step 20 of 60."""
    perf = PerfMonitor(tmp_path, idle_s=0, sensors=[constant_sensor()], warmup_steps=0, flush_s=0.1).begin()
    first_pid = perf.sampler.pid
    for i in range(60):
        if i == 20:
            os.kill(first_pid, signal.SIGKILL)  # as the kernel's OOM killer would
        with perf.step():
            time.sleep(0.03)
    report = perf.end().to_dict()
    outages = report["sampling"]["sampler_outages"]
    assert len(outages) == 1 and "SIGKILL" in outages[0]["reason"]
    assert outages[0]["end_s"] is not None and outages[0]["end_s"] > outages[0]["start_s"]
    assert perf.sampler.pid != first_pid  # restarted
    assert len([r for r in caplog.records if "SIGKILL" in r.getMessage()]) == 1
    start, end = outages[0]["start_s"], outages[0]["end_s"]
    steps = report["steps"]
    in_hole = [s for s in steps if s["start_s"] < end and s["end_s"] > start]
    away = [s for s in steps if s["end_s"] < start - 0.05 or s["start_s"] > end + 0.05]
    assert in_hole and len(away) >= 30
    if end - start > 0.1:  # a hole longer than the join's allowed gap: energy unknown there
        assert all(s["energy_j"]["total"] is None for s in in_hole if s["start_s"] > start and s["end_s"] < end)
        assert any(s["energy_j"]["total"] is None for s in in_hole)
    assert all(s["energy_j"]["total"] is not None for s in away)  # before the kill and after the restart
    complete = report["energy_steps_complete"]
    assert complete["complete"] == sum(s["energy_j"]["total"] is not None for s in steps)
    assert report["power_avg"] == pytest.approx(5.0, rel=1e-6)


def test_a_ctrl_c_the_programs_own_handler_lets_fit_finish_is_measured_through(tmp_path):
    """Synthetic sensor. Seen: a script whose SIGINT handler only sets a flag (fit trains on) got "training
    failed at step 6: KeyboardInterrupt: SIGINT", success false and 13 of 20 steps unmeasured."""
    asked: list[int] = []

    class CtrlC(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 5:
                os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, lambda signum, frame: asked.append(signum))
    try:
        cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=[constant_sensor()], batch_size=8)
        small_model().fit(*data(160), batch_size=8, epochs=1, callbacks=[CtrlC(), cb], verbose=0)
        assert asked == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)
    report = report_of(tmp_path)
    assert report["success"] is True and report["error"] is None
    assert report["steps_measured"] == 20 - report["warmup_steps"]


def test_a_ctrl_c_in_the_idle_baseline_ends_with_a_report_and_the_next_fit_starts_clean(tmp_path):
    """Synthetic sensor. Seen: Ctrl-C during the 2 s idle baseline left no report.json (the dashboard said
    "running" while the process lived), and the next fit's samples began with 129 rows of the aborted window
    and a 1.9 s hole."""
    import threading

    from tf_mobileperf.format.reader import read_series

    cb = MobilePerfCallback(tmp_path, idle_s=2.0, sensors=[constant_sensor()], batch_size=8)
    threading.Timer(0.8, os.kill, (os.getpid(), signal.SIGINT)).start()  # lands in the baseline's sleep
    with pytest.raises(KeyboardInterrupt):
        small_model().fit(*data(80), batch_size=8, epochs=1, callbacks=[cb], verbose=0)
    report = report_of(tmp_path)
    assert report["success"] is False and "interrupted before the first step" in report["error"]
    assert report["steps_measured"] == 0 and not cb.monitor.sampler.running
    second_began = time.monotonic()
    small_model().fit(*data(80), batch_size=8, epochs=1, callbacks=[cb], verbose=0)
    assert cb.monitor.logdir == tmp_path / "run-2" and cb.report.summary()["success"] is True
    _, rows = read_series(cb.monitor.layout.run_dir)
    assert rows[0, 0] >= second_began - 0.05  # its own samples only
