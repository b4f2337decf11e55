"""Nothing of ours listens on a port: sampler and collector use shared memory and files."""

from __future__ import annotations

import time

import psutil

from tf_mobileperf import PerfMonitor

from helpers.training import constant_sensor


def listening() -> set:
    processes = [psutil.Process()] + psutil.Process().children(recursive=True)
    return {
        (p.pid, c.laddr) for p in processes for c in p.net_connections(kind="all") if c.status == psutil.CONN_LISTEN
    }


def test_measuring_opens_no_listening_socket(tmp_path):
    before = listening()
    with PerfMonitor(tmp_path, idle_s=0, sensors=[constant_sensor()]) as perf:
        with perf.step():
            time.sleep(0.3)
        during = listening()
        assert perf.sampler.running
    assert during - before == set()
