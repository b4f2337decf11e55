"""One worker of a two-worker cluster on localhost, measured with PerfMonitor.

Args: LOGDIR INDEX PORTS WATTS STEPS MODE
  PORTS: "p0,p1"; WATTS: the synthetic sensor's constant power (each worker
  its own, so the combined energy tells the hosts apart); STEPS: 0 = until
  killed; MODE: "mwms" trains a Keras model with MultiWorkerMirroredStrategy
  in a custom loop (Keras 3's fit does not support that strategy), "plain"
  only sleeps 20 ms per step (for the worker-dies test).
"""

import json
import os
import sys
import time

logdir, index, ports, watts, steps, mode = (
    sys.argv[1],
    int(sys.argv[2]),
    sys.argv[3],
    float(sys.argv[4]),
    int(sys.argv[5]),
    sys.argv[6],
)
os.environ["TF_CONFIG"] = json.dumps(
    {"cluster": {"worker": [f"localhost:{p}" for p in ports.split(",")]}, "task": {"type": "worker", "index": index}}
)

from tf_mobileperf import PerfMonitor  # noqa: E402
from tf_mobileperf.sensors import SyntheticSensor  # noqa: E402

sensor = SyntheticSensor(power_w={"VDD_IN": lambda t: watts}, groups={"VDD_IN": "total"})

if mode == "mwms":
    import keras
    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = keras.Sequential(
            [keras.Input((16,)), keras.layers.Dense(256, activation="relu"), keras.layers.Dense(1)]
        )
        optimizer = keras.optimizers.Adam()
        optimizer.build(model.trainable_variables)
    rng = np.random.default_rng(index)
    data = (
        tf.data.Dataset.from_tensor_slices(
            (rng.random((1024, 16), dtype=np.float32), rng.random((1024, 1), dtype=np.float32))
        )
        .batch(64)
        .repeat()
    )
    batches = iter(strategy.experimental_distribute_dataset(data))

    @tf.function
    def train_step(iterator):
        def step(batch):
            x, y = batch
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((model(x, training=True) - y) ** 2) / strategy.num_replicas_in_sync
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return strategy.reduce("SUM", strategy.run(step, args=(next(iterator),)), axis=None)

    def one_step():
        train_step(batches)
else:

    def one_step():
        time.sleep(0.02)


with PerfMonitor(
    logdir, idle_s=0, sensors=[sensor], batch_size=64, combine_wait_s=3.0 if mode == "plain" else 60.0
) as perf:
    i = 0
    while steps == 0 or i < steps:
        with perf.step():
            one_step()
        i += 1
print("WORKER_DONE", perf.logdir, flush=True)
