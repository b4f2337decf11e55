"""The run summary that makes a run show up in the dashboard.

The summary is a string tensor (the report summary as JSON) under
``mobileperf/run``; TensorBoard's data provider then lists the run under our
plugin, and the dashboard reads the summary through it. Step tables and raw
samples are files under ``<run>/plugins/mobileperf/`` (named in
``names``, read by ``reader``), because TensorBoard keeps only a few tensor
events per tag. Built as a protobuf directly: no TensorFlow op runs.
"""

from __future__ import annotations

import json

from tensorboard.compat.proto import summary_pb2
from tensorboard.util import tensor_util

from . import names, schema
from .finite_json import finite


def create_summary_metadata() -> summary_pb2.SummaryMetadata:
    """Metadata that marks a tensor as this plugin's run summary."""
    return summary_pb2.SummaryMetadata(
        display_name="MobilePerf run summary",
        summary_description="tf-mobileperf report summary (JSON)",
        data_class=summary_pb2.DATA_CLASS_TENSOR,
        plugin_data=summary_pb2.SummaryMetadata.PluginData(
            plugin_name=names.PLUGIN_NAME, content=str(names.PROTO_VERSION).encode()
        ),
    )


def run_summary(summary: dict) -> summary_pb2.Summary:
    """A ``Summary`` proto holding a run summary for this plugin, marked with the report format's version and kind.

    Args:
        summary: The run summary (JSON-ready; NaN and infinity are written as null); its ``kind``, where it has
            one, says which kind of report it is (by default a report's).

    Returns:
        The proto: one string tensor, the summary as JSON, under ``names.RUN_TAG``.

    Raises:
        ValueError: its ``kind`` is not a kind of report.
    """
    text = json.dumps(schema.stamped(finite(summary), summary.get("kind", schema.REPORT)), allow_nan=False)
    value = summary_pb2.Summary.Value(
        tag=names.RUN_TAG, metadata=create_summary_metadata(), tensor=tensor_util.make_tensor_proto(text.encode())
    )
    return summary_pb2.Summary(value=[value])
