"""tegrastats parsing of every format, and the replay sensor on recorded logs."""

from __future__ import annotations

import math
import time

import pytest

from conftest import DATA
from tf_mobileperf.sensors import ReplaySensor, parse_line

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
    assert r.power_w == pytest.approx({"VDD_GPU_SOC": 9.394, "VDD_CPU_CV": 1.399, "VIN_SYS_5V0": 3.822, "VDDQ_VDD2_1V8AO": 1.503})
    assert r.gpu_util == 87 and r.gpu_freq_mhz == [1300, 1300]


def test_jetpack7_three_values_and_bare_percent():
    r = parse_line("RAM 4000/125000MB CPU [1%,2%] GR3D_FREQ 5% VDD_GPU 12000mW/11000mW/15000mW VDD_CPU_SOC_MSS 3000mW/2900mW/4000mW")
    assert r.power_w == pytest.approx({"VDD_GPU": 12.0, "VDD_CPU_SOC_MSS": 3.0})
    assert r.gpu_util == 5 and r.gpu_freq_mhz is None
    assert r.cpu_util == [1, 2] and r.cpu_freq_mhz == [None, None]


def test_xavier_short_rail_names_and_unknown_fields():
    r = parse_line("RAM 1883/15816MB (lfb 3039x4MB) SWAP 0/7908MB (cached 0MB) CPU [1%@1190] EMC_FREQ 0%@2133 "
                   "GR3D_FREQ 0%@1377 APE 150 MTS fg 0% bg 0% AO@32C GPU 0/0 CPU 311/311 SOC 933/933 CV 0/0 VDDRQ 155/155 SYS5V 1667/1667")
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
