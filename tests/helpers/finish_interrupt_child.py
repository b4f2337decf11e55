"""Ctrl-C (a real SIGINT) while the callback writes its report at the end of fit. Args: LOGDIR.

The signal is sent from inside the monitor's last collection, which runs while
the report is being finished; exits 130 after KeyboardInterrupt."""

import os
import signal
import sys

from tf_mobileperf import MobilePerfCallback

from helpers.training import constant_sensor, data, small_model


class InterruptWhileFinishing(MobilePerfCallback):
    def on_train_end(self, logs=None):
        collect = self.monitor._collect

        def collect_then_interrupt(final=False):
            if final:
                os.kill(os.getpid(), signal.SIGINT)
            return collect(final)

        self.monitor._collect = collect_then_interrupt
        super().on_train_end(logs)


cb = InterruptWhileFinishing(sys.argv[1], sensors=[constant_sensor()], batch_size=8)
try:
    small_model().fit(*data(8 * 20), batch_size=8, epochs=1, callbacks=[cb], verbose=0)
except KeyboardInterrupt:
    sampler = cb.monitor.sampler
    restored = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    print(f"INTERRUPTED sampler_running={sampler.running} handler_restored={restored}", flush=True)
    sys.exit(130)
print("FIT_RETURNED", flush=True)
