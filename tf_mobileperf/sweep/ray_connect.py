"""Connecting to a Ray cluster for a fleet sweep: within a time bound, one line naming what failed, and a
loopback cluster kept on loopback."""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)


class FleetError(ValueError):
    """The fleet cannot run the sweep as asked (a board type no node has, no board at all): one line."""


#: How long ``connect`` waits for the cluster by default (``mobileperf sweep --ray-timeout``).
CONNECT_TIMEOUT_S = 30.0


#: Ray's switch for clusters of one machine (named for Windows and macOS, where it is the default): with it
#: off, Ray keeps a loopback address instead of putting the machine's interface address in its place.
LOOPBACK_ONLY = ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


@contextlib.contextmanager
def connect(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> Iterator:
    """Ray, connected to a cluster within a time bound (Ray itself retries for many minutes); disconnected at
    the end. A loopback address is kept on loopback (``LOOPBACK_ONLY``).

    Args:
        address: The Ray head's host:port.
        timeout_s: How long to wait for the cluster to answer, in seconds.

    Yields:
        The ``ray`` module, connected.

    Raises:
        FleetError: one line: Ray is not installed, or, naming the address, it is not host:port, nothing
            listens there, the cluster does not answer in time, or ``ray.init`` fails (its first line said).
    """
    host, port = _host_port(address)
    deadline = time.monotonic() + timeout_s
    _reachable(address, host, port, timeout_s)
    with _loopback_only(_is_loopback(host)):
        ray = import_ray()
        _init_within(ray, address, deadline - time.monotonic(), timeout_s)
        try:
            yield ray
        finally:
            ray.shutdown()


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise FleetError(f"--ray {address}: the address must be the Ray head's host:port, e.g. 10.0.0.5:6379")
    return host.strip("[]"), int(port)


def _reachable(address: str, host: str, port: int, timeout_s: float) -> None:
    """FleetError unless something accepts a TCP connection at ``host:port`` within ``timeout_s``."""
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        why = f"no answer within {timeout_s:g} s" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise FleetError(
            f"no Ray cluster at {address} ({why.lower()}): start its head there with "
            f"ray start --head --port {port}, or give the head's host:port"
        ) from None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextlib.contextmanager
def _loopback_only(loopback: bool) -> Iterator[None]:
    """For a loopback address, Ray told that the cluster is this machine (``LOOPBACK_ONLY``); as before after.

    Ray reads the switch when it is first imported; where it was imported already, its constant is set."""
    name, value = LOOPBACK_ONLY
    if not loopback or os.environ.get(name) is not None:  # not loopback, or the user chose
        yield
        return
    os.environ[name] = value
    constants: Any = sys.modules.get("ray._private.ray_constants")  # a module of Ray's, if imported
    before = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    if constants is not None and before is not None:
        constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        del os.environ[name]
        if constants is not None and before is not None:
            constants.ENABLE_RAY_CLUSTER = before


def import_ray():
    """The ``ray`` module; FleetError saying how to install it where it is not installed."""
    try:
        import ray
    except ImportError:
        raise FleetError("--ray needs Ray on the driver and the boards: pip install 'tf-mobileperf[fleet]'") from None
    return ray


class _NotMainThread(logging.Filter):
    """Drops Ray's warning that it set no SIGTERM handler: ``_init_within`` connects from a thread on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "not the main thread" not in record.getMessage()


def _init_within(ray, address: str, left_s: float, timeout_s: float) -> None:
    """``ray.init`` at ``address``, in a thread given the ``left_s`` of ``timeout_s``: Ray waits for an
    unanswering cluster in its own code, where no signal reaches it. FleetError if it fails or does not
    return in time; the thread is then left to Ray (a daemon: it ends with the process)."""
    outcome: list[BaseException | None] = []

    def init() -> None:
        try:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
            outcome.append(None)
        except BaseException as exc:  # reported by the caller's thread
            outcome.append(exc)

    quiet = _NotMainThread()
    worker_log = logging.getLogger("ray._private.worker")
    worker_log.addFilter(quiet)
    try:
        thread = threading.Thread(target=init, daemon=True, name="mobileperf-ray-connect")
        thread.start()
        thread.join(max(left_s, 0.0))
    finally:
        worker_log.removeFilter(quiet)
    if not outcome:
        raise FleetError(
            f"the Ray cluster at {address} did not answer within {timeout_s:g} s "
            "(is it the head's GCS port? see --ray-timeout)"
        )
    if outcome[0] is not None:
        said = (str(outcome[0]).strip().splitlines() or [type(outcome[0]).__name__])[0][:200]
        raise FleetError(f"could not connect to the Ray cluster at {address}: {said}") from outcome[0]
