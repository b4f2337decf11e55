"""How each step's energy was obtained, in steps.csv and the report (synthetic samples), and the words the
report gives a channel that never answered (a fake sampler)."""

from __future__ import annotations

import numpy as np
import pytest

from tf_mobileperf.sensors.base import Channel
from tf_mobileperf.session.unread import unread_reasons
from tf_mobileperf.steps.join import INTERPOLATED, MEASURED, join
from tf_mobileperf.steps.records import StepRecord, csv_fields, fill_steps

from helpers.reports import report_of

CHANNELS = [
    Channel("VDD_IN", "power", "synthetic", group="total", device="board"),
    Channel("gpu0_power", "power", "synthetic", device="gpu", rail="gpu0"),
    Channel("gpu0_energy", "energy", "synthetic staircase", device="gpu", rail="gpu0"),
]


def gpu_counter(t: np.ndarray) -> np.ndarray:
    """gpu0's counter (J) at each update (every 100 ms) before ``t``: 200 W and a 37 ms square wave of +-20 W
    on it, which no step follows, so that what the counter cannot split shows in its residuals."""
    updated = np.floor(t / 0.1) * 0.1
    fine = np.arange(0.0, 4.2, 1e-4)
    cum = np.concatenate([[0.0], np.cumsum((200.0 + 20.0 * np.sign(np.sin(2 * np.pi * fine / 0.037)))[:-1] * 1e-4)])
    return np.interp(updated, fine, cum)


def joined_steps(windows):
    """VDD_IN at 6 W read (and changing) every 5 ms; gpu0 at 200 W (``gpu_counter``), its counter and power
    updating every 100 ms."""
    t = np.arange(0.0, 4.0, 0.005) + 0.0013
    vdd_in = 6.0 + 1e-3 * np.sin(t * 300.0)  # a value that changes at every read
    values = np.column_stack([vdd_in, np.full(len(t), 200.0), gpu_counter(t)])
    starts, ends = np.array([w[0] for w in windows]), np.array([w[1] for w in windows])
    joined = join(t, values, CHANNELS, starts, ends, period_s=0.005)
    steps = [StepRecord(step=i, start_s=s, end_s=e) for i, (s, e) in enumerate(windows)]
    fill_steps(steps, joined, CHANNELS)
    return steps, joined


def test_each_rail_and_the_total_say_how_their_step_energy_was_obtained():
    steps, _ = joined_steps([(1.0, 1.3), (2.0, 2.01), (3.92, 3.99)])
    long, short, unbracketed = steps
    assert long.energy_method == {"VDD_IN": MEASURED, "gpu0_energy": MEASURED, "total": MEASURED}
    # 10 ms: two 5 ms reads of VDD_IN resolve it; the counter's 100 ms updates do not (a bound over 5% of it).
    assert short.energy_method == {"VDD_IN": MEASURED, "gpu0_energy": INTERPOLATED, "total": MEASURED}
    assert long.energy_j["gpu0_energy"] == pytest.approx(60.0, rel=0.01)
    # Read, but after the counter's last update: its energy is not known yet, and neither is its method.
    assert unbracketed.energy_j["gpu0_energy"] is None and unbracketed.energy_method["gpu0_energy"] is None


def test_the_total_is_interpolated_when_one_of_its_rails_is():
    only_gpu = [c for c in CHANNELS if c.device == "gpu"]
    t = np.arange(0.0, 2.0, 0.005)
    values = np.column_stack([np.full(len(t), 200.0), gpu_counter(t)])
    joined = join(t, values, only_gpu, np.array([1.0]), np.array([1.01]), period_s=0.005)
    step = StepRecord(step=0, start_s=1.0, end_s=1.01)
    fill_steps([step], joined, only_gpu)
    assert step.energy_method == {"gpu0_energy": INTERPOLATED, "total": INTERPOLATED}


def test_steps_csv_has_an_energy_method_column_per_rail():
    steps, _ = joined_steps([(1.0, 1.3)])
    fields = csv_fields(CHANNELS)
    assert {"energy_method/VDD_IN", "energy_method/gpu0_energy", "energy_method/total"} <= set(fields)
    assert "energy_method/gpu0_power" not in fields  # the counter gives gpu0's energy
    row = steps[0].csv_row()
    assert set(row) <= set(fields) and row["energy_method/gpu0_energy"] == MEASURED


def test_the_report_says_where_each_rails_energy_comes_from_and_how_many_steps_it_resolved():
    steps, joined = joined_steps([(1.0, 1.3), (1.3, 1.31), (1.31, 1.32), (2.0, 2.5)])
    report = report_of(steps, CHANNELS, joined=joined)
    sources = report.summary()["energy_sources"]
    assert sources["gpu0_energy"] == {
        "rail": "gpu0",
        "channel": "gpu0_energy",
        "from": "counter",
        "power_not_used": ["gpu0_power"],
        "update_period_s": pytest.approx(0.1),
        "steps_measured": 2,
        "steps_interpolated": 2,
    }
    assert sources["VDD_IN"]["from"] == "power" and sources["VDD_IN"]["power_not_used"] == []
    assert sources["VDD_IN"]["update_period_s"] == pytest.approx(0.005)
    assert report.summary()["energy_total_methods"] == {MEASURED: 4, INTERPOLATED: 0}  # the total is VDD_IN
    # The total is the sum of per-step counter differences: here, over contiguous steps, the counter's own.
    assert report.summary()["energy_j"]["gpu0_energy"] == pytest.approx(200.0 * 0.82, rel=0.01)


class FakeSensor:
    def __init__(self, name, channels):
        self.name, self.channels = name, [Channel(c, "energy", "fake", device="gpu", rail="gpu0") for c in channels]


class FakeSampler:
    """A fake sampler: 412 failed reads of its NVML sensor, and the last error text of each channel."""

    sensors = [FakeSensor("nvml", ["gpu0_energy", "gpu1_energy"]), FakeSensor("rapl", ["pkg_energy"])]

    def errors(self):
        return {"nvml": 412, "rapl": 0}

    def error_texts(self):
        return {"gpu0_energy": "NVML: Uninitialized"}


class FakeSamplerWithoutTexts(FakeSampler):
    error_texts = None  # a sampler from before error_texts


def test_a_channel_without_a_value_is_explained_in_its_librarys_words_with_its_failed_reads():
    names = ["gpu0_energy", "gpu1_energy", "pkg_energy"]
    assert unread_reasons(names, FakeSampler(), "no reading yet") == {
        "gpu0_energy": "NVML: Uninitialized (412 failed reads)",
        "gpu1_energy": "no valid reading (412 failed reads)",
        "pkg_energy": "no reading yet",
    }
    assert unread_reasons(["gpu0_energy"], FakeSamplerWithoutTexts(), "x") == {
        "gpu0_energy": "no valid reading (412 failed reads)"
    }
    assert unread_reasons(["gpu0_energy"], None, "no valid reading in the run") == {
        "gpu0_energy": "no valid reading in the run"
    }


def test_a_step_whose_edge_lies_where_the_reads_stalled_past_a_counter_update_has_a_wider_bound():
    # The synthetic counter of ``joined_steps``, read every 5 ms except for 250 ms around 1.3 s (the sampler
    # was starved, as on a board at 100% CPU): the updates at 1.2 and 1.3 s (and 1.4 s) were never seen on
    # their own, so the 300 ms step ending at 1.3 s has its end split in a 300 ms interval, not 100 ms.
    t = np.arange(0.0, 4.0, 0.005) + 0.0013
    t = t[(t < 1.17) | (t > 1.42)]
    channels = CHANNELS[2:]
    starts, ends = np.array([1.0, 2.0]), np.array([1.3, 2.3])
    joined = join(t, gpu_counter(t)[:, None], channels, starts, ends, period_s=0.005, min_gap_s=1.0)
    bound = joined["gpu0_energy"].bound
    assert bound[0] > 2 * bound[1]
    exact = np.diff(gpu_counter(np.array([1.0, 1.3, 2.0, 2.3]) + 1e-9))[[0, 2]]
    assert (np.abs(joined["gpu0_energy"].value - exact) <= bound).all()
    assert joined["gpu0_energy"].value[1] == pytest.approx(60.0, rel=0.01)
