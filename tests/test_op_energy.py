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
from tf_mobileperf.sensors import SyntheticSensor
from tf_mobileperf.sensors.base import Channel
from tf_mobileperf.steps.op_energy import op_energy, split_energy
from tf_mobileperf.steps.trace_ops import ClockPair, Ops, layer_of, read_ops


def test_split_shares_overlapping_ops_and_keeps_the_rest_as_no_op():
    t = np.linspace(-0.5, 1.5, 401)
    power = np.full_like(t, 10.0)
    per_op, idle, total = split_energy(
        t, power, np.array([[0.0, 1.0]]), np.array([0.1, 0.2, 1.2]), np.array([0.3, 0.4, 1.4])
    )
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
    _xspace(
        tmp_path / "host.xplane.pb",
        start_ns,
        {
            "tf_Compute/222": [("m/MatMul:MatMul", 300_000_000, 100_000_000)],
            "tf_Compute/111": [
                ("m/Rest:EagerPyFunc", 10_000_000, 30_000_000),
                ("m/MatMul:MatMul", 50_000_000, 100_000_000),
            ],
        },
    )
    clocks = ClockPair(monotonic_s=500.0, wall_s=start_ns / 1e9, uncertainty_s=0.0)
    ops = read_ops(tmp_path / "host.xplane.pb", clocks)
    assert list(ops.thread) == ["tf_Compute/111", "tf_Compute/111", "tf_Compute/222"]
    assert list(ops.op_type) == ["EagerPyFunc", "MatMul", "MatMul"]
    # profile_start_time + the line's timestamp (1 us) + the event's offset, on the monotonic clock.
    np.testing.assert_allclose(ops.start_s - 500.0, [0.010001, 0.050001, 0.300001], atol=1e-6)
    np.testing.assert_allclose(ops.end_s - ops.start_s, [0.03, 0.1, 0.1], atol=1e-6)


def test_layer_scope_without_uniquifying_suffixes():
    # In a traced train step Keras layer "dense" is scope "dense_1", "dense_1" is "dense_1_2".
    assert layer_of("StatefulPartitionedCall/sequential_1/dense_1/Relu") == "dense"
    assert layer_of("StatefulPartitionedCall/gradient_tape/sequential_1/dense_1_2/MatMul/MatMul_1") == "dense_1"
    assert layer_of("StatefulPartitionedCall/model_1/Add_10/ReadVariableOp") == "Add"
    assert layer_of("StatefulPartitionedCall/adam/Cast") == "(no layer)"


def _ops(rows: list[tuple[str, float, float]]) -> Ops:
    """Ops from (scope/name:OpType, start, end) on the host, as read_ops makes them."""
    names = [name for name, _, _ in rows]
    return Ops(
        np.array(names, dtype=object),
        np.array([n.split(":")[1] for n in names], dtype=object),
        np.array([layer_of(n.split(":")[0]) for n in names], dtype=object),
        np.array(["cpu"] * len(rows), dtype=object),
        np.array(["tf_Compute"] * len(rows), dtype=object),
        np.array([s for _, s, _ in rows]),
        np.array([e for _, _, e in rows]),
    )


def test_without_power_the_tables_rank_by_time_keep_every_row_and_one_no_layer_group():
    # Written ops, no power rail (a CPU utilization channel only): 20 op types, the
    # alphabetically first the shortest; optimizer ops in many uniquified scopes.
    rows = [
        (
            f"StatefulPartitionedCall/m_1/layer{chr(97 + k)}_1/Op{chr(65 + k)}:Op{chr(65 + k)}",
            k * 0.01,
            k * 0.01 + 0.0001 * (k + 1),
        )
        for k in range(20)
    ]
    rows += [(f"StatefulPartitionedCall/Add_{k}:AddV2", 0.2 + k * 0.001, 0.2 + k * 0.001 + 0.0005) for k in range(12)]
    channels = [Channel("cpu_util", "util", "test", group="cpu", device="cpu")]
    t = np.linspace(-0.1, 0.4, 101)
    result = op_energy(_ops(rows), t, np.full((len(t), 1), 50.0), channels, [(3, 0.0, 0.3)], ClockPair(0.0, 0.0, 0.0))
    assert result["rank_rail"] == ""
    by_type = [r["op_type"] for r in result["by_op_type"]]
    assert len(by_type) == 21 and by_type[0] == "AddV2" and by_type[1:4] == ["OpT", "OpS", "OpR"]
    times = [r["time_s"] for r in result["by_op_type"]]
    assert times == sorted(times, reverse=True) and times[0] == pytest.approx(12 * 0.0005)
    layers = [r["layer"] for r in result["by_layer"]]
    assert layers.count("(no layer)") == 1 and len(layers) == 21 and layers[1] == "layert"
    assert next(r for r in result["by_layer"] if r["layer"] == "(no layer)")["count"] == 12
    assert result["top_ops"][0]["op_type"] == "OpT" and result["top_ops"][0]["energy_j"] == {}


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

    with PerfMonitor(tmp_path, idle_s=0, sensors=[sensor], warmup_steps=1, profile_steps=(1, 2)) as perf:
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
    from helpers.plugin_client import client_for, get

    client, _ = client_for(tmp_path)
    status, steps = get(client, "steps", run="train")
    assert status == 200 and steps["op_energy"]["by_op_type"][0] == matmul
    download = client.get("/data/plugin/mobileperf/" + steps["trace_url"].removeprefix("./"))
    assert download.status_code == 200 and "attachment" in download.headers["Content-Disposition"]
    assert json.loads(download.get_data())["traceEvents"]


def test_traced_steps_of_a_fit_carry_the_profilers_step_markers(tmp_path):
    """A real fit (synthetic power) traced over steps 4-5: its XSpace has a "train"
    event with step_num per traced step, so the Profile tab's overview knows the step times."""
    import keras
    from xprof.convert.raw_to_tool_data import xspace_to_tool_data
    from xprof.profile_data import ProfileData

    from tf_mobileperf import MobilePerfCallback

    sensor = SyntheticSensor(power_w={"VDD_IN": lambda t: 5.0}, groups={"VDD_IN": "total"})
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x = np.ones((8 * 10, 8), "float32")
    cb = MobilePerfCallback(tmp_path, idle_s=0, sensors=[sensor], batch_size=8, profile_steps=(4, 5))
    model.fit(x, x[:, :1], batch_size=8, epochs=1, callbacks=[cb], verbose=0)
    xplane = [str(p) for p in (tmp_path / "train/plugins/profile").glob("*/*.xplane.pb")]
    assert len(xplane) == 1
    markers = []
    for plane in ProfileData.from_file(xplane[0]).planes:
        if plane.name.startswith("/host"):
            markers += [dict(e.stats).get("step_num") for line in plane.lines for e in line.events if e.name == "train"]
    assert sorted(int(m) for m in markers) == [4, 5]
    overview, _ = xspace_to_tool_data(xplane, "overview_page", {})
    assert b"No step marker observed" not in overview
