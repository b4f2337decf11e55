"""Desktop and server NVIDIA GPUs through NVML (nvidia-ml-py): each value read at its own pace, in the
process that reads it.

Measured on one H200 (driver 580, nvidia-ml-py 13, inside a VM), the facts
this design follows:

- NVML belongs to the process that initialised it: used in a child made by
  ``os.fork()`` every call raises ``NVMLError: Uninitialized``, and
  ``nvmlInit()`` again in the child works. So no handle crosses a process
  boundary: each sensor opens NVML in the process that reads it
  (``NvmlSession``); a forked child, or a copy unpickled in a spawned
  sampler, calls ``nvmlInit`` and gets its handles again by index, checking
  each GPU's UUID against the one probed.
- A failed call is a failed read in NVML's words (``SensorReadError``, "NVML:
  ...", as one channel's value), never a quiet NaN: a swallowed
  "Uninitialized" would leave every NVML channel of a run empty with no
  sensor error counted.
- One call costs: ``nvmlDeviceGetTotalEnergyConsumption`` 3.9-4.8 ms (a
  driver round trip), ``nvmlDeviceGetFieldValues(NVML_FI_DEV_POWER_INSTANT)``
  3.5 us, ``nvmlDeviceGetPowerUsage`` 1.1 us, ``nvmlDeviceGetUtilizationRates``
  0.9 us, ``nvmlDeviceGetClockInfo`` 3.4 us, ``nvmlDeviceGetMemoryInfo`` 5.2 us.
- Values change (read every 1 ms for 1.5-2 s): the energy counter every ~100
  ms (99-102), the instant power every ~100 ms, ``nvmlDeviceGetPowerUsage``
  every ~100 ms (a 1 s moving average), utilization every ~200 ms, memory
  used only when allocations change.

Hence two sensors, built from one probe by ``nvml_sensors`` (the registry's
"nvml" entry):

- ``NvmlSensor``: power (the instant field where the driver has it, else
  ``nvmlDeviceGetPowerUsage``), utilization, graphics clock and memory used.
  Each value is read at the rate it changes (power every ~100 ms,
  utilization every ~200 ms, clock and memory every 0.1 s: they change on
  events), only when its own period has come; a value not due is left out
  of the reading (NaN, not a failure).
- ``NvmlEnergySensor``: the total-energy counter (Volta and newer), read in
  its own thread (``own_thread``) so that its ~4 ms call never sits in the
  sampler's 5 ms loop, on a grid of its own, every max(0.3 T, 10 ms, its CPU
  cost / 0.2%) where T is the counter's change period measured at probe time
  (``rates``) and the CPU cost that of one read of every GPU's counter
  (``ENERGY_FRACTION`` says why 0.3).

Both say in ``metadata()["nvml_reads"]`` what was measured per GPU (each
query's cost and change period) and the read period chosen and why. No
reading on such GPUs resolves a step shorter than ~100 ms: per-step energy
of shorter steps comes from interpolating the counter between its update
instants. On Jetson AGX Thor (OpenRM) NVML gives the GPU's utilization,
clock and memory, and a power the driver does not measure has no channel.
"""

from tf_mobileperf.sensors.nvml.probe import NvmlProbe, probe_nvml
from tf_mobileperf.sensors.nvml.sensors import NvmlEnergySensor, NvmlSensor, NvmlSensorBase, nvml_sensors
from tf_mobileperf.sensors.nvml.session import LIBRARY, NvmlSession

__all__ = [
    "LIBRARY",
    "NvmlEnergySensor",
    "NvmlProbe",
    "NvmlSensor",
    "NvmlSensorBase",
    "NvmlSession",
    "nvml_sensors",
    "probe_nvml",
]
