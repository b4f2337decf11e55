"""Trains with the callback until a signal arrives from a timer, started after
batch 30 so that the machine's load cannot make it land in the first steps. Args: LOGDIR SIGNAME.

SIGINT: the callback writes the partial report, then Python's handler raises
KeyboardInterrupt, caught here (exit 130). SIGTERM: the callback writes the
partial report, then the default action ends the process.
"""

import os
import signal
import sys
import threading

import keras

from tf_mobileperf import MobilePerfCallback

from helpers.training import constant_sensor, data, small_model

logdir, signame = sys.argv[1], sys.argv[2]
cb = MobilePerfCallback(logdir, idle_s=0, sensors=[constant_sensor()], batch_size=8)
timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), getattr(signal, signame)))
start_timer = keras.callbacks.LambdaCallback(
    on_train_batch_end=lambda batch, logs: timer.start() if batch == 30 else None
)
x, y = data(400_000)
try:
    small_model().fit(x, y, batch_size=8, epochs=1, callbacks=[start_timer, cb], verbose=0)
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
    sys.exit(130)
print("FIT_RETURNED")
