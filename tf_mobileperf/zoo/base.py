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
        """A new compiled model of this entry.

        Args:
            input_size: The image side (pixels) or sequence length (tokens); None or 0: ``default_input_size``.

        Returns:
            The compiled ``keras.Model`` that ``build_fn`` makes.
        """
        return self.build_fn(input_size or self.default_input_size)

    def synthetic(self, batch_size: int, batches: int, input_size: int | None = None, seed: int = 0):
        """``batches`` batches of random data of the model's shapes, as (x, y) arrays.

        Args:
            batch_size: Samples per batch.
            batches: Number of batches; ``batch_size * batches`` samples are drawn in all.
            input_size: The image side (pixels) or sequence length (tokens); None or 0: ``default_input_size``.
            seed: Seed of the random generator: the same seed gives the same data.

        Returns:
            (x, y) of ``batch_size * batches`` samples, as ``data_fn`` makes them (x a tuple where the model
            has two inputs).
        """
        rng = np.random.default_rng(seed)
        return self.data_fn(rng, batch_size * batches, input_size or self.default_input_size)
