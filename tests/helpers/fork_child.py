"""Trains while its callbacks fork: a child of os.fork that exits normally (its exit
hooks run, multiprocessing's among them) and a fork-started multiprocessing helper
stopped with terminate(). Args: LOGDIR.

The os.fork child runs Python's exit hooks, then leaves with os._exit: what
sys.exit would do next, the final garbage collection, can hang on TensorFlow's
own locks in a forked child (whether or not anything measures)."""

import atexit
import multiprocessing as mp
import os
import sys
import time

import keras

from tf_mobileperf import MobilePerfCallback

from helpers.training import constant_sensor, data, small_model


def fork_and_exit(batch, logs):
    if batch == 5:
        pid = os.fork()
        if pid == 0:
            atexit._run_exitfuncs()
            os._exit(0)
        os.waitpid(pid, 0)
    if batch == 15:
        helper = mp.get_context("fork").Process(target=time.sleep, args=(60,))
        helper.start()
        time.sleep(0.2)
        helper.terminate()  # SIGTERM to a child that inherited the trainer's handlers
        helper.join()
        print("HELPER_EXIT", helper.exitcode, flush=True)


cb = MobilePerfCallback(sys.argv[1], idle_s=0, sensors=[constant_sensor()], batch_size=8)
forks = keras.callbacks.LambdaCallback(on_train_batch_end=fork_and_exit)
slow = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: time.sleep(0.02))
small_model().fit(*data(8 * 60), batch_size=8, epochs=1, callbacks=[forks, slow, cb], verbose=0)
print("FIT_RETURNED", flush=True)
