"""Shared fixtures: fake sysfs/procfs trees of real boards, built per test."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"

TX2_CPUINFO = "\n\n".join(
    f"processor\t: {i}\nCPU implementer\t: {impl}\nCPU part\t: {part}"
    for i, (impl, part) in enumerate(
        [("0x41", "0xd07"), ("0x4e", "0x003"), ("0x4e", "0x003"), ("0x41", "0xd07"), ("0x41", "0xd07"), ("0x41", "0xd07")]
    )
)


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def tx2_tree(tmp_path: Path) -> Path:
    """A Jetson TX2 (JetPack 4): ina3221x iio rails, gpu.0 load, Denver2 + A57 cores, cores 1-2 offline."""
    rails = {"0-0040/iio:device0": ["VDD_SYS_GPU", "VDD_SYS_SOC", "VDD_4V0_WIFI"],
             "0-0041/iio:device1": ["VDD_IN", "VDD_SYS_CPU", "VDD_SYS_DDR"]}
    power_mw = {"VDD_SYS_GPU": 6120, "VDD_SYS_SOC": 1149, "VDD_4V0_WIFI": 0, "VDD_IN": 11820,
                "VDD_SYS_CPU": 1838, "VDD_SYS_DDR": 1990}
    for device, names in rails.items():
        for i, name in enumerate(names):
            base = f"sys/bus/i2c/drivers/ina3221x/{device}"
            write(tmp_path, f"{base}/rail_name_{i}", name + "\n")
            write(tmp_path, f"{base}/in_power{i}_input", f"{power_mw[name]}\n")
    write(tmp_path, "sys/devices/gpu.0/load", "993\n")
    write(tmp_path, "sys/class/devfreq/17000000.gp10b/cur_freq", "1300500000\n")
    write(tmp_path, "proc/cpuinfo", TX2_CPUINFO)
    write(tmp_path, "sys/devices/system/cpu/present", "0-5\n")
    write(tmp_path, "proc/stat", stat_text({0: (100, 100), 3: (50, 150), 4: (0, 200), 5: (200, 0)}))
    for core in (0, 3, 4, 5):
        write(tmp_path, f"sys/devices/system/cpu/cpu{core}/cpufreq/scaling_cur_freq", "2035200\n")
    write(tmp_path, "proc/meminfo", "MemTotal:        8000000 kB\nMemFree:  1000000 kB\nMemAvailable:    5000000 kB\n")
    write(tmp_path, "proc/4242/status", "Name:\tpython\nVmHWM:\t  2000000 kB\nVmRSS:\t  1500000 kB\n")
    return tmp_path


def stat_text(cores: dict[int, tuple[int, int]]) -> str:
    """/proc/stat with the given (busy, idle) jiffies per online core."""
    busy_all = sum(b for b, _ in cores.values())
    idle_all = sum(i for _, i in cores.values())
    lines = [f"cpu  {busy_all} 0 0 {idle_all} 0 0 0 0 0 0"]
    lines += [f"cpu{c} {b} 0 0 {i} 0 0 0 0 0 0" for c, (b, i) in cores.items()]
    return "\n".join(lines + ["intr 0", "ctxt 0"]) + "\n"


@pytest.fixture
def orin_tree(tmp_path: Path) -> Path:
    """A Jetson AGX Orin (JetPack 5/6): hwmon ina3221 with NC and sum-of-shunts channels."""
    for dev, hwmon, labels in (("1-0040", "hwmon3", ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"]),
                               ("1-0041", "hwmon4", ["NC", "VDDQ_VDD2_1V8AO", "NC"])):
        base = f"sys/bus/i2c/drivers/ina3221/{dev}/hwmon/{hwmon}"
        for k, label in enumerate(labels, start=1):
            write(tmp_path, f"{base}/in{k}_label", label + "\n")
            write(tmp_path, f"{base}/in{k}_input", "5000\n")
            write(tmp_path, f"{base}/curr{k}_input", f"{400 * k}\n")
        write(tmp_path, f"{base}/in7_label", "sum of shunt voltages\n")
        write(tmp_path, f"{base}/in7_input", "10\n")
        write(tmp_path, f"{base}/curr7_input", "999\n")
    write(tmp_path, "sys/devices/platform/17000000.ga10b/load", "500\n")
    return tmp_path
