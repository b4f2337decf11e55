"""The writer of a run's JSON files: atomic, without NaN or infinity, and a report stamped with its format.

No TensorFlow.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

from . import schema
from .finite_json import finite


def write_json(path: Path, data: dict | list) -> None:
    """Writes JSON atomically (temp file + rename): readers never see half a file.

    The temporary file has a name of its own in the same folder, so writers
    to one path never collide (the last rename wins), and it is removed if
    anything fails.

    Args:
        path: Where the file goes (its folder must exist).
        data: What to write; NaN and infinity are refused (``write_report`` makes them null).

    Raises:
        ValueError: ``data`` holds NaN or infinity.
        OSError: the folder cannot be written (disk full, read-only, gone).
    """
    text = json.dumps(data, indent=2, allow_nan=False)
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), 0o644)  # mkstemp makes it 0600; TensorBoard may run as another user
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_report(path: Path, report: dict, kind: str) -> dict:
    """Writes ``report`` in the format written now, NaN and infinity as null, atomically (``write_json``).

    Args:
        path: The report's file.
        report: Its fields.
        kind: The kind of report (``schema``: report, combined, sweep_summary).

    Returns:
        What it wrote: ``report`` stamped with its version and kind.

    Raises:
        ValueError: ``kind`` is not a kind of report.
        OSError: as ``write_json``.
    """
    report = schema.stamped(finite(report), kind)
    write_json(path, report)
    return report
