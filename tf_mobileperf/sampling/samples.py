"""Rows drained from the sampler, as numpy arrays."""

from __future__ import annotations

import dataclasses

import numpy as np

from tf_mobileperf.sensors.base import Channel


@dataclasses.dataclass
class Samples:
    """Rows drained from the sampler: ``t`` (n,) seconds, ``values`` (n, channels).

    ``on_grid`` marks the rows of the sampling grid (None: all are); the others are readings of sensors read
    in their own thread, each at its read's instant, with NaN in every other channel."""

    t: np.ndarray
    values: np.ndarray
    channels: list[Channel]
    on_grid: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.t)
