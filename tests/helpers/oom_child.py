"""Trains a model whose step N needs more memory than RLIMIT_AS allows.

Run as a child process by tests: TensorFlow then raises a real
ResourceExhaustedError on CPU. Args: LOGDIR FAIL_AT_BATCH ON_OOM [BATCHES_AFTER]
(default 2; 0 makes the failing batch the last one).
"""

import json
import os
import resource
import sys

# oneDNN's CPU kernels on AVX-512/AMX machines crash (SIGSEGV) when an allocation fails under
# RLIMIT_AS instead of raising; TF's own kernels raise ResourceExhaustedError, which is what is tested.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import keras
import numpy as np
import tensorflow as tf

from tf_mobileperf import MobilePerfCallback
from tf_mobileperf.sensors import SyntheticSensor

logdir, fail_at, on_oom = sys.argv[1], int(sys.argv[2]), sys.argv[3]
after = int(sys.argv[4]) if len(sys.argv) > 4 else 2

# Small weights, huge activations: batch x 2M floats (8 MB per sample).
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2_000_000), keras.layers.Dense(1)])
model.compile("sgd", "mse")


def batches():
    for i in range(fail_at + 1 + after):
        n = 4096 if i == fail_at else 4  # 32 GB of activations at the failing batch
        yield np.ones((n, 4), "float32"), np.ones((n, 1), "float32")


data = tf.data.Dataset.from_generator(
    batches, output_signature=(tf.TensorSpec((None, 4), tf.float32), tf.TensorSpec((None, 1), tf.float32))
)
sensor = SyntheticSensor(power_w={"VDD_IN": lambda t: 4.0}, groups={"VDD_IN": "total"})
cb = MobilePerfCallback(logdir, idle_s=0, sensors=[sensor], on_oom=on_oom, warmup_steps=2)

with open("/proc/self/status") as f:
    vm = [int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize")][0]
limit = vm + 6 * 2**30
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    model.fit(data, epochs=1, callbacks=[cb], verbose=0)
    print("FIT_RETURNED")
except tf.errors.ResourceExhaustedError:
    print("RAISED_OOM")
print(json.dumps({"success": cb.report.success, "failed_step": cb.report.failed_step}))
