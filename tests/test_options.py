"""MonitorOptions: every option of a measurement reaches the monitor from ``fit``, and is checked
once, with the same errors from the callback and the monitor. Sensors: the synthetic constant
sensor and "none"; the measurement is never started, except in the one fit test."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from tf_mobileperf import MobilePerfCallback, PerfMonitor
from tf_mobileperf.session.options import MonitorOptions, check_int, resolve_sensors

from helpers.training import constant_sensor, data, small_model


def fake_clock() -> float:
    return 42.0


def every_option_changed() -> dict:
    """A value for every option that differs from its default."""
    return {
        "warmup_steps": 2,
        "sample_period_ms": 10.0,
        "sensors": (constant_sensor(),),
        "profile_steps": (4, 5),
        "batch_size": 16,
        "run": "fit",
        "flush_s": 0.25,
        "keep_steps": 7,
        "clock": fake_clock,
        "combine_wait_s": 3.0,
        "idle_s": 0.5,
        "sampler_priority": "normal",
    }


def test_every_monitor_option_is_reachable_from_the_callback(tmp_path):
    values = every_option_changed()
    defaults = MonitorOptions()
    assert set(values) == {f.name for f in dataclasses.fields(MonitorOptions)}
    assert all(getattr(defaults, name) != value for name, value in values.items())
    cb = MobilePerfCallback(tmp_path, on_oom="raise", **values)
    assert cb.on_oom == "raise"
    assert cb.monitor.options == MonitorOptions(**values)
    assert cb.monitor.options.clock() == 42.0 and cb.monitor.options.sensors == values["sensors"]


def test_monitor_keywords_and_an_options_object_give_the_same_options(tmp_path):
    values = every_option_changed()
    assert PerfMonitor(tmp_path, **values).options == PerfMonitor(tmp_path, options=MonitorOptions(**values)).options
    with pytest.raises(TypeError, match="not both"):
        PerfMonitor(tmp_path, options=MonitorOptions(), warmup_steps=1)


@pytest.mark.parametrize(
    "make",
    [MonitorOptions, lambda **kw: PerfMonitor("unused", **kw), lambda **kw: MobilePerfCallback("unused", **kw)],
    ids=["options", "monitor", "callback"],
)
def test_an_unknown_option_is_refused_by_name(make):
    with pytest.raises(TypeError, match="keep_stpes"):
        make(keep_stpes=7)


@pytest.mark.parametrize(
    "bad,names",
    [
        ({"sampler_priority": "high"}, "sampler_priority"),
        ({"warmup_steps": -1}, "warmup_steps"),
        ({"warmup_steps": "3"}, "warmup_steps"),
        ({"warmup_steps": True}, "warmup_steps"),
        ({"sample_period_ms": 0.01}, "period"),
        ({"sample_period_ms": "5"}, "period"),
        ({"sensors": "bogus"}, "unknown sensors"),
        ({"sensors": [object()]}, "Sensor"),
        ({"sensors": "replay:x.log@fast"}, "replay speed"),
        ({"profile_steps": (1, 4)}, "profile_steps"),
        ({"profile_steps": 5}, "profile_steps"),
        ({"batch_size": 0}, "batch_size"),
        ({"keep_steps": 0}, "keep_steps"),
        ({"flush_s": 0}, "flush_s"),
        ({"flush_s": "0.5"}, "flush_s"),
        ({"combine_wait_s": -1.0}, "combine_wait_s"),
        ({"combine_wait_s": float("nan")}, "combine_wait_s"),
        ({"run": ""}, "run"),
        ({"clock": 5}, "clock"),
        ({"idle_s": -1.0}, "idle_s"),
        ({"idle_s": "2"}, "idle_s"),
        ({"idle_s": float("inf")}, "idle_s"),
    ],
)
def test_option_errors_are_the_same_from_options_monitor_and_callback(tmp_path, bad, names):
    errors = []
    for make in (
        MonitorOptions,
        lambda **kw: PerfMonitor(tmp_path, **kw),
        lambda **kw: MobilePerfCallback(tmp_path, **kw),
    ):
        with pytest.raises((TypeError, ValueError), match=re.escape(names)) as caught:
            make(**({"sensors": "none"} | bad))
        errors.append((type(caught.value), str(caught.value)))
    assert errors[0] == errors[1] == errors[2]


def test_options_are_stored_checked_and_cannot_change():
    options = MonitorOptions(
        warmup_steps=np.int64(2),
        sample_period_ms=5,
        sensors=[constant_sensor()],
        profile_steps=[2, 3],
        keep_steps=np.int32(9),
        flush_s=1,
    )
    assert (options.warmup_steps, options.keep_steps) == (2, 9) and type(options.warmup_steps) is int
    assert options.sample_period_ms == 5.0 and type(options.sample_period_ms) is float
    assert options.period_s == pytest.approx(0.005)
    assert options.profile_steps == (2, 3) and isinstance(options.sensors, tuple)
    assert options.flush_s == 1.0 and type(options.flush_s) is float
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.keep_steps = 0


@pytest.mark.slow
def test_the_callback_checks_once_and_every_fit_measures_with_the_same_options(tmp_path):
    """Synthetic sensor; two fits, two measurements, one options object."""
    cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=[constant_sensor()], warmup_steps=1, keep_steps=3, run="fit")
    options, first = cb.options, cb.monitor
    assert first.options is options
    model = small_model()
    for _ in range(2):
        model.fit(*data(64), batch_size=8, epochs=1, callbacks=[cb], verbose=0)
    assert cb.monitor is not first and cb.monitor.options is options
    assert cb.monitor.logdir == tmp_path / "run-2" and (tmp_path / "run-2" / "fit").is_dir()
    assert [s.step for s in cb.report.steps] == [0, 5, 6, 7] and cb.report.to_dict()["steps_not_kept"] == 4


def test_check_int_takes_numpy_ints_and_refuses_bools_and_small_values():
    assert check_int("n", np.int64(5), 1) == 5
    with pytest.raises(TypeError, match=re.escape("n must be an int, got bool")):
        check_int("n", True)
    with pytest.raises(ValueError, match=re.escape("n must be >= 1, got 0")):
        check_int("n", 0, 1)


def test_resolve_sensors_is_importable_from_the_monitor_and_reads_the_spec():
    from tf_mobileperf.session.monitor import resolve_sensors as from_monitor

    assert from_monitor is resolve_sensors
    none = resolve_sensors("none")
    assert none.sensors == [] and none.absent == {"all": "sensors='none' was requested"}
    sensor = constant_sensor()
    assert resolve_sensors((sensor,)).sensors == [sensor]


def test_a_sampler_period_given_in_milliseconds_by_mistake_is_refused_naming_the_unit():
    from tf_mobileperf.sampling.period import check_period

    with pytest.raises(ValueError, match=r"at most 10 s, got 5000.0 s \(the period is in seconds: 5 ms is 0.005\)"):
        check_period(5000.0)
    assert check_period(5.0, "ms") == 5.0 and check_period(0.005) == 0.005


def test_a_logdir_that_is_a_file_is_one_error_naming_that_file(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("not a run")
    with pytest.raises(NotADirectoryError) as raised:
        PerfMonitor(afile, sensors="none", idle_s=0).begin()
    assert str(raised.value) == f"[Errno 20] mobileperf cannot write to logdir {afile}: it is a file"
    assert not (tmp_path / "afile" / "run-2").exists() and afile.read_text() == "not a run"
