"""Sweeps over Jetson power modes, on fake ``nvpmodel`` and ``jetson_clocks`` put on PATH: shell scripts that
record every call in a file and keep the board's mode and clock state in files (``nvpmodel -q`` reads it back;
a mode change resets the clocks to the mode's own, as on a board; mode 5 asks for a reboot and stays put).
The board starts in mode 1 with jetson_clocks on, so a restore is seen in both files. Sensors: "none"
(the fake-run hook of tests/test_sweep.py where no child is needed; real children otherwise)."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tf_mobileperf.analysis.rows import lines
from tf_mobileperf.cli.parser import main
from tf_mobileperf.sweep import power_modes
from tf_mobileperf.sweep import runner as sweep_mod
from tf_mobileperf.sweep.config import SweepConfig

NVPMODEL = """#!/bin/sh
echo "nvpmodel $*" >> {state}/calls
case "$1" in
  -q) m=$(cat {state}/mode); [ "$m" = 0 ] && name=MAXN || name="MODE_$m"
      echo "NV Power Mode: $name"; echo "$m" ;;
  -m) if [ "$2" = 5 ]; then echo "NVPM WARN: Reboot required for changing to this power mode: 5"
        echo "NVPM WARN: DO YOU WANT TO REBOOT NOW? enter YES/yes to confirm:"; read answer; exit 0; fi
      echo "$2" > {state}/mode; echo off > {state}/clocks ;;
  *) exit 1 ;;
esac
"""
JETSON_CLOCKS = """#!/bin/sh
echo "jetson_clocks $*" | sed "s/ *$//" >> {state}/calls
case "$1" in
  --store) cp {state}/clocks "$2" ;;
  --restore) cp "$2" {state}/clocks ;;
  "") echo on > {state}/clocks ;;
  *) exit 1 ;;
esac
"""


@dataclasses.dataclass
class FakeBoard:
    """The fake tools' state: the mode and clocks now, and the calls made, in order."""

    state: Path

    def mode(self) -> str:
        return (self.state / "mode").read_text().strip()

    def clocks(self) -> str:
        return (self.state / "clocks").read_text().strip()

    def calls(self) -> list[str]:
        path = self.state / "calls"
        return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def board(tmp_path, monkeypatch) -> FakeBoard:
    """nvpmodel and jetson_clocks on PATH; the board in mode 1 with jetson_clocks on."""
    state, bin_dir = tmp_path / "board", tmp_path / "bin"
    state.mkdir()
    bin_dir.mkdir()
    (state / "mode").write_text("1\n")
    (state / "clocks").write_text("on\n")
    for name, text in (("nvpmodel", NVPMODEL), ("jetson_clocks", JETSON_CLOCKS)):
        (bin_dir / name).write_text(text.format(state=state))
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return FakeBoard(state)


@pytest.fixture
def fake_runs(board, monkeypatch) -> list[tuple]:
    """Replaces the child run: records (model, batch, the config's mode, the board's mode and clocks then)."""
    ran = []

    def run_one(model, batch_size, config):
        ran.append((model, batch_size, config.power_mode, int(board.mode()), board.clocks()))
        if model == "lstm" and config.power_mode == 2:
            raise RuntimeError("the harness broke in mode 2")
        return {
            "model": model,
            "batch_size": batch_size,
            "success": True,
            "config": config.key(),
            "energy_per_step_j": 1.0 + config.power_mode,
            "steps_measured": 3,
        }

    monkeypatch.setattr(sweep_mod, "run_one", run_one)
    return ran


def sweep_args(out: Path, models: str = "cnn", modes: str = "0,2", *extra: str) -> list[str]:
    return [
        "sweep",
        "--models",
        models,
        "--batch-sizes",
        "1,2",
        "--steps",
        "4",
        "--warmup-steps",
        "1",
        "--sensors",
        "none",
        "--power-modes",
        modes,
        "--settle-s",
        "0",
        "--out",
        str(out),
        *extra,
    ]


def restored(board: FakeBoard, calls: list[str]) -> bool:
    """The original mode back, then the stored clocks (in that order: a mode change resets the clocks).

    Queries change nothing and are left out: a configuration's child killed as the sweep is interrupted
    may have asked ``nvpmodel -q`` for its report, and that query (in a session of its own, so that its
    timeout kills all of it) can end after the restore."""
    changes = [c for c in calls if c != "nvpmodel -q"]
    return (board.mode(), board.clocks()) == ("1", "on") and changes[-2:] == [
        "nvpmodel -m 1",
        f"jetson_clocks --restore {calls[1].split()[-1]}",
    ]


def test_sweep_over_two_modes_runs_each_configuration_in_each_mode_and_restores_the_board(board, fake_runs, tmp_path):
    out = tmp_path / "sweep"
    assert main(sweep_args(out, "cnn", "0,2", "--jetson-clocks", "off")) == 0
    # Mode after mode; each configuration ran with the board in its mode, at the mode's own clocks.
    assert fake_runs == [("cnn", b, m, m, "off") for m in (0, 2) for b in (1, 2)]
    calls = board.calls()
    assert calls[:2] == ["nvpmodel -q", f"jetson_clocks --store {out / power_modes.CLOCKS_STATE_FILE}"]
    assert calls[2:6] == ["nvpmodel -m 0", "nvpmodel -q", "nvpmodel -m 2", "nvpmodel -q"]
    assert restored(board, calls) and len(calls) == 8

    rows = json.loads((out / "results.json").read_text())
    assert [(r["batch_size"], r["power_mode"], r["power_mode_name"], r["jetson_clocks"]) for r in rows] == [
        (1, 0, "MAXN", "off"),
        (2, 0, "MAXN", "off"),
        (1, 2, "MODE_2", "off"),
        (2, 2, "MODE_2", "off"),
    ]
    assert [r["config"]["power_mode"] for r in rows] == [0, 0, 2, 2]
    with open(out / "results.csv") as f:
        assert [(c["power_mode"], c["power_mode_name"]) for c in csv.DictReader(f)] == [
            ("0", "MAXN"),
            ("0", "MAXN"),
            ("2", "MODE_2"),
            ("2", "MODE_2"),
        ]
    assert list(lines(rows)) == ["cnn (mode 0)", "cnn (mode 2)"]  # a series per model and mode

    fake_runs.clear()
    assert main(sweep_args(out, "cnn", "2,3", "--jetson-clocks", "off")) == 0  # mode 2 is done; 3 is not
    assert fake_runs == [("cnn", 1, 3, 3, "off"), ("cnn", 2, 3, 3, "off")]
    assert restored(board, board.calls())


def test_jetson_clocks_on_is_set_in_each_mode_and_the_mode_is_in_the_run_name(board, fake_runs, tmp_path):
    assert main(sweep_args(tmp_path / "sweep", "cnn", "0", "--jetson-clocks", "on")) == 0
    assert fake_runs == [("cnn", 1, 0, 0, "on"), ("cnn", 2, 0, 0, "on")]
    assert board.calls()[2:5] == ["nvpmodel -m 0", "jetson_clocks", "nvpmodel -q"]
    assert restored(board, board.calls())
    config = SweepConfig(out=tmp_path, sensors="none", power_mode=2)
    assert sweep_mod.run_name("cnn", 8, config).startswith("cnn-bs8-mode2-")
    assert sweep_mod.run_name("cnn", 8, config) != sweep_mod.run_name(
        "cnn", 8, dataclasses.replace(config, power_mode=0)
    )


def test_jetson_clocks_alone_runs_in_the_boards_own_mode(board, fake_runs, tmp_path):
    args = sweep_args(tmp_path / "sweep", "cnn", "0", "--jetson-clocks", "on")
    del args[args.index("--power-modes") : args.index("--power-modes") + 2]
    assert main(args) == 0
    assert fake_runs == [("cnn", 1, 1, 1, "on"), ("cnn", 2, 1, 1, "on")]  # mode 1, as found, re-applied
    assert restored(board, board.calls())


def test_board_is_restored_after_an_error_in_a_configuration(board, fake_runs, tmp_path):
    out = tmp_path / "sweep"
    with pytest.raises(RuntimeError, match="harness broke in mode 2"):
        main(sweep_args(out, "cnn,lstm", "0,2"))
    assert fake_runs[-1] == ("lstm", 1, 2, 2, "off")
    assert restored(board, board.calls())
    rows = json.loads((out / "results.json").read_text())  # what ran before the error is kept
    assert [(r["model"], r["batch_size"], r["power_mode"]) for r in rows] == [
        ("cnn", 1, 0),
        ("cnn", 2, 0),
        ("lstm", 1, 0),
        ("lstm", 2, 0),
        ("cnn", 1, 2),
        ("cnn", 2, 2),
    ]


def test_a_mode_the_board_does_not_take_is_one_error_line_and_the_board_is_restored(board, fake_runs, tmp_path, capsys):
    assert main(sweep_args(tmp_path / "sweep", "cnn", "0,5")) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("mobileperf")]
    assert err == [
        "mobileperf: error: nvpmodel -m 5 left the board in mode 0 (MAXN); a mode that needs a reboot cannot be swept"
    ]
    assert [m for _, _, m, _, _ in fake_runs] == [0, 0]  # nothing ran in a mode it was not in
    assert restored(board, board.calls())


@pytest.mark.parametrize(
    "why,expected",
    [
        ("not root", "which needs root (run the sweep with sudo)"),
        ("no nvpmodel", "need nvpmodel, which is not on PATH (not a Jetson?)"),
        ("no jetson_clocks", "--jetson-clocks needs jetson_clocks, which is not on PATH"),
    ],
)
def test_sweep_refuses_power_modes_without_root_or_off_a_jetson_before_anything_runs(
    board, fake_runs, tmp_path, monkeypatch, capsys, why, expected
):
    if why == "not root":
        monkeypatch.setattr(power_modes, "is_root", lambda: False)
    else:
        tool = "nvpmodel" if why == "no nvpmodel" else "jetson_clocks"
        (tmp_path / "bin" / tool).unlink()
    out = tmp_path / "sweep"
    assert main(sweep_args(out, "cnn", "0,2", "--jetson-clocks", "on")) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("mobileperf")]
    assert len(err) == 1 and err[0].startswith("mobileperf: error: ") and expected in err[0], err
    assert fake_runs == [] and board.calls() == [] and not out.exists()


def test_parse_query_reads_the_mode_id_and_name():
    assert power_modes.parse_query("NV Power Mode: MODE_15W_2CORE\n2\n") == power_modes.Mode(2, "MODE_15W_2CORE")
    with pytest.raises(power_modes.PowerModeError, match="no mode id"):
        power_modes.parse_query("NVPM ERROR: failed to read PARAM\n")


def wait_for(predicate, what: str, timeout_s: float = 240.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.slow
def test_real_sweep_in_two_modes_rows_carry_the_mode(board, tmp_path):
    out = tmp_path / "sweep"
    args = sweep_args(out, "cnn", "0,2")
    args[args.index("--batch-sizes") + 1] = "1"
    assert main(args) == 0
    rows = json.loads((out / "results.json").read_text())
    assert [(r["power_mode"], r["success"], r["steps_measured"]) for r in rows] == [(0, True, 3), (2, True, 3)]
    assert [Path(r["logdir"]).name.split("-")[2] for r in rows] == ["mode0", "mode2"]
    assert restored(board, board.calls())


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_board_is_restored_when_the_sweep_is_interrupted(board, tmp_path, signum):
    out = tmp_path / "sweep"
    args = sweep_args(out, "cnn", "0,2")
    args[args.index("--steps") + 1] = "400"  # long enough to be running when the signal comes
    sweep = subprocess.Popen(
        [sys.executable, "-m", "tf_mobileperf.cli.parser", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for(lambda: board.calls()[2:4] == ["nvpmodel -m 0", "nvpmodel -q"], "mode 0 to be set")
        wait_for(lambda: any((out / "runs").glob("*")), "the first configuration's child to start")
        os.kill(sweep.pid, signum)  # the sweep only, as `kill`; its child is its to stop
        _, stderr = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
            sweep.wait()
    # Ctrl-C is one line and the shell's status for it; SIGTERM is delivered again once the board is restored.
    assert sweep.returncode == (130 if signum == signal.SIGINT else -signum), stderr[-2000:]
    if signum == signal.SIGINT:
        assert stderr.strip().splitlines()[-1] == "mobileperf: sweep interrupted" and "Traceback" not in stderr
    assert restored(board, board.calls())
    assert "nvpmodel -m 2" not in board.calls()  # it stopped in mode 0
    assert not (out / "results.json").exists()


def fail_in_fake(board: FakeBoard, tool: str, args: str) -> None:
    """The fake ``tool`` fails (exit 1, a message on stderr) when called with ``args``; else as before."""
    script = board.state.parent / "bin" / tool
    lines = script.read_text().splitlines()
    lines.insert(2, f'[ "$*" = "{args}" ] && {{ echo "NVPM ERROR: cannot set {args}" >&2; exit 1; }}')
    script.write_text("\n".join(lines) + "\n")


def test_a_failed_restore_of_the_mode_is_an_error_that_says_where_the_board_is_and_how_to_restore_it(
    board, fake_runs, tmp_path, capsys
):
    fail_in_fake(board, "nvpmodel", "-m 1")
    assert main(sweep_args(tmp_path / "sweep", "cnn", "0,2")) == 2
    assert board.mode() == "2"
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("mobileperf: error: could not restore power mode 1 (MODE_1): nvpmodel -m 1 failed (exit 1)")
    stored = tmp_path / "sweep" / power_modes.CLOCKS_STATE_FILE
    assert last.endswith("; the board is left in power mode 2 (MODE_2); restore the board with: sudo nvpmodel -m 1")
    assert board.clocks() == "on" and board.calls()[-1] == f"jetson_clocks --restore {stored}"  # tried all the same
    assert len(json.loads((tmp_path / "sweep" / "results.json").read_text())) == 4  # the results are kept


def test_a_failed_restore_after_an_error_in_a_configuration_still_says_where_the_board_is(
    board, fake_runs, tmp_path, capsys
):
    fail_in_fake(board, "nvpmodel", "-m 1")
    fail_in_fake(board, "jetson_clocks", "--restore " + str(tmp_path / "sweep" / power_modes.CLOCKS_STATE_FILE))
    assert main(sweep_args(tmp_path / "sweep", "cnn,lstm", "0,2")) == 2  # lstm breaks in mode 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    stored = tmp_path / "sweep" / power_modes.CLOCKS_STATE_FILE
    assert last.endswith(
        "; the board is left in power mode 2 (MODE_2); the board's clocks are left as the sweep set "
        f"them; restore the board with: sudo nvpmodel -m 1 && sudo jetson_clocks --restore {stored}"
    )
