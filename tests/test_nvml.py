"""NVML sensors on a fake NVML modelled on a measured H200 (helpers/fake_nvml_h200.py); no GPU is read.

What is checked: a sensor read in a child made by ``os.fork()`` and one
unpickled in a fresh Python process open NVML there and read the fake's
real values (the old sensor read only NaN after a fork: every call raised
"Uninitialized" and was swallowed); the probe measures the counter's ~0.1 s
change period and its ~4 ms cost and chooses the read periods from them;
each value is read only when due; a failed call is a failed read whose text
is NVML's; the registry builds both sensors from one probe.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

from tf_mobileperf.sampling.sampler import Sampler
from tf_mobileperf.sensors.errors import SensorReadError, SensorUnavailable
from tf_mobileperf.sensors.nvml import NvmlEnergySensor, NvmlProbe, NvmlSensor, nvml_sensors, probe_nvml
from tf_mobileperf.sensors.nvml import probe as nvml_probe
from tf_mobileperf.sensors.nvml import rates as nvml_rates
from tf_mobileperf.sensors.nvml import sensors as nvml_sensors_module
from tf_mobileperf.sensors.nvml.rates import QueryRate, ReadPeriod, choose_period, paced_period, watch
from tf_mobileperf.sensors.registry import probe

from helpers import fake_nvml_h200 as fake
from helpers.forked import in_forked_child

LIBRARY = "helpers.fake_nvml_h200"
TESTS = Path(__file__).parent


@pytest.fixture(scope="module")
def probed():
    """One probe of the fake H200s (it polls them for up to 0.6 s), shared by the tests that only read."""
    return probe_nvml(library=LIBRARY)


@pytest.fixture
def sensors(probed, monkeypatch):
    monkeypatch.setattr(fake, "FAIL", {})
    built = [NvmlSensor(library=LIBRARY, probed=probed), NvmlEnergySensor(library=LIBRARY, probed=probed)]
    yield built
    for sensor in built:
        sensor.close()


def read_timed(sensors) -> dict:
    """Each sensor's reading with monotonic times around it (JSON-able: a failed channel becomes its text)."""
    out = {}
    for sensor in sensors:
        before = time.monotonic()
        values = sensor.read()
        out[sensor.name] = {
            "before": before,
            "after": time.monotonic(),
            "values": {k: (v if isinstance(v, float) else f"{type(v).__name__}: {v}") for k, v in values.items()},
        }
    return out


def assert_fake_values(readings: dict) -> None:
    """Every value is the fake's at some instant between the read's start and end (not NaN, not an error)."""
    for gpu in range(fake.GPUS):
        values = readings["nvml"]
        power = values["values"][f"gpu{gpu}_power"]
        assert power in {
            int(fake.power_w(gpu, fake.last_update(t, fake.POWER_UPDATE_S, fake.POWER_OFFSET_S)) * 1000) / 1000.0
            for t in (values["before"], values["after"])
        }
        assert values["values"][f"gpu{gpu}_mem_used"] == (10 + gpu) * 2**30
        assert values["values"][f"gpu{gpu}_clock"] == fake.GRAPHICS_CLOCK_MHZ * 1e6
        assert 10 <= values["values"][f"gpu{gpu}_util"] <= 90
        energy = readings["nvml energy"]
        counter = energy["values"][f"gpu{gpu}_energy"]
        assert counter in {fake.counter_mj(gpu, t) / 1000.0 for t in (energy["before"], energy["after"])}


def test_forked_child_opens_nvml_itself_and_reads_real_values(sensors):
    assert_fake_values(read_timed(sensors))  # NVML opened here first: the child inherits an open session
    parent_handle = sensors[0]._session.handles()[0]
    time.sleep(0.2)  # every value due again (utilization every 200 ms) when the child reads

    def in_child() -> dict:
        try:
            fake.nvmlDeviceGetPowerUsage(parent_handle)
            inherited = "worked"
        except fake.NVMLError as exc:
            inherited = str(exc)
        return {"inherited": inherited, "readings": read_timed(sensors), "pid": os.getpid()}

    payload = in_forked_child(in_child)
    assert payload["inherited"] == "Uninitialized"  # as on the H200: the parent's NVML is dead in the child
    assert_fake_values(payload["readings"])
    time.sleep(0.2)  # every value due again
    assert_fake_values(read_timed(sensors))  # the parent's session is untouched by the child's


def test_prepare_opens_nvml_in_the_reading_process_so_that_no_read_opens_it(sensors):
    # The sampler calls prepare before its first row: the first read then takes what a read takes.
    def in_child() -> dict:
        for sensor in sensors:
            sensor.prepare()
        opened = fake._state["count"]
        readings = read_timed(sensors)
        return {"opened": opened, "after_reads": fake._state["count"], "readings": readings}

    payload = in_forked_child(in_child)
    assert payload["opened"] == len(sensors) == payload["after_reads"]  # one nvmlInit each, none in a read
    assert_fake_values(payload["readings"])


def test_unpickled_in_a_fresh_python_it_opens_nvml_there_and_reads_real_values(sensors, tmp_path):
    state = tmp_path / "sensors.pickle"
    state.write_bytes(pickle.dumps(sensors))
    script = (
        "import json, pickle, sys\n"
        f"sensors = pickle.loads(open({str(state)!r}, 'rb').read())\n"
        "assert 'helpers.fake_nvml_h200' not in sys.modules  # the library is imported by name on first read\n"
        "from test_nvml import read_timed\n"
        "print(json.dumps(read_timed(sensors)))\n"
    )
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert_fake_values(json.loads(done.stdout))


def test_pickled_sensor_carries_no_module_or_handle_and_keeps_what_was_probed(sensors):
    sensors[0].read()
    state = pickle.loads(pickle.dumps(sensors[0]))._session.__dict__
    assert state["library"] == LIBRARY and state["_nvml"] is None and state["_handles"] == {}
    assert state["uuids"] == {0: fake.nvmlDeviceGetUUID(sensors[0]._session.handles()[0]), 1: state["uuids"][1]}
    with pytest.raises(ValueError, match="cannot be pickled"):  # the fake's handles refuse, as pynvml's do
        pickle.dumps(sensors[0]._session.handles())


def test_probe_measures_the_counters_100ms_period_and_4ms_cost_and_reads_it_every_30ms(probed):
    for gpu in probed.gpus:
        energy, power = gpu.rates["energy"], gpu.rates["power_instant"]
        assert energy.change_period_s == pytest.approx(fake.ENERGY_UPDATE_S, abs=0.012)
        assert power.change_period_s == pytest.approx(fake.POWER_UPDATE_S, abs=0.012)
        assert energy.changes >= 3 and energy.window_s <= nvml_probe.PROBE_WINDOW_S + 0.1
        assert fake.ENERGY_CALL_S <= energy.wall_s < 0.015  # a sleep in the driver: wall time...
        assert energy.cpu_s < 0.001  # ...not CPU
        assert power.wall_s < 0.001
        # 0.3 T (0.3 of 0.1 s), at least 10 ms, and 0.2% of a core at most: the fake's call spends
        # 10-50 us of CPU in Python around its sleep, so on a busy machine the CPU term can set it.
        assert gpu.periods["energy"].period_s == pytest.approx(
            max(energy.change_period_s * 0.3, 0.01, energy.cpu_s / 0.002)
        )
        assert 0.025 <= gpu.periods["energy"].period_s < 0.05
        assert gpu.periods["power_instant"].period_s == pytest.approx(0.1, abs=0.012)  # the rate it changes at
        assert gpu.periods["util"].period_s == pytest.approx(0.2, abs=0.024)
        assert gpu.periods["memory"].period_s == gpu.periods["clock"].period_s == 0.1
        # ...and its reason names the term that set it (the largest of the three)
        terms = {"of its change period (energy": energy.change_period_s * 0.3, "the floor of": 0.01}
        terms["its CPU cost"] = energy.cpu_s / 0.002
        assert max(terms, key=terms.get) in gpu.periods["energy"].why
    values, counters = NvmlSensor(library=LIBRARY, probed=probed), NvmlEnergySensor(library=LIBRARY, probed=probed)
    assert values.min_period_s == pytest.approx(0.1, abs=0.012)
    slowest = max(g.periods["energy"].period_s for g in probed.gpus)
    wall = sum(g.rates["energy"].wall_s for g in probed.gpus)  # both GPUs' 4 ms calls, one after the other
    cpu = sum(g.rates["energy"].cpu_s for g in probed.gpus)
    # ...but never slower than a third of the counter's change period while that costs at most 1% of a core.
    ceiling = max(min(g.rates["energy"].change_period_s for g in probed.gpus) / 3, wall, cpu / 0.01)
    assert counters.min_period_s == pytest.approx(min(max(slowest, wall, cpu / 0.002), ceiling))
    assert counters.min_period_s < fake.ENERGY_UPDATE_S / 2
    assert counters.own_thread and not getattr(values, "own_thread", False)
    reads = counters.metadata()["nvml_reads"][0]
    assert set(reads) == {"power_instant", "energy", "util", "clock", "memory"}
    assert {"wall_s", "cpu_s", "change_period_s", "read_period_s", "why"} <= set(reads["energy"])
    assert values.metadata()["nvml_reads"] == counters.metadata()["nvml_reads"]  # one probe: the same figures
    assert values.metadata()["gpus"][0] == {
        "name": "NVIDIA H200",
        "uuid": "GPU-fa4e0000-0000-0000-0000-000000000000",
        "memory_total_bytes": fake.MEMORY_TOTAL,
        "energy_counter": True,
        "power_source": "nvmlDeviceGetFieldValues(NVML_FI_DEV_POWER_INSTANT)",
        "unsupported": {},
    }
    assert counters.metadata()["nvml_energy_read"]["period_s"] == counters.min_period_s


def test_read_period_rules():
    measured = QueryRate(calls=50, wall_s=0.004, cpu_s=0.00002, changes=3, change_period_s=0.1, window_s=0.3)
    assert paced_period(measured, 0.1, 0.1, "energy").period_s == pytest.approx(0.01)
    slow = QueryRate(calls=50, wall_s=0.001, cpu_s=0.0001, changes=3, change_period_s=1.0, window_s=0.35)
    assert paced_period(slow, 0.1, 0.1, "energy").period_s == pytest.approx(0.1)
    busy = QueryRate(calls=50, wall_s=0.004, cpu_s=0.004, changes=3, change_period_s=0.1, window_s=0.3)
    chosen = paced_period(busy, 0.1, 0.1, "energy")  # a counter that burns its 4 ms: 0.2% of a core at most
    assert chosen.period_s == pytest.approx(2.0) and "CPU cost" in chosen.why
    still = QueryRate(calls=80, wall_s=0.004, cpu_s=0.00002, changes=0, change_period_s=None, window_s=0.35)
    chosen = paced_period(still, 0.1, 0.1, "energy")
    assert chosen.period_s == pytest.approx(0.01) and "0 change(s)" in chosen.why and "assumed" in chosen.why
    assert choose_period(0.001, "fast", 0.0).period_s == 0.01


def test_watch_measures_a_value_that_changes_every_50ms():
    start = time.monotonic()
    rates = watch(
        {"stepped": lambda: int((time.monotonic() - start) / 0.05)}, until_changes=["stepped"], changes=4, window_s=1.0
    )
    assert rates["stepped"].changes >= 4 and rates["stepped"].change_period_s == pytest.approx(0.05, abs=0.006)


def test_watch_goes_on_past_changes_that_stalled_polls_left_unplaced():
    # Each call stalls 30 ms for the first 0.25 s (a loaded machine): the changes then are not placed, and
    # stopping at the third change, as the probe once did, measured no period at all.
    start = time.monotonic()

    def stepped():
        if time.monotonic() - start < 0.25:
            time.sleep(0.03)
        return int((time.monotonic() - start) / 0.05)

    rates = watch({"stepped": stepped}, until_changes=["stepped"], changes=3, min_calls=1, window_s=2.0)
    assert rates["stepped"].changes >= 5 and rates["stepped"].change_period_s == pytest.approx(0.05, abs=0.006)


class StallingClock:
    """``time`` for the probe's module, whose ``monotonic()`` stalls 110 ms at every ``every``-th call: the
    thread descheduled between reading a value and stamping it, as under another VM's load."""

    def __init__(self, every: int):
        self.every, self.calls = every, 0

    def monotonic(self) -> float:
        self.calls += 1
        if self.calls % self.every == 0:
            time.sleep(0.11)
        return time.monotonic()

    def __getattr__(self, name: str):
        return getattr(time, name)


@pytest.mark.parametrize("every", [401, 419, 433])
def test_watch_places_no_change_by_a_stamp_taken_after_a_stall(monkeypatch, every):
    # A value updated every 100 ms, polled while the probe's clock stalls past updates: a change whose
    # stamp came after a stall hid the update before it, and placed there it would make the period 200 ms.
    monkeypatch.setattr(nvml_rates, "time", StallingClock(every))
    start = time.monotonic()
    stepped = lambda: int((time.monotonic() - start) / 0.1)  # noqa: E731
    rates = watch({"stepped": stepped}, until_changes=["stepped"], changes=30, min_calls=10**6, window_s=2.0)
    assert rates["stepped"].changes >= 8
    assert rates["stepped"].change_period_s == pytest.approx(0.1, abs=0.012)


def test_each_value_is_read_only_when_due(probed, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(nvml_sensors_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    periods = {"power_instant": 0.05, "util": 0.1, "clock": 0.1, "memory": 0.1, "energy": 0.01}  # as on the H200
    gpus = [
        dataclasses.replace(g, periods={key: ReadPeriod(periods[key], "test") for key in g.periods})
        for g in probed.gpus
    ]
    values = NvmlSensor(library=LIBRARY, probed=NvmlProbe(LIBRARY, gpus))
    assert values.min_period_s == 0.05
    names = lambda reading, *suffixes: {k for k in reading if k.rsplit("_", 1)[-1] in suffixes}  # noqa: E731
    first = values.read()
    assert set(first) == {c.name for c in values.channels}
    clock[0] += values.min_period_s
    assert set(values.read()) == names(first, "power")  # utilization, clock and memory are not due yet
    clock[0] += values.min_period_s
    assert set(values.read()) == set(first)
    clock[0] += values.min_period_s / 4
    assert values.read() == {}
    values.close()


def test_a_failed_call_is_a_failed_read_in_nvmls_words(sensors, monkeypatch):
    monkeypatch.setitem(fake.FAIL, "nvmlDeviceGetUtilizationRates", fake.NVML_ERROR_GPU_IS_LOST)
    monkeypatch.setitem(fake.FAIL, "nvmlDeviceGetTotalEnergyConsumption", fake.NVML_ERROR_GPU_IS_LOST)
    reading = sensors[0].read()
    assert isinstance(reading["gpu0_util"], SensorReadError)
    assert str(reading["gpu0_util"]) == "NVML: nvmlDeviceGetUtilizationRates: GPU is lost"
    assert isinstance(reading["gpu0_power"], float) and isinstance(reading["gpu1_mem_used"], float)
    counters = sensors[1].read()
    assert all(
        isinstance(v, SensorReadError) and "NVML" in str(v) and "GPU is lost" in str(v) for v in counters.values()
    )
    with Sampler(sensors, period_s=0.005, mode="thread") as sampler:  # the sampler counts them
        sampler.wait_for_first_row()
        time.sleep(0.2)
    errors = sampler.errors()
    # one count per read: the counters' period is 10-45 ms here (their CPU cost, measured at probe, varies with load)
    assert errors["nvml"] >= 1 and errors["nvml energy"] >= 0.5 * 0.2 / sensors[1].min_period_s


def test_nvml_that_cannot_open_in_this_process_raises_nvmls_words(sensors, monkeypatch):
    copy = pickle.loads(pickle.dumps(sensors[1]))

    def not_loaded():
        raise fake.NVMLError(9)

    monkeypatch.setattr(fake, "nvmlInit", not_loaded)
    monkeypatch.setitem(fake._WORDS, 9, "Driver Not Loaded")
    with pytest.raises(SensorReadError, match=r"NVML: nvmlInit in process \d+: Driver Not Loaded"):
        copy.read()
    with pytest.raises(SensorUnavailable, match="NVML: nvmlInit in process .*Driver Not Loaded"):
        probe_nvml(library=LIBRARY)


def test_a_different_gpu_at_the_same_index_fails_the_read(sensors, monkeypatch):
    copy = pickle.loads(pickle.dumps(sensors[0]))
    monkeypatch.setattr(fake, "nvmlDeviceGetUUID", lambda handle: f"GPU-other-{handle.index}")
    with pytest.raises(SensorReadError, match="GPU 0 is GPU-other-0 in process .* it was GPU-fa4e.* when probed"):
        copy.read()


def test_registry_builds_both_sensors_from_one_probe_and_says_why_nvml_is_absent(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(nvml_probe, "PROBE_WINDOW_S", 0.12)
    found = probe(tmp_path, use_jtop=False, real_machine=True)
    assert [type(s) for s in found.sensors] == [NvmlSensor, NvmlEnergySensor]
    assert found.has_kind("energy", "gpu") and found.has_kind("power", "gpu") and "nvml" not in found.absent
    monkeypatch.setattr(fake, "GPUS", 0)
    found = probe(tmp_path, use_jtop=False, real_machine=True)
    assert found.sensors == [] and found.absent["nvml"] == "NVML found no NVIDIA GPU"
    assert "nvml: NVML found no NVIDIA GPU" in found.why_absent("energy", "gpu")


def test_old_fake_without_per_process_state_still_reads(monkeypatch):
    """The two-GPU constant-power fake (helpers/fake_pynvml.py) of the older tests: no UUID, no field errors."""
    from helpers import fake_pynvml

    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml)
    values, counters = nvml_sensors()
    assert values.read()["gpu0_power"] == pytest.approx(150.0)
    before = time.monotonic()
    first = counters.read()["gpu1_energy"]
    after_first = time.monotonic()
    time.sleep(0.05)
    before_last = time.monotonic()
    last = counters.read()["gpu1_energy"]
    after = time.monotonic()
    # 90 W read on a continuous clock: the difference is 90 W times the time between the two reads' instants
    assert 90.0 * (before_last - after_first) <= last - first <= 90.0 * (after - before)


def test_forked_sampler_reads_the_counter_as_the_exact_integral_of_power_with_no_failed_read(sensors):
    """Today's sampler forks its child after the probe opened NVML here: the child reopens it and every
    counter value it stores is the exact integral of the fake's power up to one of its 100 ms update instants."""
    sensors[0].read()  # NVML open in this process, as a monitor that listed its sensors leaves it
    with Sampler(sensors, period_s=0.005, mode="process") as sampler:
        assert sampler.wait_for_first_row(5.0)
        time.sleep(0.6)
    rows = sampler.drain()
    assert sampler.errors() == {"nvml": 0, "nvml energy": 0}
    names = [c.name for c in rows.channels]
    for gpu in range(fake.GPUS):
        counter = rows.values[:, names.index(f"gpu{gpu}_energy")]
        power = rows.values[:, names.index(f"gpu{gpu}_power")]
        read = ~np.isnan(counter)
        assert read.sum() >= 0.5 * 0.6 / sensors[1].min_period_s and (~np.isnan(power)).sum() >= 5
        for t, joules in zip(rows.t[read], counter[read]):  # read within 50 ms of its row's time
            instants = {fake.last_update(t + d / 1000, fake.ENERGY_UPDATE_S) for d in range(51)}
            assert any(joules == fake.counter_mj(gpu, u) / 1000.0 for u in instants), (t, joules)
        first, last = rows.t[read][0], rows.t[read][-1]
        between = counter[read][-1] - counter[read][0]
        grid = fake.ENERGY_UPDATE_S
        starts = [fake.last_update(first + ms / 1000, grid) for ms in range(0, 51, 5)]
        ends = [fake.last_update(last + ms / 1000, grid) for ms in range(0, 51, 5)]
        spans = [fake.exact_energy_j(gpu, start, end) for start in starts for end in ends]
        assert min(abs(between - span) for span in spans) < 0.002  # J: the counter's 1 mJ steps
