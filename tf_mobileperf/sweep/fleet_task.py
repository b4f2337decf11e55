"""A fleet sweep's Ray task: one configuration on the board Ray gave it, its run directory sent back as bytes.

It exists apart from ``fleet`` (the driver) because it is what runs on the
boards: it imports no TensorFlow (its child does), Ray only for the node's
id (the row's ``ray_node``), and runs the sweep's ``run_one``, so a configuration runs in the same
isolated child as in a local sweep (memory limit, out of memory and the OOM killer, progress file, its process
group killed when the task is cancelled). The run is measured into a
temporary directory of the board and returned as a tar archive, so the
driver's ``--out`` need not be shared with the boards.
"""

from __future__ import annotations

import dataclasses
import io
import shutil
import tarfile
import tempfile
from pathlib import Path

from tf_mobileperf.sweep.config import SweepConfig
from tf_mobileperf.sweep.runner import run_one


def run_on_board(model: str, batch_size: int, config: SweepConfig) -> tuple[dict, bytes]:
    """Runs one configuration on this board in a temporary sweep directory, as a Ray task.

    Args:
        model: A zoo name.
        batch_size: The batch size.
        config: The sweep's configuration (its ``out`` is replaced by the temporary directory).

    Returns:
        (row, run directory as tar.gz bytes); the row's ``logdir`` is relative to the sweep directory and its
        ``ray_node`` is this node's id.
    """
    import ray

    with tempfile.TemporaryDirectory(prefix="mobileperf-fleet-") as tmp:
        row = run_one(model, batch_size, dataclasses.replace(config, out=Path(tmp)))
        logdir = Path(row["logdir"])
        row["logdir"] = str(logdir.relative_to(tmp))
        row["ray_node"] = ray.get_runtime_context().get_node_id()
        return row, pack(logdir)


def pack(directory: Path) -> bytes:
    """A run directory as tar.gz bytes.

    Args:
        directory: The run directory.

    Returns:
        Its files as tar.gz bytes, or empty bytes where ``directory`` is not a directory (the child made none).
    """
    if not directory.is_dir():
        return b""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(directory, arcname=".")
    return buffer.getvalue()


def unpack(data: bytes, directory: Path) -> None:
    """Replaces ``directory`` with the run ``pack`` made; no path in the archive leaves it.

    Args:
        data: ``pack``'s bytes; empty: ``directory`` is removed and not made again.
        directory: Where the run goes.
    """
    shutil.rmtree(directory, ignore_errors=True)
    if not data:
        return
    directory.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(directory, filter="data")
