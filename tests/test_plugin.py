"""The dashboard's backend through TensorBoard's own WSGI app (werkzeug client),
on logdirs made by the real callback with the synthetic sensor."""

from __future__ import annotations

import json
import shutil

import keras
import numpy as np
import pytest

from tf_mobileperf import MobilePerfCallback
from tf_mobileperf.sensors import SyntheticSensor
from tf_mobileperf_tensorboard.downsample import min_max

from helpers.plugin_client import client_for, get


@pytest.fixture
def logdir(sized_runs):
    return sized_runs


@pytest.mark.slow
def test_runs_lists_every_run_with_its_summary(logdir):
    client, _ = client_for(logdir)
    status, runs = get(client, "runs")
    assert status == 200
    by_run = {r["run"]: r["summary"] for r in runs}
    assert set(by_run) == {"bs8/train", "bs32/train"}
    assert by_run["bs8/train"]["batch_size"] == 8 and by_run["bs8/train"]["status"] == "finished"
    assert by_run["bs32/train"]["model"] == "mlp" and by_run["bs32/train"]["success"] is True


def test_plugin_is_listed_active(logdir):
    client, _ = client_for(logdir)
    listing = json.loads(client.get("/data/plugins_listing").get_data())
    assert listing["mobileperf"]["enabled"] is True
    assert listing["mobileperf"]["tab_name"] == "MobilePerf"


def test_steps_and_channels(logdir):
    client, _ = client_for(logdir)
    status, steps = get(client, "steps", run="bs8/train")
    assert status == 200 and len(steps["steps"]) == 12 and steps["steps"][0]["warmup"] is True
    status, header = get(client, "channels", run="bs8/train")
    assert status == 200 and header["columns"] == ["t", "VDD_IN", "VDD_SYS_GPU", "ram_used"]
    assert header["samples"] > 0 and header["t1"] >= header["t0"]


def test_series_raw_and_downsampled_keep_peaks(logdir):
    client, _ = client_for(logdir)
    _, header = get(client, "channels", run="bs8/train")
    status, series = get(client, "series", run="bs8/train", channel="VDD_SYS_GPU", max_points=100000 // 10)
    assert status == 200 and set(series["min"]) == {2.0}
    status, small = get(client, "series", run="bs8/train", channel="VDD_IN", max_points=10)
    assert len(small["t"]) <= 5
    status, part = get(client, "series", run="bs8/train", channel="VDD_IN", start=header["t0"], end=header["t0"] + 0.05)
    assert 0 < part["samples"] <= 12


def test_min_max_keeps_a_one_sample_spike():
    t = np.arange(720_000) / 200.0
    v = np.ones_like(t)
    v[123_457] = 50.0
    out = min_max(t, v, 1000)
    assert len(out["t"]) == 500 and max(out["max"]) == 50.0 and min(out["min"]) == 1.0


def test_min_max_draws_failed_reads_over_and_breaks_only_in_a_long_gap():
    """Synthetic 20 Hz readings in 200 Hz rows: one failed read is jitter, a 0.5 s hole is a gap."""
    t = np.arange(2000) / 200.0
    v = np.full_like(t, np.nan)
    v[::10] = 3.0
    v[500] = np.nan  # one failed read: 0.1 s between readings, under the allowed 0.15 s
    v[1000:1100] = np.nan  # 0.55 s without a reading
    v[1300] = 9.0  # a one-reading peak
    gap = 3 * 0.05
    raw = min_max(t, v, 4000, gap)
    assert raw["max"].count(None) == 1 and len(raw["t"]) == 200 - 1 - 10 + 1
    marker = raw["t"][raw["max"].index(None)]
    assert 4.95 < marker < 5.5 and max(raw["max"], key=lambda x: x or 0) == 9.0
    small = min_max(t, v, 20, gap)
    assert small["max"].count(None) == 1 and 4.95 < small["t"][small["max"].index(None)] < 5.5
    assert 9.0 in small["max"] and set(small["min"]) == {3.0, None}


def test_series_of_a_slow_channel_is_its_own_readings_at_its_own_rate(tmp_path):
    """Synthetic power read every row (5 ms), synthetic memory every 50 ms: NaN in the rows between."""
    fast = SyntheticSensor(power_w={"VDD_IN": lambda t: 5.0}, groups={"VDD_IN": "total"})
    slow = SyntheticSensor(
        memory_b={"ram_used": lambda t: 2e9}, roles={"ram_used": {"device": "board"}}, min_period_s=0.05
    )
    cb = MobilePerfCallback(tmp_path / "slow", idle_s=0, sensors=[fast, slow], batch_size=8)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(32), keras.layers.Dense(1)], name="mlp")
    model.compile("sgd", "mse")
    x = np.ones((8 * 40, 8), "float32")
    model.fit(x, x[:, :1], batch_size=8, epochs=1, callbacks=[cb], verbose=0)
    client, _ = client_for(tmp_path)
    status, memory = get(client, "series", run="slow/train", channel="ram_used", max_points=20000)
    rows = np.fromfile(tmp_path / "slow/train/plugins/mobileperf/samples.bin", "<f8").reshape(-1, 3)
    readings = int(np.isfinite(rows[:, 2]).sum())
    assert status == 200 and memory["samples"] == len(rows) and readings < len(rows) / 3
    assert set(memory["max"]) == {2e9} and len(memory["t"]) == readings  # one line, no break between readings
    assert 15 < memory["rate_hz"] < 25 and memory["max_gap_s"] == pytest.approx(
        3 * memory["period_s"]
    )  # join.allowed_gap_s
    _, power = get(client, "series", run="slow/train", channel="VDD_IN", max_points=20000)
    assert 150 < power["rate_hz"] < 250 and len(power["t"]) == len(rows)


@pytest.mark.parametrize(
    "route,params,status",
    [
        ("steps", {}, 400),
        ("steps", {"run": "nope"}, 404),
        ("steps", {"run": "../../etc"}, 404),
        ("series", {"run": "bs8/train"}, 400),
        ("series", {"run": "bs8/train", "channel": "nope"}, 404),
        ("series", {"run": "bs8/train", "channel": "VDD_IN", "start": "abc"}, 400),
        ("series", {"run": "bs8/train", "channel": "VDD_IN", "max_points": "1e12"}, 400),
        ("series", {"run": "bs8/train", "channel": "VDD_IN", "start": "5", "end": "1"}, 400),
        ("series", {"run": "bs8/train", "channel": "VDD_IN", "start": "nan"}, 400),
        ("channels", {"run": "<script>alert(1)</script>"}, 404),
    ],
)
def test_bad_input_is_4xx_with_message(logdir, route, params, status):
    client, _ = client_for(logdir)
    got, body = get(client, route, **params)
    assert got == status and body["error"]


def test_corrupt_and_truncated_files_are_4xx_or_empty(logdir, tmp_path):
    broken = tmp_path / "logs"
    shutil.copytree(logdir, broken)
    series_dir = broken / "bs8/train/plugins/mobileperf"
    (series_dir / "channels.json").write_text("{not json")
    samples = broken / "bs32/train/plugins/mobileperf/samples.bin"
    samples.write_bytes(samples.read_bytes()[: 8 * 4 * 3 + 5])  # three rows and a torn fourth
    (broken / "bs32/train/plugins/mobileperf/report.json").write_text("[1, 2")
    client, _ = client_for(broken)
    assert get(client, "channels", run="bs8/train")[0] == 422
    status, series = get(client, "series", run="bs32/train", channel="VDD_IN")
    assert status == 200 and series["samples"] == 3
    assert get(client, "steps", run="bs32/train")[0] == 422
