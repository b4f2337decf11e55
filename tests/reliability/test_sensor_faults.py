"""Sensors that fail during a run, and machines without power sensors.

A sysfs file that turns unreadable (fake Orin hwmon tree), a device that
vanishes (reads raise ENODEV, never recovers) and an NVML-style library
error (synthetic sensors that raise): each leaves a NaN gap, one warning,
a counted gap in the report's sampling section, energy marked incomplete
over the gap, and training that goes on."""

from __future__ import annotations

import errno
import json
import logging
import threading
import time

import pytest

from tf_mobileperf import MobilePerfCallback, PerfMonitor
from tf_mobileperf.sensors import Ina3221HwmonSensor, SyntheticSensor
from tf_mobileperf.session import cpu_times

from helpers.machine_warnings import about_the_machine
from helpers.training import data, small_model

FAULT_FROM, FAULT_TO = 0.6, 1.2  # seconds after the start
RUN_S = 1.9


class NVMLError(RuntimeError):
    """Stands for pynvml.NVMLError (not installed here)."""


class FailingSensor(SyntheticSensor):
    """Synthetic 3 W rail "rail" whose read raises ``error`` between two times."""

    def __init__(self, t0: float, error: Exception, until: float | None):
        super().__init__(power_w={"rail": lambda t: 3.0})
        self.t0, self.error, self.until = t0, error, until

    def read(self):
        elapsed = time.monotonic() - self.t0
        if elapsed > FAULT_FROM and (self.until is None or elapsed < self.until):
            raise self.error
        return super().read()


def healthy() -> SyntheticSensor:
    return SyntheticSensor(power_w={"VDD_IN": lambda t: 5.0}, groups={"VDD_IN": "total"})


def fault_sensors(kind: str, t0: float, orin_tree):
    """(sensors, name of the failing channel, fault end or None)."""
    if kind == "sysfs-unreadable":
        value = orin_tree / "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/in1_input"
        threading.Timer(FAULT_FROM, value.write_text, ["garbage\n"]).start()
        threading.Timer(FAULT_TO, value.write_text, ["5000\n"]).start()
        return [Ina3221HwmonSensor(orin_tree)], "VDD_GPU_SOC", FAULT_TO
    if kind == "vanished-device":
        return [FailingSensor(t0, OSError(errno.ENODEV, "No such device"), None)], "rail", None
    return [FailingSensor(t0, NVMLError("NVML_ERROR_GPU_IS_LOST"), FAULT_TO)], "rail", FAULT_TO


@pytest.mark.parametrize("kind", ["sysfs-unreadable", "vanished-device", "nvml-error"])
def test_sensor_failing_mid_run(tmp_path, orin_tree, caplog, kind):
    caplog.set_level(logging.WARNING, logger="tf_mobileperf")
    t0 = time.monotonic()
    sensors, failing, fault_end = fault_sensors(kind, t0, orin_tree)
    with PerfMonitor(tmp_path, idle_s=0, sensors=sensors + [healthy()], warmup_steps=0) as perf:
        while time.monotonic() - t0 < RUN_S:
            with perf.step():
                time.sleep(0.04)
    report = perf.report
    assert report.success and len(report.steps) == perf.next_step > 30
    sampling = report.sampling
    # A loaded machine may stall the whole sampler past the allowed gap: the healthy rail's gaps. Steps over
    # them are incomplete in every rail, as they should be; the fault's own effects are checked on the others.
    stalled = sampling["channel_gaps"].get("VDD_IN", 0)

    def steps_within(a, b):
        inside = [s for s in report.steps if t0 + a <= s.start_s and s.end_s <= t0 + b]
        return [s for s in inside if not stalled or s.energy_j["VDD_IN"] is not None]

    for step in steps_within(0.0, RUN_S + 1.0):  # the healthy rail is whole throughout
        assert step.energy_j["VDD_IN"] == pytest.approx(5.0 * step.duration_s, rel=1e-9)
    assert len(steps_within(0.0, RUN_S + 1.0)) > 20
    inside = steps_within(FAULT_FROM + 0.15, (fault_end or RUN_S) - 0.15)
    assert inside and all(s.energy_j[failing] is None and failing in s.incomplete for s in inside)
    assert all(s.energy_j[failing] is not None for s in steps_within(0.0, FAULT_FROM - 0.15))
    if fault_end:
        assert all(s.energy_j[failing] is not None for s in steps_within(fault_end + 0.2, RUN_S))
    on_disk = json.loads((tmp_path / "report.json").read_text())
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and not about_the_machine(r)]
    if stalled:
        assert sampling["channel_gaps"][failing] >= 1 and on_disk["sampling"]["channel_gaps"][failing] >= 1
        assert any(failing in w for w in warnings)
        return
    assert sampling["channel_gaps"] == {failing: 1}
    gap = sampling["channels"][failing]["gap_s"]
    assert gap == pytest.approx((fault_end or perf.report.steps[-1].end_s - t0) - FAULT_FROM, abs=0.15)
    assert len(warnings) == 1 and failing in warnings[0]
    assert on_disk["sampling"]["channel_gaps"] == {failing: 1}


@pytest.mark.parametrize("steal_per_drain_s,cause", [(0.1, "the host held this VM back"), (0.0, "a sensor stopped")])
def test_a_gap_while_the_host_held_the_vm_back_says_so(tmp_path, caplog, monkeypatch, steal_per_drain_s, cause):
    """Synthetic steal counter (/proc/stat's, read at each drain) rising by 0.1 CPU s a drain, as under a host
    that throttles its VM 100 ms at a time, or not rising; a synthetic rail that vanishes mid-run."""
    steal = iter(range(10_000))
    monkeypatch.setattr(cpu_times, "steal_s", lambda: next(steal) * steal_per_drain_s)
    caplog.set_level(logging.WARNING, logger="tf_mobileperf")
    t0 = time.monotonic()
    sensors = [FailingSensor(t0, OSError(errno.ENODEV, "No such device"), None), healthy()]
    with PerfMonitor(tmp_path, idle_s=0, sensors=sensors, warmup_steps=0) as perf:
        while time.monotonic() - t0 < RUN_S:
            with perf.step():
                time.sleep(0.04)
    gaps = [r.getMessage() for r in caplog.records if "rail" in r.getMessage() and "allowed gap" in r.getMessage()]
    assert len(gaps) == 1 and f"({cause}" in gaps[0], gaps
    assert perf.report.sampling["channel_gaps"]["rail"] == 1


def test_no_power_sensor_reports_the_rest_and_null_power_with_one_log_line(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="tf_mobileperf")
    cb = MobilePerfCallback(tmp_path, sensors="auto", batch_size=32)
    small_model().fit(*data(), batch_size=32, epochs=1, callbacks=[cb], verbose=0)
    report = json.loads((tmp_path / "report.json").read_text())
    if any(c["kind"] in ("power", "energy") for s in report["sensors"] for c in s["channels"]):
        pytest.skip("this machine has a power sensor")
    assert report["energy_total"] is None and report["power_avg"] is None and report["energy_per_sample_j"] is None
    assert "no power sensor" in report["unavailable"]["energy"]
    assert report["cpu_util_avg"] is not None and 0 <= report["cpu_util_avg"] <= 100
    assert report["mem_peak_gb"] > 0.01 and report["step_time_s"]["p50"] > 0
    assert report["steps"][5]["energy_j"] == {} and report["steps"][5]["cpu_util"] is not None
    ours = [r for r in caplog.records if r.name.startswith("tf_mobileperf")]
    said = [r for r in ours if "no power sensor" in r.getMessage()]
    assert (
        len(said) == 1 and "rapl (powercap)" in said[0].getMessage() and "`mobileperf sensors`" in said[0].getMessage()
    )
    assert said[0].levelno == logging.INFO  # one info line, as the README says: nothing went wrong
    # nothing warns, but what this loaded machine did to the step times (a Jetson trains at 100% CPU too) and to the
    # sampler (a gap in its rows is the sampling section's, tested in test_sampler_isolation)
    gap = "mobileperf: no valid reading of"
    warned = [r.getMessage() for r in ours if r.levelno >= logging.WARNING and not about_the_machine(r)]
    assert [m for m in warned if not m.startswith(gap)] == []


def test_sensors_none_still_times_every_step(tmp_path):
    cb = MobilePerfCallback(tmp_path, sensors="none", batch_size=32)
    small_model().fit(*data(), batch_size=32, epochs=1, callbacks=[cb], verbose=0)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["steps_measured"] == 17 and report["step_time_s"]["mean"] > 0 and report["samples_per_s"] > 0
    for key in ("energy_total", "power_avg", "cpu_util_avg", "gpu_util_avg", "mem_peak_gb"):
        assert report[key] is None
    assert set(report["unavailable"]) >= {"energy", "power", "cpu_util", "gpu_util", "mem_peak_gb"}
    # The GPU allocator's peak is the framework's, not a sensor's: it says why it is null on its own.
    sensed = {key: reason for key, reason in report["unavailable"].items() if key != "gpu_mem_peak_gb"}
    assert all("sensors='none'" in reason for reason in sensed.values())
    assert "no GPU device visible to" in report["unavailable"]["gpu_mem_peak_gb"]
