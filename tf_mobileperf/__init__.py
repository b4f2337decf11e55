"""tf-mobileperf: what one training step costs on the device it runs on.

Power and energy per rail, per-core CPU and GPU utilization, peak memory and
whether training survived, measured the way Liu et al. (2019) measured
training on a Jetson TX2: warm-up steps skipped, power sampled every 5 ms,
energy integrated over each step's own time window.
"""

__version__ = "0.1.0"

from .callback import MobilePerfCallback
from .monitor import PerfMonitor
from .report import Report, StepRecord

__all__ = ["MobilePerfCallback", "PerfMonitor", "Report", "StepRecord"]
