"""A sweep directory's results: ``results.json`` and ``results.csv``, and the lock that keeps them one sweep's.

It exists so that reading and writing the results (which ``plot`` and the
command line need without running anything) is apart from running the
configurations (``sweep``). Rows are rewritten after every configuration, so
a sweep can be resumed. Reading them back (``load_results``) checks each row
against the report's schema and skips one that does not hold what it says,
with a warning naming it. One sweep writes a directory at a time: it holds an
``flock`` of ``DIR/.sweep.lock`` (released by the kernel if it dies); a
second one gets ``SweepError``.
"""

from __future__ import annotations

import csv
import fcntl
import logging
import os
from pathlib import Path

from tf_mobileperf.format import finite_json, schema
from tf_mobileperf.format.reader import read_bytes
from tf_mobileperf.output.files import write_json

log = logging.getLogger(__name__)

#: Summary keys copied to results.csv (scalars only): where the row ran, then its configuration and results.
CSV_KEYS = [
    "board_type",
    "host",
    "board",
    "jetpack",
    "model",
    "batch_size",
    "power_mode",
    "power_mode_name",
    "jetson_clocks",
    "steps",
    "warmup_steps",
    "input_size",
    "sensors",
    "success",
    "failed_step",
    "cause",
    "steps_measured",
    "energy_total",
    "energy_per_step_j",
    "energy_per_sample_j",
    "energy_active_total",
    "energy_active_per_step_j",
    "energy_active_per_sample_j",
    "samples_per_s",
    "power_avg",
    "gpu_util_avg",
    "cpu_util_avg",
    "process_cpu_util_avg",
    "machine",
    "other_cpu_pct",
    "steal_pct",
    "mem_peak_gb",
    "gpu_mem_peak_gb",
    "gpu_device_mem_peak_gb",
    "proc_peak_gb",
    "step_time_s_mean",
    "memory_limit_bytes",
    "limited_quantity",
    "limited_peak_gb",
    "limited_cap_gb",
]
LOCK_FILE = ".sweep.lock"


#: The largest results.json read: a row is ~2 KB, so about 100,000 configurations.
MAX_RESULTS_BYTES = 256 * 2**20


class SweepError(Exception):
    """A sweep directory or its results cannot be used: in use by another sweep, not a directory, unreadable."""


def read_rows(path: Path) -> list[dict]:
    """Every row of a sweep's results.json, as written (NaN and infinity as None), unchecked: the sweep resumes
    from these and keeps every row it finds.

    Args:
        path: The results.json file.

    Returns:
        The rows, each a dict with at least ``model`` and ``batch_size``.

    Raises:
        SweepError: the file is missing, unreadable, over ``MAX_RESULTS_BYTES``, not JSON, or not a list of
            rows with ``model`` and ``batch_size``; the message names it.
    """
    try:
        body = read_bytes(Path(path), MAX_RESULTS_BYTES)  # a FIFO, a folder or a link loop is refused, not waited on
        if body is None:
            raise FileNotFoundError(path)
        rows = finite_json.loads(body)
    except FileNotFoundError:
        raise SweepError(f"no sweep results at {path}") from None
    except RecursionError:
        raise SweepError(f"{path} nests too deeply to be a sweep's results.json; move it away to start over") from None
    except (OSError, ValueError) as exc:
        raise SweepError(f"{path} is not a sweep's results.json ({exc}); move it away to start over") from None
    if not (isinstance(rows, list) and all(isinstance(r, dict) and {"model", "batch_size"} <= r.keys() for r in rows)):
        raise SweepError(
            f"{path} is not a sweep's results.json (not a list of rows with model and batch_size); "
            "move it away to start over"
        )
    return rows


def load_results(path: Path) -> list[dict]:
    """The rows of a sweep's results.json that hold what the schema says (``schema.check_row``), for reading
    them back (the figures, report.html).

    A row that does not (a batch size that is null or text, a success that is not true or false, a number that
    is text) is skipped with a warning naming the row and the field.

    Args:
        path: The results.json file.

    Returns:
        The rows that hold, as ``schema.check_row`` returns them.

    Raises:
        SweepError: no row is left, or the file is missing or not a sweep's (``read_rows``).
    """
    rows = []
    for i, row in enumerate(read_rows(path), 1):
        try:
            rows.append(schema.check_row(row, f"{path} row {i} (model {row['model']!r})"))
        except schema.ReportError as exc:
            log.warning("skipped %s", exc)
    if not rows:
        raise SweepError(f"{path} has no row to read (each is skipped, with a warning saying why)")
    return rows


class Results:
    """results.json + results.csv of a sweep directory, rewritten after each row.

    Holds the directory's lock from opening to ``close``: an ``flock`` of
    ``.sweep.lock``, which the kernel releases if the process dies.
    """

    def __init__(self, out: Path):
        if out.exists() and not out.is_dir():
            raise SweepError(f"{out} is not a directory")
        out.mkdir(parents=True, exist_ok=True)
        self.out = out
        self.path = out / "results.json"
        self._lock: int | None = _lock(out / LOCK_FILE)
        try:
            self.rows: list[dict] = read_rows(self.path) if self.path.exists() else []
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Releases the directory's lock; a second call does nothing."""
        if self._lock is not None:
            os.close(self._lock)  # releases the flock
            self._lock = None

    def __enter__(self) -> Results:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def done(self, model: str, batch_size: int, key: dict) -> dict | None:
        """The recorded row of a configuration, if any.

        Args:
            model: A zoo name.
            batch_size: The batch size.
            key: The rest of its configuration (``SweepConfig.key``).

        Returns:
            The first row recorded for it, or None.
        """
        return next(
            (r for r in self.rows if r["model"] == model and r["batch_size"] == batch_size and r.get("config") == key),
            None,
        )

    def add(self, row: dict) -> dict:
        """Records a row and rewrites results.json and results.csv, unless it is not a result (``retry``: a
        warning says it was not recorded).

        Args:
            row: The configuration's row.

        Returns:
            ``row``, unchanged.
        """
        if row.get("retry"):
            log.warning(
                "%s batch %s did not run (%s); it is not recorded and the next sweep retries it",
                row.get("model"),
                row.get("batch_size"),
                row.get("cause"),
            )
            return row
        self.rows.append(row)
        write_json(self.path, self.rows)
        with open(self.out / "results.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=CSV_KEYS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows((r.get("config") or {}) | r | contention_columns(r) for r in self.rows)
        return row


def contention_columns(row: dict) -> dict:
    """A row's contention block (``session.contention``) as flat columns.

    Args:
        row: A sweep's row.

    Returns:
        ``machine`` ("busy" or "quiet"), ``other_cpu_pct`` and ``steal_pct``; empty when the row has no block.
    """
    block = row.get("contention") or {}
    if not block:
        return {}
    return {
        "machine": block.get("verdict"),
        "other_cpu_pct": block.get("other_cpu_pct"),
        "steal_pct": block.get("steal_pct"),
    }


def _lock(path: Path) -> int:
    """An open descriptor holding an exclusive flock of ``path``; SweepError if another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise SweepError(
            f"{path.parent} is in use by another sweep (pid {holder}); "
            "wait for it to end or choose another output directory"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd
