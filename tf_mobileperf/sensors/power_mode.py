"""The Jetson power mode (nvpmodel) and jetson_clocks state, without the jtop service.

The same training step costs a different time and energy in each power mode
(PowerTrain, Prashanthi et al.), so a report without the mode cannot be
compared with another. These are facts of the run, not per-sample readings,
so this is a plain function for the device metadata, not a sensor.

Where each fact comes from, in order:

- mode id and name: ``nvpmodel -q`` (run when on ``PATH``, with a timeout;
  it prints "NV Power Mode: <name>" and then the id), else nvpmodel's status
  file ``/var/lib/nvpmodel/status`` ("pmode:0002 fmode:quiet") with the name
  looked up in ``/etc/nvpmodel.conf`` (``< POWER_MODEL ID=2 NAME=15W >``);
- jetson_clocks (on a Jetson: where a mode was found): on when every CPU's cpufreq floor equals its ceiling
  (``scaling_min_freq == scaling_max_freq``) and, where a GPU devfreq exists,
  its ``min_freq == max_freq``: that is what jetson_clocks sets, and reading
  it needs no root (``jetson_clocks --show`` does).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tf_mobileperf.sensors.base import under_root
from tf_mobileperf.sensors.board_tool import run_tool
from tf_mobileperf.sensors.jetson_gpu import GPU_DEVFREQ_NAMES

log = logging.getLogger(__name__)

STATUS_FILE = "var/lib/nvpmodel/status"
CONF_FILE = "etc/nvpmodel.conf"
_QUERY_NAME = re.compile(r"NV Power Mode:\s*(\S.*?)\s*$", re.MULTILINE)
_QUERY_ID = re.compile(r"^\s*(\d+)\s*$", re.MULTILINE)
_STATUS_ID = re.compile(r"pmode:(\d+)")
_CONF_MODEL = re.compile(r"<\s*POWER_MODEL\s+ID=(\d+)\s+NAME=(\S+?)\s*>")


@dataclasses.dataclass
class PowerMode:
    """What is known of the board's power mode; None where unknown, with the reason in ``unavailable``."""

    mode_id: int | None = None
    mode_name: str | None = None
    source: str = ""
    jetson_clocks: bool | None = None
    jetson_clocks_how: str = ""
    unavailable: dict[str, str] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """For the report's device metadata, under "power_mode"."""
        return {"power_mode": dataclasses.asdict(self)}


def parse_query(text: str) -> tuple[int, str | None] | None:
    """The mode ``nvpmodel -q`` printed.

    Args:
        text: Its output: "NV Power Mode: MAXN", then the id on a line of its own.

    Returns:
        (id, name): the number on the last line that holds only a number, and the name (None where it
        printed none); None where no line holds an id.
    """
    name, ids = _QUERY_NAME.search(text), _QUERY_ID.findall(text)
    return (int(ids[-1]), name.group(1) if name else None) if ids else None


def _query(timeout_s: float) -> tuple[int | None, str | None, str]:
    """(id, name, reason) from running ``nvpmodel -q``; reason is "" when it answered."""
    command = shutil.which("nvpmodel")
    if command is None:
        return None, None, "nvpmodel is not on PATH"
    try:
        done = run_tool([command, "-q"], timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, None, f"{command} -q failed: {exc}"
    found = parse_query(done.stdout) if done.returncode == 0 else None
    if found is None:
        said = (done.stderr or done.stdout).strip()[:200]
        return None, None, f"{command} -q exited {done.returncode} without a mode: {said}"
    return found[0], found[1], ""


def _conf_names(root: Path) -> dict[int, str]:
    try:
        text = under_root(root, CONF_FILE).read_text()
    except OSError:
        return {}
    return {int(i): name for i, name in _CONF_MODEL.findall(text)}


def _status_id(root: Path) -> tuple[int | None, str]:
    path = under_root(root, STATUS_FILE)
    try:
        found = _STATUS_ID.search(path.read_text())
    except OSError as exc:
        return None, f"{path} not readable: {exc.strerror}"
    return (int(found.group(1)), "") if found else (None, f"{path} holds no pmode")


def _min_equals_max(directory: Path, low: str, high: str) -> bool | None:
    try:
        return int((directory / low).read_text()) == int((directory / high).read_text())
    except (OSError, ValueError):
        return None


def jetson_clocks_state(root: str | Path = "/") -> tuple[bool | None, str]:
    """Whether jetson_clocks is on: every CPU's cpufreq floor, and a GPU devfreq's, equal to its ceiling.

    Args:
        root: Root of the file system tree ("/" for this machine, a fake tree in tests).

    Returns:
        (on, how it was decided); on is None, and how says why, when no cpufreq floor and ceiling are readable.
    """
    root = Path(root)
    cpus = {d.resolve(): d for d in sorted(root.glob("sys/devices/system/cpu/cpu[0-9]*/cpufreq"))}
    answers = [_min_equals_max(d, "scaling_min_freq", "scaling_max_freq") for d in cpus.values()]
    pinned = [p for p in answers if p is not None]
    if not pinned:
        return None, f"no cpufreq scaling_min_freq/scaling_max_freq readable under {root / 'sys/devices/system/cpu'}"
    how = f"cpufreq scaling_min_freq == scaling_max_freq on {sum(pinned)} of {len(pinned)} CPU policies"
    for devfreq in sorted(root.glob("sys/class/devfreq/*")):
        if any(key in devfreq.resolve().name.lower() for key in GPU_DEVFREQ_NAMES):
            gpu = _min_equals_max(devfreq, "min_freq", "max_freq")
            if gpu is not None:
                pinned.append(gpu)
                how += f"; GPU devfreq {devfreq.name} min_freq {'==' if gpu else '!='} max_freq"
            break
    return all(pinned), how


def power_mode(root: str | Path = "/", timeout_s: float = 5.0) -> PowerMode:
    """The power mode and jetson_clocks state of the board (see the module docstring).

    Args:
        root: Root of the file system tree ("/" for this machine, a fake tree in tests).
        timeout_s: The longest ``nvpmodel -q`` may run, s; then the status file is read instead.

    Returns:
        The mode's id and name and where they came from, and the jetson_clocks state and how it was decided;
        each None where unknown, with the reason in ``unavailable``.
    """
    root = Path(root)
    mode = PowerMode()
    mode.mode_id, mode.mode_name, query_reason = _query(timeout_s)
    if mode.mode_id is not None:
        mode.source = "nvpmodel -q"
    else:
        mode.mode_id, status_reason = _status_id(root)
        if mode.mode_id is None:
            mode.unavailable["mode"] = f"{query_reason}; {status_reason}"
        else:
            mode.source = str(under_root(root, STATUS_FILE))
    if mode.mode_id is not None and mode.mode_name is None:
        mode.mode_name = _conf_names(root).get(mode.mode_id)
        if mode.mode_name is None:
            conf = under_root(root, CONF_FILE)
            mode.unavailable["mode_name"] = f"mode {mode.mode_id} has no POWER_MODEL NAME in {conf}"
        else:
            mode.source += f", name from {under_root(root, CONF_FILE)}"
    if mode.mode_id is None:
        mode.jetson_clocks_how = "no nvpmodel mode: not a Jetson, or nvpmodel is not installed"
    else:
        mode.jetson_clocks, mode.jetson_clocks_how = jetson_clocks_state(root)
    if mode.jetson_clocks is None:
        mode.unavailable["jetson_clocks"] = mode.jetson_clocks_how
    log.debug("power mode: %s", mode)
    return mode
