"""The dashboard's backend as a test reaches it: runs trained by the real callback with the synthetic sensor, and
TensorBoard's own WSGI app (werkzeug client) over a logdir."""

from __future__ import annotations

import json
import math
import time

import keras
import numpy as np
from tensorboard.backend import application
from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.plugins import base_plugin
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.util import tensor_util
from werkzeug import test as werkzeug_test
from werkzeug import wrappers

from tf_mobileperf import MobilePerfCallback
from tf_mobileperf.format import names
from tf_mobileperf.format.summary import create_summary_metadata
from tf_mobileperf.sensors import SyntheticSensor
from tf_mobileperf_tensorboard.mobileperf_plugin import MobilePerfPlugin

BASE = "/data/plugin/mobileperf"


def train(logdir, batch_size=32, profile_steps=None):
    """A 12-step fit of a small MLP measured into ``logdir`` (synthetic power and memory); its report."""
    sensor = SyntheticSensor(
        power_w={"VDD_IN": lambda t: 5.0 + math.sin(t * 20), "VDD_SYS_GPU": lambda t: 2.0},
        memory_b={"ram_used": lambda t: 2e9},
        groups={"VDD_IN": "total", "VDD_SYS_GPU": "gpu"},
        roles={"ram_used": {"device": "board"}, "VDD_SYS_GPU": {"device": "gpu"}},
    )
    cb = MobilePerfCallback(logdir, idle_s=0, sensors=[sensor], batch_size=batch_size, profile_steps=profile_steps)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(32), keras.layers.Dense(1)], name="mlp")
    model.compile("sgd", "mse")
    x = np.ones((batch_size * 12, 8), "float32")
    model.fit(x, x[:, :1], batch_size=batch_size, epochs=1, callbacks=[cb], verbose=0)
    return cb.report


def client_for(logdir):
    """A werkzeug client of TensorBoard's app with the MobilePerf plugin over ``logdir``, and the plugin."""
    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, str(logdir))
    context = base_plugin.TBContext(logdir=str(logdir), multiplexer=multiplexer, data_provider=provider)
    plugin = MobilePerfPlugin(context)
    app = application.TensorBoardWSGI([plugin], data_provider=provider)
    return werkzeug_test.Client(app, wrappers.Response), plugin


def get(client, route, **params):
    """(status, JSON body or None) of the plugin's ``route`` with ``params``."""
    response = client.get(f"{BASE}/{route}", query_string=params)
    return response.status_code, json.loads(response.get_data()) if response.mimetype == "application/json" else None


def write_summary(run_dir, tensor) -> None:
    """A run whose summary tensor (what the runs list shows) is ``tensor`` (a numpy value or text)."""
    value = summary_pb2.Summary.Value(
        tag=names.RUN_TAG, metadata=create_summary_metadata(), tensor=tensor_util.make_tensor_proto(tensor)
    )
    writer = EventFileWriter(str(run_dir))
    writer.add_event(event_pb2.Event(wall_time=time.time(), step=0, summary=summary_pb2.Summary(value=[value])))
    writer.close()
