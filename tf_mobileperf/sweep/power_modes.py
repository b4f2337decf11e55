"""Jetson power modes and ``jetson_clocks`` around a sweep: set each mode, check it took, restore the board.

It exists so that ``mobileperf sweep --power-modes 0,2 --jetson-clocks on``
can run every configuration in every mode and leave the board as it found it,
whatever ends the sweep: the end, an error, Ctrl-C or SIGTERM. The board is
driven only through NVIDIA's own tools (``nvpmodel``, ``jetson_clocks``, both
need root), so the tests use fake ones on ``PATH``.

* Before anything runs: ``check`` refuses (``PowerModeError``, one line) off a
  Jetson (no ``nvpmodel`` on ``PATH``) or without root.
* ``controlled``: reads the original mode (``nvpmodel -q``) and stores the
  clocks (``jetson_clocks --store FILE``); at its end restores the mode
  (``nvpmodel -m``) first and the clocks (``--restore FILE``) after it, as
  a mode change resets the clock limits. A restore that fails is an error
  (``PowerModeError``, raised however the block ended): its one line says
  which mode the board is left in and the commands that restore it.
  SIGTERM is turned into an exception for its duration (so the restore
  runs), then delivered again (a failed restore is then logged as an error).
  A sweep killed by SIGKILL cannot restore anything.
* ``Board.apply``: ``nvpmodel -m N``, then ``jetson_clocks`` (on) or nothing
  (off: the mode just set brings its own clock limits), a wait of ``settle_s``
  for the clocks to settle, and ``nvpmodel -q`` to check the mode took.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tf_mobileperf.sensors import power_mode
from tf_mobileperf.sensors.board_tool import run_tool
from tf_mobileperf.session.interrupts import deferred, in_main_thread

log = logging.getLogger(__name__)

#: How long one call of nvpmodel or jetson_clocks may take.
TOOL_TIMEOUT_S = 60.0
CLOCKS_STATE_FILE = ".jetson_clocks.original"


class PowerModeError(ValueError):
    """The board's power mode or clocks cannot be set, checked or read (one line, for the command line)."""


class Terminated(BaseException):
    """SIGTERM arrived while the board was under the sweep's control."""


def is_root() -> bool:
    """Whether this process may set the board's mode (nvpmodel and jetson_clocks need root)."""
    return os.geteuid() == 0


@dataclasses.dataclass(frozen=True)
class PowerPlan:
    """The modes to run every configuration in, jetson_clocks on/off (None: as the board has it), the settle time."""

    modes: tuple[int, ...] = ()
    jetson_clocks: str | None = None
    settle_s: float = 5.0

    def __post_init__(self) -> None:
        if any(not isinstance(m, int) or m < 0 for m in self.modes):
            raise ValueError(f"power modes must be integers >= 0, got {self.modes!r}")
        if self.jetson_clocks not in (None, "on", "off"):
            raise ValueError(f"jetson_clocks must be on or off, got {self.jetson_clocks!r}")
        if not (isinstance(self.settle_s, (int, float)) and math.isfinite(self.settle_s) and self.settle_s >= 0):
            raise ValueError(f"settle_s must be a finite number >= 0, got {self.settle_s!r}")

    @property
    def active(self) -> bool:
        return bool(self.modes) or self.jetson_clocks is not None


@dataclasses.dataclass(frozen=True)
class Mode:
    """A power mode as ``nvpmodel -q`` gives it: its id and name."""

    id: int
    name: str | None


def check(plan: PowerPlan) -> None:
    """Checks that ``plan`` can be carried out on this machine, before anything runs.

    Args:
        plan: The power modes and jetson_clocks setting of the sweep.

    Raises:
        PowerModeError: no nvpmodel on PATH, no jetson_clocks on PATH where ``plan`` sets it, or not root.
    """
    if shutil.which("nvpmodel") is None:
        raise PowerModeError("--power-modes/--jetson-clocks need nvpmodel, which is not on PATH (not a Jetson?)")
    if plan.jetson_clocks is not None and shutil.which("jetson_clocks") is None:
        raise PowerModeError("--jetson-clocks needs jetson_clocks, which is not on PATH")
    if not is_root():
        raise PowerModeError(
            "--power-modes/--jetson-clocks set the board's power mode with nvpmodel, "
            "which needs root (run the sweep with sudo)"
        )


def _tool(*args: str) -> str:
    """Runs a board tool; its stdout, or PowerModeError with what it said. Its stdin is empty, so a question
    it asks (nvpmodel's "reboot now?" for a mode that needs a reboot) is answered no."""
    try:
        done = run_tool(list(args), TOOL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PowerModeError(f"{' '.join(args)}: {exc}") from None
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip()).splitlines() or [""]
        raise PowerModeError(f"{' '.join(args)} failed (exit {done.returncode}): {said[-1][:200]}")
    return done.stdout


def parse_query(text: str) -> Mode:
    """The mode in ``nvpmodel -q``'s output.

    Args:
        text: The output: "NV Power Mode: MAXN", then the id on a line of its own.

    Returns:
        The mode's id and name.

    Raises:
        PowerModeError: ``text`` holds no mode id.
    """
    found = power_mode.parse_query(text)  # the one parser of nvpmodel's answer, shared with the report's power mode
    if found is None:
        raise PowerModeError(f"nvpmodel -q gave no mode id: {' '.join(text.split())[:200]!r}")
    return Mode(*found)


def query() -> Mode:
    """The board's mode now, as ``nvpmodel -q`` reads it; PowerModeError if it fails or gives no mode."""
    return parse_query(_tool("nvpmodel", "-q"))


class Board:
    """The board under a sweep's control: ``apply`` a mode; the original is restored by ``controlled``."""

    def __init__(self, plan: PowerPlan, original: Mode):
        self.plan, self.original = plan, original
        self.modes = plan.modes or (original.id,)
        self.last: Mode | None = None  # the mode last asked for (its name unknown until read back)

    def apply(self, mode_id: int) -> Mode:
        """Sets a mode and the plan's clocks, waits ``settle_s`` for them to settle, and reads the mode back.

        Args:
            mode_id: The nvpmodel mode id.

        Returns:
            The mode ``nvpmodel -q`` reads after the wait, with its name.

        Raises:
            PowerModeError: nvpmodel or jetson_clocks failed, or the board is in another mode after the wait
                (a mode that needs a reboot).
        """
        self.last = Mode(mode_id, None)
        _tool("nvpmodel", "-m", str(mode_id))
        if self.plan.jetson_clocks == "on":
            _tool("jetson_clocks")
        time.sleep(self.plan.settle_s)
        now = query()
        if now.id != mode_id:
            raise PowerModeError(
                f"nvpmodel -m {mode_id} left the board in mode {now.id} ({now.name}); "
                "a mode that needs a reboot cannot be swept"
            )
        self.last = now
        log.info("power mode %d (%s), jetson_clocks %s", now.id, now.name, self.plan.jetson_clocks or "as it was")
        return now


@contextlib.contextmanager
def controlled(plan: PowerPlan, state_dir: Path) -> Iterator[Board]:
    """The board for ``plan``; its original mode and clocks are restored when the block ends, however it ends.

    SIGTERM (in the main thread) raises ``Terminated`` in the block; once the board is restored it is delivered
    again to the handler there was before, so the process still ends as it would have.

    Args:
        plan: The power modes and jetson_clocks setting of the sweep.
        state_dir: Where the original clocks are stored (``CLOCKS_STATE_FILE``) while the block runs.

    Yields:
        The ``Board``, its original mode read.

    Raises:
        PowerModeError: the original mode cannot be read or the clocks stored; or a restore failed (its line
            says where the board is left and the commands that restore it).
    """
    original = query()
    stored = state_dir / CLOCKS_STATE_FILE if shutil.which("jetson_clocks") else None
    if stored is not None:
        _tool("jetson_clocks", "--store", str(stored))
    previous = signal.getsignal(signal.SIGTERM)
    if in_main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)
    board = Board(plan, original)
    terminated = False
    try:
        yield board
    except Terminated:
        terminated = True
        raise
    finally:
        if in_main_thread():
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
        with deferred():  # a second Ctrl-C waits until the board is restored
            problem = _restore(board, stored)
        if problem and terminated:
            log.error("%s", problem)
        if terminated:
            signal.raise_signal(signal.SIGTERM)
        if problem:
            raise PowerModeError(problem)


def _raise_terminated(signum, frame):
    raise Terminated()


def _restore(board: Board, stored: Path | None) -> str | None:
    """The original mode, then the stored clocks (a mode change resets them), each tried even if the other
    fails; None when both are back, else what failed, where the board is left and the commands that restore it."""
    failed, left, commands = [], [], []
    original = board.original
    try:
        _tool("nvpmodel", "-m", str(original.id))
    except PowerModeError as exc:
        now = _mode_now(board)
        if now is not None and now.id == original.id:
            log.warning("nvpmodel -m %d failed, but the board is in that mode: %s", original.id, exc)
        else:
            failed.append(f"could not restore power mode {_named(original)}: {exc}")
            left.append(f"the board is left in power mode {_named(now)}")
            commands.append(f"sudo nvpmodel -m {original.id}")
    if stored is not None:
        try:
            _tool("jetson_clocks", "--restore", str(stored))
        except PowerModeError as exc:
            failed.append(f"could not restore the clocks stored in {stored}: {exc}")
            left.append("the board's clocks are left as the sweep set them")
            commands.append(f"sudo jetson_clocks --restore {stored}")
    if not failed:
        return None
    return f"{'; '.join(failed)}; {'; '.join(left)}; restore the board with: {' && '.join(commands)}"


def _mode_now(board: Board) -> Mode | None:
    """The board's mode as ``nvpmodel -q`` reads it now; else the mode last asked for (None: none was)."""
    try:
        return query()
    except PowerModeError as exc:
        log.debug("nvpmodel -q after a failed restore: %s", exc)
        return board.last


def _named(mode: Mode | None) -> str:
    if mode is None:
        return "unknown (nvpmodel -q failed)"
    return f"{mode.id} ({mode.name})" if mode.name else str(mode.id)
