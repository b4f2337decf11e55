"""MobilePerfCallback in model.fit, with the synthetic sensor (a known signal)
and the replay sensor; real OOMs from a child process under RLIMIT_AS."""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import keras
import numpy as np
import pytest

from conftest import DATA
from tf_mobileperf import MobilePerfCallback, PerfMonitor
from tf_mobileperf.sensors import SyntheticSensor

HELPERS = Path(__file__).parent / "helpers"


def small_model(steps_per_execution: int = 1):
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(256, activation="relu"), keras.layers.Dense(1)])
    model.compile("adam", "mse", steps_per_execution=steps_per_execution)
    return model


def data(n=640):
    rng = np.random.default_rng(0)
    return rng.random((n, 16), dtype=np.float32), rng.random((n, 1), dtype=np.float32)


def constant_sensor(watts=5.0):
    return SyntheticSensor(power_w={"VDD_IN": lambda t: watts, "VDD_SYS_GPU": lambda t: 2.0},
                           groups={"VDD_IN": "total", "VDD_SYS_GPU": "gpu"})


def test_synthetic_constant_power_energy_is_p_times_duration(tmp_path):
    cb = MobilePerfCallback(tmp_path, sensors=[constant_sensor()], batch_size=32)
    small_model().fit(*data(), batch_size=32, epochs=2, callbacks=[cb], verbose=0)
    report = cb.report.to_dict()
    steps = report["steps"]
    assert len(steps) == 40 and [s["step"] for s in steps] == list(range(40))  # global across epochs
    assert [s["warmup"] for s in steps[:4]] == [True, True, True, False]
    measured = [s for s in steps if not s["warmup"]]
    assert report["steps_measured"] == 37
    for s in measured:
        assert s["energy_j"]["VDD_IN"] == pytest.approx(5.0 * (s["end_s"] - s["start_s"]), rel=1e-9)
        assert s["energy_j"]["total"] == s["energy_j"]["VDD_IN"]
    assert report["energy_total"] == pytest.approx(sum(s["energy_j"]["total"] for s in measured), rel=1e-12)
    assert report["power_avg"] == pytest.approx(5.0)
    assert report["power_avg_w"]["VDD_SYS_GPU"] == pytest.approx(2.0)
    assert report["energy_per_sample_j"] == pytest.approx(report["energy_total"] / (37 * 32))
    assert report["success"] is True and report["failed_step"] is None
    assert report["sampling"]["requested_hz"] == pytest.approx(200.0)
    on_disk = json.loads((tmp_path / "report.json").read_text())
    assert on_disk["energy_total"] == pytest.approx(report["energy_total"])
    rows = list(csv.DictReader((tmp_path / "steps.csv").open()))
    assert len(rows) == 40 and float(rows[10]["energy_j/total"]) == pytest.approx(steps[10]["energy_j"]["total"])


def test_synthetic_sine_total_energy_error_below_half_percent(tmp_path):
    f = 7.0
    sensor = SyntheticSensor(power_w={"VDD_IN": lambda t: 6.0 + 4.0 * math.sin(2 * math.pi * f * t)},
                             groups={"VDD_IN": "total"})
    cb = MobilePerfCallback(tmp_path, sensors=[sensor])
    x, y = data(4000)
    small_model().fit(x, y, batch_size=8, epochs=1, callbacks=[cb], verbose=0)
    F = lambda t: 6.0 * t - 4.0 * math.cos(2 * math.pi * f * t) / (2 * math.pi * f)
    measured = cb.report.measured
    exact = sum(F(s.end_s) - F(s.start_s) for s in measured)
    assert abs(cb.report.summary()["energy_total"] - exact) / exact < 0.005


def test_no_power_sensor_reports_null_with_reason(tmp_path):
    cb = MobilePerfCallback(tmp_path, sensors="auto", batch_size=32)
    small_model().fit(*data(), batch_size=32, epochs=1, callbacks=[cb], verbose=0)
    report = json.loads((tmp_path / "report.json").read_text())
    if report["sensors"] and any(c["kind"] in ("power", "energy") for s in report["sensors"] for c in s["channels"]):
        pytest.skip("this machine has a power sensor")
    assert report["energy_total"] is None and report["power_avg"] is None
    assert "no power sensor" in report["unavailable"]["energy"]
    assert report["cpu_util_avg"] is not None and 0 <= report["cpu_util_avg"] <= 100
    assert report["mem_peak_gb"] > 0.01
    assert report["steps"][5]["energy_j"] == {}


def test_replay_sensor_in_fit(tmp_path):
    cb = MobilePerfCallback(tmp_path, sensors=f"replay:{DATA / 'tx2_tegrastats.log'}@1", warmup_steps=1)
    small_model().fit(*data(), batch_size=32, epochs=1, callbacks=[cb], verbose=0)
    summary = cb.report.summary()
    # fit lasts < 1 s: the first record (VDD_IN 2.356 W) covers every step.
    assert summary["power_avg"] == pytest.approx(2.356)
    assert summary["power_avg_w"]["VDD_SYS_DDR"] == pytest.approx(0.244)
    assert summary["gpu_util_avg"] == pytest.approx(0.0)


def test_steps_per_execution_reports_batches_per_step(tmp_path):
    cb = MobilePerfCallback(tmp_path, sensors=[constant_sensor()], warmup_steps=1, batch_size=32)
    small_model(steps_per_execution=4).fit(*data(), batch_size=32, epochs=1, callbacks=[cb], verbose=0)
    steps = cb.report.steps
    assert len(steps) == 5 and all(s.batches == 4 for s in steps)
    assert cb.report.summary()["samples_per_s"] == pytest.approx(4 * 4 * 32 / sum(s.duration_s for s in steps[1:]))


def test_scalars_read_back_with_tbparse_in_keras_tensorboard_run(tmp_path):
    from tbparse import SummaryReader

    cb = MobilePerfCallback(tmp_path, sensors=[constant_sensor()])
    tb = keras.callbacks.TensorBoard(log_dir=str(tmp_path), update_freq="batch")
    small_model().fit(*data(), batch_size=32, epochs=1, callbacks=[tb, cb], verbose=0)
    reader = SummaryReader(str(tmp_path), extra_columns={"dir_name"})
    df = reader.scalars  # ours: plain scalar events
    ours = df[df.tag == "mobileperf/energy_j"]
    assert set(ours.dir_name) == {"train"}
    keras_own = reader.tensors  # Keras writes TF2 tensor summaries
    assert "train" in set(keras_own[keras_own.tag == "epoch_loss"].dir_name)  # same run
    by_step = dict(zip(ours.step, ours.value))
    for s in cb.report.steps:
        assert by_step[s.step] == pytest.approx(s.energy_j["total"], rel=1e-6)
    power = df[df.tag == "mobileperf/power_w/VDD_IN"]
    assert np.allclose(power.value, 5.0)
    assert len(df[df.tag == "mobileperf/gpu_util"]) == 0  # not measured: no point, not 0


def test_custom_loop_with_perf_step(tmp_path):
    model = small_model()
    x, y = data(256)
    with PerfMonitor(tmp_path, sensors=[constant_sensor()], warmup_steps=2, batch_size=32) as perf:
        for i in range(8):
            with perf.step():
                model.train_on_batch(x[i * 32:(i + 1) * 32], y[i * 32:(i + 1) * 32])
    summary = perf.report.summary()
    assert summary["steps_measured"] == 6 and summary["power_avg"] == pytest.approx(5.0)
    assert (tmp_path / "report.json").exists()


@pytest.mark.parametrize("kwargs,error", [
    ({"warmup_steps": -1}, ValueError), ({"warmup_steps": "3"}, TypeError), ({"warmup_steps": 2.5}, TypeError),
    ({"sample_period_ms": 0}, ValueError), ({"sample_period_ms": 0.01}, ValueError),
    ({"sensors": "bogus"}, ValueError), ({"sensors": "replay:/nonexistent.log"}, FileNotFoundError),
    ({"on_oom": "ignore"}, ValueError), ({"profile_steps": (1, 4)}, ValueError), ({"profile_steps": (5, 4)}, ValueError),
    ({"sensors": [object()]}, TypeError),
])
def test_bad_arguments_raise_in_constructor(tmp_path, kwargs, error):
    with pytest.raises(error):
        MobilePerfCallback(tmp_path, **({"sensors": "none"} | kwargs))


def test_replay_of_a_file_that_is_not_tegrastats(tmp_path):
    junk = tmp_path / "junk.log"
    junk.write_text("hello\n")
    with pytest.raises(ValueError, match="no tegrastats"):
        MobilePerfCallback(tmp_path, sensors=f"replay:{junk}")


def _run_oom_child(tmp_path, fail_at, on_oom):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(HELPERS.parent))
    proc = subprocess.run([sys.executable, str(HELPERS / "oom_child.py"), str(tmp_path), str(fail_at), on_oom],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, json.loads((tmp_path / "report.json").read_text())


@pytest.mark.parametrize("fail_at", [1, 2, 5])  # a warm-up step, the first measured step, a later one
def test_real_oom_under_rlimit_stops_cleanly_and_keeps_steps(tmp_path, fail_at):
    out, report = _run_oom_child(tmp_path, fail_at, "stop")
    assert "FIT_RETURNED" in out
    assert report["success"] is False and report["failed_step"] == fail_at
    assert "ResourceExhaustedError" in report["error"]
    steps = report["steps"]
    assert [s["step"] for s in steps] == list(range(fail_at + 1)) and steps[-1]["failed"]
    assert all(s["energy_j"]["total"] > 0 for s in steps[:-1])
    assert report["steps_measured"] == max(0, fail_at - 2)


def test_real_oom_with_on_oom_raise_writes_report_then_raises(tmp_path):
    out, report = _run_oom_child(tmp_path, 3, "raise")
    assert "RAISED_OOM" in out and report["failed_step"] == 3 and report["success"] is False


def test_ctrl_c_during_fit_writes_partial_report(tmp_path):
    cb = MobilePerfCallback(tmp_path, sensors=[constant_sensor()])
    threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    x, y = data(200_000)
    with pytest.raises(KeyboardInterrupt):
        small_model().fit(x, y, batch_size=8, epochs=1, callbacks=[cb], verbose=0)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["success"] is False and report["steps_measured"] > 10
    assert "KeyboardInterrupt" in report["error"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_fit_twice_gives_a_fresh_report(tmp_path):
    cb = MobilePerfCallback(tmp_path, sensors=[constant_sensor()], warmup_steps=1)
    model = small_model()
    model.fit(*data(320), batch_size=32, epochs=1, callbacks=[cb], verbose=0)
    model.fit(*data(160), batch_size=32, epochs=1, callbacks=[cb], verbose=0)
    assert len(cb.report.steps) == 5


def test_profile_steps_trace_where_the_profile_tab_finds_it(tmp_path):
    cb = MobilePerfCallback(tmp_path, sensors=[constant_sensor()], profile_steps=(4, 5))
    small_model().fit(*data(), batch_size=32, epochs=1, callbacks=[cb], verbose=0)
    traced = [s.step for s in cb.report.steps if s.traced]
    assert traced == [4, 5]
    assert list((tmp_path / "train" / "plugins" / "profile").glob("*/*.xplane.pb"))


def test_profiler_clash_is_a_warning_not_a_crash(tmp_path, caplog):
    import tensorflow as tf

    tf.profiler.experimental.start(str(tmp_path / "other"))
    try:
        cb = MobilePerfCallback(tmp_path, sensors=[constant_sensor()], profile_steps=(3, 4))
        small_model().fit(*data(), batch_size=32, epochs=1, callbacks=[cb], verbose=0)
    finally:
        tf.profiler.experimental.stop()
    assert cb.report.success and not any(s.traced for s in cb.report.steps)
    assert "could not start the TF profiler" in caplog.text


def test_step_longer_than_the_flush_interval_keeps_its_samples(tmp_path):
    import time

    with PerfMonitor(tmp_path, sensors=[constant_sensor()], warmup_steps=0) as perf:
        for _ in range(2):
            with perf.step():
                time.sleep(1.3)  # several collector drains while the step is open
    for step in perf.report.steps:
        assert step.energy_j["VDD_IN"] == pytest.approx(5.0 * step.duration_s, rel=1e-9)


def test_other_error_in_a_step_writes_the_partial_report_and_propagates(tmp_path):
    def batches():
        for i in range(20):
            if i == 6:
                raise RuntimeError("corrupt record")
            yield np.ones((8, 16), "float32"), np.ones((8, 1), "float32")

    cb = MobilePerfCallback(tmp_path, sensors=[constant_sensor()])
    with pytest.raises(Exception):
        small_model().fit(batches(), epochs=1, steps_per_epoch=20, callbacks=[cb], verbose=0)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["success"] is False and report["failed_step"] == 6 and "corrupt record" in report["error"]
    assert report["steps_measured"] == 3
