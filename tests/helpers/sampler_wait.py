"""Waiting for a sampler's rows by count, not by wall time: a loaded machine gives the sampler fewer ticks."""

from __future__ import annotations

import time


def wait_for_rows(sampler, count: int, timeout_s: float = 20.0) -> None:
    """Returns once ``sampler`` has written ``count`` rows since it was made, or after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while sampler.rows_written < count and time.monotonic() < deadline:
        time.sleep(0.01)
