"""Each Jetson family on a fake sysfs/procfs tree built like the real board (conftest.build_board).

TX2 JetPack 4 with its Denver2 cores off, Xavier NX and AGX Xavier (cores
4-7 off) JetPack 5, AGX Orin and Orin Nano JetPack 6, AGX Thor JetPack 7 (INA238 on the board input, GPU
driven by OpenRM with no nvgpu load file, read through a fake pynvml). No
hardware is read.
"""

from __future__ import annotations

import json
import sys
import time
import types

import pytest

from tf_mobileperf import PerfMonitor
from tf_mobileperf.cli.parser import main
from tf_mobileperf.sensors import (
    CpuSensor,
    Ina3221HwmonSensor,
    Ina3221IioSensor,
    JetsonGpuSensor,
    ReplaySensor,
    SensorUnavailable,
    probe,
)
from tf_mobileperf.sensors.board import identify

from conftest import BOARDS, DATA, build_board, thor_ina238, write


@pytest.fixture
def thor_nvml(monkeypatch):
    """pynvml as on AGX Thor: one GPU with utilization, graphics clock and memory, and no power reading."""
    from helpers import fake_pynvml

    module = types.ModuleType("pynvml")
    module.__dict__.update({k: v for k, v in vars(fake_pynvml).items() if not k.startswith("__")})

    def not_supported(*args):
        raise fake_pynvml.NVMLError("Not Supported")

    module.nvmlDeviceGetCount = lambda: 1
    module.nvmlDeviceGetPowerUsage = module.nvmlDeviceGetTotalEnergyConsumption = not_supported
    module.nvmlDeviceGetFieldValues = lambda handle, fields: [types.SimpleNamespace(nvmlReturn=3, value=None)]
    module.NVML_CLOCK_GRAPHICS = 0
    module.nvmlDeviceGetClockInfo = lambda handle, kind: 1575
    module.nvmlDeviceGetName = lambda handle: "NVIDIA Thor"
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


def test_tx2_jp4_denver2_cores_switched_off_keep_their_type_from_the_device_tree(tx2_tree):
    sensor = CpuSensor(tx2_tree)
    assert "processor\t: 1" not in (tx2_tree / "proc/cpuinfo").read_text()  # off: not in cpuinfo, as on the board
    assert sensor.metadata()["clusters"] == {"Cortex-A57": [0, 3, 4, 5], "Denver2": [1, 2]}
    assert sensor.metadata()["offline"] == [1, 2]
    assert {c.name: c.cluster for c in sensor.channels if c.core in (1, 2)} == {
        "cpu1_util": "Denver2",
        "cpu2_util": "Denver2",
    }


def test_tx2_jp4_input_rail_is_vdd_in(tx2_tree):
    meta = Ina3221IioSensor(tx2_tree).metadata()
    assert meta == {"input_rail": "VDD_IN", "total_sums": ["VDD_IN"]}


def test_xavier_nx_jp5_vdd_in_is_the_input_and_offline_carmel_cores_are_named(tmp_path):
    root = build_board(tmp_path, "xavier_nx_jp5")
    rails = Ina3221HwmonSensor(root)
    assert {c.name: (c.group, c.device) for c in rails.channels} == {
        "VDD_IN": ("total", "board"),
        "VDD_CPU_GPU_CV": ("cpu+gpu+cv", "board"),
        "VDD_SOC": ("soc", "board"),
    }
    assert rails.read()["VDD_IN"] == pytest.approx(5.0 * 0.1)
    assert rails.metadata() == {"input_rail": "VDD_IN", "total_sums": ["VDD_IN"]}
    cpu = CpuSensor(root).metadata()
    assert cpu["clusters"] == {"Carmel": [0, 1, 2, 3, 4, 5]} and cpu["offline"] == [4, 5]
    gpu = JetsonGpuSensor(root).read()
    assert gpu == {"gpu_util": pytest.approx(50.0), "gpu_freq": pytest.approx(918e6)}


def test_agx_orin_jp6_has_no_input_rail_and_says_which_rails_the_total_sums(tmp_path):
    root = build_board(tmp_path, "agx_orin_jp6")
    rails = Ina3221HwmonSensor(root)
    groups = {c.name: c.group for c in rails.channels}
    assert groups == {"VDD_GPU_SOC": "gpu+soc", "VDD_CPU_CV": "cpu+cv", "VIN_SYS_5V0": "sys", "VDDQ_VDD2_1V8AO": "mem"}
    meta = rails.metadata()
    assert meta["input_rail"] is None
    assert meta["total_sums"] == ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"]
    assert "no rail among" in meta["input_rail_reason"] and "AGX Orin" in meta["input_rail_reason"]
    assert rails.read()["VIN_SYS_5V0"] == pytest.approx(5.0 * 0.3)
    assert JetsonGpuSensor(root).read()["gpu_util"] == pytest.approx(50.0)
    assert CpuSensor(root).metadata()["clusters"] == {"Cortex-A78AE": list(range(12))}


def test_agx_xavier_jp5_sys5v_has_a_group_and_no_rail_is_the_input(tmp_path):
    root = build_board(tmp_path, "agx_xavier_jp5")
    rails = Ina3221HwmonSensor(root)
    assert {c.name: c.group for c in rails.channels} == {
        "GPU": "gpu",
        "CPU": "cpu",
        "SOC": "soc",
        "CV": "cv",
        "VDDRQ": "mem",
        "SYS5V": "sys",
    }
    meta = rails.metadata()
    assert meta["input_rail"] is None and meta["total_sums"] == ["GPU", "CPU", "SOC", "CV", "VDDRQ", "SYS5V"]
    assert "AGX Xavier" in meta["input_rail_reason"]
    cpu = CpuSensor(root).metadata()
    assert cpu["clusters"] == {"Carmel": list(range(8))} and cpu["offline"] == [4, 5, 6, 7]


def test_orin_nano_jp6_vdd_in_is_the_input_rail(tmp_path):
    root = build_board(tmp_path, "orin_nano_jp6")
    rails = Ina3221HwmonSensor(root)
    assert [c.name for c in rails.channels] == ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"]
    assert rails.metadata() == {"input_rail": "VDD_IN", "total_sums": ["VDD_IN"]}
    assert rails.read()["VDD_SOC"] == pytest.approx(5.0 * 0.3)


def test_agx_thor_jp7_ina238_vin_is_read_in_watts_and_is_the_total_rail(tmp_path):
    root = build_board(tmp_path, "agx_thor_jp7")
    rails = Ina3221HwmonSensor(root)
    found = {c.name: (c.group, c.device) for c in rails.channels}
    assert found == {
        "VDD_GPU": ("gpu", "gpu"),
        "VDD_CPU_SOC_MSS": ("cpu+soc", "board"),
        "VIN_SYS_5V0": ("sys", "board"),
        "VIN": ("total", "board"),
    }
    assert rails.read()["VIN"] == pytest.approx(49.0)  # power1_input, uW
    assert "ina238/2-0044/hwmon/hwmon3/power1_input" in {c.name: c.source for c in rails.channels}["VIN"]
    assert rails.metadata() == {"input_rail": "VIN", "total_sums": ["VIN"]}
    assert CpuSensor(root).metadata()["clusters"] == {"Neoverse-V3AE": list(range(14))}


def test_thor_ina238_without_label_is_named_from_its_device_tree_node_and_reads_mv_times_ma(tmp_path):
    hwmon = thor_ina238(tmp_path, label=None)
    (hwmon / "power1_input").unlink()
    sensor = Ina3221HwmonSensor(tmp_path)
    assert [c.name for c in sensor.channels] == ["ina238@44"]
    assert sensor.read()["ina238@44"] == pytest.approx(19.6 * 2.5)
    write(tmp_path, "sys/bus/i2c/drivers/ina238/2-0044/hwmon/hwmon3/label", "VIN\n")  # hwmon's own label wins
    assert [c.name for c in Ina3221HwmonSensor(tmp_path).channels] == ["VIN"]


def test_thor_gpu_without_nvgpu_load_is_absent_saying_openrm(tmp_path):
    root = build_board(tmp_path, "agx_thor_jp7")
    with pytest.raises(SensorUnavailable, match="OpenRM .*AGX Thor, tegra264, JetPack 7.*NVML gives its utilization"):
        JetsonGpuSensor(root)
    orin = build_board(tmp_path / "orin", "agx_orin_jp6")
    (orin / "sys/devices/platform/bus@0/17000000.gpu/load").unlink()
    with pytest.raises(SensorUnavailable) as no_load:
        JetsonGpuSensor(orin)
    assert "OpenRM" not in str(no_load.value)


def test_thor_probe_takes_gpu_util_clock_and_memory_from_nvml(tmp_path, thor_nvml):
    found = probe(build_board(tmp_path, "agx_thor_jp7"), use_jtop=False, real_machine=True)
    assert "OpenRM" in found.absent["jetson gpu load"]
    assert found.has_kind("util", "gpu") and found.has_kind("clock", "gpu") and found.has_kind("memory", "gpu")
    nvml = next(s for s in found.sensors if s.name == "nvml")
    assert [c.name for c in nvml.channels] == ["gpu0_util", "gpu0_clock", "gpu0_mem_used"]  # no power NVML lacks
    reading = nvml.read()
    assert reading["gpu0_clock"] == pytest.approx(1575e6) and reading["gpu0_util"] == 50.0
    assert nvml.metadata()["gpus"][0]["power_source"] is None


def test_server_pcie_gpu_driven_by_openrm_is_not_a_thor_and_is_named_as_nvml_names_it(tmp_path, monkeypatch, capsys):
    """An x86 server with an H200: the OpenRM driver's version file, no device tree, NVML (the fake H200)."""
    from tf_mobileperf.sensors.nvml import probe as nvml_probe

    from helpers import fake_nvml_h200

    write(tmp_path, "proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.00\n")
    write(tmp_path, "sys/class/dmi/id/product_name", "Standard PC (Q35 + ICH9, 2009)\n")
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml_h200)
    monkeypatch.setattr(nvml_probe, "PROBE_WINDOW_S", 0.12)
    found = probe(tmp_path, use_jtop=False, real_machine=True)
    reason = found.absent["jetson gpu load"]
    assert reason.startswith("no Jetson GPU load file: this is not a Jetson")
    assert "Thor" not in reason and "OpenRM" not in reason and "JetPack" not in reason
    gpus = next(s for s in found.sensors if s.name == "nvml").metadata()["gpus"]
    assert [gpu["name"] for gpu in gpus.values()] == ["NVIDIA H200", "NVIDIA H200"]
    identity = identify(tmp_path)
    assert identity.board == "Standard PC (Q35 + ICH9, 2009)" and identity.jetpack is None
    assert main(["sensors", "--root", str(tmp_path), "--seconds", "0"]) == 0
    assert "jetson gpu load: no Jetson GPU load file: this is not a Jetson" in capsys.readouterr().out


@pytest.mark.parametrize("board", sorted(BOARDS))
def test_probe_on_each_board_finds_its_rails_cpu_and_memory(tmp_path, board):
    found = probe(build_board(tmp_path, board))
    names = {s.name for s in found.sensors}
    assert {"ina3221 (hwmon)", "cpu (/proc/stat)", "memory (/proc/meminfo)"} <= names
    assert ("jetson gpu (sysfs)" in names) == (BOARDS[board]["gpu"] is not None)
    assert found.has_kind("power", "board")


def test_report_of_an_agx_orin_replay_says_there_is_no_input_rail_and_what_the_total_sums(tmp_path):
    sensor = ReplaySensor(DATA / "orin_tegrastats.log", speed=0.01)  # the first record covers every step
    with PerfMonitor(tmp_path, sensors=[sensor], warmup_steps=0) as perf:
        for _ in range(2):
            with perf.step():
                time.sleep(0.05)
    report = json.loads((tmp_path / "report.json").read_text())
    sums = ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"]
    assert report["device"]["input_rail"] is None and report["device"]["total_sums"] == sums
    assert "AGX Orin" in report["device"]["input_rail_reason"]
    assert report["power_avg"] == pytest.approx(2.394 + 0.399 + 2.822 + 0.503)
