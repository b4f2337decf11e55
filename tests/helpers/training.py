"""A small Keras model, its data and a constant synthetic power sensor, shared by the tests."""

from __future__ import annotations

import keras
import numpy as np

from tf_mobileperf.sensors import SyntheticSensor


def small_model(steps_per_execution: int = 1) -> keras.Model:
    """Two dense layers, named "mlp" (its report's and the dashboard's name for it)."""
    model = keras.Sequential(
        [keras.Input((16,)), keras.layers.Dense(256, activation="relu"), keras.layers.Dense(1)], name="mlp"
    )
    model.compile("adam", "mse", steps_per_execution=steps_per_execution)
    return model


def data(n: int = 640) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.random((n, 16), dtype=np.float32), rng.random((n, 1), dtype=np.float32)


def constant_sensor(watts: float = 5.0) -> SyntheticSensor:
    """Synthetic: VDD_IN at ``watts`` (the total), VDD_SYS_GPU at 2 W."""
    return SyntheticSensor(
        power_w={"VDD_IN": lambda t: watts, "VDD_SYS_GPU": lambda t: 2.0},
        groups={"VDD_IN": "total", "VDD_SYS_GPU": "gpu"},
    )
