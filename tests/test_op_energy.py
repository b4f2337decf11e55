"""Energy per op: the split on known ops and power, the clocks, and a real
profiler trace on CPU with a synthetic sensor whose power is high exactly
while a large matmul runs (a flag in shared memory, set and cleared by
py_function ops ordered around the matmul)."""

from __future__ import annotations

import json
import multiprocessing
import time

import numpy as np
import pytest

from tf_mobileperf import PerfMonitor
from tf_mobileperf.steps.op_energy import ClockPair, layer_of, read_ops, split_energy
from tf_mobileperf.sensors import SyntheticSensor


def test_split_shares_overlapping_ops_and_keeps_the_rest_as_no_op():
    t = np.linspace(-0.5, 1.5, 401)
    power = np.full_like(t, 10.0)
    per_op, idle, total = split_energy(t, power, np.array([[0.0, 1.0]]), np.array([0.1, 0.2, 1.2]),
                                       np.array([0.3, 0.4, 1.4]))
    # A alone 0.1-0.2, A and B 0.2-0.3 (5 W each), B alone 0.3-0.4; the third op is outside the step.
    np.testing.assert_allclose(per_op, [1.5, 1.5, 0.0], atol=1e-9)
    np.testing.assert_allclose(idle, [7.0], atol=1e-9)
    np.testing.assert_allclose(total, [10.0], atol=1e-9)


def test_split_follows_the_power_curve():
    t = np.linspace(0.0, 1.0, 201)
    power = 4.0 * t  # W
    per_op, idle, total = split_energy(t, power, np.array([[0.0, 1.0]]), np.array([0.5]), np.array([1.0]))
    assert per_op[0] == pytest.approx(1.5) and idle[0] == pytest.approx(0.5) and total[0] == pytest.approx(2.0)


def test_clock_pair_maps_wall_to_monotonic():
    pair = ClockPair.now()
    assert pair.uncertainty_s < 1e-3
    assert pair.to_monotonic(time.time()) == pytest.approx(time.monotonic(), abs=2e-3)


def _xspace(path, start_ns: int, threads: dict[str, list[tuple[str, int, int]]]) -> None:
    """Writes an XSpace as the TF profiler does: per thread a line, events at (offset, duration) in ns."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    host = space.planes.add(id=0, name="/host:CPU")
    for thread_id, (thread, events) in enumerate(threads.items(), start=1):
        line = host.lines.add(id=thread_id, display_id=thread_id, name=thread, timestamp_ns=1000)
        for name, offset_ns, duration_ns in events:
            metadata_id = len(host.event_metadata) + 1
            host.event_metadata[metadata_id].id, host.event_metadata[metadata_id].name = metadata_id, name
            line.events.add(metadata_id=metadata_id, offset_ps=offset_ns * 1000, duration_ps=duration_ns * 1000)
    environment = space.planes.add(id=1, name="Task Environment")
    environment.stat_metadata[1].id, environment.stat_metadata[1].name = 1, "profile_start_time"
    environment.stats.add(metadata_id=1, uint64_value=start_ns)
    path.write_bytes(space.SerializeToString())


def test_ops_of_steps_run_on_different_threads_come_in_time_order(tmp_path):
    # As on a loaded machine: step 2 ran on the thread the XSpace lists first.
    # A written XSpace (no sensor).
    start_ns = 1_796_000_000_000_000_000
    _xspace(tmp_path / "host.xplane.pb", start_ns, {
        "tf_Compute/222": [("m/MatMul:MatMul", 300_000_000, 100_000_000)],
        "tf_Compute/111": [("m/Rest:EagerPyFunc", 10_000_000, 30_000_000), ("m/MatMul:MatMul", 50_000_000, 100_000_000)],
    })
    clocks = ClockPair(monotonic_s=500.0, wall_s=start_ns / 1e9, uncertainty_s=0.0)
    ops = read_ops(tmp_path / "host.xplane.pb", clocks)
    assert list(ops.thread) == ["tf_Compute/111", "tf_Compute/111", "tf_Compute/222"]
    assert list(ops.op_type) == ["EagerPyFunc", "MatMul", "MatMul"]
    # profile_start_time + the line's timestamp (1 us) + the event's offset, on the monotonic clock.
    np.testing.assert_allclose(ops.start_s - 500.0, [0.010001, 0.050001, 0.300001], atol=1e-6)
    np.testing.assert_allclose(ops.end_s - ops.start_s, [0.03, 0.1, 0.1], atol=1e-6)


def test_layer_scope():
    assert layer_of("StatefulPartitionedCall/sequential_1/dense_1/Relu") == "dense_1"
    assert layer_of("StatefulPartitionedCall/adam/Cast") == "(no layer)"


def test_the_op_that_draws_the_power_gets_the_energy(tmp_path):
    import tensorflow as tf

    flag = multiprocessing.RawValue("b", 0)  # shared with the forked sampler
    sensor = SyntheticSensor(power_w={"VDD_IN": lambda t: 20.0 if flag.value else 1.0}, groups={"VDD_IN": "total"})
    a = tf.Variable(tf.random.normal((1536, 1536)))

    def set_flag(value, _=None):
        flag.value = value
        return np.float32(value)

    @tf.function
    def step():  # data dependencies order the ops: rest, flag on, matmul, flag off
        rest = tf.py_function(lambda: time.sleep(0.03) or np.float32(0), [], tf.float32)  # 30 ms at 1 W
        on = tf.py_function(lambda x: set_flag(1), [rest], tf.float32)
        m = a + 0.0 * on
        product = tf.linalg.matmul(m, m)
        return tf.py_function(lambda x: set_flag(0), [tf.reduce_sum(product)], tf.float32)

    with PerfMonitor(tmp_path, sensors=[sensor], warmup_steps=1, profile_steps=(1, 2)) as perf:
        for _ in range(4):
            with perf.step():
                step()
    result = json.loads((tmp_path / "train/plugins/mobileperf/op_energy.json").read_text())
    assert result["clock_alignment"]["alignment_uncertainty_us"] < 1000
    assert [s["step"] for s in result["steps"]] == [1, 2]
    step_energy = sum(s["energy_j"]["VDD_IN"] for s in result["steps"])
    matmul = result["by_op_type"][0]  # tf.linalg.matmul is BatchMatMulV2 in a graph
    assert "MatMul" in matmul["op_type"] and matmul["count"] == 2
    assert matmul["energy_j"]["VDD_IN"] > 0.6 * step_energy
    assert "MatMul" in result["top_ops"][0]["op_type"]
    # Alignment: each traced step's window holds its own matmul, on the monotonic clock,
    # and the trace lists the ops in time order (the steps may run on different threads).
    trace = json.loads((tmp_path / "train/plugins/mobileperf/power_trace.json").read_text())
    t0 = perf.report.steps[1].start_s
    windows = [((s.start_s - t0) * 1e6, (s.end_s - t0) * 1e6) for s in perf.report.steps if s.traced]
    ops = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [e["ts"] for e in ops] == sorted(e["ts"] for e in ops)
    matmuls = [e for e in ops if "MatMul" in e["cat"]]
    assert len(matmuls) == 2
    for event, (start, end) in zip(matmuls, windows):
        assert start <= event["ts"] and event["ts"] + event["dur"] <= end
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C" and e["name"] == "VDD_IN"]
    assert counters and {e["args"]["W"] for e in counters} == {1.0, 20.0}

    # The dashboard serves the table with the run's steps, and the trace as a download.
    from test_plugin import client_for, get

    client, _ = client_for(tmp_path)
    status, steps = get(client, "steps", run="train")
    assert status == 200 and steps["op_energy"]["by_op_type"][0] == matmul
    download = client.get("/data/plugin/mobileperf/" + steps["trace_url"].removeprefix("./"))
    assert download.status_code == 200 and "attachment" in download.headers["Content-Disposition"]
    assert json.loads(download.get_data())["traceEvents"]
