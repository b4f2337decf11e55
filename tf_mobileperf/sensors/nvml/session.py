"""NVML opened in the process that reads it: handles by index, reopened after a fork, checked by UUID."""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Mapping
from typing import Any

from tf_mobileperf.sensors.errors import SensorReadError

log = logging.getLogger(__name__)


#: The import name of nvidia-ml-py.
LIBRARY = "pynvml"


def as_text(value) -> str | None:
    """A text NVML gave, as a str.

    Args:
        value: A str, bytes (decoded as UTF-8, undecodable bytes replaced) or None.

    Returns:
        ``value`` decoded if it is bytes, else ``value`` as it is.
    """
    return value.decode(errors="replace") if isinstance(value, bytes) else value


class NvmlSession:
    """NVML opened in the process that reads it.

    ``handles()`` calls ``nvmlInit`` and gets each GPU's handle by index the
    first time it is called in a process (pid); in a forked child the
    parent's handles are never used. Pickled it keeps only the library's
    import name, the GPU indices and their UUIDs, so an unpickled copy opens
    its own. A GPU whose UUID is not the one probed fails the read.

    Args:
        library: The module's import name ("pynvml"; a fake's in tests).
        indices: GPU indices; all visible GPUs when None.
        uuids: Index -> UUID found at probe time, checked when reopening.
    """

    def __init__(
        self, library: str = LIBRARY, indices: list[int] | None = None, uuids: Mapping[int, str | None] | None = None
    ):
        self._setup(library, indices, uuids)

    def _setup(self, library: str, indices: list[int] | None, uuids: Mapping[int, str | None] | None) -> None:
        self.library = library
        self.indices = None if indices is None else list(indices)
        self.uuids = dict(uuids or {})
        self._pid: int | None = None
        self._nvml = None
        self._handles: dict[int, Any] = {}

    @property
    def nvml(self):
        """The library's module (imported by name on first use)."""
        if self._nvml is None:
            self._nvml = importlib.import_module(self.library)
        return self._nvml

    def handles(self) -> dict[int, Any]:
        """Index -> handle, opened in this process. Raises SensorReadError in NVML's words when it cannot."""
        if self._pid != os.getpid():
            self._open()
        return self._handles

    def _open(self) -> None:
        nvml, pid = self.nvml, os.getpid()
        self._pid, self._handles = None, {}
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            raise SensorReadError(f"NVML: nvmlInit in process {pid}: {exc}") from exc
        try:
            indices = self.indices if self.indices is not None else range(nvml.nvmlDeviceGetCount())
            handles = {i: nvml.nvmlDeviceGetHandleByIndex(i) for i in indices}
        except nvml.NVMLError as exc:
            self._shutdown()
            raise SensorReadError(f"NVML: getting the GPUs' handles in process {pid}: {exc}") from exc
        for i, handle in handles.items():
            uuid = gpu_uuid(nvml, handle)
            if self.uuids.get(i) and uuid and uuid != self.uuids[i]:
                self._shutdown()
                raise SensorReadError(f"NVML: GPU {i} is {uuid} in process {pid}, it was {self.uuids[i]} when probed")
        self._handles, self._pid = handles, pid
        if self.uuids:
            log.debug("NVML opened in process %d for GPUs %s", pid, sorted(handles))

    def _shutdown(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass

    def close(self) -> None:
        """Shuts NVML down if this process opened it."""
        if self._pid == os.getpid():
            self._shutdown()
        self._pid, self._handles = None, {}

    def __getstate__(self) -> dict:
        return {"library": self.library, "indices": self.indices, "uuids": self.uuids}

    def __setstate__(self, state: dict) -> None:
        self._setup(state["library"], state["indices"], state["uuids"])


def gpu_uuid(nvml, handle) -> str | None:
    """The GPU's UUID.

    Args:
        nvml: The NVML library's module.
        handle: The GPU's NVML handle.

    Returns:
        Its UUID; None where this library or driver does not give one.
    """
    try:
        return as_text(nvml.nvmlDeviceGetUUID(handle))
    except (AttributeError, nvml.NVMLError):
        return None
