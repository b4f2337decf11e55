"""Trains with the callback and dies inside a step, without its report, as a process killed from outside does.

Args: LOGDIR BATCH_SIZE HOW [DIE_AT]. HOW "abort": at batch DIE_AT (default 4) it writes what libstdc++
writes for an uncaught ``std::bad_alloc`` to stderr and calls ``os.abort()`` (SIGABRT, as TensorFlow's
allocator does under a memory limit). HOW "wait": at batch DIE_AT it prints MEASURING and sleeps until it
is killed (the test sends SIGKILL, as the OOM killer does).
"""

import os
import sys
import time

import keras

from tf_mobileperf import MobilePerfCallback

from helpers.training import constant_sensor, data

logdir, batch_size, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
die_at = int(sys.argv[4]) if len(sys.argv) > 4 else 4


def die(batch, logs=None):
    if batch != die_at:
        return
    if how == "abort":
        sys.stderr.write("terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc\n")
        sys.stderr.flush()
        os.abort()
    print("MEASURING", flush=True)
    while True:
        time.sleep(1)


model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32), keras.layers.Dense(1)], name="cnn")
model.compile("sgd", "mse")
x, y = data(batch_size * (die_at + 4))
cb = MobilePerfCallback(logdir, idle_s=0, sensors=[constant_sensor()], batch_size=batch_size)
model.fit(
    x,
    y,
    batch_size=batch_size,
    epochs=1,
    verbose=0,
    callbacks=[cb, keras.callbacks.LambdaCallback(on_train_batch_begin=die)],
)
print("FIT_RETURNED")
