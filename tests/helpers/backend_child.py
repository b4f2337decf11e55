"""Trains with the callback under the Keras backend named in KERAS_BACKEND. Args: LOGDIR.

Also checks that a real out-of-memory error of that backend counts as one:
under RLIMIT_AS, the backend is asked for an array of 64 GiB."""

import resource
import sys

import keras

from tf_mobileperf import MobilePerfCallback
from tf_mobileperf.session.backend import is_oom

from helpers.training import constant_sensor, data

model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)])
model.compile("adam", "mse")
cb = MobilePerfCallback(sys.argv[1], idle_s=0, sensors=[constant_sensor()], batch_size=8)
model.fit(*data(8 * 12), batch_size=8, epochs=1, callbacks=[cb], verbose=0)
print("BACKEND", keras.backend.backend(), flush=True)

soft, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (8 << 30, hard))
try:
    keras.ops.ones((8 << 30,), dtype="float64") + 1  # 64 GiB
    print("NO_OOM", flush=True)
except BaseException as exc:  # noqa: BLE001 - whatever the backend raises is what is checked
    print("OOM_ERROR", type(exc).__name__, is_oom(exc), flush=True)
