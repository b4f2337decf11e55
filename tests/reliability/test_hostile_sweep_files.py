"""Hostile files where `mobileperf plot` and `combine` read a sweep's results and a worker's steps: a FIFO is
refused at once instead of read forever, and a 400-digit number or 600-deep nesting is one line, never a
traceback (they were `OverflowError` and `RecursionError`). In-process, each with a time limit."""

from __future__ import annotations

import os
import time

import pytest

from tf_mobileperf.cli.parser import main
from tf_mobileperf.format import finite_json
from tf_mobileperf.format.steps_csv import read_steps_counted
from tf_mobileperf.sweep.results import SweepError, read_rows

ROW = '{"model": "cnn", "batch_size": 1, "success": true, "step_time_s_mean": %s}'


def test_an_integer_beyond_a_float_is_null_like_1e999():
    assert finite_json.loads('{"a": 1%s, "b": 12, "c": 1e999}' % ("0" * 400)) == {"a": None, "b": 12, "c": None}
    assert finite_json.loads("-" + "9" * 400) is None


def test_a_fifo_as_results_json_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "results.json")  # no writer: a blocking open would wait for ever
    started = time.monotonic()
    with pytest.raises(SweepError, match="results.json is not a sweep's results.json .*is not a regular file"):
        read_rows(tmp_path / "results.json")
    assert time.monotonic() - started < 2


def test_a_fifo_as_a_workers_steps_csv_reads_no_steps_at_once(tmp_path):
    os.mkfifo(tmp_path / "steps.csv")
    started = time.monotonic()
    found = read_steps_counted(tmp_path)
    assert (found.rows, found.torn) == ([], 0)
    assert time.monotonic() - started < 2


def test_deep_nesting_is_one_line_naming_the_file(tmp_path):
    (tmp_path / "results.json").write_text("[" * 600 + "]" * 600)
    with pytest.raises(SweepError, match="(nests too deeply|not a list of rows)"):
        read_rows(tmp_path / "results.json")
    (tmp_path / "results.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SweepError, match="nests too deeply to be a sweep's results.json"):
        read_rows(tmp_path / "results.json")


def test_plot_of_a_sweep_with_a_400_digit_step_time_is_no_traceback(tmp_path, capsys):
    (tmp_path / "results.json").write_text("[" + ROW % ("1" + "0" * 400) + "," + ROW % "0.02" + "]")
    code = main(["plot", str(tmp_path)])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "OverflowError" not in err
    assert code in (0, 2)
