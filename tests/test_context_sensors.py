"""Temperatures, EMC clock, throttling and power mode on fake trees built like real boards.

Sensors used: the thermal, EMC and throttle sensors on fake sysfs trees
(TX2 JetPack 4, AGX Orin JetPack 6, an x86 desktop) with values taken from
real tegrastats lines of those boards; ``power_mode`` with a fake
``nvpmodel`` script on PATH and fake status and conf files.
"""

from __future__ import annotations

import math
import stat
import subprocess
import time
from pathlib import Path

import pytest

from tf_mobileperf import PerfMonitor
from tf_mobileperf.sensors.emc import EmcSensor
from tf_mobileperf.sensors.errors import SensorUnavailable
from tf_mobileperf.sensors.power_mode import parse_query, power_mode
from tf_mobileperf.sensors.thermal import ThermalSensor
from tf_mobileperf.sensors.throttle import ThrottleSensor

from conftest import write
from helpers.board_context import add_cpufreq, add_zones


def test_tx2_zone_temperatures_in_celsius_by_device_with_trips(tx2_board):
    sensor = ThermalSensor(tx2_board)
    reading = sensor.read()
    assert reading["BCPU-therm_temp"] == pytest.approx(41.0) and reading["GPU-therm_temp"] == pytest.approx(40.5)
    assert reading["Tdiode_tegra_temp"] == pytest.approx(38.75) and reading["thermal-fan-est_temp"] == 40.1
    devices = {c.name: c.device for c in sensor.channels}
    assert devices["BCPU-therm_temp"] == devices["MCPU-therm_temp"] == "cpu"
    assert devices["GPU-therm_temp"] == "gpu" and devices["Tboard_tegra_temp"] == "board"
    assert all(c.kind == "temperature" and c.unit == "C" for c in sensor.channels)
    meta = sensor.metadata()
    assert "PMIC-Die_temp" not in reading and "fixed 100 C" in meta["thermal_zones_skipped"]["thermal_zone6"]
    assert meta["thermal_zones"]["BCPU-therm_temp"]["trips"] == [
        {"type": "critical", "temp_c": 101.0},
        {"type": "passive", "temp_c": 96.5},
    ]
    assert meta["thermal_zones"]["BCPU-therm_temp"]["throttle_c"] == 96.5
    assert meta["thermal_zones"]["thermal-fan-est_temp"]["throttle_c"] is None  # fan trips do not throttle


def test_orin_powered_off_zone_and_failed_read_are_nan_not_minus_256(orin_board):
    sensor = ThermalSensor(orin_board)
    reading = sensor.read()
    assert math.isnan(reading["gpu-thermal_temp"]) and math.isnan(reading["cv0-thermal_temp"])
    assert reading["cpu-thermal_temp"] == pytest.approx(44.437) and reading["tj-thermal_temp"] == pytest.approx(44.437)
    temp = orin_board / "sys/class/thermal/thermal_zone0/temp"
    temp.write_text("\n")  # the driver gave no value
    assert math.isnan(sensor.read()["cpu-thermal_temp"])
    temp.write_text("47843\n")
    assert sensor.read()["cpu-thermal_temp"] == pytest.approx(47.843)


def test_repeated_zone_types_get_the_zone_number(tmp_path):
    add_zones(tmp_path, [("acpitz", 27800), ("x86_pkg_temp", 52000), ("acpitz", 29800)], {})
    sensor = ThermalSensor(tmp_path)
    assert sensor.read() == {
        "acpitz_temp": pytest.approx(27.8),
        "x86_pkg_temp_temp": pytest.approx(52.0),
        "acpitz_2_temp": pytest.approx(29.8),
    }
    assert {c.name: c.device for c in sensor.channels}["x86_pkg_temp_temp"] == "cpu"


def test_no_thermal_zone_is_unavailable_with_reason(tmp_path):
    with pytest.raises(SensorUnavailable, match=f"no readable thermal zone under {tmp_path}/sys/class/thermal"):
        ThermalSensor(tmp_path)
    add_zones(tmp_path, [("PMIC-Die", 100000)], {})
    with pytest.raises(SensorUnavailable, match="PMIC-Die: a PMIC die zone reports a fixed 100 C"):
        ThermalSensor(tmp_path)


def test_tx2_emc_clock_and_utilization_from_actmon(tx2_board):
    sensor = EmcSensor(tx2_board)
    assert sensor.read() == {"emc_freq": pytest.approx(1866e6), "emc_util": pytest.approx(31.0, abs=0.01)}
    roles = {c.name: (c.kind, c.device, c.group) for c in sensor.channels}
    assert roles == {"emc_freq": ("clock", "board", "mem"), "emc_util": ("util", "board", "mem")}
    (tx2_board / "sys/kernel/debug/clk/emc/clk_rate").write_text("\n")  # a failed read: NaN, and no utilization
    assert all(math.isnan(value) for value in sensor.read().values())


def test_orin_emc_from_bpmp_debugfs(orin_board):
    sensor = EmcSensor(orin_board)
    assert sensor.read() == {"emc_freq": pytest.approx(3199e6), "emc_util": pytest.approx(12.0, abs=0.01)}
    assert sensor.metadata()["emc"]["clock_source"].endswith("bpmp/debug/clk/emc/rate")


def test_emc_without_debugfs_is_unavailable_saying_root(orin_board):
    (orin_board / "sys/kernel/debug/bpmp/debug/clk/emc/rate").unlink()  # a normal user: debugfs is not mounted for them
    with pytest.raises(SensorUnavailable, match=r"EMC clock not readable at .*bpmp/debug/clk/emc/rate.*root only"):
        EmcSensor(orin_board)


def test_emc_clock_without_activity_monitor_says_why_util_is_missing(tx2_board):
    (tx2_board / "sys/kernel/actmon_avg_activity/mc_all").unlink()
    sensor = EmcSensor(tx2_board)
    assert sensor.read() == {"emc_freq": pytest.approx(1866e6)}
    assert "actmon_avg_activity/mc_all" in sensor.metadata()["emc"]["util_unavailable"]


def test_throttle_channels_per_cause_all_clear_on_a_cool_orin(orin_board):
    write(orin_board, "sys/class/hwmon/hwmon9/fan1_max_alarm", "1\n")  # a fan alarm is not throttling
    sensor = ThrottleSensor(orin_board)
    assert sensor.read() == {"throttled": 0.0, "throttle_thermal": 0.0, "throttle_overcurrent": 0.0}
    assert all(c.kind == "state" and c.device == "board" for c in sensor.channels)
    assert [c.group for c in sensor.channels] == ["throttled", "throttle", "throttle"]
    causes = sensor.metadata()["throttle"]["causes"]  # the powered-off GPU zone (-256 C) is below its trip
    zones = f"{orin_board}/sys/class/thermal/thermal_zone"
    assert causes["throttle_thermal"] == [f"{zones}{i}/temp >= 99 C" for i in (0, 1)]
    assert len(causes["throttle_overcurrent"]) == 6


def test_thermal_trip_crossed_sets_throttle_thermal(orin_board):
    sensor = ThrottleSensor(orin_board)
    write(orin_board, "sys/class/thermal/thermal_zone0/temp", "99500\n")
    assert sensor.read() == {"throttled": 1.0, "throttle_thermal": 1.0, "throttle_overcurrent": 0.0}


def test_overcurrent_alarm_sets_throttle_overcurrent(orin_board):
    sensor = ThrottleSensor(orin_board)
    write(orin_board, "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/curr1_crit_alarm", "1\n")
    assert sensor.read() == {"throttled": 1.0, "throttle_thermal": 0.0, "throttle_overcurrent": 1.0}


def test_clock_below_the_asked_floor_or_target_sets_throttle_clock(tx2_board):
    sensor = ThrottleSensor(tx2_board)
    assert sensor.read()["throttle_clock"] == 0.0  # schedutil at its top, GPU at its target
    add_cpufreq(tx2_board, [0, 3, 4, 5], 1113600, 2035200, 2035200)  # jetson_clocks' floor, clock held at 1.1 GHz
    assert sensor.read()["throttle_clock"] == 1.0 and sensor.read()["throttled"] == 1.0
    add_cpufreq(tx2_board, [0, 3, 4, 5], 2035200, 345600, 2035200)
    write(tx2_board, "sys/class/devfreq/17000000.gp10b/cur_freq", "854250000\n")  # GPU below its governor's target
    assert sensor.read()["throttle_clock"] == 1.0


def test_unknown_source_makes_a_clear_cause_nan_not_zero(orin_board):
    sensor = ThrottleSensor(orin_board)
    write(orin_board, "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/curr2_max_alarm", "\n")
    reading = sensor.read()
    assert math.isnan(reading["throttle_overcurrent"]) and math.isnan(reading["throttled"])
    assert reading["throttle_thermal"] == 0.0
    write(orin_board, "sys/class/thermal/thermal_zone0/temp", "105000\n")
    assert sensor.read()["throttled"] == 1.0  # one known cause is enough


def test_nothing_to_watch_is_unavailable_with_reason(tmp_path):
    add_zones(tmp_path, [("acpitz", 27800)], {"acpitz": [("active", 60000)]})
    add_cpufreq(tmp_path, [0, 1], 400000, 800000, 4800000, governor="powersave")  # idle desktop cores under the floor
    for core in (0, 1):
        write(tmp_path, f"sys/devices/system/cpu/cpu{core}/cpufreq/scaling_driver", "intel_pstate\n")
    with pytest.raises(SensorUnavailable, match=r"no thermal zone with a passive/hot/critical trip"):
        ThrottleSensor(tmp_path)


@pytest.mark.slow
def test_context_channels_reduced_per_step_in_the_report(orin_board, tmp_path):
    sensors = [
        ThermalSensor(orin_board, period_s=0.05),
        ThrottleSensor(orin_board, period_s=0.05),
        EmcSensor(orin_board),
    ]
    with PerfMonitor(tmp_path / "run", sensors=sensors, warmup_steps=0) as perf:
        for temp in ("44437\n", "99500\n"):
            write(orin_board, "sys/class/thermal/thermal_zone0/temp", temp)
            time.sleep(0.6)
            with perf.step():
                time.sleep(0.6)
            time.sleep(0.6)  # no sample after the step's end reads the next step's temperature
    report = perf.report.to_dict()
    cool, hot = (step["channels"] for step in report["steps"])
    assert cool["cpu-thermal_temp"]["peak"] == pytest.approx(44.437) and cool["throttled"]["peak"] == 0.0
    assert hot["cpu-thermal_temp"]["mean"] == pytest.approx(99.5) and hot["throttle_thermal"]["peak"] == 1.0
    assert hot["emc_freq"]["mean"] == pytest.approx(3199e6) and cool["gpu-thermal_temp"]["peak"] is None
    assert report["device"]["throttle"]["causes"]["throttle_thermal"]


def fake_nvpmodel(bin_dir: Path, script: str) -> None:
    path = write(bin_dir, "nvpmodel", "#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def orin_nano_modes(tmp_path: Path) -> Path:
    """An Orin Nano's nvpmodel conf and status (mode 2), jetson_clocks off, and an empty bin dir on PATH."""
    root = tmp_path / "root"
    write(
        root,
        "etc/nvpmodel.conf",
        "< PM_CONFIG DEFAULT=0 >\n< POWER_MODEL ID=0 NAME=15W >\nCPU_ONLINE CORE_0 1\n"
        "< POWER_MODEL ID=1 NAME=7W >\n< POWER_MODEL ID=2 NAME=MAXN_SUPER >\n",
    )
    write(root, "var/lib/nvpmodel/status", "pmode:0002 fmode:quiet\n")
    add_cpufreq(root, [0, 1, 2, 3, 4, 5], 729600, 115200, 1728000)
    (tmp_path / "bin").mkdir()
    return root


def test_power_mode_from_a_fake_nvpmodel_on_path(orin_nano_modes, tmp_path, monkeypatch):
    answer = 'printf "NV Fan Mode:quiet\\nNV Power Mode: 7W\\n1\\n"\n'
    fake_nvpmodel(tmp_path / "bin", f'echo "$@" > {tmp_path}/asked\n' + answer)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    mode = power_mode(orin_nano_modes)
    assert (tmp_path / "asked").read_text() == "-q\n"
    assert (mode.mode_id, mode.mode_name, mode.source) == (1, "7W", "nvpmodel -q")  # live, not the status file's 2
    assert mode.jetson_clocks is False and mode.unavailable == {} and mode.to_dict()["power_mode"]["mode_name"] == "7W"
    assert mode.jetson_clocks_how == "cpufreq scaling_min_freq == scaling_max_freq on 0 of 6 CPU policies"


def test_power_mode_from_status_file_and_conf_without_nvpmodel(orin_nano_modes, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    mode = power_mode(orin_nano_modes)
    assert (mode.mode_id, mode.mode_name) == (2, "MAXN_SUPER")
    assert mode.source == f"{orin_nano_modes}/var/lib/nvpmodel/status, name from {orin_nano_modes}/etc/nvpmodel.conf"
    write(orin_nano_modes, "var/lib/nvpmodel/status", "pmode:0009 fmode:quiet\n")
    mode = power_mode(orin_nano_modes)
    assert mode.mode_id == 9 and mode.mode_name is None
    assert mode.unavailable == {"mode_name": f"mode 9 has no POWER_MODEL NAME in {orin_nano_modes}/etc/nvpmodel.conf"}


@pytest.mark.parametrize("script", ['echo "NVPM ERROR: failed to read PARAM" >&2\nexit 255\n', "exec sleep 30\n"])
def test_failing_or_hanging_nvpmodel_falls_back_to_the_status_file(orin_nano_modes, tmp_path, monkeypatch, script):
    fake_nvpmodel(tmp_path / "bin", script)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    started = time.monotonic()
    assert power_mode(orin_nano_modes, timeout_s=1.0).mode_id == 2 and time.monotonic() - started < 20


def test_a_hung_nvpmodel_is_killed_with_everything_it_started(orin_nano_modes, tmp_path, monkeypatch):
    # Seen: a wrapper whose own child hung was left running after the timeout, and holding the output pipe it
    # kept the query waiting until that child ended.
    fake_nvpmodel(tmp_path / "bin", "sleep 31.7 &\nwait\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    started = time.monotonic()
    assert power_mode(orin_nano_modes, timeout_s=0.5).mode_id == 2  # the status file's
    assert time.monotonic() - started < 10
    time.sleep(0.2)
    left = subprocess.run(["pgrep", "-f", "sleep 31.7"], capture_output=True, text=True).stdout.split()
    assert left == []


def test_unknown_power_mode_is_none_with_reasons_not_zero(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    mode = power_mode(tmp_path)
    assert mode.mode_id is None and mode.mode_name is None and mode.jetson_clocks is None
    assert mode.unavailable["mode"] == (
        f"nvpmodel is not on PATH; {tmp_path}/var/lib/nvpmodel/status not readable: No such file or directory"
    )
    assert mode.unavailable["jetson_clocks"] == "no nvpmodel mode: not a Jetson, or nvpmodel is not installed"
    write(tmp_path, "var/lib/nvpmodel/status", "pmode:0000 fmode:quiet\n")  # a Jetson whose cpufreq is not readable
    assert power_mode(tmp_path).unavailable["jetson_clocks"] == (
        f"no cpufreq scaling_min_freq/scaling_max_freq readable under {tmp_path}/sys/devices/system/cpu"
    )


def test_jetson_clocks_on_when_every_floor_equals_its_ceiling(tx2_board, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    add_cpufreq(tx2_board, [0, 3, 4, 5], 2035200, 2035200, 2035200)
    write(tx2_board, "sys/class/devfreq/17000000.gp10b/min_freq", "1300500000\n")
    write(tx2_board, "var/lib/nvpmodel/status", "pmode:0000\n")
    write(tx2_board, "etc/nvpmodel.conf", "< POWER_MODEL ID=0 NAME=MAXN >\n< POWER_MODEL ID=1 NAME=MAXQ >\n")
    mode = power_mode(tx2_board)
    assert (mode.mode_id, mode.mode_name) == (0, "MAXN")
    assert mode.jetson_clocks is True
    assert mode.jetson_clocks_how == (
        "cpufreq scaling_min_freq == scaling_max_freq on 4 of 4 CPU policies; "
        "GPU devfreq 17000000.gp10b min_freq == max_freq"
    )


def test_nvpmodel_query_output_parsed_as_the_boards_print_it():
    assert parse_query("NV Power Mode: MAXN\n0\n") == (0, "MAXN")  # TX2, JetPack 4
    assert parse_query("NV Fan Mode:quiet\nNV Power Mode: MODE_30W\n2\n") == (2, "MODE_30W")  # AGX Orin, JetPack 5/6
    assert parse_query("NVPM ERROR: failed to read PARAM\n") is None
