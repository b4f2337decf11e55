"""The sweep: real child processes per configuration, a real OOM under an
emulated memory limit, resume, plots (the memory limit in its own quantity); find-max-batch's search on a stub."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tf_mobileperf.cli.parser import main
from tf_mobileperf.figures.specs import figures
from tf_mobileperf.sweep import causes
from tf_mobileperf.sweep import runner as sweep_mod
from tf_mobileperf.sweep.config import SweepConfig
from tf_mobileperf.sweep.sizes import parse_size


@pytest.mark.slow
def test_tiny_sweep_with_a_real_oom(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", "--models", "cnn,dqn", "--batch-sizes", "1", "--steps", "5", "--out", str(out)]) == 0
    rows = json.loads((out / "results.json").read_text())
    assert [(r["model"], r["batch_size"]) for r in rows] == [("cnn", 1), ("dqn", 1)]
    assert all(r["success"] for r in rows)
    assert all(r["steps_measured"] == 2 and r["mem_peak_gb"] > 0.1 for r in rows)
    assert all(Path(r["logdir"]).parent == out / "runs" and (Path(r["logdir"]) / "train").is_dir() for r in rows)
    with open(out / "results.csv") as f:
        assert len(list(csv.DictReader(f))) == 2

    # 224x224 inputs at batch 64 need far more than 1 GiB: a real allocation failure in the child, raised as
    # ResourceExhaustedError or, where the allocation that fails is TensorFlow's own C++, a SIGSEGV.
    limited = tmp_path / "limited"
    oom_sweep = ["sweep", "--models", "cnn", "--batch-sizes", "1,64", "--input-size", "224", "--memory-limit", "1GiB"]
    oom_sweep += ["--steps", "4", "--out", str(limited)]
    assert main(oom_sweep) == 0
    small, big = json.loads((limited / "results.json").read_text())
    assert small["success"] is True and "RLIMIT_AS" in small["memory_limit_emulated_by"]
    assert big["success"] is False and causes.is_oom(big), big["cause"]
    assert big["memory_limit_bytes"] == 2**30

    # Resume: nothing left to run, the rows stay.
    before = (limited / "results.json").read_text()
    assert main(oom_sweep) == 0
    assert (limited / "results.json").read_text() == before

    assert main(["plot", str(limited)]) == 0
    for name in ("step_time", "throughput", "gpu_util", "cpu_util", "power", "energy", "memory"):
        assert (limited / f"{name}.png").stat().st_size > 5000, name
    assert (limited / "report.html").stat().st_size > 50000  # the figures are in it
    # The limit is drawn in its own quantity (the child's address space under RLIMIT_AS), batch 64 marked
    # out of memory on it; the process's peak RSS and address space of batch 1 lie under it.
    process = figures(json.loads((limited / "results.json").read_text()))[-1].panels[0]
    (limit,) = process.limits
    assert "RLIMIT_AS" in limit.label and limit.points[0][0] == 1
    assert [(f.oom, f.other) for f in process.failures] == [([64], [])]
    assert process.failures[0].at == max(v for _, v in limit.points)
    rss, address_space = process.series
    assert rss.points == [(1, small["proc_peak_gb"])] and address_space.points == [(1, small["limited_peak_gb"])]
    assert small["proc_peak_gb"] < small["limited_peak_gb"] <= small["limited_cap_gb"] == limit.points[0][1]


def test_find_max_batch_doubles_then_bisects(tmp_path, monkeypatch):
    tried = []

    def fake_run_one(model, batch_size, config):
        tried.append(batch_size)
        return {"model": model, "batch_size": batch_size, "success": batch_size <= 37}

    monkeypatch.setattr(sweep_mod, "run_one", fake_run_one)
    size, _ = sweep_mod.find_max_batch("cnn", SweepConfig(out=tmp_path))
    assert size == 37
    assert tried[:7] == [1, 2, 4, 8, 16, 32, 64] and len(tried) == 7 + 5


def test_child_killed_by_sigkill_is_a_failed_config():
    assert causes.exit_cause(-9, "").startswith("killed by SIGKILL")


@pytest.mark.parametrize(
    "text,value", [("8GiB", 8 * 2**30), ("512MiB", 512 * 2**20), ("2GB", 2 * 10**9), ("1e9", 10**9)]
)
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "8 parsecs", "-1GiB", "GiB", "0"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_sweep_rejects_unknown_model(capsys):
    with pytest.raises(SystemExit):
        main(["sweep", "--models", "alexnet", "--out", "x"])
    assert "unknown model" in capsys.readouterr().err


@pytest.mark.slow
def test_zoo_builds_every_model_and_trains_a_step():
    import numpy as np

    from tf_mobileperf import zoo

    for name in ("cnn", "lstm", "dqn", "dcgan", "bert", "nmt"):
        spec = zoo.get(name)
        model = spec.build()
        x, y = spec.synthetic(batch_size=2, batches=1)
        history = model.fit(x, y, batch_size=2, epochs=1, verbose=0)
        assert all(np.isfinite(v[0]) for v in history.history.values()), name
    with pytest.raises(ValueError, match="known"):
        zoo.get("alexnet")


def test_find_max_batch_on_the_command_line_prints_each_run_as_it_finishes_and_where_they_are(
    tmp_path, monkeypatch, capsys
):
    from tf_mobileperf.cli.parser import main

    def fake_run_one(model, batch_size, config):
        fits = batch_size <= 5
        return {
            "model": model,
            "batch_size": batch_size,
            "success": fits,
            "step_time_s_mean": 0.002 * batch_size if fits else None,
            "proc_peak_gb": 0.5 + 0.1 * batch_size if fits else None,
            "cause": None if fits else "out of memory (ResourceExhaustedError)",
            "config": config.key(),
        }

    monkeypatch.setattr(sweep_mod, "run_one", fake_run_one)
    assert main(["sweep", "--models", "cnn", "--find-max-batch", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "cnn: searching for the largest batch that fits, from batch 1 (one run each):"
    assert lines[1:6] == [
        "  batch     1: fits, step 2.0 ms, process peak 0.600 GiB",
        "  batch     2: fits, step 4.0 ms, process peak 0.700 GiB",
        "  batch     4: fits, step 8.0 ms, process peak 0.900 GiB",
        "  batch     8: does not fit: out of memory (ResourceExhaustedError)",
        "  batch     6: does not fit: out of memory (ResourceExhaustedError)",
    ]
    assert lines[-2].startswith("cnn: largest batch that fits: 5 (")
    assert lines[-1].startswith(f"results: {tmp_path / 'results.csv'}   dashboard: ")
