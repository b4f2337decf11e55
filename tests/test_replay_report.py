"""A tegrastats replay reported as what the log says: the CPU's mean over the cores the log has, cores the log
marks "off" reported off (not a sensor that stopped), each channel at the log's own rate, energy per op null
where power is unknown, and one warning when the log runs out before the run ends."""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path

import numpy as np
import pytest

from tf_mobileperf import PerfMonitor
from tf_mobileperf.format.reader import read_series
from tf_mobileperf.output.files import write_json
from tf_mobileperf.sensors import ReplaySensor
from tf_mobileperf.sensors.base import Channel
from tf_mobileperf.steps.op_energy import op_energy
from tf_mobileperf.steps.trace_ops import ClockPair, Ops
from tf_mobileperf_tensorboard.downsample import ChannelRate, declared_period_s

from conftest import DATA
from helpers.stall_rerun import made_unstalled

TX2 = [line for line in (DATA / "tx2_tegrastats.log").read_text().splitlines() if "RAM" in line]
#: Cores 1 and 2 (TX2's Denver2) off in every line; the others busy 40, 20, 30 and 10%: 25% on average.
CORES = "CPU [40%@2035,off,off,20%@2035,30%@2035,10%@2035]"


def tx2_log(path: Path, lines: int = 6) -> Path:
    """A 1 s TX2 log of ``lines`` lines: the first two give temperatures, the later ones stop giving them."""
    with_temps, without = (re.sub(r"CPU \[[^\]]*\]", CORES, TX2[i]) for i in (1, 2))
    path.write_text("\n".join([with_temps] * 2 + [without] * (lines - 2)) + "\n")
    return path


def run(logdir: Path, sensor: ReplaySensor, steps: int, step_s: float) -> dict:
    with PerfMonitor(logdir, sensors=[sensor], idle_s=0, warmup_steps=0) as perf:
        for _ in range(steps):
            with perf.step():
                time.sleep(step_s)
    return json.loads((logdir / "report.json").read_text())


class Captured(logging.Handler):
    """The library's log records of a run shared by several tests (caplog is per test)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self, level: int) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno == level]


@pytest.fixture(scope="module")
def tx2_run(tmp_path_factory) -> tuple[dict, Captured, Path]:
    """A 2.5 s run on a 1 s TX2 log at speed 1: its report, its log records and its run folder."""
    tmp = tmp_path_factory.mktemp("tx2")

    def make() -> tuple[dict, Captured]:
        logger, captured = logging.getLogger("tf_mobileperf"), Captured()
        level = logger.level
        logger.addHandler(captured)
        logger.setLevel(logging.INFO)
        try:
            return run(tmp / "run", ReplaySensor(tx2_log(tmp / "tx2.log")), steps=10, step_s=0.25), captured
        finally:
            logger.removeHandler(captured)
            logger.setLevel(level)

    report, captured = made_unstalled(tmp / "run", make, lambda made: "VDD_IN" in made[0]["sampling"]["channel_gaps"])
    return report, captured, tmp / "run" / "train"


@pytest.mark.slow
def test_replay_cpu_mean_is_the_mean_of_the_cores_the_log_has(tx2_run):
    report, _, _ = tx2_run
    assert report["cpu_util_avg"] == pytest.approx(25.0)  # cores 0, 3, 4, 5 at each line; 1 and 2 are off
    assert all(s["cpu_util"] == pytest.approx(25.0) for s in report["steps"] if s["cpu_util"] is not None)
    assert report["cpu_util_per_cluster"] == {"all cores": pytest.approx(25.0)}  # a log does not say core types
    assert report["cpu_util_per_core"]["cpu0"] == pytest.approx(40.0)


def test_replay_cores_off_in_the_log_are_off_not_stopped_sensors(tx2_run):
    report, captured, _ = tx2_run
    assert report["cpu_util_per_core"]["cpu1"] is None and report["cpu_util_per_core"]["cpu2"] is None
    assert report["unavailable"]["cpu1_util"] == "off in the log"
    warnings = captured.messages(logging.WARNING)
    # Neither the off cores nor the temperatures the log stops giving after 2 s are a sensor that stopped.
    assert not [w for w in warnings if "allowed gap" in w or "cpu1_util" in w or "_temp" in w], warnings
    assert any(
        "cpu1_util (off in the log)" in m and "gpu_temp (not in every line of the log)" in m
        for m in captured.messages(logging.INFO)
    )


def test_replay_channels_have_the_logs_own_rate_in_the_report_and_the_legend(tx2_run):
    report, _, run_dir = tx2_run
    channels = report["sampling"]["channels"]  # a 1 s log at speed 1: 1 Hz, though read at every tick
    assert channels["VDD_IN"]["rate_hz"] == pytest.approx(1.0) and channels["cpu_util"]["rate_hz"] == pytest.approx(1.0)
    assert channels["VDD_IN"]["read_hz"] > 10
    assert "VDD_IN" not in report["sampling"]["stale_channels_updates_hz"]
    header, rows = read_series(run_dir)
    column = rows[:, header["columns"].index("VDD_IN")]
    legend = ChannelRate.of(rows[:, 0], column, declared_period_s(header, "VDD_IN")).to_dict()
    assert legend["rate_hz"] == pytest.approx(1.0)


def test_a_replay_that_runs_out_says_so_once_and_not_as_stopped_sensors(tmp_path, caplog):
    sensor = ReplaySensor(tx2_log(tmp_path / "short.log", lines=3), speed=20)  # 3 lines at 20x: 0.15 s
    report = run(tmp_path / "run", sensor, steps=8, step_s=0.05)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    ran_out = [w for w in warnings if "covers 0.15 s at speed 20; the run lasted" in w]
    assert len(ran_out) == 1 and "short.log" in ran_out[0] and "samples after that are missing" in ran_out[0]
    assert not [w for w in warnings if "allowed gap" in w], warnings
    assert report["steps"][-1]["energy_j"]["VDD_IN"] is None  # after the log's end: missing, not made up


def _host_ops(spans: list[tuple[float, float]]) -> Ops:
    """CPU ops "m/dense/MatMul:MatMul" running over ``spans`` (start, end)."""
    n = len(spans)
    obj = lambda value: np.array([value] * n, dtype=object)  # noqa: E731
    return Ops(
        obj("m/dense/MatMul:MatMul"),
        obj("MatMul"),
        obj("dense"),
        obj("cpu"),
        obj("tf_Compute"),
        np.array([s for s, _ in spans]),
        np.array([e for _, e in spans]),
    )


def test_op_energy_with_unknown_power_writes_null_not_nan(tmp_path):
    channels = [Channel("VDD_IN", "power", "test", group="total"), Channel("VDD_SYS_CPU", "power", "test", group="cpu")]
    t = np.linspace(-0.1, 0.4, 51)
    values = np.column_stack([np.full(len(t), np.nan), np.full(len(t), 2.0)])  # VDD_IN never read
    result = op_energy(
        _host_ops([(0.05, 0.1), (0.15, 0.2)]), t, values, channels, [(3, 0.0, 0.3)], ClockPair(0.0, 0.0, 0.0)
    )
    write_json(tmp_path / "op_energy.json", result)  # allow_nan=False: raised on NaN before
    stored = json.loads((tmp_path / "op_energy.json").read_text())
    assert stored["by_op_type"][0]["energy_j"]["VDD_IN"] is None
    assert stored["top_ops"][0]["energy_j"]["VDD_IN"] is None and stored["steps"][0]["energy_j"]["VDD_IN"] is None
    assert stored["by_layer"][0]["energy_j"]["VDD_SYS_CPU"] > 0  # a rail with power keeps its energy
