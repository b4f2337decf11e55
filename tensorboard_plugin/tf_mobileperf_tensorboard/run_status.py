"""What a run's status truly is: "running" only while the process that claimed it is alive.

A measurement writes a "running" run summary when it starts and replaces it
with the finished one when its report is written. A process that dies in
between (the OOM killer's SIGKILL, an abort on ``std::bad_alloc``) never
replaces it, so the summary alone would say "running" forever. A "running"
summary is therefore checked against the run's files, in its logdir:

* the end record (``names.END_FILE``) that whoever watched the process
  end wrote (``mobileperf sweep``): the run ended without a report, failed,
  with the cause the sweep recorded;
* the claim (``names.CLAIM_FILE``: pid, host, start): on this host the
  run is running while that pid is alive and is the claimer (not a pid
  reused since); on another host while the run's files were written to
  within ``HEARTBEAT_S`` (samples are appended every drain);
* a run whose process is gone has its report by now (the summary has not
  been reloaded yet), or ended without one: failed, at the step its
  ``progress.bin`` holds.

A finished run whose report cannot be read, or does not hold what the
report's schema says, is listed as unreadable with the reason
(``ReportChecks``), so the runs list marks it, not only its own routes.

No TensorFlow.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

from tf_mobileperf.format import names, reader
from tf_mobileperf.format.layout import RunLayout
from tf_mobileperf.format.schema import FINISHED, RUNNING

log = logging.getLogger(__name__)

#: A run on another host whose files were not written to for this long has ended (it appends samples every
#: drain, a second or so, and a step's row at every step).
HEARTBEAT_S = 600.0
#: How much later than its claim a live process may have started and still be the claimer (the boot time
#: the kernel gives is in whole seconds).
START_SLACK_S = 2.0

ENDED = "ended"  #: the process ended without writing its report
UNREADABLE = "unreadable"  #: the run summary, or the finished run's report, cannot be read


@dataclasses.dataclass
class RunStatus:
    """A run's status as it is: one of RUNNING, FINISHED, ENDED, UNREADABLE, and its line for people.

    ``failed_step`` and ``error`` are those of a run that ended without a report (it failed)."""

    status: str
    text: str
    failed_step: int | None = None
    error: str | None = None

    def applied(self, summary: dict) -> dict:
        """``summary`` with this status: ``status``, ``status_text``, and the failure of a run that ended.

        Args:
            summary: The run summary; not modified.

        Returns:
            A copy with ``status`` and ``status_text`` set; an ENDED one also ``success=False``, ``failed_step``
            and ``error``.
        """
        out = dict(summary, status=self.status, status_text=self.text)
        if self.status == ENDED:
            out.update(success=False, failed_step=self.failed_step, error=self.error)
        return out


def unreadable(error: str) -> dict:
    """The summary listed for a run whose summary cannot be read: the error, marked.

    Args:
        error: Why the summary cannot be read.

    Returns:
        ``{"error", "status": UNREADABLE, "status_text": error}``.
    """
    return RunStatus(UNREADABLE, error).applied({"error": error})


def finished_text(summary: dict) -> str:
    """The status line of a finished run.

    Args:
        summary: The run's summary (or report).

    Returns:
        "trained"; "no step measured[: why]" (a run that succeeded but ended before its first measured step);
        "missing: HOSTS" (a combined run with hosts missing); else "failed" or "failed at step N".
    """
    if summary.get("success"):
        if summary.get("steps_measured") == 0:
            why = (summary.get("unavailable") or {}).get("step_time_s")
            return f"no step measured: {why}" if why else "no step measured"
        return "trained"
    missing = summary.get("missing_hosts") or []
    if summary.get("combined") and missing:
        return f"missing: {', '.join(map(str, missing))}"
    step = summary.get("failed_step")
    return "failed" if step is None else f"failed at step {step}"


class ReportChecks:
    """Whether each run's report can be read and holds what the schema says, read again only when the file
    changes (its modification time or size): listing the runs does not parse every report every time."""

    def __init__(self) -> None:
        self._seen: dict[Path, tuple[tuple[int, int], str | None]] = {}

    def problem(self, directory: Path, root: Path) -> str | None:
        """What is wrong with the report in ``directory``; None if it is good or there is none.

        Args:
            directory: The run's ``plugins/mobileperf/`` folder, holding ``names.REPORT_FILE``.
            root: The logdir the report must resolve inside.

        Returns:
            The reader's error text, or None; kept until the file's modification time or size changes.
        """
        path = directory / names.REPORT_FILE
        try:
            info = path.stat()
        except OSError:
            return None
        key = (info.st_mtime_ns, info.st_size)
        seen = self._seen.get(path)
        if seen is not None and seen[0] == key:
            return seen[1]
        try:
            reader.read_report(directory, root)
            problem = None
        except (OSError, ValueError, RecursionError) as exc:
            problem = str(exc)
        self._seen[path] = (key, problem)
        return problem


def status_of(summary: dict, run_dir: Path, root: Path | None, checks: ReportChecks | None = None) -> RunStatus:
    """The status of the run in ``run_dir``; the files it reads are only those of the run's logdir, inside ``root``.

    Args:
        summary: The run's summary (a readable one).
        run_dir: The run's folder.
        root: The TensorBoard logdir; None: the run's files are not local, a "running" summary stays RUNNING
            (whether its process is alive is unknown) and no report is checked.
        checks: The report cache; with it, a finished run whose report cannot be read is UNREADABLE, saying why;
            None: reports are not checked.

    Returns:
        The run's RunStatus.
    """
    if summary.get("status", FINISHED) != RUNNING:
        problem = checks.problem(RunLayout.of_run(run_dir).plugin_dir, root) if checks and root else None
        if problem:
            return RunStatus(UNREADABLE, f"unreadable report: {problem}")
        return RunStatus(FINISHED, finished_text(summary))
    if root is None:
        return RunStatus(RUNNING, "running (its files are not local: whether its process is alive is unknown)")
    logdir = _logdir_of(run_dir, root)
    if logdir is None:
        return RunStatus(RUNNING, "running (no claim file: whether its process is alive is unknown)")
    claim = _read(RunLayout(logdir).claim, root) or {}
    ended = _read(RunLayout(logdir).ended, root)
    if ended is not None and ended.get("pid") in (None, claim.get("pid")):
        return _ended_as_recorded(ended)
    host = claim.get("host")
    if host is not None and host != socket.gethostname():
        quiet_s = time.time() - _last_write(logdir, run_dir)
        if quiet_s <= HEARTBEAT_S:
            return RunStatus(RUNNING, f"running (on host {host})")
        return _ended(logdir, root, f"no write to its files from host {host} for {quiet_s / 60:.0f} min")
    pid = claim.get("pid")
    if type(pid) is int and 0 < pid <= PID_MAX and _alive(pid, claim.get("started")):
        return RunStatus(RUNNING, "running")
    return _finished_since(run_dir, root) or _ended(logdir, root, f"its process (pid {pid}) is gone")


def _logdir_of(run_dir: Path, root: Path) -> Path | None:
    """The measurement's logdir: the nearest folder from ``run_dir`` up to ``root`` holding a claim."""
    for folder in [run_dir, *run_dir.parents]:
        if not folder.is_relative_to(root):
            break
        if RunLayout(folder).claim.is_file():
            return folder
    return None


def _read(path: Path, root: Path | None) -> dict[str, Any] | None:
    """A small JSON file of the run's logdir; None if there is none, {} if it cannot be read (a claim cut short
    by a kill)."""
    try:
        return reader.read_json(path, 64 * 1024, root)
    except (OSError, ValueError, RecursionError) as exc:
        log.warning("mobileperf: %s", exc)
        return {}


#: The largest pid a process can have (pid_t is a signed 32-bit int); a claim's larger one names no process
#: (os.kill would raise OverflowError on it).
PID_MAX = 2**31 - 1


def _alive(pid: int, started: Any) -> bool:
    """Whether ``pid`` is a live process that started by the time of its claim (``started``, wall seconds)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        pass
    stat = _proc_stat(pid)
    if stat is None:
        return True  # no /proc: the signal's answer stands
    state, start_s = stat
    if state in ("Z", "X"):  # a zombie: dead, not yet reaped by its parent
        return False
    return not isinstance(started, (int, float)) or start_s is None or start_s <= started + START_SLACK_S


def _proc_stat(pid: int) -> tuple[str, float | None] | None:
    """(state, start time in wall seconds) of ``pid`` from /proc; None without /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        boot = next(
            float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime ")
        )
        return fields[0], boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _last_write(logdir: Path, run_dir: Path) -> float:
    """The newest modification time of the files a live run keeps writing (0 if there is none)."""
    paths = [
        RunLayout(logdir).steps_csv,
        RunLayout(logdir).progress,
        RunLayout(logdir).claim,
        RunLayout.of_run(run_dir).samples,
    ]
    times = []
    for path in paths:
        try:
            times.append(path.stat().st_mtime)
        except OSError:
            continue
    return max(times, default=0.0)


def _finished_since(run_dir: Path, root: Path | None) -> RunStatus | None:
    """The status from the run's report if it was written after the summary TensorBoard has (not reloaded
    yet); None without a readable report."""
    try:
        report = reader.read_report(RunLayout.of_run(run_dir).plugin_dir, root)
    except (OSError, ValueError, RecursionError):
        return None
    return None if report is None else RunStatus(FINISHED, finished_text(report))


def _ended(logdir: Path, root: Path | None, why: str) -> RunStatus:
    step = reader.read_progress(RunLayout(logdir).progress)
    error = f"ended without a report: {why}"
    return RunStatus(ENDED, error, step, error)


def _ended_as_recorded(record: dict) -> RunStatus:
    """A run whose end was recorded by whoever watched its process end (``mobileperf sweep``)."""
    error = record.get("error") or record.get("cause") or "its process ended"
    step = record.get("failed_step")
    return RunStatus(ENDED, f"ended without a report: {error}", step if type(step) is int else None, str(error))
