"""A fake pynvml with two GPUs drawing constant power, for tests on machines without NVIDIA GPUs.

GPU i draws WATTS[i]; its total-energy counter (mJ) grows at that rate on
time.monotonic(), as a Volta+ driver's does. Nothing here is a reading of
real hardware.
"""

import time
from types import SimpleNamespace

WATTS = [150.0, 90.0]
NVML_FI_DEV_POWER_INSTANT = 186


class NVMLError(Exception):
    pass


def nvmlInit():
    pass


def nvmlShutdown():
    pass


def nvmlDeviceGetCount():
    return len(WATTS)


def nvmlDeviceGetHandleByIndex(i):
    return i


def nvmlDeviceGetFieldValues(handle, fields):
    return [SimpleNamespace(nvmlReturn=0, value=SimpleNamespace(uiVal=int(WATTS[handle] * 1000)))]


def nvmlDeviceGetPowerUsage(handle):
    return int(WATTS[handle] * 1000)


def nvmlDeviceGetTotalEnergyConsumption(handle):
    return WATTS[handle] * 1000.0 * time.monotonic()


def nvmlDeviceGetUtilizationRates(handle):
    return SimpleNamespace(gpu=50 + 20 * handle, memory=10)


def nvmlDeviceGetMemoryInfo(handle):
    return SimpleNamespace(total=80 * 2**30, used=(10 + handle) * 2**30)


def nvmlDeviceGetName(handle):
    return f"Fake GPU {handle}"
