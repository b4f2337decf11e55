"""The writers of a run's files: series, steps, progress, claim and JSON.

File names, paths and the schema version come from ``tf_mobileperf.format``
and every reader is ``tf_mobileperf.format.reader``, so writers and readers
share one contract.

TensorBoard keeps only a few tensor events per tag, so raw samples live in
plain files under ``<run>/plugins/mobileperf/`` (as the profile plugin keeps
its traces): ``channels.json`` names the columns and their roles,
``samples.bin`` holds rows of float64 (time, channel...) appended and
flushed every drain, so a crash loses at most one drain interval. A write
that fails (disk full) is cut back to the last whole row, so the rows after
it stay aligned.

A logdir is claimed by the measurement that writes it (``claim_logdir``), so
two measurements never write into one logdir. ``steps.csv`` is appended in
whole rows, and JSON is written through a temporary file of its own, so
writers never collide.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import logging
import mmap
import os
import re
import socket
import struct
import time
from pathlib import Path

import numpy as np

from tf_mobileperf.format.channels import CHANNELS_VERSION
from tf_mobileperf.format.layout import RunLayout
from tf_mobileperf.format.reader import read_progress
from tf_mobileperf.format.writer import write_json  # noqa: F401 (its writers import it from here too)
from tf_mobileperf.sensors.base import Channel

log = logging.getLogger(__name__)


#: ``scheme://`` at the start of a path: a remote file system (gs://, s3://, hdfs://, ram://).
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def local_dir(path: str | os.PathLike) -> Path:
    """``path`` as a local directory path.

    Args:
        path: The logdir as given by the user.

    Returns:
        ``path`` as a ``Path``, unchanged.

    Raises:
        ValueError: ``path`` names a remote file system. Samples, steps and
            the claim are written with local file calls (append, mmap,
            exclusive create), so a remote logdir would become a local folder
            named ``gs:``; measure into a local directory and copy it. Or
            ``path`` is empty, which would write into the current directory.
    """
    text = os.fspath(path)
    if not text.strip():
        raise ValueError(f"logdir is empty ({text!r}): name a directory, such as 'runs/exp1'")
    if _URL.match(text):
        raise ValueError(
            f"logdir {text!r} is on a remote file system ({text.split('://')[0]}://), which "
            "mobileperf does not write to; measure into a local directory and copy it there"
        )
    return Path(text)


def claim_logdir(logdir: Path) -> Path:
    """Claims ``logdir`` for one measurement, or the first free ``logdir/run-N``.

    The claim is an exclusive create of ``mobileperf.claim`` (who, when), so
    two processes starting at once get two directories.

    Args:
        logdir: The directory asked for; created (with its parents) if missing.

    Returns:
        The claimed directory: ``logdir``, or ``logdir/run-N`` when ``logdir`` is already claimed.

    Raises:
        NotADirectoryError: ``logdir`` is a file.
        OSError: the directory cannot be created or written, with its path.
    """
    base = logdir
    if base.exists() and not base.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"mobileperf cannot write to logdir {base}: it is a file")
    candidate, n = base, 1
    while True:
        try:
            candidate.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # FileExistsError too: a file took the name meanwhile
            raise OSError(exc.errno, f"mobileperf cannot write to logdir {candidate}: {exc.strerror or exc}") from exc
        try:
            fd = os.open(RunLayout(candidate).claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:  # another measurement's: the next run-N
            n += 1
            candidate = base / f"run-{n}"
            continue
        except OSError as exc:
            raise OSError(exc.errno, f"mobileperf cannot write to logdir {candidate}: {exc.strerror or exc}") from exc
        with os.fdopen(fd, "w") as f:
            json.dump({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}, f)
        if candidate != base:
            log.warning("mobileperf: %s already holds a measurement; this one is written to %s", base, candidate)
        return candidate


class StepProgress:
    """The step running or next to run, in an 8-byte memory-mapped file.

    Set at every step boundary without a system call. The page outlives the
    process, so after a SIGKILL (the kernel's OOM killer) whoever started it
    reads which step it died in with ``StepProgress.read``.
    """

    def __init__(self, path: Path):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, 8)
            self._map = mmap.mmap(fd, 8)
        finally:
            os.close(fd)
        self.set(0)

    def set(self, step: int) -> None:
        """Stores ``step`` in the page; does nothing once the file is closed.

        Args:
            step: The step running, or next to run.
        """
        if not self._map.closed:  # a signal handler may end the run inside a step
            struct.pack_into("<q", self._map, 0, step)

    def close(self) -> None:
        """Unmaps the page; later ``set`` calls do nothing."""
        self._map.close()

    @staticmethod
    def read(path: Path) -> int | None:
        """The last step set in ``path``; None if there is no whole value (no file, or not 8 bytes).

        Args:
            path: The progress file (``progress.bin``) of a run.
        """
        return read_progress(path)


class AppendFile:
    """A file appended to in whole records: a failed write is cut back, then raised."""

    def __init__(self, path: Path):
        self._file = open(path, "wb", buffering=0)
        self._size = 0

    def append(self, data: bytes) -> None:
        """Writes all of ``data`` at the end of the file (unbuffered).

        Args:
            data: One or more whole records.

        Raises:
            OSError: a write failed (disk full); the file was first cut back to its size before this call.
        """
        view = memoryview(data)
        try:
            while view:
                view = view[self._file.write(view) :]
        except OSError:
            self._file.truncate(self._size)
            self._file.seek(self._size)
            raise
        self._size += len(data)

    def close(self) -> None:
        """Syncs the file to disk and closes it; a second call does nothing."""
        if not self._file.closed:
            os.fsync(self._file.fileno())
            self._file.close()


class SeriesWriter:
    """Appends sample rows to ``samples.bin`` next to their ``channels.json``."""

    def __init__(self, run_dir: str | Path, channels: list[Channel], run_metadata: dict):
        layout = RunLayout.of_run(run_dir)
        self.dir = layout.plugin_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        header = {
            "version": CHANNELS_VERSION,
            "columns": ["t"] + [c.name for c in channels],
            "channels": [c.to_dict() for c in channels],
            "clock": "time.monotonic (CLOCK_MONOTONIC), seconds",
            "metadata": run_metadata,
        }
        write_json(layout.channels, header)
        self._file = AppendFile(layout.samples)

    def append(self, t: np.ndarray, values: np.ndarray) -> None:
        """Appends one row per sample, as little-endian float64 (time, then each channel); nothing if ``t`` is empty.

        Args:
            t: Sample times, seconds of ``time.monotonic``, shape (n,).
            values: The samples, shape (n, channels), in the order of the channels given to the constructor.
        """
        if len(t):
            self._file.append(np.column_stack([t, values]).astype("<f8", copy=False).tobytes())

    def close(self) -> None:
        """Syncs ``samples.bin`` to disk and closes it."""
        self._file.close()


class StepsCsv:
    """``steps.csv``: one row per step, appended as steps are joined."""

    def __init__(self, path: str | Path, fields: list[str]):
        self.path = Path(path)
        self._file = AppendFile(self.path)
        self._fields = fields
        self._write([fields])

    def write(self, rows: list[dict]) -> None:
        """Appends ``rows`` in one write.

        Args:
            rows: One dict per step, field -> value; keys not among the fields are ignored, missing ones and None
                left empty.
        """
        fields = self._fields
        self._write([[row.get(f) for f in fields] for row in rows])

    def _write(self, lines: list[list]) -> None:
        text = io.StringIO()
        csv.writer(text).writerows(lines)
        self._file.append(text.getvalue().encode())

    def close(self) -> None:
        """Syncs ``steps.csv`` to disk and closes it."""
        self._file.close()


def link_or_copy(source: Path, target: Path) -> None:
    """Makes ``target`` name the file ``source`` (a hard link, swapped in atomically).

    Where the file system has no hard links, ``source`` is read as JSON and written to ``target`` with
    ``write_json``. Either way readers of ``target`` never see half a file.

    Args:
        source: The existing JSON file.
        target: The name to give it; replaced if it exists.
    """
    target = Path(target)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.link")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    try:
        os.link(source, tmp)
    except OSError:  # no hard links here (some network and FUSE file systems)
        write_json(target, json.loads(Path(source).read_text()))
        return
    os.replace(tmp, target)
