"""Desktop and server NVIDIA GPUs through NVML (nvidia-ml-py).

Power comes from ``nvmlDeviceGetPowerUsage`` (on Ampere and newer a 1 s
moving average) or, where the driver has it, the instantaneous field
``NVML_FI_DEV_POWER_INSTANT``. On Volta and newer the total-energy counter
(mJ since driver load) is also read; the join prefers a counter over
integrating power and the report says which one it used.
"""

from __future__ import annotations

from typing import Mapping

from tf_mobileperf.sensors.base import NAN, Channel, Sensor, SensorUnavailable


class NvmlSensor(Sensor):
    """Power (W), energy counter (J), utilization (%) and memory (B) per GPU.

    Args:
        indices: GPU indices to read; all visible GPUs by default.
    """

    name = "nvml"
    min_period_s = 0.01
    provides = frozenset({("power", "gpu"), ("energy", "gpu"), ("util", "gpu"), ("memory", "gpu")})

    def __init__(self, indices: list[int] | None = None):
        try:
            import pynvml
        except ImportError as exc:
            raise SensorUnavailable("nvidia-ml-py is not installed (pip install tf-mobileperf[nvidia])") from exc
        self._nvml = pynvml
        try:
            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as exc:
            raise SensorUnavailable(f"NVML: {exc}") from exc
        if count == 0:
            pynvml.nvmlShutdown()
            raise SensorUnavailable("NVML found no NVIDIA GPU")
        self._handles = {i: pynvml.nvmlDeviceGetHandleByIndex(i) for i in (indices or range(count))}
        self.channels = []
        self._meta: dict = {"gpus": {}}
        self._has_energy: dict[int, bool] = {}
        self._instant: dict[int, bool] = {}
        for i, handle in self._handles.items():
            self._has_energy[i] = self._try(pynvml.nvmlDeviceGetTotalEnergyConsumption, handle) is not None
            self._instant[i] = not _isnan(self._instant_power(handle))
            power_source = "NVML_FI_DEV_POWER_INSTANT" if self._instant[i] else "nvmlDeviceGetPowerUsage"
            self.channels.append(Channel(f"gpu{i}_power", "power", power_source, group="gpu", device="gpu", rail=f"gpu{i}"))
            if self._has_energy[i]:
                self.channels.append(Channel(f"gpu{i}_energy", "energy", "nvmlDeviceGetTotalEnergyConsumption",
                                             group="gpu", device="gpu", rail=f"gpu{i}"))
            self.channels.append(Channel(f"gpu{i}_util", "util", "nvmlDeviceGetUtilizationRates", group="gpu", device="gpu"))
            self.channels.append(Channel(f"gpu{i}_mem_used", "memory", "nvmlDeviceGetMemoryInfo", group="mem", device="gpu"))
            memory = self._try(pynvml.nvmlDeviceGetMemoryInfo, handle)
            name = self._try(pynvml.nvmlDeviceGetName, handle)
            self._meta["gpus"][i] = {
                "name": name.decode() if isinstance(name, bytes) else name,
                "memory_total_bytes": getattr(memory, "total", None),
                "energy_counter": self._has_energy[i],
                "power_source": power_source,
            }

    def _try(self, fn, *args):
        try:
            return fn(*args)
        except self._nvml.NVMLError:
            return None

    def _instant_power(self, handle) -> float:
        field = getattr(self._nvml, "NVML_FI_DEV_POWER_INSTANT", None)
        if field is None:
            return NAN
        values = self._try(self._nvml.nvmlDeviceGetFieldValues, handle, [field])
        if not values or values[0].nvmlReturn != 0:
            return NAN
        return values[0].value.uiVal / 1000.0

    def read(self) -> Mapping[str, float]:
        nvml = self._nvml
        out: dict[str, float] = {}
        for i, handle in self._handles.items():
            if self._instant[i]:
                out[f"gpu{i}_power"] = self._instant_power(handle)
            else:
                milliwatts = self._try(nvml.nvmlDeviceGetPowerUsage, handle)
                out[f"gpu{i}_power"] = NAN if milliwatts is None else milliwatts / 1000.0
            if self._has_energy[i]:
                millijoules = self._try(nvml.nvmlDeviceGetTotalEnergyConsumption, handle)
                out[f"gpu{i}_energy"] = NAN if millijoules is None else millijoules / 1000.0
            util = self._try(nvml.nvmlDeviceGetUtilizationRates, handle)
            out[f"gpu{i}_util"] = NAN if util is None else float(util.gpu)
            memory = self._try(nvml.nvmlDeviceGetMemoryInfo, handle)
            out[f"gpu{i}_mem_used"] = NAN if memory is None else float(memory.used)
        return out

    def metadata(self) -> dict:
        return self._meta

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass


def _isnan(value: float) -> bool:
    return value != value
