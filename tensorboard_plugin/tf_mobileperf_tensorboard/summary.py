"""Writes the run summary that makes a run show up in the dashboard.

The summary is a string tensor (the report summary as JSON) under
``mobileperf/run``; TensorBoard's data provider then lists the run under our
plugin, and the dashboard reads the summary through it. Step tables and raw
samples are files under ``<run>/plugins/mobileperf/`` (see
``tf_mobileperf.storage``), because TensorBoard keeps only a few tensor
events per tag.
"""

from __future__ import annotations

import json

import tensorflow as tf

from . import metadata


def run_summary(summary: dict, step: int) -> None:
    """Writes ``summary`` (JSON-ready) at ``step`` into the default writer."""
    text = json.dumps(summary, allow_nan=False)
    tf.summary.write(metadata.RUN_TAG, tf.constant(text), step=step, metadata=metadata.create_summary_metadata())
