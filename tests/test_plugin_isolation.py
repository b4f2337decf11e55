"""One malformed run never hides the others in the dashboard: a run whose summary is not JSON text (a float
tensor), or whose summary or report holds a field of the wrong type, is listed (or answered) as the error it
is, naming the field, and every other run's routes still answer 200. A NaN in a summary or report is null,
never a refused response. Runs made by the real callback with the synthetic sensor; the dashboard's backend
through TensorBoard's WSGI app."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from helpers.plugin_client import client_for, get, write_summary


@pytest.fixture
def logdir(two_runs, tmp_path):
    root = tmp_path / "logs"
    shutil.copytree(two_runs, root)
    return root


def report_file(root, run):
    return root / run / "train/plugins/mobileperf/report.json"


def every_route_of_a_answers(client) -> None:
    assert get(client, "steps", run="a/train")[0] == 200
    assert get(client, "channels", run="a/train")[0] == 200
    assert get(client, "series", run="a/train", channel="VDD_IN")[0] == 200


@pytest.mark.slow
def test_a_run_whose_summary_is_a_float_tensor_hides_no_other_run(logdir):
    write_summary(logdir / "float/train", np.float32(1.5))
    client, _ = client_for(logdir)
    status, runs = get(client, "runs")
    assert status == 200
    by_run = {r["run"]: r["summary"] for r in runs}
    assert set(by_run) == {"a/train", "b/train", "float/train"}
    assert by_run["float/train"]["status"] == "unreadable"
    assert by_run["float/train"]["error"] == "unreadable run summary: ValueError: a float32 tensor, not JSON text"
    assert by_run["float/train"]["status_text"] == by_run["float/train"]["error"]
    assert by_run["a/train"]["status"] == "finished" and by_run["a/train"]["status_text"] == "trained"
    every_route_of_a_answers(client)
    status, body = get(client, "steps", run="float/train")  # it has no report: its route says why
    assert status == 422 and "float/train: unreadable run summary" in body["error"]


def test_a_summary_with_a_field_of_the_wrong_type_is_listed_as_that_field(logdir):
    write_summary(logdir / "lies/train", json.dumps({"status": "finished", "success": "no", "batch_size": 8}))
    client, _ = client_for(logdir)
    by_run = {r["run"]: r["summary"] for r in get(client, "runs")[1]}
    assert by_run["lies/train"] == {
        "error": "unreadable run summary: field 'success' must be true or false, got 'no'",
        "status": "unreadable",
        "status_text": "unreadable run summary: field 'success' must be true or false, got 'no'",
    }
    every_route_of_a_answers(client)


def test_a_nan_in_a_summary_is_null_and_the_runs_list_still_answers(logdir):
    write_summary(logdir / "nan/train", '{"status": "finished", "success": true, "energy_total": NaN, "batch_size": 4}')
    client, _ = client_for(logdir)
    status, runs = get(client, "runs")
    assert status == 200
    nan = {r["run"]: r["summary"] for r in runs}["nan/train"]
    assert nan["energy_total"] is None and nan["success"] is True and nan["status_text"] == "trained"


def test_a_report_with_a_field_of_the_wrong_type_is_422_naming_it_and_the_others_answer(logdir):
    path = report_file(logdir, "a")
    path.write_text(json.dumps(json.loads(path.read_text()) | {"success": "no"}))
    client, _ = client_for(logdir)
    status, body = get(client, "steps", run="a/train")
    assert status == 422
    assert (
        body["error"] == "unreadable data: a/train/plugins/mobileperf/report.json: field 'success' must be true "
        "or false, got 'no'"
    )
    assert get(client, "steps", run="b/train")[0] == 200
    status, runs = get(client, "runs")  # the runs list marks it too
    by_run = {r["run"]: r["summary"] for r in runs}
    assert status == 200 and by_run["a/train"]["status"] == "unreadable"
    assert (
        by_run["a/train"]["status_text"] == "unreadable report: a/train/plugins/mobileperf/report.json: field "
        "'success' must be true or false, got 'no'"
    )
    assert (by_run["b/train"]["status"], by_run["b/train"]["status_text"]) == ("finished", "trained")
    path.write_text(json.dumps(json.loads(path.read_text()) | {"success": True}))  # mended: read again
    assert {r["run"]: r["summary"] for r in get(client, "runs")[1]}["a/train"]["status"] == "finished"


def test_a_nan_in_a_report_is_served_as_null(logdir):
    path = report_file(logdir, "a")
    report = json.loads(path.read_text())
    report["steps"][5]["energy_j"]["total"] = float("nan")
    path.write_text(json.dumps(report))  # Python writes NaN
    client, _ = client_for(logdir)
    status, steps = get(client, "steps", run="a/train")
    assert status == 200 and steps["steps"][5]["energy_j"]["total"] is None
    assert steps["steps"][4]["energy_j"]["total"] > 0
