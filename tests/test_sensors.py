"""Sensors on fake sysfs/procfs trees of real boards (no hardware here)."""

from __future__ import annotations

import math
import shutil

import pytest

from tf_mobileperf.sensors import (
    CpuSensor,
    Ina3221HwmonSensor,
    Ina3221IioSensor,
    JetsonGpuSensor,
    MemorySensor,
    NvmlSensor,
    RaplSensor,
    SensorUnavailable,
    SyntheticSensor,
    detect,
    probe,
    rail_group,
)

from conftest import stat_text, write


def test_tx2_iio_rails_in_watts_with_board_names(tx2_tree):
    sensor = Ina3221IioSensor(tx2_tree)
    reading = sensor.read()
    assert set(reading) == {"VDD_SYS_GPU", "VDD_SYS_SOC", "VDD_4V0_WIFI", "VDD_IN", "VDD_SYS_CPU", "VDD_SYS_DDR"}
    assert reading["VDD_SYS_GPU"] == pytest.approx(6.120)
    assert reading["VDD_IN"] == pytest.approx(11.820)
    groups = {c.name: c.group for c in sensor.channels}
    assert groups["VDD_IN"] == "total" and groups["VDD_SYS_CPU"] == "cpu"
    assert groups["VDD_SYS_GPU"] == "gpu" and groups["VDD_SYS_DDR"] == "mem"
    assert all(c.unit == "W" for c in sensor.channels)


def test_orin_hwmon_power_is_mv_times_ma_and_skips_nc_and_sum(orin_tree):
    sensor = Ina3221HwmonSensor(orin_tree)
    names = [c.name for c in sensor.channels]
    assert names == ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"]
    reading = sensor.read()
    assert reading["VDD_GPU_SOC"] == pytest.approx(5.0 * 0.4)
    assert reading["VIN_SYS_5V0"] == pytest.approx(5.0 * 1.2)
    assert reading["VDDQ_VDD2_1V8AO"] == pytest.approx(5.0 * 0.8)


def test_unreadable_file_reads_nan_and_recovers(tx2_tree):
    sensor = Ina3221IioSensor(tx2_tree)
    power = next(tx2_tree.glob("sys/bus/i2c/drivers/ina3221x/0-0040/iio:device0/in_power0_input"))
    power.write_text("garbage\n")
    assert math.isnan(sensor.read()["VDD_SYS_GPU"])
    power.write_text("500\n")
    assert sensor.read()["VDD_SYS_GPU"] == pytest.approx(0.5)


def test_vanished_device_is_a_failed_read_not_zero(orin_tree):
    sensor = Ina3221HwmonSensor(orin_tree)
    shutil.rmtree(orin_tree / "sys/bus/i2c/drivers/ina3221/1-0040")
    reading = sensor.read()
    assert str(reading["VDD_GPU_SOC"]).startswith("No such file or directory: ")  # counted by the sampler
    assert reading["VDDQ_VDD2_1V8AO"] == pytest.approx(4.0)


@pytest.mark.parametrize("cls", [Ina3221IioSensor, Ina3221HwmonSensor, JetsonGpuSensor, RaplSensor])
def test_absent_hardware_raises_unavailable_with_reason(tmp_path, cls):
    with pytest.raises(SensorUnavailable, match=str(tmp_path)):
        cls(tmp_path)


def test_jetson_gpu_load_per_mille_to_percent_and_clock(tx2_tree, orin_tree):
    tx2 = JetsonGpuSensor(tx2_tree).read()
    assert tx2["gpu_util"] == pytest.approx(99.3)
    assert tx2["gpu_freq"] == pytest.approx(1300.5e6)


def test_jetson_gpu_newer_path(orin_tree):
    assert JetsonGpuSensor(orin_tree).read()["gpu_util"] == pytest.approx(50.0)


def test_cpu_per_core_util_clusters_and_offline(tx2_tree):
    sensor = CpuSensor(tx2_tree)
    meta = sensor.metadata()
    assert meta["clusters"] == {"Cortex-A57": [0, 3, 4, 5], "Denver2": [1, 2]}
    assert meta["offline"] == [1, 2]
    write(tx2_tree, "proc/stat", stat_text({0: (150, 150), 3: (50, 250), 4: (100, 200), 5: (200, 0)}))
    reading = sensor.read()
    assert reading["cpu0_util"] == pytest.approx(50.0)
    assert reading["cpu3_util"] == pytest.approx(0.0)
    assert reading["cpu4_util"] == pytest.approx(100.0)
    assert math.isnan(reading["cpu5_util"])  # no jiffies passed: unknown, not 0
    assert math.isnan(reading["cpu1_util"])  # offline
    assert reading["cpu_util"] == pytest.approx(100.0 * 150 / 300)
    assert reading["cpu0_freq"] == pytest.approx(2035.2e6)
    assert {c.name: c.cluster for c in sensor.channels}["cpu1_util"] == "Denver2"


def test_memory_system_used_and_process_peak(tx2_tree):
    sensor = MemorySensor(tx2_tree, pid=4242)
    reading = sensor.read()
    assert reading["ram_used"] == (8000000 - 5000000) * 1024
    assert reading["proc_peak"] == 2000000 * 1024
    assert reading["proc_rss"] == 1500000 * 1024


def test_rapl_unwraps_counter(tmp_path):
    zone = "sys/class/powercap/intel-rapl:0"
    write(tmp_path, f"{zone}/name", "package-0\n")
    write(tmp_path, f"{zone}/max_energy_range_uj", "1000000\n")
    counter = write(tmp_path, f"{zone}/energy_uj", "900000\n")
    sensor = RaplSensor(tmp_path)
    assert sensor.read()["rapl_0_package-0"] == pytest.approx(0.9)
    counter.write_text("100000\n")  # wrapped past 1 J
    assert sensor.read()["rapl_0_package-0"] == pytest.approx(1.1)
    assert sensor.channels[0].unit == "J"


def test_nvml_absent_here_says_why():
    with pytest.raises(SensorUnavailable, match="NVML|nvidia-ml-py"):
        NvmlSensor()


def test_synthetic_sensor_failed_read_is_nan():
    def broken(t):
        raise RuntimeError("boom")

    sensor = SyntheticSensor(power_w={"VDD_IN": lambda t: 4.0, "bad": broken})
    reading = sensor.read()
    assert reading["VDD_IN"] == 4.0 and math.isnan(reading["bad"])
    with pytest.raises(TypeError):
        SyntheticSensor(power_w={"x": 3.0})


def test_detect_on_fake_tx2_finds_rails_gpu_cpu_memory(tx2_tree):
    names = {s.name for s in detect(tx2_tree)}
    assert {"ina3221x (iio)", "jetson gpu (sysfs)", "cpu (/proc/stat)", "memory (/proc/meminfo)"} <= names


def test_probe_on_this_machine_reports_no_power_with_reasons():
    found = probe()
    if found.has_kind("power") or found.has_kind("energy"):
        pytest.skip("this machine has a power sensor")
    assert "nvml" in found.absent and "rapl (powercap)" in found.absent


def test_rail_groups_of_known_boards():
    assert rail_group("POM_5V_IN") == "total"
    assert rail_group("VDD_CPU_GPU_CV") == "cpu+gpu+cv"
    assert rail_group("VDDQ_VDD2_1V8AO") == "mem"
    assert rail_group("VDD_4V0_WIFI") == ""


def test_system_5v_rails_of_orin_and_xavier_have_group_sys_and_thor_vin_is_total():
    assert rail_group("VIN_SYS_5V0") == "sys" and rail_group("SYS5V") == "sys"
    assert rail_group("VIN") == "total"
    assert rail_group("VDD_SYS_GPU") == "gpu" and rail_group("VDD_SYS_DDR") == "mem"  # TX2's SYS rails stay theirs


def test_jtop_is_tried_only_on_a_jetson_and_elsewhere_says_so_without_its_service_advice(tmp_path, monkeypatch):
    import sys
    import types

    from tf_mobileperf.sensors import probe

    class NoService(Exception):
        pass

    def jtop(interval=0.5):
        raise NoService("The jtop.service is not active. Please run: sudo jtop --install-service")

    monkeypatch.setitem(sys.modules, "jtop", types.SimpleNamespace(jtop=jtop, JtopException=NoService))
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML either: only what the tree holds
    x86 = probe(tmp_path / "x86", real_machine=True)
    not_jetson = "not a Jetson (no Tegra SoC in the device tree): jtop reads Jetsons only"
    assert x86.absent["jtop (jetson-stats)"] == not_jetson
    assert not any("jtop.service" in why for why in x86.absent.values())
    jetson = tmp_path / "jetson"
    (jetson / "proc" / "device-tree").mkdir(parents=True)
    (jetson / "proc" / "device-tree" / "compatible").write_bytes(b"nvidia,p3737-0000\0nvidia,tegra234\0")
    assert "jtop.service" in probe(jetson, real_machine=True).absent["jtop (jetson-stats)"]
