"""Thermal zones, core clocks and their trip points, as real boards lay them out in sysfs."""

from __future__ import annotations

from pathlib import Path

from conftest import write

#: TX2 zones, values of its tegrastats line
#: "PLL@41C MCPU@41C PMIC@100C Tboard@35C GPU@40.5C BCPU@41C thermal@40.1C Tdiode@38.75C".
TX2_ZONES = [
    ("BCPU-therm", 41000),
    ("MCPU-therm", 41000),
    ("GPU-therm", 40500),
    ("PLL-therm", 41000),
    ("Tboard_tegra", 35000),
    ("Tdiode_tegra", 38750),
    ("PMIC-Die", 100000),
    ("thermal-fan-est", 40100),
]


#: AGX Orin JetPack 6 zones: "CV0@-256C CPU@44.437C SOC2@41.25C SOC0@42.375C CV1@-256C GPU@-256C tj@44.437C SOC1@41.5C".
ORIN_ZONES = [
    ("cpu-thermal", 44437),
    ("gpu-thermal", -256000),
    ("cv0-thermal", -256000),
    ("soc0-thermal", 42375),
    ("soc1-thermal", 41500),
    ("soc2-thermal", 41250),
    ("tj-thermal", 44437),
]


def add_zones(root: Path, zones: list[tuple[str, int]], trips: dict[str, list[tuple[str, int]]]) -> None:
    for i, (zone_type, milli_c) in enumerate(zones):
        write(root, f"sys/class/thermal/thermal_zone{i}/type", zone_type + "\n")
        write(root, f"sys/class/thermal/thermal_zone{i}/temp", f"{milli_c}\n")
        for k, (trip_type, trip_mc) in enumerate(trips.get(zone_type, [])):
            write(root, f"sys/class/thermal/thermal_zone{i}/trip_point_{k}_type", trip_type + "\n")
            write(root, f"sys/class/thermal/thermal_zone{i}/trip_point_{k}_temp", f"{trip_mc}\n")


def add_cpufreq(root: Path, cores: list[int], cur: int, low: int, high: int, governor: str = "schedutil") -> None:
    for core in cores:
        base = f"sys/devices/system/cpu/cpu{core}/cpufreq"
        for name, value in (
            ("scaling_cur_freq", cur),
            ("scaling_min_freq", low),
            ("scaling_max_freq", high),
            ("scaling_governor", governor),
        ):
            write(root, f"{base}/{name}", f"{value}\n")
