"""MobilePerfCallback in model.fit, with the synthetic sensor (a known signal)
and the replay sensor. Failures (OOM, signals, bad input) are in tests/reliability/."""

from __future__ import annotations

import csv
import json
import math

import keras
import numpy as np
import pytest

from tf_mobileperf import MobilePerfCallback, PerfMonitor
from tf_mobileperf.sensors import SyntheticSensor

from conftest import DATA
from helpers.training import constant_sensor, data, small_model


@pytest.mark.slow
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
    # The default 2 s idle baseline, before the first step: the same constant power, so no energy above it.
    assert report["idle_power_w"] == pytest.approx({"VDD_IN": 5.0, "VDD_SYS_GPU": 2.0, "total": 5.0})
    assert report["energy_active_total"] == pytest.approx(0.0, abs=1e-9)
    assert report["energy_per_sample_j"] == pytest.approx(report["energy_total"] / (37 * 32))
    assert report["success"] is True and report["failed_step"] is None
    assert report["sampling"]["requested_hz"] == pytest.approx(200.0)
    on_disk = json.loads((tmp_path / "report.json").read_text())
    assert on_disk["energy_total"] == pytest.approx(report["energy_total"])
    rows = list(csv.DictReader((tmp_path / "steps.csv").open()))
    assert len(rows) == 40 and float(rows[10]["energy_j/total"]) == pytest.approx(steps[10]["energy_j"]["total"])


@pytest.mark.slow
def test_synthetic_sine_total_energy_error_below_half_percent(tmp_path):
    f = 7.0
    sensor = SyntheticSensor(
        power_w={"VDD_IN": lambda t: 6.0 + 4.0 * math.sin(2 * math.pi * f * t)}, groups={"VDD_IN": "total"}
    )
    cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=[sensor])
    x, y = data(4000)
    small_model().fit(x, y, batch_size=8, epochs=1, callbacks=[cb], verbose=0)

    def F(t):  # the integral of the power
        return 6.0 * t - 4.0 * math.cos(2 * math.pi * f * t) / (2 * math.pi * f)

    measured = cb.report.measured
    exact = sum(F(s.end_s) - F(s.start_s) for s in measured)
    assert abs(cb.report.summary()["energy_total"] - exact) / exact < 0.005


def test_replay_sensor_in_fit(tmp_path):
    cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=f"replay:{DATA / 'tx2_tegrastats.log'}@0.01", warmup_steps=1)
    small_model().fit(*data(), batch_size=32, epochs=1, callbacks=[cb], verbose=0)
    summary = cb.report.summary()
    # Replayed 100 times slower, the first record (VDD_IN 2.356 W) lasts 100 s: it covers every step
    # however busy the machine is.
    assert summary["power_avg"] == pytest.approx(2.356)
    assert summary["power_avg_w"]["VDD_SYS_DDR"] == pytest.approx(0.244)
    assert summary["gpu_util_avg"] == pytest.approx(0.0)


def test_steps_per_execution_reports_batches_per_step(tmp_path):
    cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=[constant_sensor()], warmup_steps=1, batch_size=32)
    small_model(steps_per_execution=4).fit(*data(), batch_size=32, epochs=1, callbacks=[cb], verbose=0)
    steps = cb.report.steps
    assert len(steps) == 5 and all(s.batches == 4 for s in steps)
    assert cb.report.summary()["samples_per_s"] == pytest.approx(4 * 4 * 32 / sum(s.duration_s for s in steps[1:]))


def test_scalars_read_back_with_tbparse_in_keras_tensorboard_run(tmp_path):
    from tbparse import SummaryReader

    cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=[constant_sensor()])
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
    with PerfMonitor(tmp_path, idle_s=0, sensors=[constant_sensor()], warmup_steps=2, batch_size=32) as perf:
        for i in range(8):
            with perf.step():
                model.train_on_batch(x[i * 32 : (i + 1) * 32], y[i * 32 : (i + 1) * 32])
    summary = perf.report.summary()
    assert summary["steps_measured"] == 6 and summary["power_avg"] == pytest.approx(5.0)
    assert (tmp_path / "report.json").exists()


def test_profile_steps_trace_where_the_profile_tab_finds_it(tmp_path):
    cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=[constant_sensor()], profile_steps=(4, 5))
    small_model().fit(*data(), batch_size=32, epochs=1, callbacks=[cb], verbose=0)
    traced = [s.step for s in cb.report.steps if s.traced]
    assert traced == [4, 5]
    assert list((tmp_path / "train" / "plugins" / "profile").glob("*/*.xplane.pb"))


def test_profiler_clash_is_a_warning_not_a_crash(tmp_path, caplog):
    import tensorflow as tf

    tf.profiler.experimental.start(str(tmp_path / "other"))
    try:
        cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=[constant_sensor()], profile_steps=(3, 4))
        small_model().fit(*data(), batch_size=32, epochs=1, callbacks=[cb], verbose=0)
    finally:
        tf.profiler.experimental.stop()
    assert cb.report.success and not any(s.traced for s in cb.report.steps)
    assert "could not start the TF profiler" in caplog.text


def test_step_longer_than_the_flush_interval_keeps_its_samples(tmp_path):
    import time

    with PerfMonitor(tmp_path, idle_s=0, sensors=[constant_sensor()], warmup_steps=0) as perf:
        for _ in range(2):
            with perf.step():
                time.sleep(1.3)  # several collector drains while the step is open
    for step in perf.report.steps:
        assert step.energy_j["VDD_IN"] == pytest.approx(5.0 * step.duration_s, rel=1e-9)


def test_time_between_steps_is_reported_as_a_fraction(tmp_path):
    now = [100.0]  # the step clock, moved by the test: the gaps are exact however loaded the machine is

    with PerfMonitor(tmp_path, idle_s=0, sensors=[constant_sensor()], warmup_steps=1, clock=lambda: now[0]) as perf:
        for _ in range(6):
            now[0] += 0.03  # the loop's own work between steps: input, environment, logging
            with perf.step():
                now[0] += 0.01
    steps = perf.report.steps
    assert steps[0].gap_before_s is None and all(s.gap_before_s == pytest.approx(0.03) for s in steps[1:])
    summary = perf.report.summary()
    assert summary["between_steps_fraction"] == pytest.approx(0.75)
    assert summary["gap_before_step_s"]["mean"] == pytest.approx(0.03)


def test_every_monitor_option_reaches_the_monitor(tmp_path):
    """Synthetic sensor."""
    cb = MobilePerfCallback(
        tmp_path, idle_s=0, sensors=[constant_sensor()], keep_steps=7, flush_s=0.2, run="fit", combine_wait_s=3.0
    )
    options = cb.monitor.options
    assert (options.keep_steps, options.flush_s, options.run, options.combine_wait_s) == (7, 0.2, "fit", 3.0)
    small_model().fit(*data(80), batch_size=8, epochs=1, callbacks=[cb], verbose=0)
    assert (tmp_path / "fit" / "plugins" / "mobileperf" / "samples.bin").exists()
    with pytest.raises(TypeError, match="keep_stpes"):
        MobilePerfCallback(tmp_path / "other", keep_stpes=7)
