"""The sampler's tick loop, in C and in its Python fallback: file sensors read without Python, wake-ups only
when a sensor is due, a hung file read taken over, and the child's end when the trainer dies.

Sensors: INA3221 hwmon rails and /proc/meminfo of fake sysfs trees, this machine's /proc, and the synthetic
sensor (a known signal)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from tf_mobileperf.sampling import native
from tf_mobileperf.sampling.sampler import Sampler
from tf_mobileperf.sampling.schedule import every_ticks, next_due, plan
from tf_mobileperf.sensors import SyntheticSensor
from tf_mobileperf.sensors.files import FileReads, parse_number
from tf_mobileperf.sensors.ina3221 import Ina3221HwmonSensor
from tf_mobileperf.sensors.procfs import CpuSensor, MemorySensor

from conftest import INA3221, hwmon_rails, write
from helpers.sampler_wait import wait_for_rows

HWMON = f"{INA3221}/1-0040/hwmon/hwmon1"


def child_wakeups(pid: int) -> int:
    """Voluntary context switches of every thread of ``pid``: how often it went to sleep."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "status").read_text().split("voluntary_ctxt_switches:")[1].split()[0])
        except (OSError, IndexError):
            pass
    return total


def test_parse_number_takes_the_first_number_or_the_one_after_a_key_at_a_line_start():
    meminfo = b"MemTotal:  8000 kB\nMemFree:  100 kB\nMemAvailable:   2000 kB\n"
    assert parse_number(b"5000\n", b"") == 5000.0
    assert parse_number(meminfo, b"MemAvailable:") == 2000.0
    assert np.isnan(parse_number(meminfo, b"Free:"))  # not at a line start
    assert np.isnan(parse_number(meminfo, b"SwapTotal:"))
    assert np.isnan(parse_number(b"N/A\n", b"")) and np.isnan(parse_number(b"", b""))


def test_file_reads_combine_numbers_and_fail_the_channel_of_a_missing_file(tmp_path):
    write(tmp_path, "v", "5000\n"), write(tmp_path, "a", "300\n")
    reads = FileReads()
    volt, amp = reads.number(tmp_path / "v", 1e-3), reads.number(tmp_path / "a", 1e-3)
    reads.channel("power", volt, amp, "*")
    reads.channel("gone", reads.number(tmp_path / "missing"))
    reads.channel("diff", volt, amp, "-")
    values = reads.read()
    assert str(values.pop("gone")) == f"No such file or directory: {tmp_path / 'missing'}"
    assert values == pytest.approx({"power": 1.5, "diff": 4.7})
    with pytest.raises(ValueError, match="op"):
        reads.channel("bad", volt, -1, "*")


def test_memory_without_memavailable_uses_memfree(tmp_path):
    write(tmp_path, "proc/meminfo", "MemTotal:  8000 kB\nMemFree:  1000 kB\n")
    write(tmp_path, "proc/42/status", "VmHWM:  300 kB\nVmRSS:  200 kB\n")
    sensor = MemorySensor(tmp_path, pid=42)
    assert sensor.read() == {"ram_used": 7000 * 1024, "proc_rss": 200 * 1024, "proc_peak": 300 * 1024}


def test_schedule_spaces_a_slow_sensors_readings_evenly_on_the_wake_ups():
    assert [every_ticks(s, 0.005) for s in (0.0, 0.02, 0.05, 0.001)] == [1, 4, 10, 1]
    assert plan([0.02, 0.05, 0.1], 0.005) == ([4, 12, 20], 4)  # 50 ms rounded up to 60: never 40 then 60 ms
    assert plan([0.0, 0.05], 0.005) == ([1, 10], 1)
    assert plan([], 0.005) == ([], 1)


def test_schedule_keeps_a_slow_sensors_grid_when_read_late():
    due, reads = 0, []
    for tick in (0, 4, 8, 13, 16, 20, 26, 28, 32):  # wake-ups, some late; the sensor is due every 8
        if tick >= due:
            reads.append(tick)
            due = next_due(tick, due, 8)
    assert reads == [0, 8, 16, 26, 32]  # the late read at 26 does not move the next one off the grid


def test_rails_read_by_the_tick_loop_are_the_sensors_own_values(tick_loop, tmp_path):
    hwmon_rails(tmp_path, HWMON, ["VDD_IN", "VDD_SYS_GPU"])
    sensor = Ina3221HwmonSensor(tmp_path)
    assert sensor.read() == pytest.approx({"VDD_IN": 0.5, "VDD_SYS_GPU": 1.0})
    sampler = Sampler([sensor], 0.005, mode="process")
    with sampler:
        assert sampler.wait_for_first_row()
        time.sleep(0.4)
        write(tmp_path, f"{HWMON}/in1_input", "4000\n")
        changed = time.monotonic()
        wait_for_rows(sampler, sampler.rows_written + 40)
    rows = sampler.drain()
    vin, gpu = rows.values[:, 0], rows.values[:, 1]
    assert (rows.t > changed + 0.02).sum() >= 30 and (gpu == 1.0).all()
    assert (vin[rows.t < changed - 0.02] == 0.5).all() and (vin[rows.t > changed + 0.02] == 0.4).all()
    assert sampler.errors() == {"ina3221 (hwmon)": 0}


def test_the_sampler_wakes_only_when_a_sensor_is_due(tick_loop):
    """This machine's /proc: memory every 20 ms is the fastest, CPU every 50 ms (read every 60 ms, on the
    wake-ups); the grid is 5 ms."""
    sampler = Sampler([CpuSensor(), MemorySensor()], 0.005, mode="process")
    with sampler:
        sampler.wait_for_first_row(5.0)
        sampler.drain()
        before, t0 = child_wakeups(sampler.pid), time.monotonic()
        time.sleep(2.0)
        wakeups, seconds = child_wakeups(sampler.pid) - before, time.monotonic() - t0
        rows = sampler.drain()
    assert np.median(np.diff(rows.t)) == pytest.approx(0.020, abs=0.002)
    assert len(rows) <= 51 * seconds  # not one row per 5 ms tick
    assert wakeups <= 55 * seconds  # it was 224 a second
    cpu = rows.values[:, [c.name for c in rows.channels].index("cpu_util")]
    assert np.isfinite(cpu).sum() == pytest.approx(seconds / 0.060, rel=0.25)
    assert np.median(np.diff(rows.t[np.isfinite(cpu)])) == pytest.approx(0.060, abs=0.002)  # evenly spaced


def test_the_first_row_starts_the_grid(tick_loop):
    """The first row is tick 0 of the grid: it was read about 7 ms (14 ms while training) after the grid's
    origin, as opening the files came between, and its short first interval was the p99 of a short run."""
    sampler = Sampler([CpuSensor(), MemorySensor()], 0.005, mode="process")
    with sampler:
        sampler.wait_for_first_row(5.0)
        time.sleep(0.3)
        rows = sampler.drain()
    assert np.diff(rows.t)[0] == pytest.approx(0.020, abs=0.004)


def test_a_rail_file_that_would_block_fails_alone_and_the_other_sensor_goes_on(tick_loop, tmp_path):
    """A FIFO without a writer in place of a rail file: open() used to wait there, as a hung I2C read does; it is
    opened non-blocking now, and is a failed read ("not a regular file") on every tick, not a hang."""
    hwmon_rails(tmp_path, HWMON, ["VDD_IN", "VDD_SYS_GPU"])
    sensor = Ina3221HwmonSensor(tmp_path)
    gpu_sensor_file = tmp_path / HWMON / "curr2_input"
    gpu_sensor_file.unlink()
    os.mkfifo(gpu_sensor_file)
    sampler = Sampler([sensor, SyntheticSensor(power_w={"steady": lambda t: 3.0})], 0.005, mode="process")
    with sampler:
        time.sleep(1.5)
        assert sampler.health() is None
    rows = sampler.drain()
    steady = rows.values[:, 2]
    steady_t = rows.t[steady == 3.0]
    assert steady_t[-1] - steady_t[0] > 1.2 and np.diff(steady_t).max() < 0.6
    assert np.isnan(rows.values[:, 1]).all()  # never read, never 0
    assert sampler.errors()["ina3221 (hwmon)"] >= 1


def test_the_sampler_process_ends_when_the_trainer_is_killed(tick_loop, tmp_path):
    script = textwrap.dedent("""
        import sys, time
        from tf_mobileperf.sampling.sampler import Sampler
        from tf_mobileperf.sensors.procfs import MemorySensor
        sampler = Sampler([MemorySensor()], 0.005, mode="process").start()
        sampler.wait_for_first_row(5.0)
        print(sampler.pid, flush=True)
        time.sleep(60)
    """)
    trainer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = int(trainer.stdout.readline())
    trainer.send_signal(signal.SIGKILL)
    trainer.wait()
    deadline = time.monotonic() + 5.0
    while (
        time.monotonic() < deadline
        and Path(f"/proc/{child}").exists()
        and Path(f"/proc/{child}/stat").read_text().split()[2] != "Z"
    ):
        time.sleep(0.01)
    gone_after = 5.0 - (deadline - time.monotonic())
    assert gone_after < 1.5  # the death pipe reads EOF at once; getppid() is looked at once a second


def test_the_c_tick_loop_is_built_where_there_is_a_c_compiler():
    if shutil.which("cc") is None:
        pytest.skip("no C compiler: the sampler runs its Python loop")
    assert native.load() is not None, native.why_not()
    assert Sampler([MemorySensor()], 0.005, mode="process").tick_loop == "C"
    assert Sampler([MemorySensor()], 0.005, mode="thread").tick_loop == "Python (thread mode)"


def test_gpu_load_thermal_zones_and_emc_are_read_by_the_c_loop_as_by_python(tick_loop, tmp_path):
    """A fake Orin-like tree: GPU load (per mille), a zone at 45.5 C, a powered-off zone (-256 C), EMC clock and
    activity; the loop's rows equal the sensors' own reads."""
    from tf_mobileperf.sensors.emc import EmcSensor
    from tf_mobileperf.sensors.jetson_gpu import JetsonGpuSensor
    from tf_mobileperf.sensors.thermal import ThermalSensor

    write(tmp_path, "sys/devices/platform/bus@0/17000000.gpu/load", "537\n")
    for n, (kind, temp) in enumerate([("CPU-therm", "45500"), ("CV0-therm", "-256000")]):
        write(tmp_path, f"sys/devices/virtual/thermal/thermal_zone{n}/type", kind + "\n")
        write(tmp_path, f"sys/devices/virtual/thermal/thermal_zone{n}/temp", temp + "\n")
        (tmp_path / "sys/class/thermal").mkdir(parents=True, exist_ok=True)
        os.symlink(
            tmp_path / f"sys/devices/virtual/thermal/thermal_zone{n}", tmp_path / f"sys/class/thermal/thermal_zone{n}"
        )
    write(tmp_path, "sys/kernel/debug/bpmp/debug/clk/emc/rate", "2133000000\n")
    write(tmp_path, "sys/kernel/actmon_avg_activity/mc_all", "1066500\n")
    sensors = [JetsonGpuSensor(tmp_path), ThermalSensor(tmp_path, period_s=0.02), EmcSensor(tmp_path, period_s=0.02)]
    expected = {name: value for s in sensors for name, value in s.read().items()}
    assert expected["gpu_util"] == pytest.approx(53.7) and expected["emc_util"] == pytest.approx(50.0)
    assert expected["CPU-therm_temp"] == pytest.approx(45.5) and np.isnan(expected["CV0-therm_temp"])
    sampler = Sampler(sensors, 0.005, mode="process")
    with sampler:
        assert sampler.wait_for_first_row(), "no row within the sampler's first-row timeout"
        time.sleep(0.3)  # a loaded machine may give it fewer rows than 60, never none
    rows = sampler.drain()
    assert len(rows) > 0
    for k, channel in enumerate(rows.channels):
        column = rows.values[:, k]
        if np.isnan(expected[channel.name]):
            assert np.isnan(column).all(), channel.name
        else:
            assert np.nanmin(column) == np.nanmax(column) == pytest.approx(expected[channel.name]), channel.name


def test_starting_and_stopping_the_sampler_leaves_no_file_descriptor_open_in_the_trainer():
    open_fds = lambda: len(os.listdir("/proc/self/fd"))  # noqa: E731
    sampler = Sampler([MemorySensor()], 0.005, mode="process")
    sampler.start().stop()
    before = open_fds()
    for _ in range(5):
        sampler.start()
        sampler.restart()
        sampler.stop()
    assert open_fds() == before
