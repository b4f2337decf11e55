"""What a zoo entry is: a builder, a synthetic data source, a real-data hook."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One model family of the paper.

    Args:
        name: Short name used on the command line ("cnn", "resnet50", ...).
        family: The paper's family ("CNN", "RNN", "GAN", "RL", "Transformer").
        build_fn: ``build_fn(input_size) -> compiled keras.Model``.
        data_fn: ``data_fn(rng, n, input_size) -> (x, y)`` synthetic samples.
        default_input_size: Input size when none is given.
        real_data: Where real data comes from (a loader's name), or None.
    """

    name: str
    family: str
    build_fn: Callable
    data_fn: Callable
    default_input_size: int | None = None
    real_data: str | None = None

    def build(self, input_size: int | None = None):
        return self.build_fn(input_size or self.default_input_size)

    def synthetic(self, batch_size: int, batches: int, input_size: int | None = None, seed: int = 0):
        """``batches`` batches of random data of the model's shapes, as (x, y) arrays."""
        rng = np.random.default_rng(seed)
        return self.data_fn(rng, batch_size * batches, input_size or self.default_input_size)
