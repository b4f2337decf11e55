"""Plugin name and summary metadata of the MobilePerf dashboard."""

from __future__ import annotations

from tensorboard.compat.proto import summary_pb2

PLUGIN_NAME = "mobileperf"
#: Tag of the per-run summary tensor (JSON of the report summary).
RUN_TAG = "mobileperf/run"
PROTO_VERSION = 0


def create_summary_metadata() -> summary_pb2.SummaryMetadata:
    """Metadata that marks a tensor as this plugin's run summary."""
    return summary_pb2.SummaryMetadata(
        display_name="MobilePerf run summary",
        summary_description="tf-mobileperf report summary (JSON)",
        data_class=summary_pb2.DATA_CLASS_TENSOR,
        plugin_data=summary_pb2.SummaryMetadata.PluginData(
            plugin_name=PLUGIN_NAME, content=str(PROTO_VERSION).encode()
        ),
    )
