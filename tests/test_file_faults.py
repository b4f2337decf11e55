"""Kernel files that lie, block or grow, read by the sampler in both tick loops (C and Python).

Each test is a fault a hostile tester found: a rail holding ``11820`` with no
newline read after one holding ``500999999\\n`` (the C loop read 118209.999 W
from the previous file's bytes), hex read as a number, a FIFO or a directory
in place of a rail file (every rail of the sensor lost, ``mobileperf sensors``
hung), a /proc/stat over 64 KiB (the cores past the cut reported offline),
and readings no hardware can give (a GPU load of -5 per mille, a -1 W or
1e300 W rail) averaged and integrated.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from tf_mobileperf.sampling.ring import TEXT_BYTES
from tf_mobileperf.sampling.sampler import Sampler
from tf_mobileperf.sensors import SyntheticSensor
from tf_mobileperf.sensors.ina3221 import Ina3221IioSensor
from tf_mobileperf.sensors.jetson_gpu import JetsonGpuSensor
from tf_mobileperf.sensors.procfs import CpuSensor

from conftest import A57, write, write_cores

IIO = "sys/bus/i2c/drivers/ina3221x/0-0041/iio:device1"
TX2_RAIL = "sys/bus/i2c/drivers/ina3221x/0-0041/iio:device1/in_power1_input"  # VDD_SYS_CPU


def sample(sensors: list, seconds: float = 0.3):
    sampler = Sampler(sensors, 0.005, mode="process")
    with sampler:
        assert sampler.wait_for_first_row(10.0)
        time.sleep(seconds)
        assert sampler.health() is None
    return sampler, sampler.drain()


def column(rows, name: str) -> np.ndarray:
    return rows.values[:, [c.name for c in rows.channels].index(name)]


def rails(root, values: dict[str, str]) -> None:
    for k, (name, text) in enumerate(values.items()):
        write(root, f"{IIO}/rail_name_{k}", name + "\n")
        write(root, f"{IIO}/in_power{k}_input", text)


def test_a_value_without_a_newline_is_read_from_its_own_bytes_only(tick_loop, tmp_path):
    """The C loop used to parse past the bytes read, into the previous file's: 11820 after 500999999\\n read
    118209.999 W. The first rail is itself impossible (501 kW) and is a failed read; hex is no number."""
    rails(tmp_path, {"VDD_IN": "500999999\n", "VDD_SYS_CPU": "11820", "VDD_SYS_GPU": "0x7C6\n", "VDD_SOC": "1990"})
    sampler, rows = sample([Ina3221IioSensor(tmp_path)])
    assert len(rows) > 20
    assert (column(rows, "VDD_SYS_CPU") == 11.82).all()
    assert (column(rows, "VDD_SOC") == 1.99).all()
    assert np.isnan(column(rows, "VDD_IN")).all() and np.isnan(column(rows, "VDD_SYS_GPU")).all()
    assert sampler.errors()["ina3221x (iio)"] >= len(rows)  # the 501 kW rail, on every read
    assert sampler.error_texts() == {
        "VDD_IN": "reading 501000 W outside [0, 1000] W, the power range of ina3221x (iio)"
    }


@pytest.mark.parametrize("fault", ["fifo", "directory"])
def test_a_fifo_or_directory_in_place_of_a_rail_costs_that_rail_only(tick_loop, tx2_tree, fault):
    bad = tx2_tree / TX2_RAIL
    bad.unlink()
    os.mkfifo(bad) if fault == "fifo" else bad.mkdir()
    sensor = Ina3221IioSensor(tx2_tree)
    sampler, rows = sample([sensor])
    assert len(rows) > 20
    assert np.isnan(column(rows, "VDD_SYS_CPU")).all()
    expected = {"VDD_SYS_GPU": 6.12, "VDD_SYS_SOC": 1.149, "VDD_4V0_WIFI": 0.0, "VDD_IN": 11.82, "VDD_SYS_DDR": 1.99}
    for name, watts in expected.items():
        assert column(rows, name) == pytest.approx(np.full(len(rows), watts)), name
    assert sampler.errors()["ina3221x (iio)"] >= len(rows)
    assert sampler.error_texts() == {"VDD_SYS_CPU": f"SensorReadError: not a regular file: {bad}"[:TEXT_BYTES]}


def test_a_fifo_as_a_rail_label_does_not_block_making_the_sensor(tx2_tree):
    label = tx2_tree / IIO / "rail_name_1"
    label.unlink()
    os.mkfifo(label)
    made = []
    thread = threading.Thread(target=lambda: made.append(Ina3221IioSensor(tx2_tree)), daemon=True)
    thread.start()
    thread.join(10.0)
    if thread.is_alive():  # the old code waits in open(): let it go
        threading.Thread(target=lambda: open(label, "w").close(), daemon=True).start()
    assert made, "making the sensor blocked on the FIFO"
    assert "VDD_SYS_CPU" not in [c.name for c in made[0].channels] and len(made[0].channels) == 5


def test_mobileperf_sensors_answers_with_a_fifo_in_the_tree(tx2_tree):
    bad = tx2_tree / TX2_RAIL
    bad.unlink()
    os.mkfifo(bad)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tf_mobileperf.cli.parser", "sensors", "--root", str(tx2_tree), "--seconds", "0.3"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("mobileperf sensors hung on a FIFO")
    assert done.returncode == 0, done.stderr
    assert f"read failed: not a regular file: {bad}" in done.stdout
    assert "11.820 W" in done.stdout  # VDD_IN, on the same monitor


def big_stat(cores: int, step: int) -> str:
    """/proc/stat of ``cores`` cores whose counters have 15 digits (a long-running server's), ``step`` jiffies on."""
    base = 123456789012345
    line = lambda name: f"{name} " + " ".join(str(base + step * (k in (0, 3))) for k in range(10))  # noqa: E731
    return "\n".join([line("cpu")] + [line(f"cpu{c}") for c in range(cores)] + ["intr 0", "ctxt 0"]) + "\n"


def test_a_proc_stat_over_64_kib_is_read_whole(tick_loop, tmp_path):
    """400 cores (servers have 192-384, with longer counters than these): cores whose lines start past byte
    65535 were reported offline, with no utilization, in both loops."""
    cores = 400
    write_cores(tmp_path, dict.fromkeys(range(cores), A57))
    stat = write(tmp_path, "proc/stat", big_stat(cores, 0))
    assert stat.stat().st_size > 1 << 16 and stat.read_text().index(f"cpu{cores - 1} ") > 1 << 16
    sensor = CpuSensor(tmp_path, period_s=0.02)
    assert sensor.offline == [] and sensor.metadata()["offline"] == []
    step = iter(range(1, 10**6))
    fd = os.open(stat, os.O_WRONLY)

    def tick():  # busy and idle both go on: 50 %
        # The kernel makes /proc/stat whole at each read: the new text overwrites the old in one pwrite of the
        # same length (the counters keep their 15 digits), never a truncated file that a loaded reader would
        # catch empty between write_text's truncation and its write.
        while not stop.is_set():
            os.pwrite(fd, big_stat(cores, 1000 * next(step)).encode(), 0)
            time.sleep(0.01)

    stop = threading.Event()
    writer = threading.Thread(target=tick, daemon=True)
    writer.start()
    try:
        sampler, rows = sample([sensor], 0.5)
    finally:
        stop.set()
        writer.join()
        os.close(fd)
    last = column(rows, f"cpu{cores - 1}_util")
    assert np.isfinite(last).sum() >= 5
    assert np.nanmin(last) == pytest.approx(50.0, abs=1.0) and np.nanmax(last) == pytest.approx(50.0, abs=1.0)


def test_a_negative_gpu_load_is_a_failed_read_not_an_average(tick_loop, tmp_path):
    load = write(tmp_path, "sys/devices/gpu.0/load", "-5\n")
    sampler, rows = sample([JetsonGpuSensor(tmp_path)])
    assert np.isnan(column(rows, "gpu_util")).all()
    assert sampler.errors()["jetson gpu (sysfs)"] >= len(rows)
    assert (
        sampler.error_texts()["gpu_util"] == "reading -0.5 % outside [0, 100] %, the util range of jetson gpu (sysfs)"
    )
    load.write_text("1001\n")  # over 100 %
    sampler, rows = sample([JetsonGpuSensor(tmp_path)])
    assert np.isnan(column(rows, "gpu_util")).all()


def test_impossible_power_is_a_failed_read_never_integrated():
    """A synthetic rail at -1 W and one at 1e300 W beside a true one: only the true one has readings."""
    sensor = SyntheticSensor(power_w={"negative": lambda t: -1.0, "huge": lambda t: 1e300, "true": lambda t: 5.0})
    sampler, rows = sample([sensor])
    assert np.isnan(column(rows, "negative")).all() and np.isnan(column(rows, "huge")).all()
    assert (column(rows, "true") == 5.0).all()
    assert sampler.errors()["synthetic"] >= len(rows)
    assert sampler.error_texts() == {
        "negative": "reading -1 W outside [0, 2000] W, the power range of synthetic",
        "huge": "reading 1e+300 W outside [0, 2000] W, the power range of synthetic",
    }
