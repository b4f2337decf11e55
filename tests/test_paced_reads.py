"""Sensors read in a thread of their own (``own_thread``), synthetic sensors: the sensors of one ``thread_group``
share one thread, woken on the fastest one's grid, and a slower one is read at every wake-up its period came."""

from __future__ import annotations

import threading
import time

import pytest

from tf_mobileperf.sampling.paced import PacedReader, thread_groups
from tf_mobileperf.sensors.base import Channel, Sensor


class Counting(Sensor):
    """A synthetic sensor that says which thread read it; ``values`` is what each read gives."""

    own_thread = True

    def __init__(self, name: str, min_period_s: float, group: str | None, values: dict | None = None):
        self.name, self.min_period_s, self.thread_group = name, min_period_s, group
        self.channels = [Channel(f"{name}_thread", "state", "test")]
        self.values = values

    def read(self):
        return self.values if self.values is not None else {f"{self.name}_thread": float(threading.get_ident())}


class Inline(Counting):
    own_thread = False


def test_sensors_of_one_group_share_a_thread_and_the_others_have_their_own():
    a, b = Counting("a", 0.03, "gpu"), Counting("b", 0.1, "gpu")
    c, d, e = Counting("c", 0.03, None), Counting("d", 0.03, None), Inline("e", 0.03, "gpu")
    groups = thread_groups([a, e, c, b, d])
    assert groups == [[(0, a), (3, b)], [(2, c)], [(4, d)]]


def test_a_slower_member_is_read_on_every_third_wake_up_of_the_fastest_ones_grid_by_the_same_thread():
    fast, slow = Counting("fast", 0.02, "gpu"), Counting("slow", 0.06, "gpu")
    readings: list[tuple[int, float, dict]] = []
    reader = PacedReader([(0, fast), (1, slow)], lambda i, t, v: readings.append((i, t, v)), period_s=0.005)
    assert reader.grid_s == 0.02 and reader.every == [1, 3]
    end = time.monotonic() + 1.2
    thread = threading.Thread(target=reader.serve, args=(lambda: time.monotonic() < end,))
    thread.start()
    thread.join(5)
    fast_reads = [r for r in readings if r[0] == 0]
    slow_reads = [r for r in readings if r[0] == 1]
    # 60 ticks in 1.2 s; a loaded machine skips some, never adds any.
    assert 20 <= len(fast_reads) <= 61
    assert len(slow_reads) == pytest.approx(len(fast_reads) / 3, abs=2)
    assert (
        {v["fast_thread"] for _, _, v in fast_reads}
        == {v["slow_thread"] for _, _, v in slow_reads}
        == {float(thread.ident)}
    )
    instants = [t for _, t, _ in readings]
    assert instants == sorted(instants)


def test_a_read_that_gives_nothing_is_not_published():
    quiet = Counting("quiet", 0.02, None, values={})
    readings: list = []
    end = time.monotonic() + 0.2
    PacedReader([(0, quiet)], lambda *r: readings.append(r), period_s=0.005).serve(lambda: time.monotonic() < end)
    assert readings == []
