"""What a sweep measures by default and what its console says: enough measured steps for a mean (a warning
when asked for fewer), and "n/a" with its cause said once, never "null"."""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
from pathlib import Path

from tf_mobileperf.cli.parser import build_parser
from tf_mobileperf.cli.sweep_command import _print_rows
from tf_mobileperf.sweep.config import SweepConfig
from tf_mobileperf.sweep.defaults import MEASURED_STEPS
from tf_mobileperf.sweep.power_modes import PowerPlan
from tf_mobileperf.sweep.runner import warn_few_measured_steps

ROOT = Path(__file__).parent.parent
NO_POWER = "no power sensor: ina3221 (hwmon, JetPack 5/6): no ina3221 hwmon rails under /sys/bus/i2c"
NO_GPU = "no GPU device visible to tensorflow (tf.config.list_physical_devices('GPU') is empty)"


def test_the_defaults_measure_at_least_ten_steps_after_the_warm_up(tmp_path):
    for command in (["sweep", "--models", "cnn"], ["predict", "--model", "cnn"]):
        args = build_parser().parse_args([*command, "--out", str(tmp_path)])
        assert args.steps - args.warmup_steps >= MEASURED_STEPS >= 10, command
    assert SweepConfig(out=tmp_path).measured_steps >= 10


def test_fewer_measured_steps_are_one_warning_line(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="tf_mobileperf"):
        warn_few_measured_steps(SweepConfig(out=tmp_path))
        assert caplog.records == []
        warn_few_measured_steps(SweepConfig(out=tmp_path, steps=4))
    (record,) = caplog.records
    message = record.getMessage()
    assert record.levelno == logging.WARNING and "\n" not in message
    assert "--steps 4 with 3 warm-up steps measures 1 step per configuration" in message and "--steps 13" in message


def test_a_bad_argument_is_its_one_line_without_the_warning(tmp_path):
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tf_mobileperf.cli.parser",
            "sweep",
            "--models",
            "cnn",
            "--steps",
            "4",
            "--input-size",
            "8",
            "--out",
            str(tmp_path / "sweep"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=path),
    )
    (line,) = proc.stderr.strip().splitlines()  # no warning about --steps 4 before it
    assert proc.returncode == 2 and line.startswith("mobileperf: error: input size 8 for cnn is too small")


def _row(batch_size: int, **values) -> dict:
    return {
        "model": "lstm",
        "batch_size": batch_size,
        "success": True,
        "cause": None,
        "step_time_s_mean": 0.2,
        "samples_per_s": 40.0,
        "energy_per_step_j": None,
        "energy_per_sample_j": None,
        "proc_peak_gb": 1.0,
        "mem_peak_gb": 2.0,
        "gpu_mem_peak_gb": None,
        "unavailable": {"energy": NO_POWER, "power": NO_POWER, "gpu_mem_peak_gb": NO_GPU},
    } | values


def test_the_table_prints_n_a_and_says_each_cause_once_never_null(tmp_path, capsys):
    rows = [
        _row(8),
        _row(32),
        {"model": "lstm", "batch_size": 64, "success": False, "cause": "out of memory", "proc_peak_gb": None},
    ]
    assert _print_rows(argparse.Namespace(out=tmp_path), rows, PowerPlan()) == 0
    out = capsys.readouterr().out
    assert "null" not in out
    lines = out.splitlines()
    assert lines[1].split()[5:7] == ["n/a", "n/a"] and lines[1].split()[9] == "n/a"  # J/step, J/sample, GPU GiB
    assert [line for line in lines if "no power sensor" in line] == ["J/step, J/sample n/a: no power sensor"]
    assert [line for line in lines if NO_GPU in line] == [f"GPU GiB n/a: {NO_GPU}"]
    assert "out of memory" in lines[3]  # a failed row's cells are n/a for its own cause, in its row


def test_the_table_gives_the_processs_cpu_and_says_which_runs_ran_on_a_busy_machine(tmp_path, capsys):
    busy = {"verdict": "busy", "busy": True, "other_cpu_pct": 48.0, "steal_pct": 2.0}
    quiet = {"verdict": "quiet", "busy": False, "other_cpu_pct": 1.0, "steal_pct": 0.0}
    rows = [
        _row(8, process_cpu_util_avg=47.5, contention=quiet),
        _row(32, process_cpu_util_avg=45.0, contention=busy),
        _row(
            64,
            process_cpu_util_avg=None,
            unavailable={"process_cpu_util_avg": "the steps are marked on a simulated clock"},
        ),
    ]
    assert _print_rows(argparse.Namespace(out=tmp_path), rows, PowerPlan()) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[10:12] == ["47.5", "quiet"] and lines[2].split()[10:12] == ["45", "busy"]
    assert lines[3].split()[10:12] == ["n/a", "n/a"]
    assert "proc CPU% n/a: the steps are marked on a simulated clock" in lines
    (said,) = [line for line in lines if line.startswith("machine: ")]
    assert said.startswith("machine: 1 of 3 runs ran while other processes or the hypervisor took 10% or more")
