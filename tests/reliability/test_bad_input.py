"""Bad input: constructor arguments, hostile tegrastats lines and logs, and
hostile files and requests for the dashboard. Each is a clear error that
names the problem, or a result that holds only what the input really says."""

from __future__ import annotations

import json
import os
import random
import re

import numpy as np
import pytest

from tf_mobileperf import MobilePerfCallback, PerfMonitor
from tf_mobileperf.sensors.replay import ReplaySensor
from tf_mobileperf.sensors.tegrastats import parse_line, read_log

from conftest import DATA
from helpers.plugin_client import client_for, get, train

LINES = [
    line
    for name in ("tx2_tegrastats.log", "orin_tegrastats.log")
    for line in (DATA / name).read_text().splitlines()
    if "RAM" in line
]


@pytest.mark.parametrize(
    "kwargs,error,names",
    [
        ({"warmup_steps": -1}, ValueError, "warmup_steps"),
        ({"warmup_steps": "3"}, TypeError, "warmup_steps"),
        ({"warmup_steps": 2.5}, TypeError, "warmup_steps"),
        ({"warmup_steps": True}, TypeError, "warmup_steps"),
        ({"sample_period_ms": 0}, ValueError, "period"),
        ({"sample_period_ms": -5}, ValueError, "period"),
        ({"sample_period_ms": 0.01}, ValueError, "period"),
        ({"sample_period_ms": float("nan")}, TypeError, "period"),
        ({"sample_period_ms": "5"}, TypeError, "period"),
        ({"sensors": "bogus"}, ValueError, "unknown sensors"),
        ({"sensors": [object()]}, TypeError, "Sensor"),
        ({"sensors": "replay:/nonexistent.log"}, FileNotFoundError, "nonexistent.log"),
        ({"on_oom": "ignore"}, ValueError, "on_oom"),
        ({"profile_steps": (1, 4)}, ValueError, "profile_steps"),
        ({"profile_steps": (5, 4)}, ValueError, "profile_steps"),
        ({"profile_steps": 5}, TypeError, "profile_steps"),
        ({"profile_steps": (3, -1)}, ValueError, "profile_steps"),
        ({"batch_size": 0}, ValueError, "batch_size"),
    ],
)
def test_bad_arguments_raise_in_constructor_naming_the_problem(tmp_path, kwargs, error, names):
    with pytest.raises(error, match=re.escape(names)):
        MobilePerfCallback(tmp_path, **({"sensors": "none"} | kwargs))


def test_bad_monitor_arguments(tmp_path):
    with pytest.raises(ValueError, match="keep_steps"):
        PerfMonitor(tmp_path, sensors="none", keep_steps=0)


def test_replay_of_a_file_that_is_not_tegrastats(tmp_path):
    junk = tmp_path / "junk.log"
    junk.write_bytes(b"hello\n\x00\xff\xfe binary\n")
    with pytest.raises(ValueError, match="no tegrastats"):
        MobilePerfCallback(tmp_path, sensors=f"replay:{junk}")
    with pytest.raises(FileNotFoundError):
        MobilePerfCallback(tmp_path, sensors=f"replay:{tmp_path}")  # a directory


def numbers(line: str) -> set[int]:
    return {int(n) for n in re.findall(r"\d+", line)}


def test_mutated_tegrastats_lines_parse_to_what_they_say_or_raise():
    """Seeded random truncations, deletions, insertions and byte flips of real lines."""
    rng = random.Random(0)
    alphabet = "0123456789/%@[],_ ABCDEFGHIJKLMNOPQRSTUVWXYZmWC\x00\t"
    parsed = 0
    for _ in range(3000):
        line = list(rng.choice(LINES))
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(line))
            op = rng.choice("cut del ins flip".split())
            if op == "cut":
                line = line[:i]
            elif op == "del":
                del line[i : i + rng.randint(1, 8)]
            elif op == "ins":
                line[i:i] = rng.choices(alphabet, k=rng.randint(1, 6))
            else:
                line[i] = rng.choice(alphabet)
            if not line:
                break
        text = "".join(line)
        try:
            record = parse_line(text)
        except ValueError:
            continue
        parsed += 1
        said = numbers(text)
        for name, watts in record.power_w.items():  # every rail value is written in the line, under its name
            assert name in text and round(watts * 1000) in said, text
        if record.gpu_util is not None:
            assert int(record.gpu_util) in said
        for util in record.cpu_util or []:
            assert util is None or int(util) in said
    assert parsed > 1000


@pytest.mark.parametrize(
    "line", ["RAM " * 200_000, "CPU [" + "1%@2," * 100_000, "VDD_IN 1/" * 100_000, "\x00" * 1_000_000, "[" * 500_000]
)
def test_huge_hostile_lines_end_quickly(line):
    try:
        record = parse_line(line)
    except ValueError:
        return
    assert len(record.power_w) < 10


def test_replay_skips_bad_lines_and_a_torn_last_line_with_a_count(tmp_path):
    good = LINES[:3]
    log = tmp_path / "mixed.log"
    log.write_text("\n".join([good[0], "garbage \x01\x02", good[1], "VDD_IN", good[2], good[0][:25]]))
    records, skipped = read_log(log)
    assert len(records) == 3 and skipped == 3  # two bad lines and the last one, cut without its newline
    sensor = ReplaySensor(log, interval_ms=1000)
    assert sensor.skipped == 3 and sensor.metadata()["skipped_lines"] == 3


# -- the dashboard ---------------------------------------------------------------


@pytest.fixture
def hostile_logdir(tmp_path):
    """Two real runs, one named like a script; then broken in hostile ways."""
    root = tmp_path / "logs"
    train(root / "good")
    train(root / "<img src=x onerror=alert(1)>")
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "channels.json").write_text(json.dumps({"columns": ["t", "x"]}))
    (outside / "samples.bin").write_bytes(np.ones(20).tobytes())
    good = root / "good/train/plugins/mobileperf"
    os.replace(good, good.with_name("moved"))
    os.symlink(outside, good)  # the run's series folder now points out of the logdir
    return root


@pytest.mark.slow
def test_dashboard_refuses_files_outside_the_logdir(hostile_logdir):
    client, _ = client_for(hostile_logdir)
    for route in ("channels", "steps"):
        status, body = get(client, route, run="good/train")
        assert status == 403 and "outside the logdir" in body["error"]
    status, body = get(client, "series", run="good/train", channel="x")
    assert status == 403


def test_dashboard_serves_a_script_named_run_as_data(hostile_logdir):
    client, _ = client_for(hostile_logdir)
    runs = client.get("/data/plugin/mobileperf/runs")
    assert runs.mimetype == "application/json"
    names = [r["run"] for r in json.loads(runs.get_data())]
    assert "<img src=x onerror=alert(1)>/train" in names
    status, body = get(client, "channels", run="<img src=x onerror=alert(1)>/train")
    assert status == 200 and body["samples"] > 0


def test_dashboard_non_finite_and_huge_ranges(tmp_path):
    root = tmp_path / "logs"
    train(root / "run")
    samples = root / "run/train/plugins/mobileperf/samples.bin"
    rows = np.fromfile(samples, "<f8").reshape(-1, 4)
    rows[3, 1], rows[4, 1], rows[5, 2] = np.nan, np.inf, -np.inf
    rows.tofile(samples)
    client, _ = client_for(root)
    status, body = get(client, "series", run="run/train", channel="VDD_IN", start="-1e308", end="1e308")
    # NaN and inf are failed reads: left out of the line, which is not broken for two readings (only a gap longer
    # than the channel's allowed gap is); the answer is valid JSON of finite numbers.
    assert status == 200 and body["samples"] == len(rows) and len(body["t"]) == len(rows) - 2
    assert all(v is not None and np.isfinite(v) for v in body["min"] + body["max"])
    for method in ("post", "put", "delete"):  # no route writes
        assert getattr(client, method)("/data/plugin/mobileperf/runs").status_code in (400, 405)
