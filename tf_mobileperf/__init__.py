"""tf-mobileperf: what one training step costs on the device it runs on.

Power and energy per rail, per-core CPU and GPU utilization, peak memory and
whether training survived, measured the way Liu et al. (2019) measured
training on a Jetson TX2: warm-up steps skipped, power sampled every 5 ms,
energy integrated over each step's own time window.
"""

__version__ = "0.1.0"

import importlib

#: The public names and the module each lives in. They are imported on first use, so the
#: command-line tools and the dashboard do not pay for TensorFlow and Keras unless they train.
_PUBLIC = {
    "MobilePerfCallback": "tf_mobileperf.callback",
    "PerfMonitor": "tf_mobileperf.session.monitor",
    "Report": "tf_mobileperf.steps.report",
    "StepRecord": "tf_mobileperf.steps.records",
}

__all__ = list(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
