"""Trains with the callback while every file it writes may hold 32 KiB at most.

RLIMIT_FSIZE with SIGXFSZ ignored makes writes past the limit fail with
EFBIG, as a full disk fails them with ENOSPC. Arg: LOGDIR. Prints the
in-memory report's counts as JSON.
"""

import json
import resource
import signal
import sys

from tf_mobileperf import MobilePerfCallback

from helpers.training import constant_sensor, data, small_model

LIMIT = 32 * 1024
cb = MobilePerfCallback(sys.argv[1], idle_s=0, sensors=[constant_sensor()], sample_period_ms=1.0)
model = small_model()
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))
model.fit(*data(16_000), batch_size=8, epochs=1, callbacks=[cb], verbose=0)
summary = cb.report.summary()
print(
    json.dumps(
        {
            "steps": len(cb.report.steps),
            "steps_measured": summary["steps_measured"],
            "power_avg": summary["power_avg"],
            "success": summary["success"],
        }
    )
)
