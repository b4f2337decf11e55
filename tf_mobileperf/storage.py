"""On-disk series of a run, written as it is measured.

TensorBoard keeps only a few tensor events per tag, so raw samples live in
plain files under ``<run>/plugins/mobileperf/`` (as the profile plugin keeps
its traces): ``channels.json`` names the columns, ``samples.bin`` holds rows
of float64 (time, channel...) appended and flushed every drain, so a crash
loses at most one drain interval. A torn last row is ignored on reading.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
from pathlib import Path

import numpy as np

from .sensors.base import Channel

PLUGIN_DIR = "plugins/mobileperf"
CHANNELS_FILE = "channels.json"
SAMPLES_FILE = "samples.bin"


class SeriesWriter:
    """Appends sample rows to ``samples.bin`` next to their ``channels.json``."""

    def __init__(self, run_dir: str | Path, channels: list[Channel], metadata: dict):
        self.dir = Path(run_dir) / PLUGIN_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        header = {"version": 1, "columns": ["t"] + [c.name for c in channels],
                  "channels": [dataclasses.asdict(c) | {"unit": c.unit} for c in channels],
                  "clock": "time.monotonic (CLOCK_MONOTONIC), seconds", "metadata": metadata}
        write_json(self.dir / CHANNELS_FILE, header)
        self._file = open(self.dir / SAMPLES_FILE, "wb")

    def append(self, t: np.ndarray, values: np.ndarray) -> None:
        if len(t):
            rows = np.column_stack([t, values]).astype("<f8", copy=False)
            self._file.write(rows.tobytes())
            self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()


def read_series(run_dir: str | Path) -> tuple[dict, np.ndarray]:
    """Reads (header, rows) of a run's series; rows[:, 0] is time.

    Raises:
        FileNotFoundError: the run has no series.
        ValueError: the header is corrupt.
    """
    directory = Path(run_dir) / PLUGIN_DIR
    try:
        header = json.loads((directory / CHANNELS_FILE).read_text())
        width = len(header["columns"])
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"corrupt {directory / CHANNELS_FILE}: {exc}") from exc
    raw = np.fromfile(directory / SAMPLES_FILE, dtype="<f8")
    rows = raw[: len(raw) // width * width].reshape(-1, width)
    return header, rows


class StepsCsv:
    """``steps.csv``: one row per step, appended as steps are joined."""

    def __init__(self, path: str | Path, fields: list[str]):
        self.path = Path(path)
        self._file = open(self.path, "w", newline="")
        self._writer = csv.DictWriter(self._file, fieldnames=fields, extrasaction="ignore")
        self._writer.writeheader()
        self._file.flush()

    def write(self, rows: list[dict]) -> None:
        self._writer.writerows(rows)
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def write_json(path: Path, data: dict) -> None:
    """Writes JSON atomically (temp file + rename): readers never see half a file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, allow_nan=False))
    os.replace(tmp, path)


