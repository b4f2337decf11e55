"""The DQN Q-network of the Atari case (Mnih et al. 2015), 84x84x4 frames in."""

from __future__ import annotations

import keras
import numpy as np

from tf_mobileperf.zoo.base import ModelSpec
from tf_mobileperf.zoo.shapes import DQN_WINDOWS

ACTIONS = 6  # Pong's action set


def build_dqn(size: int = 84, actions: int = ACTIONS) -> keras.Model:
    """The DQN Q-network (convolutions of ``shapes.DQN_WINDOWS``), compiled with Adam and the Huber loss.

    Args:
        size: Side of the square frames in pixels; each sample is 4 stacked frames of 0..255.
        actions: Number of actions, one Q-value out for each (Pong's 6 by default).

    Returns:
        The compiled ``keras.Model`` named "dqn".
    """
    model = keras.Sequential(
        [
            keras.Input((size, size, 4)),
            keras.layers.Rescaling(1 / 255.0),
            *[w.layer(activation="relu") for w in DQN_WINDOWS],  # shapes.DQN_WINDOWS: 8x8 stride 4, 4x4 stride 2, 3x3
            keras.layers.Flatten(),
            keras.layers.Dense(512, activation="relu"),
            keras.layers.Dense(actions),
        ],
        name="dqn",
    )
    model.compile(keras.optimizers.Adam(1e-4), keras.losses.Huber())
    return model


def _frames(rng, n, size):
    """Frames and regression targets of Q-values (what a DQN step fits)."""
    return rng.integers(0, 256, (n, size, size, 4)).astype(np.float32), rng.standard_normal((n, ACTIONS)).astype(
        np.float32
    )


DQN = ModelSpec("dqn", "RL", build_dqn, _frames, 84, "gymnasium + ale-py (examples/atari_dqn.py)")
