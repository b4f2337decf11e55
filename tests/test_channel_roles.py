"""Channel roles (device, rail, core, cluster) as each sensor declares them, and why a quantity is absent.

Sensors are built on fake sysfs/procfs trees of real boards (conftest), on recorded
tegrastats logs (replay), on a fake pynvml with two GPUs, on a fake jtop module, or
are synthetic; nothing here reads hardware.
"""

from __future__ import annotations

import sys
import types

import pytest

from tf_mobileperf.sensors import (
    REGISTRY,
    UNITS,
    Channel,
    CpuSensor,
    Ina3221HwmonSensor,
    Ina3221IioSensor,
    JetsonGpuSensor,
    JtopSensor,
    MemorySensor,
    NvmlSensor,
    Probe,
    RaplSensor,
    ReplaySensor,
    SyntheticSensor,
    probe,
)
from tf_mobileperf.sensors.emc import EmcSensor
from tf_mobileperf.sensors.nvml import NvmlEnergySensor, nvml_sensors
from tf_mobileperf.sensors.thermal import ThermalSensor
from tf_mobileperf.sensors.throttle import ThrottleSensor

from conftest import DATA, stat_text, write


def roles(sensor) -> dict[str, tuple]:
    """Channel name -> (kind, device, rail, core, cluster, group)."""
    return {c.name: (c.kind, c.device, c.rail, c.core, c.cluster, c.group) for c in sensor.channels}


@pytest.fixture
def proc_only_tree(tmp_path):
    """A machine with /proc and nothing else: no power rails, no RAPL, no Jetson GPU."""
    write(tmp_path, "proc/stat", stat_text({0: (10, 90), 1: (20, 80)}))
    write(tmp_path, "proc/meminfo", "MemTotal:  4000000 kB\nMemAvailable:  1000000 kB\n")
    write(tmp_path, "proc/4242/status", "VmHWM:\t  20000 kB\nVmRSS:\t  10000 kB\n")
    return tmp_path


@pytest.fixture
def fake_nvml(monkeypatch):
    from helpers import fake_pynvml

    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml)
    return fake_pynvml


@pytest.fixture
def fake_jtop(monkeypatch):
    """A jtop module reporting an Orin's rails in mW, as jetson-stats 4 does."""
    module = types.ModuleType("jtop")

    class JtopException(Exception):
        pass

    class FakeJtop:
        power = {
            "rail": {"VDD_GPU_SOC": {"power": 5200}, "VDD_CPU_CV": {"power": 1400}, "VIN_SYS_5V0": {"power": 3800}}
        }

        def __init__(self, interval):
            self.interval = interval

        def start(self):
            pass

        def close(self):
            pass

    module.JtopException, module.jtop = JtopException, FakeJtop
    monkeypatch.setitem(sys.modules, "jtop", module)
    return module


def test_tx2_iio_rails_take_device_from_rail_group_and_rail_from_name(tx2_tree):
    sensor = Ina3221IioSensor(tx2_tree)
    assert {c.name: (c.device, c.group) for c in sensor.channels} == {
        "VDD_SYS_GPU": ("gpu", "gpu"),
        "VDD_SYS_CPU": ("cpu", "cpu"),
        "VDD_IN": ("board", "total"),
        "VDD_SYS_DDR": ("board", "mem"),
        "VDD_SYS_SOC": ("board", "soc"),
        "VDD_4V0_WIFI": ("board", ""),
    }
    assert all(c.kind == "power" and c.rail == c.name and c.core is None and c.cluster == "" for c in sensor.channels)


def test_orin_hwmon_rails_shared_by_several_blocks_belong_to_the_board(orin_tree):
    found = roles(Ina3221HwmonSensor(orin_tree))
    assert found["VDD_GPU_SOC"] == ("power", "board", "VDD_GPU_SOC", None, "", "gpu+soc")
    assert found["VDD_CPU_CV"] == ("power", "board", "VDD_CPU_CV", None, "", "cpu+cv")
    assert found["VDDQ_VDD2_1V8AO"][1:3] == ("board", "VDDQ_VDD2_1V8AO")


def test_jetson_gpu_load_and_clock_belong_to_the_gpu(tx2_tree):
    assert roles(JetsonGpuSensor(tx2_tree)) == {
        "gpu_util": ("util", "gpu", "", None, "", "gpu"),
        "gpu_freq": ("clock", "gpu", "", None, "", "gpu"),
    }


def test_procfs_cpu_aggregate_has_no_core_and_per_core_channels_name_core_and_cluster(tx2_tree):
    found = roles(CpuSensor(tx2_tree))
    assert found["cpu_util"] == ("util", "cpu", "", None, "", "cpu")
    assert found["cpu1_util"] == ("util", "cpu", "", 1, "Denver2", "cpu")
    assert found["cpu5_util"] == ("util", "cpu", "", 5, "Cortex-A57", "cpu")
    assert found["cpu3_freq"] == ("clock", "cpu", "", 3, "Cortex-A57", "cpu")
    assert sorted(c.core for c in CpuSensor(tx2_tree).channels if c.kind == "util" and c.core is not None) == [
        0,
        1,
        2,
        3,
        4,
        5,
    ]


def test_procfs_memory_system_ram_is_board_and_rss_is_process(tx2_tree):
    assert roles(MemorySensor(tx2_tree, pid=4242)) == {
        "ram_used": ("memory", "board", "", None, "", "mem"),
        "proc_rss": ("memory", "process", "", None, "", "mem"),
        "proc_peak": ("memory", "process", "", None, "", "mem"),
    }


def test_rapl_package_and_core_are_cpu_dram_and_psys_are_board(rapl_tree):
    found = roles(RaplSensor(rapl_tree))
    assert found["rapl_0_package-0"] == ("energy", "cpu", "rapl_0_package-0", None, "", "cpu")
    assert found["rapl_0_0_core"] == ("energy", "cpu", "rapl_0_0_core", None, "", "subzone")
    assert found["rapl_0_1_dram"] == ("energy", "board", "rapl_0_1_dram", None, "", "subzone")
    assert found["rapl_1_psys"] == ("energy", "board", "rapl_1_psys", None, "", "total")


def test_nvml_power_and_energy_counter_of_one_gpu_share_its_rail(fake_nvml):
    values, counters = nvml_sensors()
    assert (type(values), type(counters)) == (NvmlSensor, NvmlEnergySensor)
    found = roles(values) | roles(counters)
    assert found["gpu0_power"] == ("power", "gpu", "gpu0", None, "", "gpu")
    assert found["gpu0_energy"] == ("energy", "gpu", "gpu0", None, "", "gpu")
    assert found["gpu1_util"] == ("util", "gpu", "", None, "", "gpu")
    assert found["gpu1_mem_used"] == ("memory", "gpu", "", None, "", "mem")
    by_rail: dict[str, set[str]] = {}
    for c in values.channels + counters.channels:
        if c.rail:
            by_rail.setdefault(c.rail, set()).add(c.name)
    assert by_rail == {"gpu0": {"gpu0_power", "gpu0_energy"}, "gpu1": {"gpu1_power", "gpu1_energy"}}
    assert values.read()["gpu1_power"] == pytest.approx(fake_nvml.WATTS[1])


def test_jtop_rails_declare_the_same_roles_as_the_sysfs_rails(fake_jtop):
    sensor = JtopSensor(interval_s=0.5)
    assert roles(sensor)["VDD_GPU_SOC"] == ("power", "board", "VDD_GPU_SOC", None, "", "gpu+soc")
    assert roles(sensor)["VIN_SYS_5V0"][1:3] == ("board", "VIN_SYS_5V0")
    assert sensor.read()["VDD_CPU_CV"] == pytest.approx(1.4)


def test_tegrastats_replay_declares_rails_cores_gpu_and_board_memory():
    found = roles(ReplaySensor(DATA / "tx2_tegrastats.log"))
    assert found["VDD_SYS_GPU"] == ("power", "gpu", "VDD_SYS_GPU", None, "", "gpu")
    assert found["VDD_IN"] == ("power", "board", "VDD_IN", None, "", "total")
    assert found["cpu4_util"] == ("util", "cpu", "", 4, "", "cpu")
    assert found["gpu_util"] == ("util", "gpu", "", None, "", "gpu")
    assert found["ram_used"] == ("memory", "board", "", None, "", "mem")


def test_synthetic_channels_take_the_roles_a_test_gives():
    sensor = SyntheticSensor(
        power_w={"gpu0_power": lambda t: 100.0, "VDD_IN": lambda t: 5.0},
        util={"cpu2_util": lambda t: 50.0},
        groups={"VDD_IN": "total"},
        roles={
            "gpu0_power": {"device": "gpu", "rail": "gpu0"},
            "cpu2_util": {"device": "cpu", "core": 2, "cluster": "Cortex-A78AE"},
        },
    )
    found = roles(sensor)
    assert found["gpu0_power"] == ("power", "gpu", "gpu0", None, "", "")
    assert found["cpu2_util"] == ("util", "cpu", "", 2, "Cortex-A78AE", "")
    assert found["VDD_IN"] == ("power", "", "VDD_IN", None, "", "total")


def test_synthetic_roles_that_fit_no_channel_are_refused():
    with pytest.raises(ValueError, match="watts"):
        SyntheticSensor(power_w={"VDD_IN": lambda t: 5.0}, roles={"VDD_IN": {"watts": 5}})
    with pytest.raises(ValueError, match="missing_rail"):
        SyntheticSensor(power_w={"VDD_IN": lambda t: 5.0}, roles={"missing_rail": {"device": "board"}})
    with pytest.raises(ValueError, match="tpu"):
        SyntheticSensor(power_w={"VDD_IN": lambda t: 5.0}, roles={"VDD_IN": {"device": "tpu"}})


def test_every_channel_lies_within_what_its_sensor_class_provides(tx2_tree, orin_tree, rapl_tree, fake_nvml, fake_jtop):
    sensors = [
        Ina3221IioSensor(tx2_tree),
        Ina3221HwmonSensor(orin_tree),
        JetsonGpuSensor(tx2_tree),
        CpuSensor(tx2_tree),
        MemorySensor(tx2_tree, pid=4242),
        RaplSensor(rapl_tree),
        *nvml_sensors(),
        JtopSensor(),
        ReplaySensor(DATA / "orin_tegrastats.log"),
    ]
    for sensor in sensors:
        declared = {(c.kind, c.device) for c in sensor.channels}
        assert declared <= type(sensor).provides, sensor.name
    # The context sensors' channels are checked against what they provide in test_context_sensors.py.
    context = {EmcSensor, ThermalSensor, ThrottleSensor}
    assert {cls for spec in REGISTRY for cls in spec.classes} == ({type(s) for s in sensors} - {ReplaySensor}) | context
    assert len({spec.label for spec in REGISTRY}) == len(REGISTRY)


def test_why_absent_names_the_absent_sensors_that_would_give_power(proc_only_tree):
    found = probe(proc_only_tree, pid=4242)
    assert {s.name for s in found.sensors} == {"cpu (/proc/stat)", "memory (/proc/meminfo)"}
    power = found.why_absent("power")
    for label in ("ina3221x (iio, JetPack 4)", "ina3221 (hwmon, JetPack 5/6)", "rapl (powercap)"):
        assert f"{label}: {found.absent[label]}" in power
    assert "no RAPL powercap zones under" in power and "jetson gpu" not in power
    assert found.why_absent("energy") == power
    assert found.why_absent("util", "gpu") == "jetson gpu load: " + found.absent["jetson gpu load"]
    assert found.why_absent("util", "cpu") == "no such sensor among those given"
    assert found.has_kind("memory", "process") and not found.has_kind("util", "gpu")


def test_why_absent_of_a_reason_outside_the_registry_explains_every_quantity():
    nothing = Probe([], {"all": "sensors='none' was requested"})
    assert nothing.why_absent("memory", "board") == "all: sensors='none' was requested"
    assert nothing.why_absent("power") == "all: sensors='none' was requested"
    assert Probe([], {}).why_absent("temperature") == "no such sensor among those given"


def test_unknown_kind_or_device_is_refused_with_its_name():
    with pytest.raises(ValueError, match="'watts'"):
        Channel("x", "watts", "synthetic")
    with pytest.raises(ValueError, match="'tpu'"):
        Channel("x", "util", "synthetic", device="tpu")
    with pytest.raises(ValueError, match="'watts'"):
        Probe([], {}).why_absent("watts")
    with pytest.raises(ValueError, match="'tpu'"):
        Probe([], {}).why_absent("util", "tpu")
    with pytest.raises(ValueError, match="'tpu'"):
        Probe([], {}).has_kind("util", "tpu")


def test_rail_only_on_power_and_energy_and_core_only_on_a_cpu_index():
    with pytest.raises(ValueError, match="rail"):
        Channel("cpu_util", "util", "synthetic", rail="VDD_IN")
    with pytest.raises(ValueError, match="core"):
        Channel("gpu_util", "util", "synthetic", device="gpu", core=0)
    with pytest.raises(ValueError, match="core"):
        Channel("cpu0_util", "util", "synthetic", device="cpu", core=-1)
    with pytest.raises(ValueError, match="core"):
        Channel("cpu0_util", "util", "synthetic", device="cpu", core=True)
    assert Channel("VDD_IN", "power", "synthetic").rail == "VDD_IN"  # a rail defaults to its channel


def test_temperature_and_state_kinds_have_their_units():
    assert UNITS["temperature"] == "C" and Channel("soc_temp", "temperature", "synthetic", device="board").unit == "C"
    assert Channel("gpu_throttled", "state", "synthetic", device="gpu").unit == ""
    assert {"power": "W", "energy": "J", "util": "%", "memory": "B", "clock": "Hz"}.items() <= UNITS.items()


def test_from_dict_reads_a_stored_channel_and_ignores_unknown_keys(tx2_tree):
    channel = next(c for c in CpuSensor(tx2_tree).channels if c.name == "cpu1_util")
    stored = CpuSensor(tx2_tree).describe()["channels"][2]
    assert stored == channel.to_dict() and stored["core"] == 1 and stored["unit"] == "%"
    assert Channel.from_dict(stored | {"added_by_a_newer_version": [1, 2]}) == channel
    old = Channel.from_dict(
        {"name": "gpu0_energy", "kind": "energy", "source": "nvml", "group": "gpu", "cluster": "", "unit": "J"}
    )
    assert (old.device, old.rail, old.core) == ("", "gpu0_energy", None)
