"""Trains with the callback until a signal arrives from a timer. Args: LOGDIR SIGNAME.

SIGINT: the callback writes the partial report, then Python's handler raises
KeyboardInterrupt, caught here (exit 130). SIGTERM: the callback writes the
partial report, then the default action ends the process.
"""

import signal
import sys
import threading
import os

from tf_mobileperf import MobilePerfCallback
from helpers.training import constant_sensor, data, small_model

logdir, signame = sys.argv[1], sys.argv[2]
cb = MobilePerfCallback(logdir, sensors=[constant_sensor()], batch_size=8)
threading.Timer(2.0, lambda: os.kill(os.getpid(), getattr(signal, signame))).start()
x, y = data(400_000)
try:
    small_model().fit(x, y, batch_size=8, epochs=1, callbacks=[cb], verbose=0)
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
    sys.exit(130)
print("FIT_RETURNED")
