"""Desktop and server NVIDIA GPUs through NVML (nvidia-ml-py).

Power comes from ``nvmlDeviceGetPowerUsage`` (on Ampere and newer a 1 s
moving average) or, where the driver has it, the instantaneous field
``NVML_FI_DEV_POWER_INSTANT``. On Volta and newer the total-energy counter
(mJ since driver load) is also read; the join prefers a counter over
integrating power and the report says which one it used. The graphics
clock is read where the driver gives it; on Jetson AGX Thor (OpenRM) NVML
is the source of the GPU's utilization, clock and memory, and a power the
driver does not measure has no channel.
"""

from __future__ import annotations

from typing import Mapping

from tf_mobileperf.sensors.base import NAN, Channel, Sensor, SensorUnavailable


class NvmlSensor(Sensor):
    """Power (W), energy counter (J), utilization (%), clock (Hz) and memory (B) per GPU.

    Args:
        indices: GPU indices to read; all visible GPUs by default.
    """

    name = "nvml"
    min_period_s = 0.01
    provides = frozenset({("power", "gpu"), ("energy", "gpu"), ("util", "gpu"), ("clock", "gpu"), ("memory", "gpu")})

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
        self._has_power: dict[int, bool] = {}
        self._has_clock: dict[int, bool] = {}
        for i, handle in self._handles.items():
            self.channels += self._gpu_channels(i, handle)

    def _gpu_channels(self, i: int, handle) -> list[Channel]:
        """GPU ``i``'s channels: power, energy counter and clock only where its driver gives them."""
        nvml = self._nvml
        self._has_energy[i] = self._try(nvml.nvmlDeviceGetTotalEnergyConsumption, handle) is not None
        self._instant[i] = not _isnan(self._instant_power(handle))
        self._has_power[i] = self._instant[i] or self._try(nvml.nvmlDeviceGetPowerUsage, handle) is not None
        self._has_clock[i] = self._clock(handle) is not None
        power_source = ("NVML_FI_DEV_POWER_INSTANT" if self._instant[i]
                        else "nvmlDeviceGetPowerUsage" if self._has_power[i] else None)
        channels = []
        if power_source:
            channels.append(Channel(f"gpu{i}_power", "power", power_source, group="gpu", device="gpu", rail=f"gpu{i}"))
        if self._has_energy[i]:
            channels.append(Channel(f"gpu{i}_energy", "energy", "nvmlDeviceGetTotalEnergyConsumption",
                                    group="gpu", device="gpu", rail=f"gpu{i}"))
        channels.append(Channel(f"gpu{i}_util", "util", "nvmlDeviceGetUtilizationRates", group="gpu", device="gpu"))
        if self._has_clock[i]:
            channels.append(Channel(f"gpu{i}_clock", "clock", "nvmlDeviceGetClockInfo(NVML_CLOCK_GRAPHICS)",
                                    group="gpu", device="gpu"))
        channels.append(Channel(f"gpu{i}_mem_used", "memory", "nvmlDeviceGetMemoryInfo", group="mem", device="gpu"))
        memory = self._try(nvml.nvmlDeviceGetMemoryInfo, handle)
        name = self._try(nvml.nvmlDeviceGetName, handle)
        self._meta["gpus"][i] = {
            "name": name.decode() if isinstance(name, bytes) else name,
            "memory_total_bytes": getattr(memory, "total", None),
            "energy_counter": self._has_energy[i],
            "power_source": power_source,
        }
        return channels

    def _clock(self, handle) -> float | None:
        """The graphics clock in Hz; None where this pynvml or driver has none."""
        get = getattr(self._nvml, "nvmlDeviceGetClockInfo", None)
        kind = getattr(self._nvml, "NVML_CLOCK_GRAPHICS", None)
        mhz = None if get is None or kind is None else self._try(get, handle, kind)
        return None if mhz is None else float(mhz) * 1e6

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
            elif self._has_power[i]:
                milliwatts = self._try(nvml.nvmlDeviceGetPowerUsage, handle)
                out[f"gpu{i}_power"] = NAN if milliwatts is None else milliwatts / 1000.0
            if self._has_energy[i]:
                millijoules = self._try(nvml.nvmlDeviceGetTotalEnergyConsumption, handle)
                out[f"gpu{i}_energy"] = NAN if millijoules is None else millijoules / 1000.0
            util = self._try(nvml.nvmlDeviceGetUtilizationRates, handle)
            out[f"gpu{i}_util"] = NAN if util is None else float(util.gpu)
            if self._has_clock[i]:
                clock = self._clock(handle)
                out[f"gpu{i}_clock"] = NAN if clock is None else clock
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
