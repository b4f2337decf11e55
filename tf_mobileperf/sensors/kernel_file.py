"""A sysfs or procfs file kept open and re-read whole, and how its failed reads are worded."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tf_mobileperf.sensors.errors import SensorReadError

#: Why a kernel file could not be read, besides the system's own errors (``_tick.c`` words them the same).
NOT_REGULAR = "not a regular file"
TOO_LARGE = "larger than 16 MiB"
#: The largest file read: /proc/stat of a 4096-core machine is about 0.5 MiB; a larger file is not one of ours.
#: The C loop's too: ``_tick_abi.h``'s MP_MAX_FILE_BYTES, held equal by tests/test_tick_abi.py.
MAX_FILE_BYTES = 1 << 24


class KernelFile:
    """A sysfs/procfs file kept open and re-read whole with ``pread`` at offset 0.

    Re-reading an open kernel file costs one system call instead of three,
    which matters at 200 Hz. It is opened with ``O_NONBLOCK`` and must be a
    regular file (sysfs attributes and procfs files are): a FIFO or a device
    node in its place would block the sampler in ``open()`` or ``read()``,
    so it is a failed read instead. ``size`` is the first read's length; a
    file that fills it is read again with twice as much (a /proc/stat of
    hundreds of cores), and the larger size kept. A failed read (EIO, a
    device that vanished) raises OSError and the file is reopened on the
    next read.
    """

    def __init__(self, path: Path, size: int = 64):
        self.path = Path(path)
        self.size = size
        self._fd: int | None = None

    def read_bytes(self) -> bytes:
        """The file's whole content now, opening the file first if it is not open.

        Raises:
            OSError: it could not be opened or read, is not a regular file or is larger than ``MAX_FILE_BYTES``;
                it is then closed, and reopened on the next read.
        """
        try:
            if self._fd is None:
                fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    os.close(fd)
                    raise OSError(NOT_REGULAR)
                self._fd = fd
            while True:
                data = os.pread(self._fd, self.size, 0)
                if len(data) < self.size:
                    return data
                if self.size >= MAX_FILE_BYTES:
                    raise OSError(TOO_LARGE)
                self.size *= 2
        except OSError:
            self.close()
            raise

    def failure(self, exc: OSError) -> SensorReadError:
        """Why this file could not be read, as both sampling loops word it (``file_error``).

        Args:
            exc: The error its read raised; its ``strerror`` (else its text) is the reason.

        Returns:
            The error to give as the value of the channels that use the file.
        """
        return file_error(self.path, exc.strerror or str(exc))

    def close(self) -> None:
        """Closes the file if it is open; the next read opens it again."""
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    def __getstate__(self) -> dict:
        # File descriptors do not cross process boundaries; reopen lazily.
        return {"path": self.path, "size": self.size, "_fd": None}


def file_error(path: str | Path, reason: str) -> SensorReadError:
    """A kernel file's failed read, worded as ``_tick.c`` words it.

    Args:
        path: The file.
        reason: Why it could not be read (``NOT_REGULAR``, an errno's text).

    Returns:
        The error ``"<reason>: <path>"``, e.g. ``"not a regular file: /sys/.../in1_input"`` (the reason first:
        texts are cut to 120 bytes).
    """
    return SensorReadError(f"{reason}: {path}")


def read_text(path: str | Path) -> str:
    """The whole text of a kernel file read once, as ``KernelFile`` reads it (never blocking).

    For what a sensor reads when it is made: labels, types, trip points.

    Args:
        path: The file.

    Returns:
        Its text, decoded as UTF-8 with undecodable bytes replaced.

    Raises:
        OSError: it could not be read, or it is not a regular file (a FIFO in its place).
    """
    file = KernelFile(Path(path), 4096)
    try:
        return file.read_bytes().decode(errors="replace")
    finally:
        file.close()
