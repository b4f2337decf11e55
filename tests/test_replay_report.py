"""A tegrastats replay reported as what the log says: the CPU's mean over the cores the log has, cores the log
marks "off" reported off (not a sensor that stopped), each channel at the log's own rate, energy per op null
where power is unknown, and one warning when the log runs out before the run ends."""

from __future__ import annotations

import json

import numpy as np

from tf_mobileperf.output.files import write_json
from tf_mobileperf.sensors.base import Channel
from tf_mobileperf.steps.op_energy import ClockPair, Ops, op_energy


def _host_ops(spans: list[tuple[float, float]]) -> Ops:
    """CPU ops "m/dense/MatMul:MatMul" running over ``spans`` (start, end)."""
    n = len(spans)
    obj = lambda value: np.array([value] * n, dtype=object)  # noqa: E731
    return Ops(obj("m/dense/MatMul:MatMul"), obj("MatMul"), obj("dense"), obj("cpu"), obj("tf_Compute"),
               np.array([s for s, _ in spans]), np.array([e for _, e in spans]))


def test_op_energy_with_unknown_power_writes_null_not_nan(tmp_path):
    channels = [Channel("VDD_IN", "power", "test", group="total"), Channel("VDD_SYS_CPU", "power", "test", group="cpu")]
    t = np.linspace(-0.1, 0.4, 51)
    values = np.column_stack([np.full(len(t), np.nan), np.full(len(t), 2.0)])  # VDD_IN never read
    result = op_energy(_host_ops([(0.05, 0.1), (0.15, 0.2)]), t, values, channels, [(3, 0.0, 0.3)],
                       ClockPair(0.0, 0.0, 0.0))
    write_json(tmp_path / "op_energy.json", result)  # allow_nan=False: raised on NaN before
    stored = json.loads((tmp_path / "op_energy.json").read_text())
    assert stored["by_op_type"][0]["energy_j"]["VDD_IN"] is None
    assert stored["top_ops"][0]["energy_j"]["VDD_IN"] is None and stored["steps"][0]["energy_j"]["VDD_IN"] is None
    assert stored["by_layer"][0]["energy_j"]["VDD_SYS_CPU"] > 0  # a rail with power keeps its energy
