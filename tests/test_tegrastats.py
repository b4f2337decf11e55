"""tegrastats parsing of every format, and the replay sensor on recorded logs."""

from __future__ import annotations

import math
import time

import pytest

from tf_mobileperf.sensors import ReplaySensor, parse_line

from conftest import DATA

TX2 = (DATA / "tx2_tegrastats.log").read_text().splitlines()
ORIN = (DATA / "orin_tegrastats.log").read_text().splitlines()


def test_tx2_line_without_units():
    r = parse_line(TX2[1])
    assert r.power_w["VDD_SYS_GPU"] == pytest.approx(6.120)
    assert r.power_avg_w["VDD_SYS_GPU"] == pytest.approx(3.136)
    assert r.ram_used_mb == 2890 and r.ram_total_mb == 7854
    assert r.cpu_util == [45, 12, 10, 88, 60, 71]
    assert r.gpu_util == 99 and r.gpu_freq_mhz == [1300]
    assert r.emc_util == 31 and r.emc_freq_mhz == 1866
    assert r.timestamp is None


def test_tx2_off_cores_are_none():
    r = parse_line(TX2[0])
    assert r.cpu_util == [2, None, None, 1, 0, 1]
    assert r.cpu_freq_mhz[1] is None


def test_orin_line_with_mw_timestamp_and_gpc_freqs():
    r = parse_line(ORIN[1])
    assert r.timestamp.isoformat() == "2023-04-05T10:23:46"
    assert r.power_w == pytest.approx(
        {"VDD_GPU_SOC": 9.394, "VDD_CPU_CV": 1.399, "VIN_SYS_5V0": 3.822, "VDDQ_VDD2_1V8AO": 1.503}
    )
    assert r.gpu_util == 87 and r.gpu_freq_mhz == [1300, 1300]


def test_jetpack7_three_values_and_bare_percent():
    r = parse_line(
        "RAM 4000/125000MB CPU [1%,2%] GR3D_FREQ 5% "
        "VDD_GPU 12000mW/11000mW/15000mW VDD_CPU_SOC_MSS 3000mW/2900mW/4000mW"
    )
    assert r.power_w == pytest.approx({"VDD_GPU": 12.0, "VDD_CPU_SOC_MSS": 3.0})
    assert r.gpu_util == 5 and r.gpu_freq_mhz is None
    assert r.cpu_util == [1, 2] and r.cpu_freq_mhz == [None, None]


def test_xavier_short_rail_names_and_unknown_fields():
    r = parse_line(
        "RAM 1883/15816MB (lfb 3039x4MB) SWAP 0/7908MB (cached 0MB) CPU [1%@1190] EMC_FREQ 0%@2133 "
        "GR3D_FREQ 0%@1377 APE 150 MTS fg 0% bg 0% AO@32C "
        "GPU 0/0 CPU 311/311 SOC 933/933 CV 0/0 VDDRQ 155/155 SYS5V 1667/1667"
    )
    assert r.power_w["CPU"] == pytest.approx(0.311) and r.power_w["SYS5V"] == pytest.approx(1.667)
    assert "RAM" not in r.power_w and "SWAP" not in r.power_w


def test_truncated_line_keeps_only_what_it_says():
    r = parse_line(TX2[1][: TX2[1].index("VDD_SYS_CPU") + 16])
    assert "VDD_SYS_DDR" not in r.power_w
    assert "VDD_IN" in r.power_w
    r = parse_line("RAM 2410/7854MB (lfb 1x4MB) CPU [2%@345,of")
    assert r.ram_used_mb == 2410 and r.cpu_util is None and r.gpu_util is None and r.power_w == {}


@pytest.mark.parametrize("line", ["", "hello world", "12:00 RAM", "VDD_IN", "\x00\xff garbage"])
def test_not_tegrastats_raises(line):
    with pytest.raises(ValueError):
        parse_line(line)


def test_replay_sensor_plays_log_time_compressed_and_counts_skipped():
    sensor = ReplaySensor(DATA / "tx2_tegrastats.log", interval_ms=100, speed=10)  # 10 ms per record
    assert sensor.skipped == 1 and len(sensor.records) == 4
    first = sensor.read()
    assert first["VDD_IN"] == pytest.approx(2.356)
    assert math.isnan(first["cpu1_util"])  # core off in that line
    assert first["ram_used"] == 2410 * 1024 * 1024
    time.sleep(0.06)
    assert all(math.isnan(v) for v in sensor.read().values()) and sensor.exhausted


def test_replay_interval_from_timestamps():
    assert ReplaySensor(DATA / "orin_tegrastats.log").interval_s == pytest.approx(1.0)


def test_replay_bad_input(tmp_path):
    with pytest.raises(FileNotFoundError):
        ReplaySensor(tmp_path / "missing.log")
    junk = tmp_path / "junk.log"
    junk.write_text("not\ntegrastats\n")
    with pytest.raises(ValueError, match="no tegrastats lines"):
        ReplaySensor(junk)


# One line of each board family's tegrastats form. TX1 (L4T 28.1), Nano
# (JetPack 4.6.1) and Xavier NX (JetPack 5) lines are as published by their
# users; TX2, AGX Xavier and AGX Orin JetPack 5 are in the tests above; Orin
# Nano JetPack 6 (no EMC for a non-root user, GR3D_FREQ without a clock) and
# AGX Thor JetPack 7.1 / 7.2 (two and three values a rail, GPC clocks without
# a percentage, one CPU clock after the list) follow the forms their releases print.
TX1_L4T28_1 = (
    "RAM 3468/3983MB (lfb 48x4MB) SWAP 873/8192MB (cached 295MB) cpu [17%,13%,29%,5%]@408 EMC 1%@408 APE 25 GR3D 3%@76"
)
NANO_JP4 = (
    "RAM 1923/3964MB (lfb 2x2MB) SWAP 191/1982MB (cached 6MB) IRAM 0/252kB(lfb 252kB) "
    "CPU [5%@1224,4%@1224,3%@1224,6%@1224] EMC_FREQ 0%@1600 GR3D_FREQ 0%@76 APE 25 PLL@37C CPU@40C "
    "PMIC@50C GPU@40C AO@45C thermal@40C POM_5V_IN 1750/1628 POM_5V_GPU 0/0 POM_5V_CPU 366/406"
)
XAVIER_NX_JP5 = (
    "RAM 2690/6854MB (lfb 6x1MB) SWAP 479/3427MB (cached 3MB) CPU [3%@1904,7%@1906,1%@1905,0%@1907,off,off] "
    "EMC_FREQ 0%@1600 GR3D_FREQ 0%@[510] VIC_FREQ 601 APE 150 AUX@39C CPU@39.5C AO@37.5C GPU@37.5C PMIC@50C "
    "VDD_IN 5079mW/5079mW VDD_CPU_GPU_CV 696mW/696mW VDD_SOC 1104mW/1104mW"
)
ORIN_NANO_JP6 = (
    "RAM 2106/7620MB (lfb 1x4MB) SWAP 0/3810MB (cached 0MB) CPU [1%@729,0%@729,2%@729,0%@729,0%@729,3%@729] "
    "GR3D_FREQ 0% cpu@47.437C soc2@46.062C soc0@46.781C gpu@46.437C tj@47.437C soc1@46.218C "
    "VDD_IN 4330mW/4330mW VDD_CPU_GPU_CV 483mW/483mW VDD_SOC 1370mW/1370mW"
)
THOR_JP7_1 = (
    "RAM 8353/125749MB (lfb 31x4MB) CPU [90%@2601,75%@2601,off,7%@2601] EMC_FREQ 34%@4266 "
    "GR3D_FREQ 87%@[1574,1574,1574] NVENC0_FREQ @1691 VIC off cpu@58.25C tj@66.625C gpu@56.937C "
    "VDD_GPU 37939mW/8660mW VDD_CPU_SOC_MSS 30059mW/12281mW VIN_SYS_5V0 15486mW/7424mW VIN 124486mW/36487mW"
)
THOR_JP7_2 = (
    "08-08-2025 20:58:23 RAM 3429/125749MB (lfb 120x4MB) CPU [0%,5%,off]@2601 EMC_FREQ @4266 "
    "GR3D_FREQ @[1574,1574,1574] cpu@49.75C/49.75C tj@51.218C/51.218C gpu@51.218C/51.218C "
    "VDD_GPU 6330mW/6330mW/6330mW VIN 28906mW/14453mW/28906mW"
)
AGX_XAVIER_JP5 = (
    "RAM 1883/15816MB (lfb 3039x4MB) SWAP 0/7908MB (cached 0MB) CPU [1%@1190,off,off,off,off,off,off,off] "
    "EMC_FREQ 0%@2133 GR3D_FREQ 0%@[1377] VIC_FREQ 115 APE 150 AUX@32C CPU@33.5C GPU@32.5C "
    "GPU 0mW/0mW CPU 311mW/311mW SOC 933mW/933mW CV 0mW/0mW VDDRQ 155mW/155mW SYS5V 1667mW/1667mW"
)
FAMILIES = {
    "agx_xavier_jp5": (
        AGX_XAVIER_JP5,
        dict(
            cpu_util=[1] + [None] * 7,
            gpu_freq_mhz=[1377],
            emc_freq_mhz=2133,
            power_w={"GPU": 0.0, "CPU": 0.311, "SOC": 0.933, "CV": 0.0, "VDDRQ": 0.155, "SYS5V": 1.667},
        ),
    ),
    "tx1_l4t28.1": (
        TX1_L4T28_1,
        dict(
            cpu_util=[17, 13, 29, 5],
            cpu_freq_mhz=[408] * 4,
            emc_util=1,
            emc_freq_mhz=408,
            gpu_util=3,
            gpu_freq_mhz=[76],
            ram_used_mb=3468,
            power_w={},
        ),
    ),
    "tx2_jp4": (TX2[1], dict(cpu_util=[45, 12, 10, 88, 60, 71], gpu_util=99, gpu_freq_mhz=[1300], emc_freq_mhz=1866)),
    "nano_jp4": (
        NANO_JP4,
        dict(
            cpu_freq_mhz=[1224] * 4,
            gpu_util=0,
            gpu_freq_mhz=[76],
            emc_util=0,
            ram_used_mb=1923,
            power_w={"POM_5V_IN": 1.750, "POM_5V_GPU": 0.0, "POM_5V_CPU": 0.366},
        ),
    ),
    "xavier_nx_jp5": (
        XAVIER_NX_JP5,
        dict(
            cpu_util=[3, 7, 1, 0, None, None],
            gpu_freq_mhz=[510],
            emc_freq_mhz=1600,
            power_w={"VDD_IN": 5.079, "VDD_CPU_GPU_CV": 0.696, "VDD_SOC": 1.104},
        ),
    ),
    "agx_orin_jp5": (ORIN[1], dict(gpu_util=87, gpu_freq_mhz=[1300, 1300], emc_util=12, emc_freq_mhz=3199)),
    "orin_nano_jp6": (
        ORIN_NANO_JP6,
        dict(
            cpu_util=[1, 0, 2, 0, 0, 3],
            gpu_util=0,
            gpu_freq_mhz=None,
            emc_util=None,
            emc_freq_mhz=None,
            power_w={"VDD_IN": 4.330, "VDD_CPU_GPU_CV": 0.483, "VDD_SOC": 1.370},
        ),
    ),
    "agx_thor_jp7.1": (
        THOR_JP7_1,
        dict(
            cpu_util=[90, 75, None, 7],
            cpu_freq_mhz=[2601, 2601, None, 2601],
            gpu_util=87,
            gpu_freq_mhz=[1574] * 3,
            emc_util=34,
            emc_freq_mhz=4266,
            power_w={"VDD_GPU": 37.939, "VDD_CPU_SOC_MSS": 30.059, "VIN_SYS_5V0": 15.486, "VIN": 124.486},
        ),
    ),
    "agx_thor_jp7.2": (
        THOR_JP7_2,
        dict(
            cpu_util=[0, 5, None],
            cpu_freq_mhz=[2601, 2601, None],
            gpu_util=None,
            gpu_freq_mhz=[1574] * 3,
            emc_util=None,
            emc_freq_mhz=4266,
            power_w={"VDD_GPU": 6.330, "VIN": 28.906},
        ),
    ),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_line_of_every_board_family_gives_what_it_holds(family):
    line, expected = FAMILIES[family]
    record = parse_line(line)
    for field, value in expected.items():
        assert getattr(record, field) == (pytest.approx(value) if field == "power_w" else value), field


def test_tx1_l4t28_1_line_gives_cores_emc_and_gpu_with_their_clocks():
    r = parse_line(TX1_L4T28_1)
    assert r.cpu_util == [17, 13, 29, 5] and r.cpu_freq_mhz == [408, 408, 408, 408]
    assert (r.emc_util, r.emc_freq_mhz, r.gpu_util, r.gpu_freq_mhz) == (1, 408, 3, [76])
    assert (r.ram_used_mb, r.ram_total_mb) == (3468, 3983)


def test_jetpack6_padded_columns_parse():
    r = parse_line("CPU [ 1%@729, 12%@729,off]  EMC_FREQ  3%@2133  GR3D_FREQ  45%@[ 612, 612]  VDD_IN  4330mW/4330mW")
    assert r.cpu_util == [1, 12, None] and r.cpu_freq_mhz == [729, 729, None]
    assert (r.emc_util, r.gpu_util, r.gpu_freq_mhz) == (3, 45, [612, 612])
    assert r.power_w == pytest.approx({"VDD_IN": 4.330})


def test_gpc_clocks_without_percentage_give_clocks_and_no_utilization():
    r = parse_line("GR3D_FREQ @[1574,off,1574] EMC_FREQ @4266")
    assert r.gpu_util is None and r.gpu_freq_mhz == [1574, 1574]
    assert r.emc_util is None and r.emc_freq_mhz == 4266


def test_replay_of_tx1_and_thor_logs_has_clock_channels_with_roles_in_hz(tmp_path):
    tx1 = tmp_path / "tx1.log"
    tx1.write_text(TX1_L4T28_1 + "\n")
    sensor = ReplaySensor(tx1)
    roles = {c.name: (c.kind, c.device, c.core, c.group) for c in sensor.channels}
    assert roles["cpu3_freq"] == ("clock", "cpu", 3, "cpu")
    assert roles["gpu_freq"] == ("clock", "gpu", None, "gpu")
    assert roles["emc_freq"] == ("clock", "board", None, "mem") and roles["emc_util"] == ("util", "board", None, "mem")
    reading = sensor.read()
    assert reading["cpu0_freq"] == 408e6 and reading["gpu_freq"] == 76e6 and reading["emc_freq"] == 408e6
    assert reading["gpu_util"] == 3 and reading["emc_util"] == 1
    thor = tmp_path / "thor.log"
    thor.write_text(THOR_JP7_2 + "\n")
    sensor = ReplaySensor(thor)
    assert "gpu_util" not in {c.name for c in sensor.channels}  # the line has no GPU percentage: no channel, not 0
    reading = sensor.read()
    assert (
        reading["gpu_freq"] == 1574e6 and reading["VIN"] == pytest.approx(28.906) and math.isnan(reading["cpu2_freq"])
    )
    assert sensor.metadata()["input_rail"] == "VIN"


def test_replay_of_agx_orin_log_says_it_has_no_input_rail():
    meta = ReplaySensor(DATA / "orin_tegrastats.log").metadata()
    assert meta["input_rail"] is None and meta["total_sums"] == [
        "VDD_GPU_SOC",
        "VDD_CPU_CV",
        "VIN_SYS_5V0",
        "VDDQ_VDD2_1V8AO",
    ]


def test_temperatures_of_a_real_tx2_and_orin_log_replay_as_temperature_channels():
    """Replay of the recorded logs: NAME@TC zones become <name>_temp channels in C; TX2's constant PMIC@100C
    is not one; Orin's powered-off units (-256C for the whole log) get no channel, never a 0 or -256."""
    tx2 = ReplaySensor(DATA / "tx2_tegrastats.log")
    temps = {c.name: c.device for c in tx2.channels if c.kind == "temperature"}
    assert temps == {
        "pll_temp": "board",
        "mcpu_temp": "cpu",
        "tboard_temp": "board",
        "gpu_temp": "gpu",
        "bcpu_temp": "cpu",
        "thermal_temp": "board",
        "tdiode_temp": "board",
    }
    assert tx2.read()["gpu_temp"] == 36.5 and all(c.unit == "C" for c in tx2.channels if c.kind == "temperature")
    orin = ReplaySensor(DATA / "orin_tegrastats.log")
    names = {c.name for c in orin.channels if c.kind == "temperature"}
    assert {"cpu_temp", "tj_temp", "soc0_temp"} <= names and not names & {"gpu_temp", "cv0_temp"}
    assert parse_line("RAM 1/2MB GPU@-256C cpu@44.4C").temps_c == {"GPU": None, "cpu": 44.4}
