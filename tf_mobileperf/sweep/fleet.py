"""``mobileperf sweep --ray ADDRESS``: a sweep's configurations across the boards of a Ray cluster.

Each board is a Ray node that declares a custom resource ``board:<type>``
(``ray start --address HEAD --resources '{"board:orin-nano": 1}'``). Each
configuration (model x batch size x board type) is a Ray task that needs
the whole resource, so two measurements never share a board. The task
(``fleet_task``) runs the same isolated child as a local sweep and returns
its row and its run directory, which the driver writes to
``DIR/runs/<board type>/<run name>``; the driver keeps ``results.json`` and
``results.csv`` (``sweep_results``), keyed on the whole configuration with
its board type, so a rerun runs only what is missing. The driver plans and
collects: it needs Ray, not TensorFlow.

- Board types: those given (``boards``), else every one a live node
  declares; one that no node has is a ``FleetError`` before anything runs.
- A node lost mid-configuration: the configuration runs once more if a live
  node of its type remains (its row says ``retried_after``), else its row is
  ``success: False``, cause "node lost", ``retry: True`` (not recorded: the
  next sweep runs it again). Configurations waiting for a board type that no
  live node has any more are cancelled the same way ("no <type> node left").
- Ctrl-C: every remaining task is cancelled (a running one kills its child's
  process group) and waited for; one that does not end is forced.
- Connecting (``connect``) waits at most ``timeout_s``: nothing listening at
  the address, or a cluster that does not answer in time, is a ``FleetError``
  naming the address. A loopback address (``127.0.0.1:PORT``, ``localhost``)
  is a cluster on this machine: Ray is told so (``LOOPBACK_ONLY``), where it
  would otherwise connect to the machine's interface address and wait forever.

Ray is imported here only, and this module only where ``--ray`` is given.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import logging
import os
import re
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from tf_mobileperf.sweep.config import SweepConfig
from tf_mobileperf.sweep.fleet_task import run_on_board, unpack
from tf_mobileperf.sweep.results import Results
from tf_mobileperf.sweep.runner import check_models

log = logging.getLogger(__name__)

#: A node offers a board of type T by declaring the custom resource "board:T".
RESOURCE_PREFIX = "board:"
#: The lost node's id in a NodeDiedError's message.
_NODE_ID = re.compile(r"node ID: ([0-9a-f]+)")
#: How long cancelled tasks get to kill their children before they are forced.
CANCEL_WAIT_S = 30.0
#: How long ``connect`` waits for the cluster by default (``mobileperf sweep --ray-timeout``).
CONNECT_TIMEOUT_S = 30.0
#: Ray's switch for clusters of one machine (named for Windows and macOS, where it is the default): with it
#: off, Ray keeps a loopback address instead of putting the machine's interface address in its place.
LOOPBACK_ONLY = ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


class FleetError(ValueError):
    """The fleet cannot run the sweep as asked (a board type no node has, no board at all): one line."""


def board_types(nodes: list[dict], dead: str | None = None) -> Counter:
    """Board type -> how many live nodes declare it, from ``ray.nodes()`` (``dead``: a node id known lost)."""
    return Counter(
        name[len(RESOURCE_PREFIX) :]
        for node in nodes
        if node.get("Alive") and node.get("NodeID") != dead
        for name in node.get("Resources", {})
        if name.startswith(RESOURCE_PREFIX)
    )


def choose(available: Counter, wanted: list[str] | None) -> list[str]:
    """The board types to sweep: ``wanted`` (all of them present) or every one available."""
    have = ", ".join(f"{t} ({n} node{'s' * (n > 1)})" for t, n in sorted(available.items())) or "none"
    if not wanted:
        if not available:
            raise FleetError(
                f"no node of the Ray cluster declares a board resource ({RESOURCE_PREFIX}<type>): "
                "join each board with ray start --resources '{\"board:<type>\": 1}'"
            )
        return sorted(available)
    missing = [t for t in wanted if t not in available]
    if missing:
        raise FleetError(f"no node of the Ray cluster has board type(s) {', '.join(missing)}; boards: {have}")
    return list(dict.fromkeys(wanted))


@dataclasses.dataclass
class Job:
    """A configuration in flight: its board type's config, model, batch size, and whether it is a retry."""

    config: SweepConfig
    model: str
    batch_size: int
    retry_of: str | None = None  #: why it runs again (a node lost), None on its first run


def fleet_sweep(
    address: str,
    models: Iterable[str],
    batch_sizes: Iterable[int],
    config: SweepConfig,
    boards: list[str] | None = None,
    timeout_s: float = CONNECT_TIMEOUT_S,
) -> list[dict]:
    """Runs every (model, batch size, board type) not yet in the results on the fleet at ``address``;
    returns their rows, board type after board type. ``config.out`` is on the driver; ``timeout_s`` bounds
    the wait for the cluster to answer (``connect``)."""
    pairs = list(dict.fromkeys((m, b) for m in models for b in batch_sizes))
    check_models(dict.fromkeys(m for m, _ in pairs), config)
    with connect(address, timeout_s) as ray:
        configs = [dataclasses.replace(config, board_type=t) for t in choose(board_types(ray.nodes()), boards)]
        with Results(config.out) as results:
            jobs = [Job(c, *p) for c in configs for p in pairs if results.done(*p, c.key()) is None]
            ran = _Fleet(results).run(jobs)
            rows = []
            for c in configs:
                for p in pairs:
                    row = ran.get((c.board_type, *p)) or results.done(*p, c.key())
                    assert row is not None, "each configuration was in the results or ran now"
                    rows.append(row)
            return rows


@contextlib.contextmanager
def connect(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> Iterator:
    """Ray, connected to the cluster at ``address`` (host:port) within ``timeout_s``; disconnected at the end.

    FleetError (one line, naming the address) when nothing listens there, or when the cluster does not
    answer in time: Ray itself retries for many minutes."""
    host, port = _host_port(address)
    deadline = time.monotonic() + timeout_s
    _reachable(address, host, port, timeout_s)
    with _loopback_only(_is_loopback(host)):
        ray = _import_ray()
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


def _import_ray():
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


class _Fleet:
    """The tasks in flight, their results as they come, the progress bar over them all."""

    def __init__(self, results: Results):
        import ray

        self.ray = ray
        self.task = ray.remote(run_on_board)
        self.results = results
        self.pending: dict = {}  # object ref -> Job
        self.dropped: set = set()  # refs cancelled as their board type has no node left
        self.total: Counter = Counter()
        self.done: Counter = Counter()

    def run(self, jobs: list[Job]) -> dict[tuple, dict]:
        """Runs ``jobs``; returns their rows by (board type, model, batch size)."""
        self.total.update(j.config.board_type for j in jobs)
        ran = {}
        with logging_redirect_tqdm(), tqdm(total=len(jobs), desc="fleet", unit="config", disable=not jobs) as bar:
            self._postfix(bar)
            try:
                for job in jobs:
                    self._submit(job)
                while self.pending:
                    ready, _ = self.ray.wait(list(self.pending), num_returns=1, timeout=1.0)  # Ctrl-C between
                    if not ready:
                        self._drop_boardless()
                        continue
                    job = self.pending.pop(ready[0])
                    row = self._collect(ready[0], job)
                    if row is None:  # running again on another node
                        continue
                    ran[job.config.board_type, job.model, job.batch_size] = self.results.add(row)
                    self.done[job.config.board_type] += 1
                    bar.update()
                    self._postfix(bar)
            except BaseException:  # Ctrl-C, an error of the driver: nothing goes on running on the boards
                self._cancel()
                raise
        return ran

    def _submit(self, job: Job) -> None:
        board = job.config.board_type
        assert board is not None  # a fleet's configs each have their board type
        options = {
            "num_cpus": 0,
            "resources": {RESOURCE_PREFIX + board: 1},
            "max_retries": 0,
            "name": f"{job.model} batch {job.batch_size} on {board}",
        }
        self.pending[self.task.options(**options).remote(job.model, job.batch_size, job.config)] = job

    def _collect(self, ref, job: Job) -> dict | None:
        """The job's row, its run directory under the sweep's; None where it was submitted again."""
        exceptions = self.ray.exceptions
        try:
            row, files = self.ray.get(ref)
        except (exceptions.NodeDiedError, exceptions.WorkerCrashedError, exceptions.LocalRayletDiedError) as exc:
            cause = "node lost" if isinstance(exc, exceptions.NodeDiedError) else "Ray worker lost"
            dead = _NODE_ID.search(str(exc))  # the GCS may not have marked it dead yet
            if job.retry_of is None and board_types(self.ray.nodes(), dead and dead[1])[job.config.board_type]:
                log.warning("%s: running it again on another %s", self._name(job, cause), job.config.board_type)
                self._submit(dataclasses.replace(job, retry_of=cause))
                return None
            return self._not_run(job, cause, exc)
        except exceptions.TaskCancelledError as exc:  # by ``_drop_boardless``
            return self._not_run(job, job.retry_of or f"no {job.config.board_type} node left", exc)
        except exceptions.RayTaskError as exc:  # the task itself failed (not the model's run): not a result
            return self._not_run(job, f"the Ray task failed: {str(exc.cause)[:200]}", exc)
        unpack(files, self.results.out / row["logdir"])
        row["logdir"] = str(self.results.out / row["logdir"])
        if job.retry_of:
            row["retried_after"] = job.retry_of
        return row

    def _drop_boardless(self) -> None:
        """Cancels the waiting configurations of a board type no live node has any more (they would wait forever)."""
        left = board_types(self.ray.nodes())
        for ref, job in self.pending.items():
            if not left[job.config.board_type] and ref not in self.dropped:
                self.ray.cancel(ref)
                self.dropped.add(ref)

    def _not_run(self, job: Job, cause: str, exc: Exception) -> dict:
        log.warning("%s", self._name(job, cause))
        return {
            "model": job.model,
            "batch_size": job.batch_size,
            "config": job.config.key(),
            "board_type": job.config.board_type,
            "success": False,
            "retry": True,
            "cause": cause,
            "error": str(exc)[-2000:],
        }

    @staticmethod
    def _name(job: Job, what: str) -> str:
        return f"{job.model} batch {job.batch_size} on {job.config.board_type}: {what}"

    def _postfix(self, bar: tqdm) -> None:
        bar.set_postfix_str(" ".join(f"{t} {self.done[t]}/{n}" for t, n in sorted(self.total.items())))

    def _cancel(self) -> None:
        """Cancels every pending task, waits for them to end (their children killed), forces the rest."""
        refs = list(self.pending)
        for ref in refs:
            self.ray.cancel(ref)
        _, running = self.ray.wait(refs, num_returns=len(refs), timeout=CANCEL_WAIT_S) if refs else ([], [])
        for ref in running:
            self.ray.cancel(ref, force=True)
        self.pending.clear()
