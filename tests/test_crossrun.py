"""The one cross-run analysis (tf_mobileperf.analysis.crossrun) that ``mobileperf plot``, report.html and the
MobilePerf tab's /crossrun route share: rows of runs on two boards (replays of two logs on one machine), two
runs sharing a point, a failure, the best batch size per board; and the route's answer over real runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tf_mobileperf.analysis import boards, crossrun
from tf_mobileperf.analysis import rows as run_rows
from tf_mobileperf.analysis.colours import model_colour, shade

SRC = Path(__file__).parents[1] / "tensorboard_plugin" / "frontend" / "src"


def summary(model: str, batch_size: int, replay: str, energy: float | None, samples_per_s: float, **more) -> dict:
    """A run's report summary as the /runs route lists it: a replay on host "vm" of ``replay``."""
    return {
        "model": model,
        "batch_size": batch_size,
        "success": True,
        "steps_measured": 10,
        "energy_total": None if energy is None else energy * 10,
        "energy_per_sample_j": None if energy is None else energy / batch_size,
        "samples_per_s": samples_per_s,
        "step_time_s": {"mean": 0.02},
        "power_avg_w": {"VDD_IN": 5.0, "total": 5.0},
        "sensors": [{"name": "replay", "channels": [{"name": "VDD_IN", "kind": "power", "group": "total"}]}],
        "device": {"hostname": "vm", "replay_of": f"/logs/{replay}"},
        **more,
    }


RUNS = {
    "tx2/mlp-bs1/train": summary("mlp", 1, "tx2.log", 0.10, 100.0),
    "tx2/mlp-bs4/train": summary("mlp", 4, "tx2.log", 0.20, 300.0),
    "tx2/wide-bs4/train": summary("wide", 4, "tx2.log", 0.40, 150.0),
    "tx2/wide-bs16/train": summary(
        "wide", 16, "tx2.log", None, 0.0, success=False, failed_step=3, error="MemoryError: out of memory\nmore"
    ),
    "orin-mlp-bs1/train": summary("mlp", 1, "orin.log", 0.06, 180.0),
    "orin-mlp-bs4/train": summary("mlp", 4, "orin.log", 0.08, 500.0),
    "orin-mlp-bs4-again/train": summary("mlp", 4, "orin.log", 0.12, 400.0),
}
TX2, ORIN = "vm, replay of tx2.log", "vm, replay of orin.log"


def rows() -> list[dict]:
    return [run_rows.row_of_summary(run, s) for run, s in RUNS.items()]


def test_a_summary_becomes_a_sweep_row_on_its_replayed_board():
    row = run_rows.row_of_summary("tx2/mlp-bs4/train", RUNS["tx2/mlp-bs4/train"])
    assert run_rows.board_of(row) == TX2 and row["folder"] == "tx2" and row["run"] == "tx2/mlp-bs4/train"
    assert row["energy_per_step_j"] == pytest.approx(0.2) and row["step_time_s_mean"] == 0.02
    failed = run_rows.row_of_summary("x/train", RUNS["tx2/wide-bs16/train"])
    assert failed["success"] is False and failed["cause"] == "MemoryError: out of memory"
    assert run_rows.row_of_summary("solo/train", {"batch_size": 2})["folder"] == "solo"
    assert run_rows.board_of(run_rows.row_of_summary("a", {"device": {"board_type": "tx2", "hostname": "h"}})) == "tx2"


def test_the_chart_keeps_two_boards_apart_and_averages_a_shared_point():
    out = crossrun.chart(rows())
    assert out["quantity"] == "energy_per_step" and out["grouping"] == "board_model"
    assert [g["label"] for g in out["groupings"]] == ["board and model", "model", "run folder"]
    assert {"key": "power:total", "label": "mean power: total rail group", "unit": "W", "measured": True} in out[
        "quantities"
    ]
    assert {"key": "gpu_util", "label": "GPU utilization", "unit": "%", "measured": False} in out["quantities"]
    assert out["x"] == [1, 4, 16]
    lines = {line["label"]: line for line in out["lines"]}
    assert list(lines) == [f"mlp on {ORIN}", f"mlp on {TX2}", f"wide on {TX2}"]
    shared = lines[f"mlp on {ORIN}"]["points"][1]
    assert shared == {
        "batch_size": 4,
        "mean": pytest.approx(0.1),
        "n": 2,
        "min": pytest.approx(0.08),
        "max": pytest.approx(0.12),
        "runs": ["orin-mlp-bs4/train", "orin-mlp-bs4-again/train"],
    }
    assert lines[f"mlp on {TX2}"]["points"][1]["n"] == 1 and lines[f"mlp on {TX2}"]["points"][2] is None
    # Colours: the model's, a shade of it for its line on the other board.
    assert [line["colour"] for line in out["lines"]] == [
        model_colour("mlp"),
        shade(model_colour("mlp"), 1),
        model_colour("wide"),
    ]
    assert out["failed"] == [
        {
            "batch_size": 16,
            "y": None,
            "group": f"wide on {TX2}",
            "text": "tx2/wide-bs16/train: batch size 16 failed at step 3: MemoryError: out of memory",
        }
    ]
    by_model = crossrun.chart(rows(), "energy_per_step", "model")
    mlp = by_model["lines"][0]["points"][1]
    assert (mlp["n"], mlp["min"], mlp["max"]) == (3, pytest.approx(0.08), pytest.approx(0.2))
    assert by_model["failed"][0]["group"] == "wide"
    folders = crossrun.chart(rows(), "samples_per_s", "folder")
    assert [line["label"] for line in folders["lines"]] == ["orin-mlp-bs1", "orin-mlp-bs4", "orin-mlp-bs4-again", "tx2"]


def test_best_batch_per_board_takes_the_mean_of_a_shared_point_and_says_why_there_is_none():
    out = crossrun.chart(rows())
    assert out["best"] == {
        "columns": ["board", "model", "most samples/s", "fewest J/sample"],
        "rows": [
            [ORIN, "mlp", "batch 4: 450 samples/s", "batch 4: 0.025 J/sample"],
            [TX2, "mlp", "batch 4: 300 samples/s", "batch 4: 0.05 J/sample"],
            [TX2, "wide", "batch 4: 150 samples/s", "batch 4: 0.1 J/sample"],
        ],
    }
    failed = [r for r in rows() if r["model"] == "wide" and r["batch_size"] == 16]
    assert boards.best_batch(failed + rows()[:1])[1].samples_per_s.text() == boards.NO_SUCCESS
    # One board: no table, no board grouping.
    tx2 = [r for r in rows() if run_rows.board_of(r) == TX2]
    one = crossrun.chart(tx2)
    assert one["best"] is None and [g["key"] for g in one["groupings"]] == ["model", "folder"]


def test_an_unmeasured_quantity_says_why_and_an_unknown_key_is_refused():
    unmeasured = crossrun.chart(rows(), "gpu_util")
    assert unmeasured["empty_reason"] == "no run measured GPU utilization (not measured on this device)"
    assert crossrun.chart([])["empty_reason"] == crossrun.NO_BATCH_SIZE
    with pytest.raises(crossrun.UnknownKey):
        crossrun.chart(rows(), "watts")
    with pytest.raises(crossrun.UnknownKey):
        crossrun.chart(rows(), None, "colour")


def test_the_dashboard_scripts_no_longer_copy_the_analysis():
    for script in SRC.glob("*.js"):
        text = script.read_text()
        for copied in ("UNKNOWN_BOARD", "NO_SUCCESS", run_rows.UNKNOWN_BOARD, boards.NO_SUCCESS, "successStats"):
            assert copied not in text, (script.name, copied)
        assert not re.search(r"function (boardOf|groupPower|quantities|groupColours)\b", text), script.name


# -- the route -------------------------------------------------------------------------------------------------
@pytest.fixture
def logdir(sized_runs):
    return sized_runs


def test_route_serves_the_analysis_of_the_runs_summaries(logdir):
    from helpers.plugin_client import client_for, get

    client, _ = client_for(logdir)
    status, runs = get(client, "runs")
    by_run = {r["run"]: r["summary"] for r in runs}
    status, out = get(client, "crossrun")
    assert status == 200
    assert out == crossrun.chart([run_rows.row_of_summary(run, s) for run, s in sorted(by_run.items())])
    assert out["quantity"] == "energy_per_step" and out["grouping"] == "model" and out["x"] == [8, 32]
    (line,) = out["lines"]
    assert line["label"] == "mlp" and line["colour"] == model_colour("mlp")
    for size, point in zip((8, 32), line["points"]):
        s = by_run[f"bs{size}/train"]
        assert point["n"] == 1 and point["runs"] == [f"bs{size}/train"]
        assert point["mean"] == pytest.approx(s["energy_total"] / s["steps_measured"])
    assert out["failed"] == [] and out["best"] is None and out["empty_reason"] is None
    status, power = get(client, "crossrun", quantity="power:total", grouping="folder")
    assert status == 200 and [line["label"] for line in power["lines"]] == ["bs8", "bs32"]  # natural order
    assert power["lines"][1]["points"][1]["mean"] == pytest.approx(by_run["bs32/train"]["power_avg"])
    status, body = get(client, "crossrun", quantity="watts")
    assert status == 400 and "unknown quantity 'watts'" in body["error"]


def test_a_run_whose_process_peak_is_text_loses_that_value_not_the_chart():
    # Seen: a summary with "peak": "lots" in its process-memory channel made /crossrun answer 422 for every run.
    sensors = [{"channels": [{"name": "proc_rss", "kind": "memory", "device": "process"}]}]
    base = {"status": "trained", "model": "cnn", "success": True, "sensors": sensors}
    good = run_rows.row_of_summary("good", base | {"batch_size": 8, "channels": {"proc_rss": {"peak": 3 * 2**30}}})
    bad = run_rows.row_of_summary("bad", base | {"batch_size": 4, "channels": {"proc_rss": {"peak": "lots"}}})
    assert bad["proc_peak_gb"] is None and good["proc_peak_gb"] == 3.0
    chart = crossrun.chart([bad, good], "proc_peak", "model")
    assert chart["x"] == [4, 8] and chart["lines"][0]["points"][0] is None
    assert chart["lines"][0]["points"][1]["mean"] == 3.0
