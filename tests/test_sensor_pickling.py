"""Every sensor the probe returns crosses a process boundary: it pickles, and reads in the process that reads it.

A spawned sampler gets its sensors pickled, and a forked one gets copies
whose library connections (NVML, jtop's socket and thread) belong to the
parent. Checked on the fake trees of every board family (conftest), the
context trees (thermal, EMC, throttle), an Intel RAPL tree, the fake H200
NVML and a fake jtop whose connection records the process that started it.
"""

from __future__ import annotations

import os
import pickle
import sys
import types
from collections.abc import Mapping

import pytest

from tf_mobileperf.sensors import JtopSensor, probe
from tf_mobileperf.sensors.nvml import probe as nvml_probe

from conftest import BOARDS, build_board
from helpers import fake_nvml_h200
from helpers.forked import in_forked_child


@pytest.fixture
def fake_libraries(monkeypatch):
    """The fake H200 NVML as pynvml, and a jtop whose connections say which process started them."""
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml_h200)
    monkeypatch.setattr(nvml_probe, "PROBE_WINDOW_S", 0.12)
    module = types.ModuleType("jtop")

    class JtopException(Exception):
        pass

    class FakeJtop:
        started_in: list[int] = []

        def __init__(self, interval):
            self.interval = interval
            self.power = {}

        def start(self):
            FakeJtop.started_in.append(os.getpid())
            self.power = {"rail": {"VDD_GPU_SOC": {"power": 5200}, "VDD_CPU_CV": {"power": 1400}}}

        def close(self):
            self.power = {}

    module.JtopException, module.jtop = JtopException, FakeJtop
    monkeypatch.setitem(sys.modules, "jtop", module)
    return module


def round_trip(sensor) -> Mapping:
    """The reading of a pickled and unpickled copy of ``sensor``."""
    copy = pickle.loads(pickle.dumps(sensor))
    assert [c.name for c in copy.channels] == [c.name for c in sensor.channels]
    return copy.read()


@pytest.mark.parametrize("board", sorted(BOARDS))
def test_every_sensor_probed_on_each_board_pickles_and_reads(tmp_path, board, fake_libraries):
    found = probe(build_board(tmp_path, board), pid=os.getpid(), real_machine=True)
    names = {s.name for s in found.sensors}
    assert {"nvml", "nvml energy", "cpu (/proc/stat)"} <= names
    for sensor in found.sensors:
        reading = round_trip(sensor)
        assert isinstance(reading, Mapping) and set(reading) <= {c.name for c in sensor.channels}, sensor.name


def test_context_and_rapl_sensors_pickle_and_read(tx2_board, orin_board, rapl_tree, fake_libraries):  # noqa: F811
    for root in (tx2_board, orin_board, rapl_tree):
        found = probe(root, use_jtop=False)
        assert found.sensors
        for sensor in found.sensors:
            reading = round_trip(sensor)
            assert any(value == value for value in reading.values()), sensor.name  # some value is a number


def test_jtop_opens_its_connection_in_the_process_that_reads(fake_libraries):
    sensor = JtopSensor(interval_s=0.5)
    started = fake_libraries.jtop.started_in
    assert started == [os.getpid()]
    assert sensor.read() == {"VDD_GPU_SOC": pytest.approx(5.2), "VDD_CPU_CV": pytest.approx(1.4)}
    assert pickle.loads(pickle.dumps(sensor)).__dict__["_jetson"] is None  # no socket, no thread in the pickle
    payload = in_forked_child(lambda: {"reading": sensor.read(), "started_in": started, "pid": os.getpid()})
    assert payload["started_in"] == [os.getpid(), payload["pid"]]  # the child started its own
    assert payload["reading"] == {"VDD_GPU_SOC": pytest.approx(5.2), "VDD_CPU_CV": pytest.approx(1.4)}
    sensor.close()
    assert sensor.read()["VDD_CPU_CV"] == pytest.approx(1.4)  # reopened on the next read

    def prepared() -> dict:  # the sampler's process starts it before the first row, not in a read
        sensor.prepare()
        return {"started_in": started, "pid": os.getpid()}

    payload = in_forked_child(prepared)
    assert payload["started_in"][-1] == payload["pid"]
