"""The sweep and the command line under faults: every user error is one line
and exit status 2 from a real ``mobileperf`` process; sweep results keyed on
the whole configuration (tiny real sweeps, sensors replayed from a recorded
TX2 tegrastats log); a configuration that did not run for a reason of its
own is retried, not cached; one sweep per directory; a child's summary read
from the directory its measurement claimed; OOM marked only for OOM."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tf_mobileperf.analysis.rows import lines
from tf_mobileperf.cli.parser import main
from tf_mobileperf.figures.panels import failures
from tf_mobileperf.format.names import CLAIM_FILE
from tf_mobileperf.sweep import runner as sweep_mod
from tf_mobileperf.sweep.config import SweepConfig

from conftest import DATA

REPLAY = f"replay:{DATA / 'tx2_tegrastats.log'}"
#: A tiny configuration: cnn at batch 1, 4 steps of which 1 is warm-up, sensors replayed.
TINY = ["--models", "cnn", "--batch-sizes", "1", "--steps", "4", "--warmup-steps", "1", "--sensors", REPLAY]


def cli(*args: str) -> subprocess.CompletedProcess:
    """``mobileperf ARGS`` as a real process."""
    return subprocess.run(
        [sys.executable, "-m", "tf_mobileperf.cli.parser", *args], capture_output=True, text=True, timeout=600
    )


def error_lines(stderr: str) -> list[str]:
    """What the command itself wrote to stderr (TensorFlow's import prints log lines of its own)."""
    return [line for line in stderr.splitlines() if line.startswith("mobileperf")]


#: The cases of the issue, each run as a real ``mobileperf`` process; the others (same code) run in-process,
#: as every process imports TensorFlow (seconds of CPU each).
REAL_PROCESS = [
    "combine_missing_directory",
    "combine_on_a_file",
    "plot_missing_results",
    "plot_corrupt_results",
    "sensors_period_0",
    "sensors_period_nan",
    "sweep_out_is_a_file",
    "sweep_corrupt_results",
    "sweep_steps_0",
    "sweep_warmup_steps_negative",
    "sweep_input_size_negative",
    "sweep_replay_speed_nan",
]
IN_PROCESS = [
    "plot_missing_directory",
    "plot_results_not_rows",
    "sensors_seconds_nan",
    "sweep_no_step_measured",
    "sweep_replay_log_missing",
    "sweep_replay_speed_inf",
    "sweep_replay_speed_0",
    "predict_steps_0",
    "sweep_power_modes_not_integers",
    "sweep_power_modes_negative",
    "sweep_jetson_clocks_maybe",
    "sweep_find_max_batch_in_power_modes",
]


def _cases(tmp: Path) -> dict[str, tuple[list[str], str]]:
    """Each case: the arguments, and what its error line must say."""
    (tmp / "a_file").write_text("x")
    (tmp / "empty").mkdir()
    for name, text in (
        ("corrupt_plot", "{not json"),
        ("corrupt_sweep", '[{"model": "cnn", "batch_'),
        ("not_rows", '{"model": "cnn"}'),
    ):
        (tmp / name).mkdir()
        (tmp / name / "results.json").write_text(text)
    out = str(tmp / "out")
    return {
        "combine_missing_directory": (["combine", str(tmp / "missing")], "does not exist"),
        "combine_on_a_file": (["combine", str(tmp / "a_file")], "is not a directory"),
        "plot_missing_directory": (["plot", str(tmp / "missing")], "does not exist"),
        "plot_missing_results": (["plot", str(tmp / "empty")], "no sweep results at"),
        "plot_corrupt_results": (["plot", str(tmp / "corrupt_plot")], "corrupt_plot/results.json is not a sweep's"),
        "plot_results_not_rows": (["plot", str(tmp / "not_rows")], "not a list of rows"),
        "sensors_period_0": (["sensors", "--period-ms", "0", "--seconds", "0"], "sample period must be >="),
        "sensors_period_nan": (["sensors", "--period-ms", "nan", "--seconds", "0"], "finite number"),
        "sensors_seconds_nan": (["sensors", "--seconds", "nan"], "--seconds: must be a finite number"),
        "sweep_out_is_a_file": (["sweep", *TINY[:4], "--out", str(tmp / "a_file")], "is not a directory"),
        "sweep_corrupt_results": (
            ["sweep", *TINY, "--out", str(tmp / "corrupt_sweep")],
            "corrupt_sweep/results.json is not a sweep's",
        ),
        "sweep_steps_0": (["sweep", *TINY[:4], "--steps", "0", "--out", out], "--steps: must be >= 1, got 0"),
        "sweep_warmup_steps_negative": (
            ["sweep", *TINY[:4], "--warmup-steps", "-1", "--out", out],
            "--warmup-steps: must be >= 0, got -1",
        ),
        "sweep_input_size_negative": (
            ["sweep", *TINY[:4], "--input-size", "-32", "--out", out],
            "--input-size: must be >= 1, got -32",
        ),
        "sweep_no_step_measured": (
            ["sweep", *TINY[:4], "--steps", "3", "--warmup-steps", "3", "--out", out],
            "no step would be measured",
        ),
        "sweep_replay_log_missing": (
            ["sweep", *TINY[:4], "--sensors", f"replay:{tmp / 'missing.log'}", "--out", out],
            "tegrastats log not found",
        ),
        "sweep_replay_speed_nan": (
            ["sweep", *TINY[:4], "--sensors", f"{REPLAY}@nan", "--out", out],
            "replay speed must be a finite number > 0, got nan",
        ),
        "sweep_replay_speed_inf": (
            ["sweep", *TINY[:4], "--sensors", f"{REPLAY}@inf", "--out", out],
            "replay speed must be a finite number > 0, got inf",
        ),
        "sweep_replay_speed_0": (
            ["sweep", *TINY[:4], "--sensors", f"{REPLAY}@0", "--out", out],
            "replay speed must be a finite number > 0, got 0",
        ),
        "predict_steps_0": (["predict", "--model", "cnn", "--steps", "0", "--out", out], "--steps: must be >= 1"),
        "sweep_power_modes_not_integers": (
            ["sweep", *TINY[:4], "--power-modes", "0,max", "--out", out],
            "--power-modes: power modes must be comma-separated integers",
        ),
        "sweep_power_modes_negative": (
            ["sweep", *TINY[:4], "--power-modes", "-1", "--out", out],
            "--power-modes: power modes must be integers >= 0",
        ),
        "sweep_jetson_clocks_maybe": (
            ["sweep", *TINY[:4], "--jetson-clocks", "maybe", "--out", out],
            "--jetson-clocks: invalid choice: 'maybe'",
        ),
        "sweep_find_max_batch_in_power_modes": (
            ["sweep", *TINY[:4], "--find-max-batch", "--power-modes", "0", "--out", out],
            "--find-max-batch searches in the board's current",
        ),
    }


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> tuple[Path, dict[str, tuple[list[str], str]], dict[str, tuple[int, str]]]:
    """The cases' files, and the REAL_PROCESS cases run, a few processes at a time: (exit status, stderr)."""
    tmp = tmp_path_factory.mktemp("cli")
    cases = _cases(tmp)
    assert sorted(cases) == sorted(REAL_PROCESS + IN_PROCESS)
    with ThreadPoolExecutor(max_workers=4) as pool:
        procs = pool.map(lambda name: cli(*cases[name][0]), REAL_PROCESS)
        ran = {name: (proc.returncode, proc.stderr) for name, proc in zip(REAL_PROCESS, procs)}
    return tmp, cases, ran


def _in_process(args: list[str], capsys) -> tuple[int, str]:
    try:
        status = main(args)
    except SystemExit as exc:  # argparse
        status = exc.code
    return status, capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("case", REAL_PROCESS + IN_PROCESS)
def test_cli_error_is_one_line_and_exit_status_2(cases, case, capsys):
    tmp, arguments, ran = cases
    args, expected = arguments[case]
    status, stderr = ran[case] if case in ran else _in_process(args, capsys)
    assert status == 2, stderr
    assert "Traceback" not in stderr
    lines = error_lines(stderr)
    assert len(lines) == 1 and "error:" in lines[0] and expected in lines[0], stderr
    assert not (tmp / "out" / "results.json").exists()  # no child started, nothing recorded


def test_corrupt_results_are_left_as_they_were(cases):
    tmp = cases[0]
    assert (tmp / "corrupt_sweep" / "results.json").read_text() == '[{"model": "cnn", "batch_'


@pytest.mark.slow
def test_rerun_with_other_steps_runs_again_and_the_same_steps_does_not(tmp_path):
    out = tmp_path / "sweep"
    assert main(["sweep", *TINY, "--out", str(out)]) == 0
    assert main(["sweep", *TINY, "--steps", "5", "--out", str(out)]) == 0
    rows = json.loads((out / "results.json").read_text())
    assert [(r["model"], r["batch_size"], r["steps_measured"]) for r in rows] == [("cnn", 1, 3), ("cnn", 1, 4)]
    assert [r["config"]["steps"] for r in rows] == [4, 5]
    assert all(r["success"] and r["config"]["sensors"] == REPLAY for r in rows)
    assert rows[0]["logdir"] != rows[1]["logdir"]  # each its own TensorBoard run, both kept
    assert all(Path(r["logdir"], "summary.json").exists() for r in rows)

    before = (out / "results.json").read_text()
    assert main(["sweep", *TINY, "--out", str(out)]) == 0  # the first configuration again: done
    assert (out / "results.json").read_text() == before


@pytest.mark.slow
def test_missing_sensor_log_is_retried_not_cached(tmp_path):
    log = tmp_path / "tx2.log"
    shutil.copy(DATA / "tx2_tegrastats.log", log)
    config = SweepConfig(out=tmp_path / "sweep", steps=4, warmup_steps=1, sensors=f"replay:{log}")
    log.unlink()  # gone after the arguments were checked: the child cannot set the run up
    (row,) = sweep_mod.sweep(["cnn"], [1], config)
    assert not (config.out / "results.json").exists()
    assert row["success"] is False and row["retry"] is True
    assert "cannot set up cnn batch 1" in row["cause"] and "tegrastats log not found" in row["cause"]

    shutil.copy(DATA / "tx2_tegrastats.log", log)
    (row,) = sweep_mod.sweep(["cnn"], [1], config)  # retried, not answered from a cache
    assert row["success"] is True and "retry" not in row and row["steps_measured"] == 3
    assert json.loads((config.out / "results.json").read_text()) == [row]


@pytest.mark.slow
def test_second_sweep_into_a_directory_in_use_exits_2_and_a_dead_sweep_frees_it(tmp_path, capsys):
    out = tmp_path / "sweep"
    first = subprocess.Popen(
        [sys.executable, "-m", "tf_mobileperf.cli.parser", "sweep", *TINY, "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not (out / "runs").exists():  # its child is running
            assert first.poll() is None, "the first sweep ended before its child was seen"
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGSTOP)  # holds the lock, stopped, for as long as the test needs
        assert first.poll() is None

        assert main(["sweep", *TINY, "--out", str(out)]) == 2
        lines = error_lines(capsys.readouterr().err)
        assert lines == [
            f"mobileperf: error: {out} is in use by another sweep (pid {first.pid}); "
            "wait for it to end or choose another output directory"
        ]
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the sweep and its child die; the kernel drops the lock
        first.wait(timeout=60)

    assert main(["sweep", *TINY, "--out", str(out)]) == 0
    (row,) = json.loads((out / "results.json").read_text())
    assert row["success"] is True and row["steps_measured"] == 3


@pytest.mark.slow
def test_child_writes_its_summary_where_its_measurement_went(tmp_path):
    logdir = tmp_path / "cnn-bs1"
    logdir.mkdir()
    (logdir / CLAIM_FILE).write_text('{"pid": 1}')  # another measurement holds the logdir
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tf_mobileperf.sweep.child",
            "--model",
            "cnn",
            "--batch-size",
            "1",
            "--steps",
            "4",
            "--warmup-steps",
            "1",
            "--sensors",
            REPLAY,
            "--logdir",
            str(logdir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, stderr = child.communicate(timeout=300)
    assert child.returncode == 0, stderr
    assert not (logdir / "summary.json").exists()
    summary = json.loads((logdir / "run-2" / "summary.json").read_text())
    assert summary["success"] is True and summary["steps_measured"] == 3
    assert sweep_mod._claimed_by(logdir, child.pid) == logdir / "run-2"  # where the sweep reads it from
    assert sweep_mod._claimed_by(logdir, child.pid + 10**6) == logdir  # a child that claimed nothing


def test_killed_child_with_a_torn_steps_csv_keeps_its_whole_steps(tmp_path):
    (tmp_path / "steps.csv").write_text(
        "step,duration_s,warmup,failed,energy_j/total,mem_peak_gb\n"
        "0,0.5,1,0,,1.0\n1,0.25,0,0,,1.0\n2,0.75,0,0,,1.1\n3,0.2"
    )  # killed mid-row
    row = sweep_mod._row(-signal.SIGKILL, "", tmp_path, SweepConfig(out=tmp_path, sensors="none"))
    assert row["cause"].startswith("killed by SIGKILL") and "retry" not in row
    assert row["steps_on_disk"] == 3 and row["steps_measured"] == 2 and row["step_time_s"]["mean"] == 0.5


@pytest.mark.parametrize(
    "returncode,stderr,result",
    [
        (-signal.SIGKILL, "", True),
        (None, "", True),
        (1, "MemoryError", True),  # the model's own run ended it
        (3, "sweep child: cannot set up cnn batch 1: tegrastats log not found: x.log", False),
        (1, "Traceback ...\nAttributeError: 'NoneType' object has no attribute 'x'", False),  # the harness crashed
        (-signal.SIGTERM, "", False),
        (-signal.SIGINT, "", False),  # stopped from outside
    ],
)
def test_only_the_models_own_failures_are_results(tmp_path, returncode, stderr, result):
    row = sweep_mod._row(returncode, stderr, tmp_path, SweepConfig(out=tmp_path, sensors="none"))
    assert row["success"] is False and bool(row.get("retry")) is (not result), row


def test_plot_marks_out_of_memory_only_for_out_of_memory(tmp_path, capsys):
    rows = [
        {"model": "cnn", "batch_size": 1, "success": True, "mem_peak_gb": 1.0},
        {"model": "cnn", "batch_size": 2, "success": False, "cause": "timed out"},
        {"model": "cnn", "batch_size": 4, "success": False, "cause": "out of memory"},
        {"model": "cnn", "batch_size": 8, "success": False, "cause": "killed by SIGSEGV"},
        {
            "model": "cnn",
            "batch_size": 16,
            "success": False,
            "cause": "killed by SIGKILL (the kernel's OOM killer, most likely)",
        },
        {
            "model": "vgg19",
            "batch_size": 64,
            "success": False,
            "cause": "killed by SIGSEGV under the emulated memory limit (an allocation failure, most likely)",
        },
    ]
    assert {f.label: (f.oom, f.other) for f in failures(lines(rows))} == {"cnn": ([4, 16], [2, 8]), "vgg19": ([64], [])}
    (tmp_path / "results.json").write_text(json.dumps(rows))
    assert main(["plot", str(tmp_path)]) == 0
    assert (tmp_path / "memory.png").stat().st_size > 1000


def test_plot_draws_a_line_per_configuration_of_a_model():
    rows = [
        {"model": "cnn", "batch_size": b, "success": True, "config": {"steps": s, "sensors": "none"}}
        for s in (4, 5)
        for b in (1, 2)
    ]
    assert {label: [r["batch_size"] for r in group] for label, group in lines(rows).items()} == {
        "cnn (steps 4)": [1, 2],
        "cnn (steps 5)": [1, 2],
    }
